/* Writers on one context finished with ptwm_writer_finish_later (a sharded
 * directory's shards): each file holds byte for byte what a writer of its
 * own writes, for 1, 2 and 3 threads and a thread count that changes from
 * one file to the next; the sizes reported are the files'; a failed commit
 * is returned, naming the file, by ptwm_ctx_commit_wait and every later
 * open; files finished before a context is freed are still committed; an
 * abandoned writer leaves no file; a checkpoint of many small shards is the
 * same for 1, 2 and 3 threads. Real weights: the corpus's emotion
 * network in BF16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "write_later.h"
#include "testutil.h"

#define NFILES 6

typedef struct model {
    ptwm_source *s;
    size_t n;
} model;

typedef struct src_tensor {
    ptwm_source *s;
    size_t i;
} src_tensor;

static ptwm_error read_src(void *ctx, uint64_t off, void *dst, size_t len, ptwm_err *err) {
    const src_tensor *t = (const src_tensor *)ctx;
    return ptwm_source_read(t->s, t->i, off, dst, len, err);
}

/* Tensors [first, last) of the model into w, streamed as the checkpoint
 * code adds them. */
static void add_range(ptwm_writer *w, const model *m, size_t first, size_t last) {
    size_t i;
    ptwm_err err;
    for (i = first; i < last; i++) {
        ptwm_tensor_info t;
        ptwm_tensor_desc d;
        src_tensor st;
        ptwm_source_tensor(m->s, i, &t, NULL);
        memset(&d, 0, sizeof(d));
        d.name = t.name;
        d.dtype = t.dtype;
        d.ndim = t.ndim;
        d.shape = t.shape;
        d.nbytes = t.nbytes;
        st.s = m->s;
        st.i = i;
        CHECK_ERR(ptwm_writer_add_stream(w, &d, NULL, read_src, &st, &err), &err, PTWM_OK, NULL);
    }
}

/* File k holds tensors [cut[k], cut[k+1]): one tiny file, one empty, the
 * rest of a few dozen chunks each. */
static void cuts(const model *m, size_t cut[NFILES + 1]) {
    size_t k;
    cut[0] = 0;
    cut[1] = 1;
    cut[2] = 1;
    for (k = 3; k <= NFILES; k++) cut[k] = 1 + (m->n - 1) * (k - 2) / (NFILES - 2);
}

static ptwm_cparams params(int threads, ptwm_ctx *ctx) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    p.threads = threads;
    p.chunk_size = 16384;
    p.ctx = ctx;
    return p;
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : UINT64_MAX;
}

/* threads > 0: every file with that many; 0: 1, 2, 3, 1, 2, 3 (the shared
 * threads are remade between files). */
static void test_same_bytes(const model *m, int threads) {
    size_t cut[NFILES + 1], k;
    uint64_t size[NFILES];
    ptwm_ctx *ctx = NULL;
    ptwm_err err;
    char ref[64], got[64];
    cuts(m, cut);
    CHECK_ERR(ptwm_ctx_create(&ctx, &err), &err, PTWM_OK, NULL);
    for (k = 0; k < NFILES; k++) {
        ptwm_writer *w = NULL;
        ptwm_cparams p = params(threads ? threads : (int)(k % 3) + 1, ctx);
        snprintf(got, sizeof(got), "later-%d-%zu.ptwm", threads, k);
        CHECK_ERR(ptwm_writer_open_file(tu_tmp_path(got), &p, &w, &err), &err, PTWM_OK, NULL);
        if (!w) break;
        add_range(w, m, cut[k], cut[k + 1]);
        size[k] = 0;
        CHECK_ERR(ptwm_writer_finish_later(w, &size[k], &err), &err, PTWM_OK, NULL);
    }
    CHECK_ERR(ptwm_ctx_commit_wait(ctx, &err), &err, PTWM_OK, NULL);
    for (k = 0; k < NFILES; k++) {
        ptwm_writer *w = NULL;
        ptwm_cparams p = params(1, NULL);
        snprintf(ref, sizeof(ref), "ref-%zu.ptwm", k);
        snprintf(got, sizeof(got), "later-%d-%zu.ptwm", threads, k);
        CHECK_ERR(ptwm_writer_open_file(tu_tmp_path(ref), &p, &w, &err), &err, PTWM_OK, NULL);
        if (!w) break;
        add_range(w, m, cut[k], cut[k + 1]);
        CHECK_ERR(ptwm_writer_finish(w, &err), &err, PTWM_OK, NULL);
        CHECK_MSG(tu_files_equal(tu_tmp_path(ref), tu_tmp_path(got)), "%d threads: file %zu differs",
                  threads, k);
        CHECK_MSG(size[k] == file_size(tu_tmp_path(got)), "file %zu: size %llu reported", k,
                  (unsigned long long)size[k]);
        strcat(got, ".tmp-");
        CHECK(tu_count_prefixed(got) == 0);
    }
    ptwm_ctx_free(ctx);
}

/* A commit that fails (the target is a directory) is returned, naming the
 * file, by ptwm_ctx_commit_wait and by every later open on the context; the
 * file before it is whole, and no temporary file is left. */
