/* What the CLI prints. Names from hostile files reach the terminal escaped:
 * cli_escape on its own (control characters, bidi overrides, every kind of
 * invalid UTF-8, cutting short), then `ptwm inspect` and `ptwm verify` run as
 * processes on a file whose tensor name is a terminal escape sequence, and on
 * a path that is not UTF-8. Error lines name the kind of file that is wrong,
 * and verify reports a safetensors file's own error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"
/* The helper lives in the CLI, which the library's tests do not link. */
#include "../programs/cli_util.c"

static void check_escape(const char *in, const char *want) {
    char buf[CLI_ESCAPED_MAX(64)];
    cli_escape(in, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, want) == 0, "cli_escape: got '%s', want '%s'", buf, want);
}

static void test_escape_unit(void) {
    char small[12];
    check_escape("model.layers.0.weight", "model.layers.0.weight");
    check_escape("caf\xc3\xa9 \xe6\x9d\x83\xe9\x87\x8d \xf0\x9f\x98\x80", /* é, CJK, emoji kept */
                 "caf\xc3\xa9 \xe6\x9d\x83\xe9\x87\x8d \xf0\x9f\x98\x80");
    check_escape("a\x1b[2Jb", "a\\x1B[2Jb");
    check_escape("\t\n\r\x7f", "\\x09\\x0A\\x0D\\x7F");
    check_escape("c1\xc2\x9b", "c1\\u009B");                 /* 8-bit CSI as U+009B */
    check_escape("\xe2\x80\xae" "abc", "\\u202Eabc");          /* right-to-left override */
    check_escape("\xe2\x81\xa6x", "\\u2066x");                 /* left-to-right isolate */
    check_escape("bad\xff", "bad\\xFF");
    check_escape("\xc0\xaf", "\\xC0\\xAF");                    /* overlong '/' */
    check_escape("\xe0\x80\xaf", "\\xE0\\x80\\xAF");           /* overlong, 3 bytes */
    check_escape("\xed\xa0\x80", "\\xED\\xA0\\x80");           /* surrogate U+D800 */
    check_escape("\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80");  /* past U+10FFFF */
    check_escape("\xe6\x9d", "\\xE6\\x9D");                    /* truncated at the end */
    check_escape("\xe6" "a", "\\xE6a");                        /* truncated mid-string */
    check_escape("back\\slash", "back\\slash");
    check_escape(NULL, "(null)");
    /* Cut short on a whole escape, never mid-escape, with "..." */
    cli_escape("abcdefghijklmnop", small, sizeof small);
    CHECK(strcmp(small, "abcdefgh...") == 0);
    cli_escape("ab\x1b\x1b\x1b", small, sizeof small);
    CHECK(strcmp(small, "ab\\x1B...") == 0);
    CHECK(strlen(small) < sizeof small);
}

static const char *bin;
static char out_path[1200], err_path[1200];
/* Run "ptwm ARGS" with stdout and stderr captured; returns the exit status. */
#define run(...) tu_run_cli(bin, out_path, err_path, __VA_ARGS__)


/* No byte of the captured stream is a control character other than newline,
 * and it holds only valid UTF-8 free of C1 and bidi controls. */
static int clean(const char *path) {
    size_t len = 0, i;
    uint8_t *t = tu_read_file(path, &len);
    int ok = t != NULL;
    for (i = 0; ok && i < len; i++) {
        unsigned long c;
        size_t n;
        if (t[i] == '\n') continue;
        n = utf8_seq(t + i, &c);
        if (i + n > len || n == 0 || is_control(c)) {
            fprintf(stderr, "%s: byte %zu (0x%02X) is unsafe\n", path, i, t[i]);
            ok = 0;
        } else {
            i += n - 1;
        }
    }
    free(t);
    return ok;
}


static int file_empty(const char *path) {
    size_t len = 0;
    uint8_t *t = tu_read_file(path, &len);
    if (t && len) fprintf(stderr, "%s is not empty:\n%.*s\n", path, (int)len, (const char *)t);
    free(t);
    return t != NULL && len == 0;
}

