/* Contexts (ptwm_ctx): the caller's work memory. Writers and readers given a
 * context code and decode exactly as with their own, across many calls and
 * thread counts; a context serves one user at a time (a second one is refused
 * by name until the first lets go); method 0 means the default. Real weights:
 * the corpus's emotion network in BF16 and F32. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct model {
    ptwm_tensor_desc *d;
    char **names;
    uint64_t *shapes;
    uint8_t *bytes;
    size_t n;
} model;

static int model_load(const char *name, model *m) {
    ptwm_source *s = NULL;
    ptwm_err err;
    size_t i, total = 0, off = 0, dims = 0;
    memset(m, 0, sizeof(*m));
    CHECK_ERR(ptwm_source_open(tu_corpus_path(name), PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK,
              NULL);
    if (!s) return -1;
    m->n = ptwm_source_count(s);
    m->d = (ptwm_tensor_desc *)calloc(m->n, sizeof(*m->d));
    m->names = (char **)calloc(m->n, sizeof(char *));
    for (i = 0; i < m->n; i++) {
        ptwm_tensor_info t;
        ptwm_source_tensor(s, i, &t, NULL);
        total += (size_t)t.nbytes;
        dims += t.ndim;
    }
    m->bytes = (uint8_t *)malloc(total ? total : 1);
    m->shapes = (uint64_t *)calloc(dims ? dims : 1, sizeof(uint64_t));
    for (i = 0, dims = 0; i < m->n; i++) {
        ptwm_tensor_info t;
        ptwm_source_tensor(s, i, &t, NULL);
        CHECK_ERR(ptwm_source_read(s, i, 0, m->bytes + off, (size_t)t.nbytes, &err), &err, PTWM_OK,
                  NULL);
        m->names[i] = strdup(t.name);
        memcpy(m->shapes + dims, t.shape, t.ndim * sizeof(uint64_t));
        m->d[i] = (ptwm_tensor_desc){m->names[i], t.dtype, t.ndim, m->shapes + dims,
                                     m->bytes + off, t.nbytes};
        off += (size_t)t.nbytes;
        dims += t.ndim;
    }
    ptwm_source_close(s);
    return 0;
}

static void model_free(model *m) {
    size_t i;
    for (i = 0; i < m->n; i++) free(m->names[i]);
    free(m->names);
    free(m->d);
    free(m->shapes);
    free(m->bytes);
}

static void *compress(const model *m, int threads, int method, uint64_t chunk, ptwm_ctx *ctx,
                      size_t *len) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    void *blob = NULL;
    p.threads = threads;
    p.method = method;
    p.chunk_size = chunk;
    p.ctx = ctx;
    CHECK_ERR(ptwm_compress_blob(m->d, m->n, NULL, &p, &blob, len, &err), &err, PTWM_OK, NULL);
    return blob;
}

/* Decodes blob with ctx (NULL: the reader's own) and compares every tensor. */
static void check_decode(const model *m, const void *blob, size_t len, int threads, ptwm_ctx *ctx) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i;
    CHECK_ERR(ptwm_reader_open_memory(blob, len, "blob", &r, &err), &err, PTWM_OK, NULL);
    if (!r) return;
    ptwm_reader_set_threads(r, threads);
    CHECK_ERR(ptwm_reader_set_ctx(r, ctx, &err), &err, PTWM_OK, NULL);
    for (i = 0; i < m->n; i++) {
        uint8_t *got = (uint8_t *)malloc(m->d[i].nbytes ? (size_t)m->d[i].nbytes : 1);
        CHECK_ERR(ptwm_reader_decode(r, i, got, (size_t)m->d[i].nbytes, &err), &err, PTWM_OK, NULL);
        CHECK_MSG(memcmp(got, m->d[i].data, (size_t)m->d[i].nbytes) == 0, "tensor %s differs",
                  m->d[i].name);
        free(got);
    }
    ptwm_reader_close(r);
}

/* The same bytes with and without a context, call after call, for thread
 * counts and chunk sizes that make the context's buffers change size. */
