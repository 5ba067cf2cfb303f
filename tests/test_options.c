/* Options structs carry their size (include/ptwm.h): a struct from an older,
 * smaller header (here: this one without its last fields) is read only as far
 * as its size reaches, the rest taking the defaults, and codes to the same
 * bytes as the whole struct with the same values; a size of 0, one larger
 * than the library's, or one that is no version's is refused by every entry
 * point that takes the struct, naming it and the sizes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "options.h"
#include "testutil.h"

/* The older structs: this header's without `base` (the last field of both),
 * and options without `part`, `parts` and `base`. */
#define OLD_CPARAMS offsetof(ptwm_cparams, base)
#define OLD_OPTIONS offsetof(ptwm_checkpoint_options, base)
#define OLDER_OPTIONS offsetof(ptwm_checkpoint_options, part)

static float x[4096];
static uint64_t shape[1] = {4096};
static ptwm_tensor_desc desc = {"x", PTWM_DTYPE_F32, 1, shape, x, sizeof x};

/* The first `size` bytes of *full, with that size, in a block of exactly
 * `size` bytes: any read past the caller's struct is a heap overflow under
 * ASan. */
static void *old_struct(const void *full, size_t size) {
    void *p = malloc(size);
    memcpy(p, full, size);
    memcpy(p, &size, sizeof size);
    return p;
}

/* The library reads whole fields up to the size and nothing past it: past
 * the caller's bytes lies garbage that must not arrive. */
static void test_read_prefix(void) {
    unsigned char buf[sizeof(ptwm_checkpoint_options) + sizeof(ptwm_cparams)];
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT, got;
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT, gotopt;
    size_t old = OLD_CPARAMS;
    ptwm_err err;
    cp.threads = 3;
    cp.chunk_size = 65536;
    cp.zstd_level = 5;
    memset(buf, 0xa5, sizeof buf);
    memcpy(buf, &cp, OLD_CPARAMS);
    memcpy(buf, &old, sizeof old);
    CHECK_ERR(ptwm_cparams_read((const ptwm_cparams *)(void *)buf, &got, "test", &err), &err,
              PTWM_OK, NULL);
    CHECK(got.size == sizeof(ptwm_cparams) && got.threads == 3 && got.chunk_size == 65536 &&
          got.zstd_level == 5 && got.method == PTWM_METHOD_MICROSCALE && got.ctx == NULL);
    CHECK_MSG(got.base == NULL, "a field past the caller's size was read (base %p)",
              (void *)got.base);

    o.max_shard_size = 1000;
    o.threads = 2;
    o.part = 1;
    o.parts = 2;
    for (old = OLDER_OPTIONS; old <= OLD_OPTIONS; old += OLD_OPTIONS - OLDER_OPTIONS) {
        memset(buf, 0xa5, sizeof buf);
        memcpy(buf, &o, old);
        memcpy(buf, &old, sizeof old);
        CHECK_ERR(ptwm_checkpoint_options_read((const ptwm_checkpoint_options *)(void *)buf,
                                               &gotopt, "test", &err),
                  &err, PTWM_OK, NULL);
        CHECK(gotopt.size == sizeof(ptwm_checkpoint_options) && gotopt.max_shard_size == 1000 &&
              gotopt.threads == 2 && gotopt.base == NULL);
        CHECK_MSG(old == OLD_OPTIONS ? gotopt.part == 1 && gotopt.parts == 2
                                     : gotopt.part == 0 && gotopt.parts == 0,
                  "a struct of %zu bytes gave part %u of %u", old, (unsigned)gotopt.part,
                  (unsigned)gotopt.parts);
    }
    /* NULL: every default. */
    CHECK_ERR(ptwm_cparams_read(NULL, &got, "test", &err), &err, PTWM_OK, NULL);
    CHECK(got.size == sizeof(ptwm_cparams) && got.method == PTWM_METHOD_MICROSCALE &&
          got.threads == 0 && got.base == NULL);
}