static void test_cli_output(void) {
    static const char evil[] = "evil\x1b[2J\x07name\xc2\x9b\xe2\x80\xae";
    char file[1100], bad_path[1100];
    uint8_t one = 1;
    uint64_t shape[1] = {1};
    ptwm_tensor_desc t;
    ptwm_err err;
    memset(&t, 0, sizeof t);
    t.name = evil;
    t.dtype = PTWM_DTYPE_U8;
    t.ndim = 1;
    t.shape = shape;
    t.data = &one;
    t.nbytes = 1;
    snprintf(file, sizeof file, "%s/escape.safetensors", tu_tmpdir());
    CHECK(ptwm_st_write(file, &t, 1, NULL, 0, &err) == PTWM_OK);

    CHECK(run("inspect '%s'", file) == 0);
    CHECK(clean(out_path) && clean(err_path));
    CHECK(tu_file_expect(out_path, "evil\\x1B[2J\\x07name\\u009B\\u202E"));
    CHECK(run("inspect --json '%s'", file) == 0);
    CHECK(clean(out_path));
    CHECK(tu_file_expect(out_path, "\"evil\\u001B[2J\\u0007name\\u009B\\u202E\""));
    CHECK(run("verify '%s'", file) == 0);
    CHECK(clean(out_path) && clean(err_path));

    /* The name column is as wide as the longest name, at most 60 characters:
     * a longer name overflows its row, not every row's column. */
    {
        char longname[91], want[80];
        memset(longname, 'x', 90);
        longname[90] = 0;
        t.name = longname;
        CHECK(ptwm_st_write(file, &t, 1, NULL, 0, &err) == PTWM_OK);
        CHECK(run("inspect '%s'", file) == 0);
        snprintf(want, sizeof want, "\nname%*s  dtype", 56, "");
        CHECK(tu_file_expect(out_path, want));
    }

    /* A path that is not UTF-8 and carries an escape, in an error message. */
    snprintf(bad_path, sizeof bad_path, "%s/no\x1b[31m\xff.safetensors", tu_tmpdir());
    CHECK(run("inspect '%s'", bad_path) == 1);
    CHECK(clean(err_path));
    CHECK(tu_file_expect(err_path, "no\\x1B[31m\\xFF.safetensors"));
    CHECK(run("inspect --json '%s'", bad_path) == 1);
    CHECK(clean(err_path));
    /* Usage errors quote the command line. */
    CHECK(run("inspect '--bogus\x1b[31m'") == 2);
    CHECK(clean(err_path));
    CHECK(tu_file_expect(err_path, "unknown option '--bogus\\x1B[31m'"));
}

/* The error's name in "ptwm: <name>: <message>" fits every file that can
 * carry the error, not only safetensors headers. */
static void test_error_names(void) {
    static const char broken[] = "{\"weight_map\": {", wrong[] = "{\"weight_map\": 3}";
    char dir[1100], index[1200];
    snprintf(dir, sizeof dir, "%s/badindex", tu_tmpdir());
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    CHECK(mkdir(dir, 0777) == 0 || access(dir, F_OK) == 0);
    CHECK(tu_write_file(index, broken, strlen(broken)) == 0);
    CHECK(run("inspect '%s'", dir) == 1);
    CHECK(tu_file_expect(err_path, "ptwm: not valid JSON: index '"));
    CHECK(tu_write_file(index, wrong, strlen(wrong)) == 0);
    CHECK(run("inspect '%s'", dir) == 1);
    CHECK(tu_file_expect(err_path, "ptwm: wrong structure: index '"));
}

/* verify on a damaged safetensors file or directory shows the safetensors
 * error, not the .ptwm reader's "not a .ptwm file" it tried first. */
static void test_verify_reports_safetensors_error(void) {
    char src[1200], dir[1100], copy[1200];
    size_t len = 0;
    uint8_t *bytes;
    snprintf(src, sizeof src, "%s/tests/hostile/safetensors/hole.safetensors",
             getenv("PTWM_SOURCE_DIR") ? getenv("PTWM_SOURCE_DIR") : ".");
    bytes = tu_read_file(src, &len);
    CHECK_MSG(bytes != NULL, "cannot read %s (PTWM_SOURCE_DIR)", src);
    if (!bytes) return;
    CHECK(run("verify '%s'", src) == 1);
    CHECK(tu_file_expect(err_path, "hole in the data region"));
    snprintf(dir, sizeof dir, "%s/holedir", tu_tmpdir());
    snprintf(copy, sizeof copy, "%s/model.safetensors", dir);
    CHECK(mkdir(dir, 0777) == 0 || access(dir, F_OK) == 0);
    CHECK(tu_write_file(copy, bytes, len) == 0);
    CHECK(run("verify '%s'", dir) == 1);
    CHECK(tu_file_expect(err_path, "hole in the data region"));
    free(bytes);
}

/* A .ptwm file whose magic is damaged is reported as that, with its bytes,
 * not as a safetensors file with an absurd header length; a model.safetensors
 * that is a link to itself is reported with its real error (ELOOP), not as
 * "has neither ...". Through the CLI and through the API. */
