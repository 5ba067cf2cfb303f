/* .ptwm container: byte-exact round trips of every corpus file (through a
 * file and through memory) for each method, identical output for any thread
 * count, ranges at chunk edges, candidate chains, metadata, streaming input,
 * and the writer's argument checks. */
#include "testutil.h"
#include "common.h"
#include "reader.h"
#include "writer.h"

#include <stdlib.h>
#include <string.h>

/* Sanitizer builds run every method on a few files, every file with the
 * default method; normal builds run everything (the 60 s budget). */
#if defined(__SANITIZE_ADDRESS__)
#define TC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_SANITIZED 1
#endif
#endif
#ifndef TC_SANITIZED
#define TC_SANITIZED 0
#endif

static int files_equal(const char *a, const char *b) {
    size_t la, lb;
    uint8_t *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
    int eq = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return eq;
}

/* safetensors -> .ptwm -> safetensors, byte for byte. */
static void roundtrip_file(const char *name, int method, int threads) {
    char ptwm_path[1024], out_path[1024];
    const char *src = tu_corpus_path(name);
    char src_copy[1024];
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_reader *r = NULL;
    ptwm_err err;
    ptwm_error rc;
    snprintf(src_copy, sizeof(src_copy), "%s", src);
    snprintf(ptwm_path, sizeof(ptwm_path), "%s/%s.m%d.ptwm", tu_tmpdir(), name, method);
    snprintf(out_path, sizeof(out_path), "%s/%s.m%d.out", tu_tmpdir(), name, method);
    p.method = method;
    p.threads = threads;
    rc = ptwm_compress_safetensors(src_copy, ptwm_path, &p, &err);
    CHECK_MSG(rc == PTWM_OK, "%s method %d: %s", name, method, err.message);
    if (rc) return;
    rc = ptwm_reader_open(ptwm_path, &r, &err);
    CHECK_MSG(rc == PTWM_OK, "%s: %s", name, err.message);
    if (rc) return;
    ptwm_reader_set_threads(r, threads);
    CHECK(ptwm_reader_source_name(r) && strcmp(ptwm_reader_source_name(r), name) == 0);
    rc = ptwm_reader_verify(r, &err);
    CHECK_MSG(rc == PTWM_OK, "%s verify: %s", name, err.message);
    rc = ptwm_reader_write_safetensors(r, out_path, &err);
    CHECK_MSG(rc == PTWM_OK, "%s rebuild: %s", name, err.message);
    CHECK_MSG(files_equal(src_copy, out_path), "%s method %d: rebuilt file differs", name, method);
    ptwm_reader_close(r);
    remove(ptwm_path);
    remove(out_path);
}

/* Writer descriptions of a mapped safetensors file's tensors (calloc'd). */
static ptwm_tensor_desc *descs_of(const ptwm_st *st, size_t *n) {
    size_t i;
    ptwm_tensor_desc *d;
    *n = ptwm_st_count(st);
    d = (ptwm_tensor_desc *)calloc(*n + 1, sizeof(*d));
    for (i = 0; i < *n; i++) {
        ptwm_tensor_info info;
        ptwm_st_tensor(st, i, &info, NULL);
        d[i].name = info.name;
        d[i].dtype = info.dtype;
        d[i].ndim = info.ndim;
        d[i].shape = info.shape;
        d[i].data = info.data;
        d[i].nbytes = info.nbytes;
    }
    return d;
}