/* An older caller's struct codes to the bytes of today's with the same values. */
static void test_old_size_codes_alike(void) {
    ptwm_cparams full = PTWM_CPARAMS_DEFAULT;
    ptwm_cparams *old;
    ptwm_checkpoint_options fo = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_checkpoint_options *oo;
    void *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0, i;
    uint8_t *fa, *fb;
    size_t falen = 0, fblen = 0;
    ptwm_writer *w = NULL;
    ptwm_err err;
    for (i = 0; i < 4096; i++) x[i] = (float)(i % 97) * 0.03125f - 1.0f;
    full.threads = 1;
    full.chunk_size = 4096;
    full.method = PTWM_METHOD_RANS;
    old = (ptwm_cparams *)old_struct(&full, OLD_CPARAMS);
    CHECK_ERR(ptwm_compress_blob(&desc, 1, NULL, &full, &a, &alen, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_compress_blob(&desc, 1, NULL, old, &b, &blen, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(a && b && alen == blen && memcmp(a, b, alen) == 0,
              "a struct of %zu bytes codes %zu bytes, the whole one %zu",
              (size_t)OLD_CPARAMS, blen, alen);
    ptwm_free(b);
    b = NULL;
    CHECK_ERR(ptwm_writer_open_memory(old, &w, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_add(w, &desc, NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_finish_memory(w, &b, &blen, &err), &err, PTWM_OK, NULL);
    CHECK(b && alen == blen && memcmp(a, b, alen) == 0);
    ptwm_free(a);
    ptwm_free(b);
    free(old);

    /* A checkpoint compressed with an older options struct. */
    CHECK_ERR(ptwm_st_write(tu_tmp_path("in.safetensors"), &desc, 1, NULL, 0, &err), &err,
              PTWM_OK, NULL);
    fo.threads = 1;
    fo.chunk_size = 4096;
    oo = (ptwm_checkpoint_options *)old_struct(&fo, OLDER_OPTIONS);
    CHECK_ERR(ptwm_compress_checkpoint(tu_tmp_path("in.safetensors"), tu_tmp_path("full"), &fo,
                                       &err),
              &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_compress_checkpoint(tu_tmp_path("in.safetensors"), tu_tmp_path("old"), oo,
                                       &err),
              &err, PTWM_OK, NULL);
    fa = tu_read_file(tu_tmp_path("full/model.ptwm"), &falen);
    fb = tu_read_file(tu_tmp_path("old/model.ptwm"), &fblen);
    CHECK(fa && fb && falen == fblen && memcmp(fa, fb, falen) == 0);
    CHECK_ERR(ptwm_decompress_checkpoint(tu_tmp_path("old"), tu_tmp_path("back"), oo, &err), &err,
              PTWM_OK, NULL);
    CHECK(tu_files_equal(tu_tmp_path("in.safetensors"), tu_tmp_path("back/in.safetensors")));
    free(fa);
    free(fb);
    free(oo);
}

/* Each entry point taking a ptwm_cparams refuses the struct p (its size
 * set), with a message holding `msg`. */
static void refused_cparams(const ptwm_cparams *p, const char *msg) {
    ptwm_writer *w = NULL;
    void *blob = NULL;
    size_t len = 0;
    ptwm_err err;
    CHECK_ERR(ptwm_compress_blob(&desc, 1, NULL, p, &blob, &len, &err), &err,
              PTWM_ERR_INVALID_ARG, msg);
    CHECK(blob == NULL);
    CHECK_ERR(ptwm_writer_open_memory(p, &w, &err), &err, PTWM_ERR_INVALID_ARG, msg);
    CHECK(w == NULL);
    CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("bad.ptwm"), p, &w, &err), &err,
              PTWM_ERR_INVALID_ARG, msg);
    CHECK_ERR(ptwm_compress_file(tu_tmp_path("bad.ptwm"), &desc, 1, NULL, p, &err), &err,
              PTWM_ERR_INVALID_ARG, msg);
    CHECK_ERR(ptwm_compress_safetensors(tu_tmp_path("in.safetensors"), tu_tmp_path("bad.ptwm"),
                                        p, &err),
              &err, PTWM_ERR_INVALID_ARG, msg);
    CHECK_ERR(ptwm_ptdir_write(tu_tmp_path("bad-dir"), &desc, 1, NULL, 0, 1 << 20, p, 0, &err),
              &err, PTWM_ERR_INVALID_ARG, msg);
    CHECK(tu_count_prefixed("bad") == 0);
}

static void refused_options(const ptwm_checkpoint_options *o, const char *msg) {
    ptwm_err err;
    CHECK_ERR(ptwm_compress_checkpoint(tu_tmp_path("in.safetensors"), tu_tmp_path("bad-c"), o,
                                       &err),
              &err, PTWM_ERR_INVALID_ARG, msg);
    CHECK_ERR(ptwm_decompress_checkpoint(tu_tmp_path("full"), tu_tmp_path("bad-d"), o, &err),
              &err, PTWM_ERR_INVALID_ARG, msg);
    CHECK(tu_count_prefixed("bad") == 0);
}

/* A zeroed struct, one of a newer header (larger) and sizes of no version. */
static void test_bad_sizes(void) {
    static const size_t odd[] = {4, 12, OLD_CPARAMS - 4};
    ptwm_cparams zero, *big;
    ptwm_checkpoint_options zopt, *bigopt;
    size_t more = sizeof(ptwm_cparams) + 8, moreopt = sizeof(ptwm_checkpoint_options) + 8, i;
    char msg[160];
    memset(&zero, 0, sizeof zero);
    memset(&zopt, 0, sizeof zopt);
    refused_cparams(&zero, "ptwm_cparams.size is 0: start from PTWM_CPARAMS_DEFAULT");
    refused_options(&zopt, "ptwm_checkpoint_options.size is 0: start from "
                           "PTWM_CHECKPOINT_OPTIONS_DEFAULT");
    big = (ptwm_cparams *)calloc(1, more);
    bigopt = (ptwm_checkpoint_options *)calloc(1, moreopt);
    memcpy(big, &more, sizeof more);
    memcpy(bigopt, &moreopt, sizeof moreopt);
    snprintf(msg, sizeof msg, "ptwm_cparams.size is %zu, larger than this library's %zu", more,
             sizeof(ptwm_cparams));
    refused_cparams(big, msg);
    snprintf(msg, sizeof msg, "ptwm_checkpoint_options.size is %zu, larger than this library's %zu",
             moreopt, sizeof(ptwm_checkpoint_options));
    refused_options(bigopt, msg);
    for (i = 0; i < PTWM_ARRAY_LEN(odd); i++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
        p.size = odd[i];
        o.size = odd[i];
        snprintf(msg, sizeof msg, "ptwm_cparams.size is %zu, the size of no version of it",
                 odd[i]);
        refused_cparams(&p, msg);
        snprintf(msg, sizeof msg,
                 "ptwm_checkpoint_options.size is %zu, the size of no version of it", odd[i]);
        refused_options(&o, msg);
    }
    free(big);
    free(bigopt);
}

int main(void) {
    test_read_prefix();
    test_old_size_codes_alike();
    test_bad_sizes();
    return tu_finish("options");
}