static void test_failed_commit(const model *m) {
    ptwm_ctx *ctx = NULL;
    ptwm_writer *w = NULL;
    ptwm_err err;
    ptwm_cparams p;
    uint64_t size = 0;
    char *bad = tu_tmp_path("fail-target");
    CHECK(mkdir(bad, 0700) == 0);
    CHECK(tu_write_file(tu_tmp_path("fail-target/x"), "x", 1) == 0);
    CHECK_ERR(ptwm_ctx_create(&ctx, &err), &err, PTWM_OK, NULL);
    p = params(2, ctx);
    CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("fail-first.ptwm"), &p, &w, &err), &err, PTWM_OK,
              NULL);
    add_range(w, m, 0, m->n / 2);
    CHECK_ERR(ptwm_writer_finish_later(w, &size, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("fail-target"), &p, &w, &err), &err, PTWM_OK, NULL);
    add_range(w, m, m->n / 2, m->n);
    CHECK_ERR(ptwm_writer_finish_later(w, &size, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_ctx_commit_wait(ctx, &err), &err, PTWM_ERR_IO, "fail-target: rename from");
    CHECK_ERR(ptwm_ctx_commit_wait(ctx, &err), &err, PTWM_ERR_IO, "fail-target: rename from");
    w = NULL;
    CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("fail-after.ptwm"), &p, &w, &err), &err,
              PTWM_ERR_IO, "fail-target: rename from");
    CHECK(w == NULL);
    ptwm_ctx_free(ctx);
    CHECK(file_size(tu_tmp_path("fail-first.ptwm")) != UINT64_MAX);
    CHECK(tu_count_prefixed("fail-target.tmp-") == 0);
    CHECK(tu_count_prefixed("fail-after") == 0);
}

/* Freeing the context commits what was finished; a writer freed unfinished
 * leaves nothing; arguments are checked. */
static void test_free_and_args(const model *m) {
    ptwm_ctx *ctx = NULL;
    ptwm_writer *w = NULL;
    ptwm_err err;
    ptwm_cparams p;
    uint64_t size = 0;
    CHECK_ERR(ptwm_ctx_create(&ctx, &err), &err, PTWM_OK, NULL);
    p = params(2, ctx);
    CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("free-done.ptwm"), &p, &w, &err), &err, PTWM_OK,
              NULL);
    add_range(w, m, 0, m->n);
    CHECK_ERR(ptwm_writer_finish_later(w, &size, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_file(tu_tmp_path("free-dropped.ptwm"), &p, &w, &err), &err,
              PTWM_OK, NULL);
    add_range(w, m, 0, m->n);
    ptwm_writer_free(w);
    ptwm_ctx_free(ctx);
    CHECK(size > 0 && size == file_size(tu_tmp_path("free-done.ptwm")));
    CHECK(tu_count_prefixed("free-dropped") == 0);
    CHECK(tu_count_prefixed("free-done.ptwm.tmp-") == 0);
    CHECK_ERR(ptwm_writer_finish_later(NULL, &size, &err), &err, PTWM_ERR_INVALID_ARG,
              "NULL writer");
    p.ctx = NULL;
    CHECK_ERR(ptwm_writer_open_memory(&p, &w, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_finish_later(w, &size, &err), &err, PTWM_ERR_INVALID_ARG,
              "not a file writer");
    CHECK_ERR(ptwm_ctx_commit_wait(NULL, &err), &err, PTWM_ERR_INVALID_ARG, "NULL context");
}

/* The whole path: a directory of many small shards from 1, 2 and 3
 * threads, byte for byte the same, and back to the source's bytes. */
static void test_checkpoint(void) {
    static const int threads[] = {1, 2, 3};
    char out[32];
    ptwm_err err;
    size_t i;
    for (i = 0; i < 3; i++) {
        ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
        o.threads = threads[i];
        o.max_shard_size = 40000;
        o.chunk_size = 16384;
        snprintf(out, sizeof(out), "ck-%d", threads[i]);
        CHECK_ERR(ptwm_compress_checkpoint(tu_corpus_path("emotion.bf16.safetensors"),
                                           tu_tmp_path(out), &o, &err),
                  &err, PTWM_OK, NULL);
    }
    CHECK(tu_trees_equal(tu_tmp_path("ck-1"), tu_tmp_path("ck-2")));
    CHECK(tu_trees_equal(tu_tmp_path("ck-1"), tu_tmp_path("ck-3")));
    CHECK(tu_file_expect(tu_tmp_path("ck-1/model.ptwm.index.json"), "model-00010-of-000"));
}

int main(void) {
    model m;
    ptwm_err err;
    if (!tu_corpus_dir()) return tu_finish("test_writer_later");
    memset(&m, 0, sizeof(m));
    CHECK_ERR(ptwm_source_open(tu_corpus_path("emotion.bf16.safetensors"), PTWM_SOURCE_AUTO, &m.s,
                               &err),
              &err, PTWM_OK, NULL);
    if (!m.s) return tu_finish("test_writer_later");
    m.n = ptwm_source_count(m.s);
    CHECK(m.n > NFILES * 2);
    test_same_bytes(&m, 1);
    test_same_bytes(&m, 2);
    test_same_bytes(&m, 3);
    test_same_bytes(&m, 0);
    test_failed_commit(&m);
    test_free_and_args(&m);
    test_checkpoint();
    ptwm_source_close(m.s);
    return tu_finish("test_writer_later");
}