/* Every tensor of a safetensors file in memory -> blob -> each tensor equal. */
static void roundtrip_blob(const char *name, int method, uint64_t chunk, void **blob_out,
                           size_t *blob_len, int threads) {
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_error rc;
    ptwm_tensor_desc *d;
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_reader *r = NULL;
    void *blob = NULL;
    size_t len = 0, i, n;
    rc = ptwm_st_open(tu_corpus_path(name), PTWM_OPEN_MMAP, &st, &err);
    CHECK_MSG(rc == PTWM_OK, "%s: %s", name, err.message);
    if (rc) return;
    d = descs_of(st, &n);
    p.method = method;
    p.chunk_size = chunk;
    p.threads = threads;
    rc = ptwm_compress_blob(d, n, NULL, &p, &blob, &len, &err);
    CHECK_MSG(rc == PTWM_OK, "%s method %d: %s", name, method, err.message);
    if (!rc) rc = ptwm_reader_open_memory(blob, len, name, &r, &err);
    CHECK_MSG(rc == PTWM_OK, "%s open: %s", name, err.message);
    if (!rc) {
        ptwm_reader_set_threads(r, threads);
        CHECK(ptwm_reader_count(r) == n);
        for (i = 0; i < n; i++) {
            ptwm_tensor_info info;
            size_t idx = (size_t)-1;
            uint8_t *out = (uint8_t *)malloc(d[i].nbytes ? d[i].nbytes : 1);
            CHECK(ptwm_reader_find(r, d[i].name, &idx, NULL) == PTWM_OK && idx == i);
            ptwm_reader_tensor(r, i, &info, NULL);
            CHECK(info.nbytes == d[i].nbytes && info.dtype == d[i].dtype && info.ndim == d[i].ndim);
            rc = ptwm_reader_decode(r, i, out, d[i].nbytes, &err);
            CHECK_MSG(rc == PTWM_OK, "%s '%s': %s", name, d[i].name, err.message);
            CHECK_MSG(rc || memcmp(out, d[i].data, d[i].nbytes) == 0, "%s '%s' method %d differs", name,
                      d[i].name, method);
            free(out);
        }
        ptwm_reader_close(r);
    }
    if (blob_out) {
        *blob_out = blob;
        *blob_len = len;
    } else {
        free(blob);
    }
    free(d);
    ptwm_st_close(st);
}

static void test_corpus(void) {
    const char *const *f;
    int m;
    for (f = tu_corpus_files(); *f; f++)
        for (m = 1; m <= 5; m++) {
            int small = strncmp(*f, "emotion", 7) == 0 || strncmp(*f, "handtrack", 9) == 0;
            if (TC_SANITIZED && m != PTWM_METHOD_MICROSCALE && !small) continue;
            roundtrip_file(*f, m, 2);
            roundtrip_blob(*f, m, 0, NULL, NULL, 2);
        }
}

/* The same bytes for 1, 2 and 3 threads; handtrack.u8 has repeated tensors,
 * whose payloads are shared. */
static void test_threads_identical(void) {
    void *b[3];
    size_t len[3];
    int t, f;
    const char *names[2] = {TC_SANITIZED ? "emotion.bf16.safetensors" : "handskeleton.bf16.safetensors",
                            "handtrack.u8.safetensors"};
    for (f = 0; f < 2; f++) {
        for (t = 0; t < 3; t++) roundtrip_blob(names[f], PTWM_METHOD_MICROSCALE, 16384, &b[t], &len[t], t + 1);
        CHECK(b[0] && b[1] && b[2]);
        if (b[0] && b[1] && b[2]) {
            CHECK_MSG(len[0] == len[1] && memcmp(b[0], b[1], len[0]) == 0, "%s: threads 1 and 2 differ", names[f]);
            CHECK_MSG(len[0] == len[2] && memcmp(b[0], b[2], len[0]) == 0, "%s: threads 1 and 3 differ", names[f]);
        }
        for (t = 0; t < 3; t++) free(b[t]);
    }
}

/* Default chunks on 1-3 threads, every tensor with two candidate chains:
 * small tensors take the ring's small buffers, big chunks the big ones, and a
 * second chain that wins is swapped or copied in; the bytes must not depend
 * on the thread count, and every tensor must come back. */
