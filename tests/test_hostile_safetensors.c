/* Every file of tests/hostile/safetensors must fail with the error code and
 * message text its MANIFEST line names, whether opened from memory, mapped,
 * or read with pread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* $PTWM_SOURCE_DIR (set by ctest), else next to this source file. */
static const char *hostile_dir(void) {
    static char buf[2048];
    const char *src = getenv("PTWM_SOURCE_DIR");
    if (src) {
        snprintf(buf, sizeof(buf), "%s/tests/hostile/safetensors", src);
    } else {
        const char *slash = strrchr(__FILE__, '/');
        int n = slash ? (int)(slash - __FILE__) : 1;
        snprintf(buf, sizeof(buf), "%.*s/hostile/safetensors", n, slash ? __FILE__ : ".");
    }
    return buf;
}

static int code_from_name(const char *name, ptwm_error *out) {
    int c;
    for (c = 0; c <= PTWM_ERR_UNSUPPORTED; c++) {
        if (strcmp(ptwm_error_name((ptwm_error)c), name) == 0) {
            *out = (ptwm_error)c;
            return 1;
        }
    }
    return 0;
}

static void check_file(const char *dir, const char *file, ptwm_error code, const char *substr) {
    char path[4096];
    uint8_t *buf;
    size_t len = 0;
    ptwm_st *st = NULL;
    ptwm_err err;
    int mode;

    snprintf(path, sizeof(path), "%.2000s/%.1000s", dir, file);
    buf = tu_read_file(path, &len);
    CHECK_MSG(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    memset(&err, 0, sizeof(err));
    CHECK_ERR(ptwm_st_open_memory(len ? buf : NULL, len, file, &st, &err), &err, code, substr);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err.message, file) != NULL, "%s: message does not name the file: %s", file,
              err.message);
    for (mode = 0; mode < 2; mode++) {
        memset(&err, 0, sizeof(err));
        CHECK_ERR(ptwm_st_open(path, (ptwm_open_mode)mode, &st, &err), &err, code, substr);
        CHECK(st == NULL);
    }
    free(buf);
}

int main(void) {
    const char *dir = hostile_dir();
    char manifest[2100], line[8192];
    FILE *f;
    int files = 0;

    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", dir);
    f = fopen(manifest, "r");
    CHECK_MSG(f != NULL, "cannot open %s", manifest);
    while (f && fgets(line, sizeof(line), f)) {
        char *file = line, *code_name, *substr, *nl;
        ptwm_error code = PTWM_OK;
        if (line[0] == '#' || line[0] == '\n') continue;
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        code_name = strchr(file, '\t');
        substr = code_name ? strchr(code_name + 1, '\t') : NULL;
        CHECK_MSG(substr != NULL, "bad MANIFEST line: %s", line);
        if (!substr) continue;
        *code_name++ = 0;
        *substr++ = 0;
        CHECK_MSG(code_from_name(code_name, &code), "unknown code %s", code_name);
        check_file(dir, file, code, substr);
        files++;
    }
    if (f) fclose(f);
    /* the issue asks for at least 30; the corpus holds more */
    CHECK_MSG(files >= 35, "only %d hostile files", files);
    printf("%d hostile files checked\n", files);
    return tu_finish("test_hostile_safetensors");
}