static void test_misread_inputs(void) {
    char src[1200], out[1100], bad[1200], ptwm[1200], dir[1100], link[1200];
    ptwm_source *s = NULL;
    ptwm_st *st = NULL;
    ptwm_err err;
    uint8_t *bytes;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/samples/posenet.bf16.safetensors",
             getenv("PTWM_SOURCE_DIR") ? getenv("PTWM_SOURCE_DIR") : ".");
    snprintf(out, sizeof out, "%s/magic", tu_tmpdir());
    CHECK(run("compress '%s' -o '%s' -q", src, out) == 0);
    snprintf(ptwm, sizeof ptwm, "%s/model.ptwm", out);
    bytes = tu_read_file(ptwm, &len);
    CHECK(bytes != NULL && len > 8);
    if (!bytes) return;
    bytes[1] = 'X'; /* "\x89XTWM\r\n\x1a" */
    snprintf(bad, sizeof bad, "%s/damaged.ptwm", out);
    CHECK(tu_write_file(bad, bytes, len) == 0);
    free(bytes);
    CHECK(run("verify '%s'", bad) == 1);
    CHECK(tu_file_expect(err_path, "ptwm: not a .ptwm file: file '"));
    CHECK(tu_file_expect(err_path, "bad magic 89 58 54 57 4D 0D 0A 1A, a .ptwm file starts 89 50 54 57 4D "
                        "0D 0A 1A"));
    CHECK(run("inspect '%s'", bad) == 1);
    CHECK(tu_file_expect(err_path, "bad magic 89 58 54 57"));
    CHECK_ERR(ptwm_source_open(bad, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_ERR_BAD_MAGIC,
              "bad magic 89 58 54 57 4D 0D 0A 1A");
    CHECK_ERR(ptwm_st_open(bad, PTWM_OPEN_PREAD, &st, &err), &err, PTWM_ERR_BAD_MAGIC,
              "bad magic");

    snprintf(dir, sizeof dir, "%s/selflink", tu_tmpdir());
    snprintf(link, sizeof link, "%s/model.safetensors", dir);
    CHECK(mkdir(dir, 0777) == 0);
    CHECK(symlink("model.safetensors", link) == 0);
    CHECK(run("verify '%s'", dir) == 1);
    CHECK(tu_file_expect(err_path, "model.safetensors': Too many levels of symbolic links"));
    CHECK(run("compress '%s' -o '%s/never'", dir, dir) == 1);
    CHECK(tu_file_expect(err_path, "model.safetensors': Too many levels of symbolic links"));
    CHECK_ERR(ptwm_source_open(dir, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_ERR_IO,
              "model.safetensors': Too many levels of symbolic links");
    /* The same for a model.ptwm, which inspect and verify look for themselves. */
    snprintf(link, sizeof link, "%s/model.safetensors", dir);
    CHECK(unlink(link) == 0);
    snprintf(link, sizeof link, "%s/model.ptwm", dir);
    CHECK(symlink("model.ptwm", link) == 0);
    CHECK(run("verify '%s'", dir) == 1);
    CHECK(tu_file_expect(err_path, "model.ptwm': Too many levels of symbolic links"));
    CHECK(run("inspect '%s'", dir) == 1);
    CHECK(tu_file_expect(err_path, "model.ptwm': Too many levels of symbolic links"));
}

/* A file whose tensors carry no CRC and no hash (version 3, both options
 * off) is never reported as verified: verify says what it could not check and
 * exits 1, decompress restores it with a warning. Files with checks verify. */
static void test_unchecked_file(void) {
    char nocheck[1200], checked[1200], out[1200];
    const char *src = getenv("PTWM_SOURCE_DIR") ? getenv("PTWM_SOURCE_DIR") : ".";
    snprintf(nocheck, sizeof nocheck, "%s/tests/golden/emotion.bf16.microscale.v3.nocheck.ptwm", src);
    snprintf(checked, sizeof checked, "%s/tests/golden/emotion.bf16.microscale.v4.ptwm", src);
    snprintf(out, sizeof out, "%s/nocheck.out", tu_tmpdir());
    CHECK(run("verify '%s'", nocheck) == 1);
    CHECK(tu_file_expect(err_path, "NOT VERIFIED: 21 of 21 tensors carry no CRC or hash"));
    CHECK(tu_file_expect(err_path, "1 of 1 shard could not be verified"));
    CHECK(run("decompress '%s' -o '%s' -q", nocheck, out) == 0);
    CHECK(tu_file_expect(err_path, "warning: "));
    CHECK(tu_file_expect(err_path, "21 tensors carry no CRC or hash"));
    CHECK(run("verify '%s'", checked) == 0 && tu_file_expect(out_path, "1 shard verified"));
    CHECK(run("decompress '%s' -o '%s' -q -f", checked, out) == 0);
    CHECK(file_empty(err_path));
}

/* Output that cannot be written (a full disk) is exit status 1 with a
 * message, never a silent success. */
static void test_write_failure(const char *file) {
    char cmd[4096];
    int st;
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' >/dev/full 2>'%s'", bin, file, err_path);
    st = system(cmd);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "inspect >/dev/full: status %d", st);
    CHECK(tu_file_expect(err_path, "cannot write the output"));
    snprintf(cmd, sizeof cmd, "'%s' --help >/dev/full 2>/dev/null", bin);
    st = system(cmd);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "--help >/dev/full: status %d", st);
}

int main(void) {
    bin = getenv("PTWM_BIN");
    test_escape_unit();
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    if (bin) {
        snprintf(out_path, sizeof out_path, "%s/escape.out", tu_tmpdir());
        snprintf(err_path, sizeof err_path, "%s/escape.err", tu_tmpdir());
        test_cli_output();
        test_error_names();
        test_verify_reports_safetensors_error();
        test_misread_inputs();
        test_unchecked_file();
        test_write_failure(tu_corpus_path("handtrack.u8.safetensors"));
    }
    return tu_finish("cli_output");
}