static void test_threads_candidates(void) {
    const char *name = TC_SANITIZED ? "emotion.bf16.safetensors" : "posenet.bf16.safetensors";
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_tensor_desc *d;
    ptwm_chain_list *lists;
    uint8_t c1[PTWM_CHAIN_MAX_BYTES], c2[PTWM_CHAIN_MAX_BYTES];
    const uint8_t *cs[2] = {c1, c2};
    size_t cl[2], n = 0, i, len[3] = {0, 0, 0};
    void *b[3] = {NULL, NULL, NULL};
    int t;
    if (ptwm_st_open(tu_corpus_path(name), PTWM_OPEN_MMAP, &st, &err) != PTWM_OK) {
        CHECK_MSG(0, "%s: %s", name, err.message);
        return;
    }
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_IDENTITY, c1, sizeof(c1), &cl[0], &err) ==
          PTWM_OK);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, c2, sizeof(c2), &cl[1], &err) ==
          PTWM_OK);
    d = descs_of(st, &n);
    lists = (ptwm_chain_list *)calloc(n, sizeof(*lists));
    for (i = 0; i < n; i++) {
        lists[i].chains = cs;
        lists[i].lens = cl;
        lists[i].count = 2;
    }
    for (t = 0; t < 3; t++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        p.threads = t + 1;
        CHECK_MSG(ptwm_compress_blob(d, n, lists, &p, &b[t], &len[t], &err) == PTWM_OK, "%s: %s",
                  name, err.message);
    }
    CHECK_MSG(b[0] && b[1] && b[2] && len[0] == len[1] && len[0] == len[2] &&
                  memcmp(b[0], b[1], len[0]) == 0 && memcmp(b[0], b[2], len[0]) == 0,
              "%s with two candidate chains: threads 1, 2, 3 give %zu, %zu, %zu bytes or differ",
              name, len[0], len[1], len[2]);
    if (b[1]) {
        ptwm_reader *r = NULL;
        CHECK(ptwm_reader_open_memory(b[1], len[1], name, &r, &err) == PTWM_OK);
        for (i = 0; r && i < n; i++) {
            uint8_t *out = (uint8_t *)malloc(d[i].nbytes ? d[i].nbytes : 1);
            CHECK_MSG(ptwm_reader_decode(r, i, out, d[i].nbytes, &err) == PTWM_OK &&
                          memcmp(out, d[i].data, d[i].nbytes) == 0,
                      "%s '%s' with candidate chains differs", name, d[i].name);
            free(out);
        }
        ptwm_reader_close(r);
    }
    for (t = 0; t < 3; t++) free(b[t]);
    free(lists);
    free(d);
    ptwm_st_close(st);
}

/* Ranges at and around chunk edges of a 4096-byte-chunk tensor. */
static void test_ranges(void) {
    enum { N = 50000 };
    static uint16_t v[N];
    uint64_t shape[1] = {N}, state = 7;
    ptwm_tensor_desc d = {"w", PTWM_DTYPE_BF16, 1, shape, v, sizeof(v)};
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_reader *r = NULL;
    ptwm_err err;
    void *blob = NULL;
    size_t len = 0, i;
    uint8_t *out = (uint8_t *)malloc(sizeof(v));
    const uint8_t *raw = (const uint8_t *)v;
    static const uint64_t cases[][2] = {{0, 1},       {4095, 2},   {4096, 4096}, {4095, 4098},
                                        {0, 4096},    {8191, 1},   {99996, 4},   {98304, 1696},
                                        {0, 100000},  {12000, 40000}, {50000, 0}};
    for (i = 0; i < N; i++) v[i] = (uint16_t)(0x3c00 + (tu_rand(&state) % 512) - 256);
    p.chunk_size = 4096;
    CHECK(ptwm_compress_blob(&d, 1, NULL, &p, &blob, &len, &err) == PTWM_OK);
    CHECK(ptwm_reader_open_memory(blob, len, "ranges", &r, &err) == PTWM_OK);
    if (!r) return;
    for (i = 0; i < PTWM_ARRAY_LEN(cases); i++) {
        int t;
        for (t = 1; t <= 2; t++) {
            ptwm_error rc;
            ptwm_reader_set_threads(r, t);
            memset(out, 0xee, sizeof(v));
            rc = ptwm_reader_decode_range(r, 0, cases[i][0], out, (size_t)cases[i][1], &err);
            CHECK_MSG(rc == PTWM_OK, "range %llu+%llu: %s", (unsigned long long)cases[i][0],
                      (unsigned long long)cases[i][1], err.message);
            CHECK_MSG(memcmp(out, raw + cases[i][0], (size_t)cases[i][1]) == 0, "range %llu+%llu differs",
                      (unsigned long long)cases[i][0], (unsigned long long)cases[i][1]);
        }
    }
    CHECK_ERR(ptwm_reader_decode_range(r, 0, 99999, out, 2, &err), &err, PTWM_ERR_INVALID_ARG, "past its 100000 bytes");
    CHECK_ERR(ptwm_reader_decode_range(r, 1, 0, out, 2, &err), &err, PTWM_ERR_NOT_FOUND, "no tensor 1");
    CHECK_ERR(ptwm_reader_decode(r, 0, out, 10, &err), &err, PTWM_ERR_DST_SIZE, "has 100000 bytes");
    {
        uint64_t nchunks = 0;
        uint32_t raw_len = 0;
        CHECK(ptwm_reader_chunk_info(r, 0, 24, NULL, NULL, &raw_len, &nchunks) == PTWM_OK);
        CHECK(nchunks == 25 && raw_len == 100000 - 24 * 4096);
    }
    ptwm_reader_close(r);
    free(blob);
    free(out);
}

