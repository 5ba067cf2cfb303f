/* Pulled tensors (ptwm_writer_add_pulled): chunks read on the coding
 * threads and tensors of several chunks hashed in job order by them. A
 * writer fed by pulls writes byte for byte what one fed by ptwm_writer_add
 * writes (payload hashes included), in memory and to a file, on 1 to 4
 * threads, over the corpus's emotion network in BF16 (real weights, many
 * chunks a tensor at 4 KiB chunks) with an empty, a one-byte and a
 * one-chunk tensor among them; every tensor decodes with its hash checked.
 * A read failing on a coding thread fails the writer with the tensor's name
 * and the bytes it read, reported by the next call; pulled tensors coded
 * against a base (whose chunks the writing thread reads) match too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer.h"
#include "testutil.h"

typedef struct model {
    ptwm_tensor_desc *d;
    size_t n;
    uint8_t **bytes;
} model;

/* The read a source's table gives: tensor `key` of the model, or a failure
 * at bytes [fail_at, ...) of tensor fail_key. */
typedef struct pull_src {
    const model *m;
    size_t fail_key;
    uint64_t fail_at;
} pull_src;

static ptwm_error read_key(void *h, size_t key, uint64_t off, void *dst, size_t len,
                           ptwm_err *err) {
    const pull_src *s = (const pull_src *)h;
    if (key == s->fail_key && off + len > s->fail_at)
        return ptwm_fail(err, PTWM_ERR_IO, "disk on fire at %llu", (unsigned long long)off);
    memcpy(dst, s->m->bytes[key] + off, len);
    return PTWM_OK;
}

static const uint64_t shape_empty[1] = {0}, shape_one[1] = {1}, shape_small[1] = {1000};
static uint8_t one_byte[1] = {0x5a}, small[1000];

/* The corpus network's tensors, then three edge cases. */
static int load_model(model *m) {
    ptwm_source *s = NULL;
    ptwm_err err;
    size_t i, n;
    memset(m, 0, sizeof(*m));
    CHECK_ERR(ptwm_source_open(tu_corpus_path("emotion.bf16.safetensors"), PTWM_SOURCE_AUTO, &s, &err),
              &err, PTWM_OK, NULL);
    if (!s) return 0;
    n = ptwm_source_count(s);
    m->d = (ptwm_tensor_desc *)calloc(n + 3, sizeof(ptwm_tensor_desc));
    m->bytes = (uint8_t **)calloc(n + 3, sizeof(uint8_t *));
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        CHECK(ptwm_source_tensor(s, i, &t, NULL) == PTWM_OK);
        m->bytes[i] = (uint8_t *)malloc(t.nbytes + 1);
        CHECK_ERR(ptwm_source_read(s, i, 0, m->bytes[i], t.nbytes, &err), &err, PTWM_OK, NULL);
        m->d[i].name = strdup(t.name);
        m->d[i].dtype = t.dtype;
        m->d[i].ndim = t.ndim;
        m->d[i].shape = (uint64_t *)malloc(8 * (t.ndim + 1));
        memcpy((void *)m->d[i].shape, t.shape, 8 * t.ndim);
        m->d[i].nbytes = t.nbytes;
        m->d[i].data = m->bytes[i];
    }
    ptwm_source_close(s);
    for (i = 0; i < sizeof(small); i++) small[i] = (uint8_t)(i * 7);
    m->d[n] = (ptwm_tensor_desc){"edge/empty", PTWM_DTYPE_U8, 1, shape_empty, NULL, 0};
    m->d[n + 1] = (ptwm_tensor_desc){"edge/one", PTWM_DTYPE_U8, 1, shape_one, one_byte, 1};
    m->d[n + 2] = (ptwm_tensor_desc){"edge/small", PTWM_DTYPE_U8, 1, shape_small, small, 1000};
    m->bytes[n] = NULL;
    m->bytes[n + 1] = one_byte;
    m->bytes[n + 2] = small;
    m->n = n + 3;
    return 1;
}

static void free_model(model *m) {
    size_t i;
    for (i = 0; i + 3 < m->n; i++) {
        free((void *)m->d[i].name);
        free((void *)m->d[i].shape);
        free(m->bytes[i]);
    }
    free(m->d);
    free(m->bytes);
}

static ptwm_cparams params(int threads) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    p.threads = threads;
    p.chunk_size = 4096;
    return p;
}

/* Every tensor of m into w, pulled (src) or added from memory (NULL). */
static ptwm_error add_all(ptwm_writer *w, const model *m, pull_src *src, ptwm_err *err) {
    size_t i;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < m->n && !rc; i++)
        rc = src ? ptwm_writer_add_pulled(w, &m->d[i], NULL, read_key, src, i, err)
                 : ptwm_writer_add(w, &m->d[i], NULL, err);
    return rc;
}

