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

/* The same model, added one tensor at a time to a writer that copies each
 * chunk (as the command line's compress does), into memory. */
static void *compress_copied(const model *m, int threads, uint64_t chunk, ptwm_ctx *ctx, size_t *len) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_writer *w = NULL;
    ptwm_err err;
    void *blob = NULL;
    size_t i;
    p.threads = threads;
    p.chunk_size = chunk;
    p.ctx = ctx;
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
    if (!w) return NULL;
    for (i = 0; i < m->n; i++)
        CHECK_ERR(ptwm_writer_add(w, &m->d[i], NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_finish_memory(w, &blob, len, &err), &err, PTWM_OK, NULL);
    return blob;
}

/* A ring deep enough for runs of small tensors sizes its buffers to its
 * jobs: with 16 MiB chunks and only small tensors (the emotion network's
 * of 16 KB or less), the context keeps the two workers' chunk-sized scratch
 * and buffers about the size of the tensors, not a chunk's work bound (64
 * MiB of address space) for each job coded ahead or a chunk for each slot. The bytes are those of one thread, with
 * chunks borrowed (one call) or copied (tensor by tensor). */
static void test_small_buffers(void) {
    const uint64_t chunk = (uint64_t)16 << 20, work = 4 * chunk + 65536;
    model m;
    size_t l1 = 0, l2 = 0, l3 = 0, l4 = 0;
    void *one, *borrowed, *copied, *copied1;
    ptwm_ctx *c1 = NULL, *c2 = NULL, *c3 = NULL;
    ptwm_err err;
    model small;
    size_t i;
    if (model_load("emotion.bf16.safetensors", &m)) return;
    /* Its tensors of at most 16 KB: every buffer of theirs is of the
     * smallest size, so what the context keeps beside the scratch is bounded
     * whatever the threads' timing. */
    small = m;
    small.d = (ptwm_tensor_desc *)calloc(m.n, sizeof(*small.d));
    for (small.n = i = 0; i < m.n; i++)
        if (m.d[i].nbytes <= 16384) small.d[small.n++] = m.d[i];
    CHECK_ERR(ptwm_ctx_create(&c1, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_ctx_create(&c2, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_ctx_create(&c3, &err), &err, PTWM_OK, NULL);
    one = compress(&small, 1, PTWM_METHOD_MICROSCALE, chunk, NULL, &l1);
    borrowed = compress(&small, 2, PTWM_METHOD_MICROSCALE, chunk, c1, &l2);
    copied = compress_copied(&small, 2, chunk, c2, &l3);
    copied1 = compress_copied(&small, 1, chunk, c3, &l4);
    CHECK(one && borrowed && l1 == l2 && !memcmp(one, borrowed, l1));
    CHECK(copied && copied1 && l3 == l4 && !memcmp(copied, copied1, l3));
    if (copied) check_decode(&small, copied, l3, 2, NULL);
    CHECK_MSG(ptwm_ctx_size(c1) < 2 * work + chunk, "borrowing writer keeps %zu bytes",
              ptwm_ctx_size(c1));
    CHECK_MSG(ptwm_ctx_size(c2) < 2 * work + chunk, "copying writer keeps %zu bytes",
              ptwm_ctx_size(c2));
    ptwm_free(one);
    ptwm_free(borrowed);
    ptwm_free(copied);
    ptwm_free(copied1);
    ptwm_ctx_free(c1);
    ptwm_ctx_free(c2);
    ptwm_ctx_free(c3);
    free(small.d);
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
    test_small_buffers();
    return tu_finish("test_ctx");
}