/* Candidate chains, metadata, streaming input, empty and constant tensors. */
typedef struct mem_src {
    const uint8_t *p;
    int calls;
} mem_src;

static ptwm_error read_mem(void *ctx, uint64_t off, void *dst, size_t len, ptwm_err *err) {
    mem_src *m = (mem_src *)ctx;
    (void)err;
    m->calls++;
    memcpy(dst, m->p + off, len);
    return PTWM_OK;
}

static ptwm_error read_fail(void *ctx, uint64_t off, void *dst, size_t len, ptwm_err *err) {
    (void)ctx;
    (void)dst;
    (void)len;
    return ptwm_fail(err, PTWM_ERR_IO, "disk on fire at %llu", (unsigned long long)off);
}

static void test_writer_features(void) {
    enum { N = 30000 };
    static float f[N];
    static uint8_t zeros[8192];
    uint64_t shape[2] = {100, 300}, zshape[1] = {2048}, eshape[2] = {0, 5};
    uint8_t c1[PTWM_CHAIN_MAX_BYTES], c2[PTWM_CHAIN_MAX_BYTES];
    size_t l1 = 0, l2 = 0, len = 0, i;
    const uint8_t *cs[2] = {c1, c2};
    size_t cl[2];
    ptwm_chain_list list = {cs, cl, 2};
    ptwm_kv meta[2] = {{"format", "pt"}, {"note", "hello"}};
    ptwm_tensor_desc a = {"a/weight", PTWM_DTYPE_F32, 2, shape, f, sizeof(f)};
    ptwm_tensor_desc z = {"zeros", PTWM_DTYPE_F32, 1, zshape, zeros, sizeof(zeros)};
    ptwm_tensor_desc e = {"empty", PTWM_DTYPE_F16, 2, eshape, NULL, 0};
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_writer *w = NULL;
    ptwm_reader *r = NULL;
    ptwm_err err;
    void *blob = NULL;
    mem_src ms;
    char text[1024];
    uint64_t state = 3;
    float *out = (float *)malloc(sizeof(f));
    for (i = 0; i < N; i++) f[i] = (float)((double)(tu_rand(&state) % 20001) / 10000.0 - 1.0);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_F32, PTWM_METHOD_HUFFMAN, c1, sizeof(c1), &l1, &err) == PTWM_OK);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_F32, PTWM_METHOD_IDENTITY, c2, sizeof(c2), &l2, &err) == PTWM_OK);
    cl[0] = l1;
    cl[1] = l2;
    p.chunk_size = 8192;
    CHECK(ptwm_writer_open_memory(&p, &w, &err) == PTWM_OK);
    if (!w) return;
    CHECK(ptwm_writer_set_metadata(w, meta, 2, &err) == PTWM_OK);
    CHECK(ptwm_writer_add(w, &a, &list, &err) == PTWM_OK);
    ms.p = (const uint8_t *)zeros;
    ms.calls = 0;
    CHECK(ptwm_writer_add_stream(w, &z, NULL, read_mem, &ms, &err) == PTWM_OK);
    CHECK(ms.calls == 1);
    CHECK(ptwm_writer_add(w, &e, NULL, &err) == PTWM_OK);
    /* Rejected tensors leave the writer usable. */
    {
        ptwm_tensor_desc bad = a;
        bad.nbytes = 7;
        CHECK_ERR(ptwm_writer_add(w, &bad, NULL, &err), &err, PTWM_ERR_SHAPE, "'a/weight': 7 bytes given");
        bad = a;
        bad.dtype = (ptwm_dtype)99;
        CHECK_ERR(ptwm_writer_add(w, &bad, NULL, &err), &err, PTWM_ERR_DTYPE, "unknown dtype 99");
    }
    CHECK(ptwm_writer_coded_bytes(w) > 0);
    CHECK(ptwm_writer_finish_memory(w, &blob, &len, &err) == PTWM_OK);
    CHECK(ptwm_reader_open_memory(blob, len, "features", &r, &err) == PTWM_OK);
    if (r) {
        ptwm_tensor_info info;
        CHECK(ptwm_reader_count(r) == 3);
        CHECK(ptwm_reader_metadata_count(r) == 2);
        CHECK(strcmp(ptwm_reader_metadata(r, 1).key, "note") == 0 &&
              strcmp(ptwm_reader_metadata(r, 1).value, "hello") == 0);
        CHECK(ptwm_reader_source_header(r, NULL) == NULL);
        CHECK(ptwm_reader_decode(r, 0, out, sizeof(f), &err) == PTWM_OK && memcmp(out, f, sizeof(f)) == 0);
        CHECK(ptwm_reader_decode(r, 1, out, sizeof(zeros), &err) == PTWM_OK &&
              memcmp(out, zeros, sizeof(zeros)) == 0);
        CHECK(ptwm_reader_decode(r, 2, out, 0, &err) == PTWM_OK);
        CHECK(ptwm_reader_tensor(r, 1, &info, NULL) == PTWM_OK && info.coded_bytes < 200);
        CHECK(ptwm_reader_chain_text(r, 0, text, sizeof(text), &err) == PTWM_OK && strstr(text, " || "));
        CHECK(ptwm_reader_verify(r, &err) == PTWM_OK);
        /* Without a source header, write_safetensors writes a fresh file. */
        {
            char path[1024];
            ptwm_st *st = NULL;
            snprintf(path, sizeof(path), "%s/fresh.safetensors", tu_tmpdir());
            CHECK_MSG(ptwm_reader_write_safetensors(r, path, &err) == PTWM_OK, "%s", err.message);
            CHECK(ptwm_st_open(path, PTWM_OPEN_MMAP, &st, &err) == PTWM_OK);
            if (st) {
                CHECK(ptwm_st_count(st) == 3);
                CHECK(ptwm_st_metadata_get(st, "format") && strcmp(ptwm_st_metadata_get(st, "format"), "pt") == 0);
                CHECK(ptwm_st_read(st, 0, 0, out, sizeof(f), &err) == PTWM_OK && memcmp(out, f, sizeof(f)) == 0);
                ptwm_st_close(st);
            }
        }
        ptwm_reader_close(r);
    }
    free(blob);

    /* Duplicate names, failing reads, bad parameters. */
    CHECK(ptwm_writer_open_memory(&p, &w, &err) == PTWM_OK);
    CHECK(ptwm_writer_add(w, &z, NULL, &err) == PTWM_OK);
    CHECK(ptwm_writer_add(w, &z, NULL, &err) == PTWM_OK);
    CHECK_ERR(ptwm_writer_finish_memory(w, &blob, &len, &err), &err, PTWM_ERR_DUPLICATE, "'zeros' added twice");
    CHECK(ptwm_writer_open_memory(&p, &w, &err) == PTWM_OK);
    CHECK_ERR(ptwm_writer_add_stream(w, &z, NULL, read_fail, NULL, &err), &err, PTWM_ERR_IO,
              "tensor 'zeros': reading bytes 0..8192: disk on fire at 0");
    CHECK_ERR(ptwm_writer_add(w, &a, NULL, &err), &err, PTWM_ERR_IO, "writer already failed");
    ptwm_writer_free(w);
    p.chunk_size = 100;
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_ERR_INVALID_ARG, "chunk size 100 outside");
    p.chunk_size = 0;
    p.method = 9;
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_ERR_UNKNOWN_ID, "unknown method 9");
    free(out);
}