static void *image(const model *m, pull_src *src, int threads, size_t *len) {
    ptwm_writer *w = NULL;
    ptwm_cparams p = params(threads);
    ptwm_err err;
    void *blob = NULL;
    *len = 0;
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
    if (!w) return NULL;
    CHECK_ERR(add_all(w, m, src, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_finish_memory(w, &blob, len, &err), &err, PTWM_OK, NULL);
    return blob;
}

/* Each tensor decodes to its bytes, its payload hash checked. */
static void check_decodes(const model *m, const void *blob, size_t len) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i;
    CHECK_ERR(ptwm_reader_open_memory(blob, len, "pulled", &r, &err), &err, PTWM_OK, NULL);
    if (!r) return;
    CHECK(ptwm_reader_count(r) == m->n);
    for (i = 0; i < m->n && i < ptwm_reader_count(r); i++) {
        uint8_t *out = (uint8_t *)malloc(m->d[i].nbytes + 1);
        CHECK_ERR(ptwm_reader_decode(r, i, out, m->d[i].nbytes, &err), &err, PTWM_OK, NULL);
        CHECK_MSG(!m->d[i].nbytes || memcmp(out, m->bytes[i], m->d[i].nbytes) == 0, "tensor %zu", i);
        free(out);
    }
    ptwm_reader_close(r);
}

static void test_same_image(const model *m) {
    size_t ref_len = 0, len = 0;
    void *ref = image(m, NULL, 1, &ref_len);
    int threads;
    pull_src src = {m, SIZE_MAX, 0};
    check_decodes(m, ref, ref_len);
    for (threads = 1; threads <= 4; threads++) {
        void *got = image(m, &src, threads, &len);
        CHECK_MSG(got && len == ref_len && memcmp(got, ref, len) == 0,
                  "%d threads: the pulled image differs from the added one", threads);
        if (threads == 2) check_decodes(m, got, len);
        ptwm_free(got);
    }
    ptwm_free(ref);
}

static void test_same_file(const model *m) {
    pull_src src = {m, SIZE_MAX, 0};
    int threads;
    for (threads = 1; threads <= 3; threads += 2) {
        ptwm_writer *w = NULL;
        ptwm_cparams p = params(threads);
        ptwm_err err;
        CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("pull-ref.ptwm"), &p, &w, &err), &err, PTWM_OK, NULL);
        if (w) CHECK_ERR(add_all(w, m, NULL, &err), &err, PTWM_OK, NULL);
        if (w) CHECK_ERR(ptwm_writer_finish(w, &err), &err, PTWM_OK, NULL);
        w = NULL;
        CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("pull-got.ptwm"), &p, &w, &err), &err, PTWM_OK, NULL);
        if (w) CHECK_ERR(add_all(w, m, &src, &err), &err, PTWM_OK, NULL);
        if (w) CHECK_ERR(ptwm_writer_finish(w, &err), &err, PTWM_OK, NULL);
        CHECK_MSG(tu_files_equal(tu_tmp_path("pull-ref.ptwm"), tu_tmp_path("pull-got.ptwm")),
                  "%d threads: the pulled file differs", threads);
    }
}

/* The largest tensor fails at its third chunk: whichever call comes next
 * (an add, or the finish) reports it, naming the tensor and the bytes. */
static void test_read_failure(const model *m) {
    size_t big = 0, i;
    int threads;
    char want[256];
    for (i = 1; i < m->n; i++)
        if (m->d[i].nbytes > m->d[big].nbytes) big = i;
    snprintf(want, sizeof(want), "tensor '%s': reading bytes 8192..12288: disk on fire at 8192",
             m->d[big].name);
    for (threads = 1; threads <= 3; threads++) {
        pull_src src = {m, big, 8192};
        ptwm_writer *w = NULL;
        ptwm_cparams p = params(threads);
        ptwm_err err;
        ptwm_error rc;
        void *blob = NULL;
        size_t len = 0;
        CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
        if (!w) continue;
        rc = add_all(w, m, &src, &err);
        if (rc == PTWM_OK) rc = ptwm_writer_finish_memory(w, &blob, &len, &err);
        else ptwm_writer_free(w);
        CHECK_ERR(rc, &err, PTWM_ERR_IO, want);
        CHECK(blob == NULL);
    }
}

/* A base holding the same tensors: the image of pulled tensors equals the
 * added one's. */
static void test_with_base(const model *m) {
    size_t base_len = 0, ref_len = 0, len = 0;
    void *base_img = image(m, NULL, 1, &base_len), *ref = NULL, *got = NULL;
    ptwm_source *base = NULL;
    ptwm_err err;
    pull_src src = {m, SIZE_MAX, 0};
    int pass;
    if (!base_img) return;
    CHECK(tu_write_file(tu_tmp_path("pull-base.ptwm"), base_img, base_len) == 0);
    CHECK_ERR(ptwm_source_open(tu_tmp_path("pull-base.ptwm"), PTWM_SOURCE_AUTO, &base, &err), &err,
              PTWM_OK, NULL);
    for (pass = 0; pass < 2 && base; pass++) {
        ptwm_writer *w = NULL;
        ptwm_cparams p = params(2);
        void **out = pass ? &got : &ref;
        size_t *out_len = pass ? &len : &ref_len;
        p.base = base;
        CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
        if (!w) break;
        CHECK_ERR(add_all(w, m, pass ? &src : NULL, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_writer_finish_memory(w, out, out_len, &err), &err, PTWM_OK, NULL);
    }
    CHECK_MSG(ref && got && len == ref_len && memcmp(got, ref, len) == 0,
              "with a base: the pulled image differs from the added one");
    ptwm_free(ref);
    ptwm_free(got);
    ptwm_source_close(base);
    ptwm_free(base_img);
}

int main(void) {
    model m;
    if (!tu_corpus_dir() || !load_model(&m)) return tu_finish("test_writer_pull");
    test_same_image(&m);
    test_same_file(&m);
    test_read_failure(&m);
    test_with_base(&m);
    free_model(&m);
    return tu_finish("test_writer_pull");
}
