#include "testutil.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

int tu_failed;
int tu_passed;
static char tmpdir_buf[256];

void tu_check_err(const char *file, int line, ptwm_error got, const ptwm_err *err,
                  ptwm_error expected, const char *substr) {
    if (got != expected) {
        tu_failed++;
        fprintf(stderr, "%s:%d: expected %s, got %s (%s)\n", file, line, ptwm_error_name(expected),
                ptwm_error_name(got), err ? err->message : "");
        return;
    }
    if (substr && (!err || !strstr(err->message, substr))) {
        tu_failed++;
        fprintf(stderr, "%s:%d: %s message lacks \"%s\": \"%s\"\n", file, line,
                ptwm_error_name(got), substr, err ? err->message : "(no err)");
        return;
    }
    tu_passed++;
}

int tu_finish(const char *suite) {
    if (tmpdir_buf[0]) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir_buf);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir_buf);
    }
    printf("%s: %d passed, %d failed\n", suite, tu_passed, tu_failed);
    return tu_failed ? 1 : 0;
}

const char *tu_corpus_dir(void) {
    const char *env = getenv("PTWM_CORPUS");
    return env && *env ? env : NULL;
}

const char *const *tu_corpus_files(void) {
    static const char *const files[] = {
        "emotion.bf16.safetensors",      "emotion.f32.safetensors",
        "faceres-deep.bf16.safetensors", "faceres-deep.f32.safetensors",
        "handlandmark-full.f16.safetensors", "handskeleton.bf16.safetensors",
        "handskeleton.f32.safetensors",  "handtrack.u8.safetensors",
        "movenet-thunder.f16.safetensors", "posenet.bf16.safetensors",
        "posenet.f32.safetensors",       NULL};
    return files;
}

const char *tu_corpus_path(const char *name) {
    static char buf[2048];
    const char *dir = tu_corpus_dir();
    snprintf(buf, sizeof(buf), "%s/%s", dir ? dir : ".", name);
    if (access(buf, R_OK) != 0)
        fprintf(stderr, "corpus file %s is missing (PTWM_CORPUS=%s; scripts/corpus.sh builds it)\n", buf,
                dir ? dir : "(unset)");
    return buf;
}

uint8_t *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long size;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t)size + 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[size] = 0;
    if (buf && len) *len = (size_t)size;
    return buf;
}

int tu_file_has(const char *path, const char *s) {
    char *t = (char *)tu_read_file(path, NULL);
    int r = t && strstr(t, s) != NULL;
    free(t);
    return r;
}

int tu_file_expect(const char *path, const char *s) {
    char *t;
    if (tu_file_has(path, s)) return 1;
    t = (char *)tu_read_file(path, NULL);
    fprintf(stderr, "'%s' lacks '%s':\n%s\n", path, s, t ? t : "(unreadable)");
    free(t);
    return 0;
}

int tu_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return -1;
    ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

const char *tu_tmpdir(void) {
    if (!tmpdir_buf[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir_buf, sizeof(tmpdir_buf), "%s/ptwm-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmpdir_buf)) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return tmpdir_buf;
}

uint64_t tu_rand(uint64_t *state) {
    /* splitmix64 */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int tu_run_cli(const char *bin, const char *out_path, const char *err_path, const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    int st;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", bin, args, out_path, err_path);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *tu_tmp_path(const char *name) {
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", tu_tmpdir(), name);
    return buf[k];
}

int tu_count_prefixed(const char *prefix) {
    DIR *d = opendir(tu_tmpdir());
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

int tu_files_equal(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    uint8_t *pa = tu_read_file(a, &la), *pb = tu_read_file(b, &lb);
    int same = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
    free(pa);
    free(pb);
    return same;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

int tu_trees_equal(const char *a, const char *b) {
    DIR *d = opendir(a);
    struct dirent *e;
    int ok = d != NULL, na = 0, nb;
    while (ok && (e = readdir(d)) != NULL) {
        char pa[4200], pb[4200];
        struct stat sa;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        na++;
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        if (stat(pa, &sa) != 0) ok = 0;
        else if (S_ISDIR(sa.st_mode)) ok = tu_trees_equal(pa, pb);
        else ok = tu_files_equal(pa, pb);
        if (!ok) fprintf(stderr, "differs: %s vs %s\n", pa, pb);
    }
    if (d) closedir(d);
    nb = count_entries(b);
    if (ok && na != nb) fprintf(stderr, "%s has %d entries, %s has %d\n", a, na, b, nb);
    return ok && na == nb;
}

int tu_sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

int tu_write_layout(const char *src, const char *path) {
    ptwm_source *s = NULL;
    FILE *f;
    size_t i, d;
    int ok;
    if (ptwm_source_open(src, PTWM_SOURCE_AUTO, &s, NULL) != PTWM_OK) return -1;
    if (!(f = fopen(path, "w"))) {
        ptwm_source_close(s);
        return -1;
    }
    fputs("[", f);
    for (i = 0; i < ptwm_source_count(s); i++) {
        ptwm_tensor_info t;
        ptwm_source_tensor(s, i, &t, NULL);
        fprintf(f, "%s{\"name\": \"%s\", \"shape\": [", i ? ", " : "", t.name);
        for (d = 0; d < t.ndim; d++)
            fprintf(f, "%s%llu", d ? ", " : "", (unsigned long long)t.shape[d]);
        fputs("]}", f);
    }
    ok = fputs("]\n", f) >= 0;
    ptwm_source_close(s);
    return fclose(f) == 0 && ok ? 0 : -1;
}