/* A safetensors file whose header lists tensors in another order than their
 * data (and with metadata): the rebuild must still be byte for byte. */
static void test_header_order(void) {
    static const char json[] =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"z.last\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"a.first\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[16,28]},"
        "\"m.mid\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[28,32]}}";
    uint8_t file[512];
    size_t jl = sizeof(json) - 1, pad = (8 - jl % 8) % 8, i, n;
    char src[1024], dst[1024], back[1024];
    ptwm_reader *r = NULL;
    ptwm_err err;
    ptwm_store_le64(file, jl + pad);
    memcpy(file + 8, json, jl);
    memset(file + 8 + jl, ' ', pad);
    for (i = 0; i < 32; i++) file[8 + jl + pad + i] = (uint8_t)(i * 7 + 1);
    n = 8 + jl + pad + 32;
    snprintf(src, sizeof(src), "%s/order.safetensors", tu_tmpdir());
    snprintf(dst, sizeof(dst), "%s/order.ptwm", tu_tmpdir());
    snprintf(back, sizeof(back), "%s/order.back.safetensors", tu_tmpdir());
    CHECK(tu_write_file(src, file, n) == 0);
    CHECK_MSG(ptwm_compress_safetensors(src, dst, NULL, &err) == PTWM_OK, "%s", err.message);
    CHECK(ptwm_reader_open(dst, &r, &err) == PTWM_OK);
    if (!r) return;
    {
        ptwm_tensor_info info;
        CHECK(ptwm_reader_tensor(r, 0, &info, NULL) == PTWM_OK && strcmp(info.name, "z.last") == 0);
        CHECK(ptwm_reader_metadata_count(r) == 1);
    }
    CHECK_MSG(ptwm_reader_write_safetensors(r, back, &err) == PTWM_OK, "%s", err.message);
    CHECK(files_equal(src, back));
    ptwm_reader_close(r);
}

