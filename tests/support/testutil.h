/* Minimal test support: checks that count and report, corpus discovery, file I/O.
 * Each test program returns non-zero if any check failed. */
#ifndef PTWM_TESTUTIL_H
#define PTWM_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ptwm.h"

extern int tu_failed;
extern int tu_passed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (cond) {                                                          \
            tu_passed++;                                                     \
        } else {                                                             \
            tu_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                 \
    do {                                                                     \
        if (cond) {                                                          \
            tu_passed++;                                                     \
        } else {                                                             \
            tu_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* Check that `got` equals the expected code and, if `substr` is non-NULL,
 * that the error message contains it. */
#define CHECK_ERR(got, err, expected, substr) \
    tu_check_err(__FILE__, __LINE__, (got), (err), (expected), (substr))
void tu_check_err(const char *file, int line, ptwm_error got, const ptwm_err *err,
                  ptwm_error expected, const char *substr);

/* Print "N passed, N failed" and return the exit status. */
int tu_finish(const char *suite);

/* Directory of the real-weights corpus: $PTWM_CORPUS, which ctest sets to the
 * directory scripts/corpus.sh builds (tests/corpus/README.md); NULL if unset. */
const char *tu_corpus_dir(void);
/* NULL-terminated list of the corpus .safetensors file names (static). */
const char *const *tu_corpus_files(void);
/* Full path of a corpus file into a static buffer; a missing file is reported
 * on stderr (the test's own check then fails). */
const char *tu_corpus_path(const char *name);
/* Read a whole file; malloc'd with a 0 byte after the contents (so text can
 * be searched as a string), NULL on failure. */
uint8_t *tu_read_file(const char *path, size_t *len);
/* Whether the file (a captured stream, a manifest) contains s. */
int tu_file_has(const char *path, const char *s);
/* The same, printing the file on stderr when it does not. */
int tu_file_expect(const char *path, const char *s);
int tu_write_file(const char *path, const void *data, size_t len);
/* A fresh temporary directory (static buffer); removed by tu_finish. */
const char *tu_tmpdir(void);
/* tu_tmpdir()/name in one of four rotating buffers (valid until the fourth
 * call after). */
char *tu_tmp_path(const char *name);
/* Entries of tu_tmpdir() whose names start with `prefix`. */
int tu_count_prefixed(const char *prefix);
/* Run "'bin' ARGS" (ARGS formatted like printf) with stdin from /dev/null and
 * stdout and stderr captured into out_path and err_path; returns the exit
 * status, or -1 if the program did not exit normally. */
int tu_run_cli(const char *bin, const char *out_path, const char *err_path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Run a shell command (formatted like printf); returns system()'s status. */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write at `path` a layout (JSON) naming every tensor of the source at `src`,
 * in its order, with its shape. 0 on success. */
int tu_write_layout(const char *src, const char *path);
/* Two files hold the same bytes. */
int tu_files_equal(const char *a, const char *b);
/* Every regular file of `a` (recursively) is in `b` with the same bytes, and
 * both hold the same entries; the first difference is printed on stderr. */
int tu_trees_equal(const char *a, const char *b);
/* Deterministic PRNG. */
uint64_t tu_rand(uint64_t *state);

#endif