static void test_same_output(const char *file) {
    static const int threads[] = {1, 2, 3};
    static const uint64_t chunks[] = {0, 65536, 0};
    model m;
    ptwm_ctx *ctx = NULL;
    ptwm_err err;
    size_t k;
    if (model_load(file, &m)) return;
    CHECK_ERR(ptwm_ctx_create(&ctx, &err), &err, PTWM_OK, NULL);
    CHECK(ptwm_ctx_size(ctx) == 0);
    for (k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        size_t la = 0, lb = 0, lc = 0;
        void *a = compress(&m, threads[k], PTWM_METHOD_MICROSCALE, chunks[k], NULL, &la);
        void *b = compress(&m, threads[k], PTWM_METHOD_MICROSCALE, chunks[k], ctx, &lb);
        void *c = compress(&m, threads[k], PTWM_METHOD_MICROSCALE, chunks[k], ctx, &lc);
        CHECK_MSG(a && b && c && la == lb && la == lc && !memcmp(a, b, la) && !memcmp(a, c, la),
                  "%s, %d threads: output with a context differs", file, threads[k]);
        if (b) {
            check_decode(&m, b, lb, threads[k], ctx);
            check_decode(&m, b, lb, threads[k], NULL);
        }
        ptwm_free(a);
        ptwm_free(b);
        ptwm_free(c);
    }
    /* The context kept the work memory of the calls. */
    CHECK(ptwm_ctx_size(ctx) > 0);
    ptwm_ctx_free(ctx);
    model_free(&m);
}

/* One user at a time; the second is refused until the first lets go. */
static void test_one_user(void) {
    model m;
    ptwm_ctx *ctx = NULL;
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_writer *w = NULL, *w2 = NULL;
    ptwm_reader *r = NULL;
    ptwm_err err;
    void *blob = NULL;
    size_t len = 0;
    if (model_load("emotion.f32.safetensors", &m)) return;
    CHECK_ERR(ptwm_ctx_create(&ctx, &err), &err, PTWM_OK, NULL);
    blob = compress(&m, 1, 0, 0, NULL, &len);
    p.ctx = ctx;
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_memory(&p, &w2, &err), &err, PTWM_ERR_INVALID_ARG,
              "writer: the context is in use");
    CHECK(w2 == NULL);
    CHECK_ERR(ptwm_reader_open_memory(blob, len, "blob", &r, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_reader_set_ctx(r, ctx, &err), &err, PTWM_ERR_INVALID_ARG,
              "reader: the context is in use");
    ptwm_writer_free(w);
    /* Free again: the reader takes it, and then a writer is refused. */
    CHECK_ERR(ptwm_reader_set_ctx(r, ctx, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_reader_set_ctx(r, ctx, &err), &err, PTWM_OK, NULL); /* already its own */
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_ERR_INVALID_ARG,
              "writer: the context is in use");
    /* Back to the reader's own memory: the context is free again. */
    CHECK_ERR(ptwm_reader_set_ctx(r, NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
    ptwm_writer_free(w);
    ptwm_reader_close(r);
    CHECK_ERR(ptwm_ctx_create(NULL, &err), &err, PTWM_ERR_INVALID_ARG, "NULL output handle");
    ptwm_ctx_free(ctx);
    ptwm_ctx_free(NULL);
    ptwm_free(blob);
    model_free(&m);
}

/* method 0 is the default (MICROSCALE), as 0 is in every options struct. */
static void test_method_zero(void) {
    model m;
    size_t la = 0, lb = 0;
    void *a, *b;
    if (model_load("emotion.bf16.safetensors", &m)) return;
    a = compress(&m, 1, 0, 0, NULL, &la);
    b = compress(&m, 1, PTWM_METHOD_MICROSCALE, 0, NULL, &lb);
    CHECK(a && b && la == lb && !memcmp(a, b, la));
    ptwm_free(a);
    ptwm_free(b);
    model_free(&m);
}

int main(void) {
    test_same_output("emotion.bf16.safetensors");
    test_same_output("emotion.f32.safetensors");
    test_one_user();
    test_method_zero();
    return tu_finish("test_ctx");
}