/* All tensors of a file in one decode_many call, and its argument checks. */
static void test_decode_many(void) {
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_tensor_desc *d;
    void *blob = NULL, **dsts;
    size_t len = 0, i, n, *idx, *sizes;
    ptwm_reader *r = NULL;
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    CHECK(ptwm_st_open(tu_corpus_path("posenet.bf16.safetensors"), PTWM_OPEN_MMAP, &st, &err) == PTWM_OK);
    if (!st) return;
    d = descs_of(st, &n);
    dsts = (void **)calloc(n, sizeof(void *));
    idx = (size_t *)calloc(n, sizeof(size_t));
    sizes = (size_t *)calloc(n, sizeof(size_t));
    for (i = 0; i < n; i++) {
        idx[i] = n - 1 - i;   /* any order */
        sizes[i] = (size_t)d[n - 1 - i].nbytes;
        dsts[i] = malloc(sizes[i] ? sizes[i] : 1);
    }
    p.chunk_size = 65536;
    p.threads = 2;
    CHECK(ptwm_compress_blob(d, n, NULL, &p, &blob, &len, &err) == PTWM_OK);
    CHECK(ptwm_reader_open_memory(blob, len, "many", &r, &err) == PTWM_OK);
    if (r) {
        ptwm_reader_set_threads(r, 2);
        CHECK_MSG(ptwm_reader_decode_many(r, idx, dsts, sizes, n, &err) == PTWM_OK, "%s", err.message);
        for (i = 0; i < n; i++) CHECK(memcmp(dsts[i], d[n - 1 - i].data, sizes[i]) == 0);
        sizes[1]++;
        CHECK_ERR(ptwm_reader_decode_many(r, idx, dsts, sizes, n, &err), &err, PTWM_ERR_DST_SIZE, "buffer");
        sizes[1]--;
        idx[2] = n;
        CHECK_ERR(ptwm_reader_decode_many(r, idx, dsts, sizes, n, &err), &err, PTWM_ERR_NOT_FOUND, "no tensor");
        ptwm_reader_close(r);
    }
    for (i = 0; i < n; i++) free(dsts[i]);
    free(dsts);
    free(idx);
    free(sizes);
    free(d);
    free(blob);
    ptwm_st_close(st);
}

/* Equal payloads are stored once: a tensor repeated under another name
 * points at the first one's payloads, every tensor (also the same bytes as
 * another dtype, coded with another chain) decodes to its own bytes, in
 * memory and in a file, and the image is smaller than the sum of the
 * tensors' coded bytes by the repeat. */
