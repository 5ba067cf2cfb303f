/* ptwm_compress_into and ptwm_compress_bound: into a buffer of the bound's
 * size, the image is byte for byte ptwm_compress_blob's, on 1 and 2 threads,
 * for corpus files of three dtypes (real weights), a buffer reused from call
 * to call, 4 KiB and default chunks; the bound holds for the table's worst
 * cases (thousands of one-byte tensors with long names and 16 dims, every
 * tensor with four candidate chains, empty tensors); a buffer one byte short
 * fails with PTWM_ERR_DST_SIZE, as does one smaller than a header; and
 * unusable arguments give a bound of 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The image compress_into writes equals compress_blob's; returns its length. */
static size_t same_as_blob(const ptwm_tensor_desc *d, size_t n, const ptwm_chain_list *chains,
                           const ptwm_cparams *p, uint8_t *dst, size_t cap, const char *what) {
    void *blob = NULL;
    size_t blen = 0, len = 0;
    ptwm_err err;
    CHECK_ERR(ptwm_compress_blob(d, n, chains, p, &blob, &blen, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_compress_into(d, n, chains, p, dst, cap, &len, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(blob && len == blen && memcmp(dst, blob, len) == 0, "%s, %d threads: not the blob's bytes",
              what, p->threads);
    CHECK_MSG(len <= cap, "%s: %zu bytes in a buffer of %zu", what, len, cap);
    ptwm_free(blob);
    return len;
}

static void test_corpus_file(const char *name) {
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_tensor_desc *d;
    size_t n, i, cap, len = 0;
    uint8_t *dst;
    int threads;
    uint8_t *all;
    uint64_t off = 0;
    CHECK_ERR(ptwm_st_open(tu_corpus_path(name), PTWM_OPEN_PREAD, &st, &err), &err, PTWM_OK, NULL);
    if (!st) return;
    n = ptwm_st_count(st);
    d = (ptwm_tensor_desc *)calloc(n, sizeof(*d));
    {
        size_t flen = 0;
        uint8_t *f = tu_read_file(tu_corpus_path(name), &flen);
        free(f);
        all = (uint8_t *)malloc(flen + 1);
    }
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        CHECK(ptwm_st_tensor(st, i, &t, NULL) == PTWM_OK);
        CHECK(ptwm_st_read(st, i, 0, all + off, (size_t)t.nbytes, NULL) == PTWM_OK);
        d[i] = (ptwm_tensor_desc){t.name, t.dtype, t.ndim, t.shape, all + off, t.nbytes};
        off += t.nbytes;
    }
    for (threads = 1; threads <= 2; threads++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        p.threads = threads;
        p.chunk_size = threads == 1 ? 4096 : 0;
        cap = ptwm_compress_bound(d, n, NULL, &p);
        CHECK(cap > 0);
        dst = (uint8_t *)malloc(cap ? cap : 1);
        len = same_as_blob(d, n, NULL, &p, dst, cap, name);
        /* Reused: the same bytes again. */
        len = same_as_blob(d, n, NULL, &p, dst, cap, name);
        /* One byte short of the image. */
        if (len) {
            size_t got = 0;
            CHECK_ERR(ptwm_compress_into(d, n, NULL, &p, dst, len - 1, &got, &err), &err,
                      PTWM_ERR_DST_SIZE, "passes the destination's");
        }
        free(dst);
    }
    free(d);
    free(all);
    ptwm_st_close(st);
}

/* Many one-byte tensors with long names and 16 dims of 1, each with four
 * candidate chains: the table outweighs the payloads. */
static void test_table_heavy(void) {
    enum { N = 3000 };
    static ptwm_tensor_desc d[N];
    static ptwm_chain_list lists[N];
    static char names[N][200];
    static uint64_t shape[16];
    static uint8_t byte = 7, blobs[4][PTWM_CHAIN_MAX_BYTES];
    static const uint8_t *chain_ptr[4];
    static size_t chain_len[4];
    static const ptwm_method methods[4] = {PTWM_METHOD_MICROSCALE, PTWM_METHOD_ZSTD,
                                           PTWM_METHOD_HUFFMAN, PTWM_METHOD_IDENTITY};
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    size_t i, cap;
    uint8_t *dst;
    uint64_t seed = 42;
    for (i = 0; i < 16; i++) shape[i] = 1;
    for (i = 0; i < 4; i++) {
        CHECK_ERR(ptwm_chain_standard(PTWM_DTYPE_U8, methods[i], blobs[i], sizeof(blobs[i]), &chain_len[i], &err),
                  &err, PTWM_OK, NULL);
        chain_ptr[i] = blobs[i];
    }
    for (i = 0; i < N; i++) {
        size_t k;
        /* Names that do not pack: random letters (a fixed LCG). */
        for (k = 0; k < sizeof(names[i]) - 1; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            names[i][k] = (char)(33 + (seed >> 33) % 94);
        }
        names[i][sizeof(names[i]) - 1] = 0;
        d[i] = (ptwm_tensor_desc){names[i], PTWM_DTYPE_U8, 16, shape, &byte, 1};
        lists[i] = (ptwm_chain_list){chain_ptr, chain_len, 4};
    }
    d[N - 1].nbytes = 0; /* and an empty one: shape with a 0 */
    {
        static const uint64_t zero[1] = {0};
        d[N - 1].ndim = 1;
        d[N - 1].shape = zero;
        d[N - 1].data = NULL;
    }
    p.threads = 2;
    p.chunk_size = 4096; /* a chunk's room (80 KiB) far below the table's size */
    cap = ptwm_compress_bound(d, N, lists, &p);
    CHECK(cap > 0);
    dst = (uint8_t *)malloc(cap ? cap : 1);
    same_as_blob(d, N, lists, &p, dst, cap, "table-heavy");
    p.threads = 1;
    same_as_blob(d, N, NULL, &p, dst, ptwm_compress_bound(d, N, NULL, &p), "table-heavy, no chains");
    {
        size_t got = 0;
        CHECK_ERR(ptwm_compress_into(d, N, NULL, &p, dst, 15, &got, &err), &err, PTWM_ERR_DST_SIZE,
                  "smaller than a header");
        CHECK_ERR(ptwm_compress_into(d, N, NULL, &p, NULL, cap, &got, &err), &err, PTWM_ERR_INVALID_ARG,
                  "NULL destination");
    }
    free(dst);
}

static void test_bound_args(void) {
    ptwm_tensor_desc bad = {"x", (ptwm_dtype)99, 0, NULL, NULL, 0};
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    CHECK(ptwm_compress_bound(NULL, 1, NULL, NULL) == 0);
    CHECK(ptwm_compress_bound(&bad, 1, NULL, NULL) == 0);
    p.size = 3;
    CHECK(ptwm_compress_bound(NULL, 0, NULL, &p) == 0);
    /* No tensors: header, empty table, footer and one chunk's room. */
    CHECK(ptwm_compress_bound(NULL, 0, NULL, NULL) > 48);
}

int main(void) {
    test_bound_args();
    test_table_heavy();
    if (tu_corpus_dir()) {
        test_corpus_file("emotion.bf16.safetensors");
        test_corpus_file("faceres-deep.f32.safetensors");
        test_corpus_file("handtrack.u8.safetensors");
    }
    return tu_finish("test_compress_into");
}