static void check_shared(const void *img, size_t len, const ptwm_tensor_desc *d, size_t n,
                         const char *what) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    uint64_t coded_sum = 0, coded0 = 0, coded1 = 1, off0, off, off2;
    size_t i;
    CHECK_MSG(ptwm_reader_open_memory(img, len, what, &r, &err) == PTWM_OK, "%s: %s", what, err.message);
    if (!r) return;
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        uint8_t *out = (uint8_t *)malloc((size_t)d[i].nbytes);
        ptwm_reader_tensor(r, i, &info, NULL);
        coded_sum += info.coded_bytes;
        if (i == 0) coded0 = info.coded_bytes;
        if (i == 1) coded1 = info.coded_bytes;
        CHECK_MSG(ptwm_reader_decode(r, i, out, (size_t)d[i].nbytes, &err) == PTWM_OK &&
                      memcmp(out, d[i].data, (size_t)d[i].nbytes) == 0,
                  "%s: tensor %zu does not decode to its bytes", what, i);
        free(out);
    }
    CHECK(ptwm_reader_chunk_info(r, 0, 1, &off0, NULL, NULL, NULL) == PTWM_OK);
    CHECK(ptwm_reader_chunk_info(r, 1, 1, &off, NULL, NULL, NULL) == PTWM_OK);
    CHECK(ptwm_reader_chunk_info(r, 2, 0, &off2, NULL, NULL, NULL) == PTWM_OK);
    CHECK_MSG(off == off0 && off2 != off0, "%s: repeated tensor's chunk at %llu, first at %llu, other at %llu",
              what, (unsigned long long)off, (unsigned long long)off0, (unsigned long long)off2);
    /* Tensor 1 repeats tensor 0: the image holds those payloads once, in
     * tensor 0's stored bytes (tensor 1 adds none), and the tensors' stored
     * bytes add up to the image less its table (a few KB). */
    CHECK_MSG(coded1 == 0 && coded0 > 0, "%s: stored bytes %llu and %llu for a tensor and its copy", what,
              (unsigned long long)coded0, (unsigned long long)coded1);
    CHECK_MSG(len >= coded_sum && len < coded_sum + 4096,
              "%s: image of %zu bytes, tensors store %llu", what, len, (unsigned long long)coded_sum);
    ptwm_reader_close(r);
}

static void test_shared_payloads(void) {
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_tensor_desc d[4];
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    const ptwm_tensor_desc *all;
    void *blob = NULL;
    size_t len = 0, n, i, big = 0;
    char path[1024];
    CHECK(ptwm_st_open(tu_corpus_path("faceres-deep.bf16.safetensors"), PTWM_OPEN_MMAP, &st, &err) == PTWM_OK);
    if (!st) return;
    all = descs_of(st, &n);
    for (i = 1; i < n; i++)
        if (all[i].nbytes > all[big].nbytes) big = i;
    p.chunk_size = 65536;
    d[0] = all[big];                 /* several chunks */
    d[1] = all[big];
    d[1].name = "copy";
    d[2] = all[big == 0 ? 1 : 0];    /* other bytes */
    d[3] = all[big];
    d[3].name = "as f16";
    d[3].dtype = PTWM_DTYPE_F16;     /* same bytes, another chain: shared only if equal */
    CHECK_MSG(ptwm_compress_blob(d, 4, NULL, &p, &blob, &len, &err) == PTWM_OK, "%s", err.message);
    if (blob) check_shared(blob, len, d, 4, "blob");
    free(blob);
    snprintf(path, sizeof(path), "%s/shared.ptwm", tu_tmpdir());
    CHECK_MSG(ptwm_compress_file(path, d, 4, NULL, &p, &err) == PTWM_OK, "%s", err.message);
    blob = tu_read_file(path, &len);
    if (blob) check_shared(blob, len, d, 4, "file");
    free(blob);
    free((void *)all);
    ptwm_st_close(st);
}

typedef struct progress_log {
    int calls;
    uint64_t last, total;
} progress_log;

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    progress_log *l = (progress_log *)ctx;
    if (done < l->last) l->calls = -1000;   /* must never go backwards */
    l->calls++;
    l->last = done;
    l->total = total;
}

/* ptwm_compress_file and ptwm_compress_safetensors report progress per chunk. */
static void test_progress(void) {
    char path[1024];
    const char *src = tu_corpus_path("handskeleton.bf16.safetensors");
    char src_copy[1024];
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    progress_log log = {0, 0, 0};
    ptwm_err err;
    ptwm_reader *r = NULL;
    uint64_t raw = 0;
    size_t i;
    snprintf(src_copy, sizeof(src_copy), "%s", src);
    snprintf(path, sizeof(path), "%s/progress.ptwm", tu_tmpdir());
    p.progress = on_progress;
    p.progress_ctx = &log;
    p.chunk_size = 65536;
    CHECK_MSG(ptwm_compress_safetensors(src_copy, path, &p, &err) == PTWM_OK, "%s", err.message);
    CHECK(ptwm_reader_open(path, &r, &err) == PTWM_OK);
    if (!r) return;
    for (i = 0; i < ptwm_reader_count(r); i++) {
        ptwm_tensor_info info;
        ptwm_reader_tensor(r, i, &info, NULL);
        raw += info.nbytes;
    }
    ptwm_reader_close(r);
    CHECK_MSG(log.calls > 10 && log.last == raw && log.total == raw, "%d calls, %llu of %llu, raw %llu", log.calls,
              (unsigned long long)log.last, (unsigned long long)log.total, (unsigned long long)raw);
}

/* A writer's own image, grown as tensors are added, on 1-3 threads: large
 * payloads coded apart are copied into it outside the append lock, and it
 * must not move while one is (write_append.c). Each tensor twice in a row,
 * the second under another name: the second's payloads are shared, compared
 * with the first's while those may still wait for their copy. The same
 * bytes for every thread count, and every tensor back. */
static void test_threads_growing_image(const char *name, uint64_t chunk) {
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_tensor_desc *d;
    size_t n = 0, i, len[3] = {0, 0, 0};
    void *b[3] = {NULL, NULL, NULL};
    char (*names)[512];
    int t, pass;
    if (ptwm_st_open(tu_corpus_path(name), PTWM_OPEN_MMAP, &st, &err) != PTWM_OK) {
        CHECK_MSG(0, "%s: %s", name, err.message);
        return;
    }
    d = descs_of(st, &n);
    names = calloc(n ? n : 1, sizeof(*names));
    for (t = 0; t < 3; t++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_writer *w = NULL;
        p.threads = t + 1;
        p.chunk_size = chunk;
        CHECK(ptwm_writer_open_memory(&p, &w, &err) == PTWM_OK);
        for (i = 0; w && i < n; i++)
            for (pass = 0; pass < 2; pass++) {
                ptwm_tensor_desc x = d[i];
                if (pass) {
                    snprintf(names[i], sizeof(names[i]), "again/%s", d[i].name);
                    x.name = names[i];
                }
                CHECK_MSG(ptwm_writer_add(w, &x, NULL, &err) == PTWM_OK, "%s", err.message);
            }
        if (w) CHECK_MSG(ptwm_writer_finish_memory(w, &b[t], &len[t], &err) == PTWM_OK, "%s", err.message);
    }
    CHECK_MSG(b[0] && b[1] && b[2] && len[0] == len[1] && len[0] == len[2] &&
                  memcmp(b[0], b[1], len[0]) == 0 && memcmp(b[0], b[2], len[0]) == 0,
              "%s twice into a growing image: threads 1, 2, 3 give %zu, %zu, %zu bytes or differ", name,
              len[0], len[1], len[2]);
    if (b[2]) {
        ptwm_reader *r = NULL;
        CHECK(ptwm_reader_open_memory(b[2], len[2], name, &r, &err) == PTWM_OK);
        CHECK(r && ptwm_reader_count(r) == 2 * n);
        for (i = 0; r && i < 2 * n; i++) {
            const ptwm_tensor_desc *x = &d[i / 2];
            uint8_t *out = (uint8_t *)malloc(x->nbytes ? x->nbytes : 1);
            CHECK_MSG(ptwm_reader_decode(r, i, out, x->nbytes, &err) == PTWM_OK &&
                          memcmp(out, x->data, x->nbytes) == 0,
                      "%s tensor %zu from a growing image differs", name, i);
            free(out);
        }
        ptwm_reader_close(r);
    }
    for (t = 0; t < 3; t++) free(b[t]);
    free(names);
    free(d);
    ptwm_st_close(st);
}

int main(void) {
    int i;
    if (!tu_corpus_dir()) {
        fprintf(stderr, "corpus not found (set PTWM_CORPUS)\n");
        return 1;
    }
    test_ranges();
    test_header_order();
    test_decode_many();
    test_shared_payloads();
    test_progress();
    test_writer_features();
    test_threads_identical();
    test_threads_candidates();
    /* many small payloads and some placed, sharing; few large ones, each
     * placed, the image growing under them; then again with every copy
     * held back 300 us, so that sharing and growing meet copies running */
    for (i = 0; i < 2; i++) {
        ptwm_writer_slow_copies(i ? 300 : 0);
        test_threads_growing_image("handtrack.u8.safetensors", 65536);
        test_threads_growing_image(TC_SANITIZED ? "emotion.bf16.safetensors" : "faceres-deep.bf16.safetensors",
                                   1 << 20);
    }
    ptwm_writer_slow_copies(0);
    test_corpus();
    return tu_finish("test_container");
}
