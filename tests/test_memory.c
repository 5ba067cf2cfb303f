/* The allocator hook: with ptwm_set_allocator called first, every block the
 * library allocates comes from the program's allocator and goes back to it
 * (each block is tagged, so a block of the C library's freed through the
 * hook is caught, and one of the hook's freed by the C library's free
 * aborts), through a compress, a decode, a source load and a checkpoint
 * directory round trip of real weights, on one and two threads; a run leaves
 * nothing allocated when all is closed (on two threads, parked helper
 * threads keep their own small records until they exit). Setting
 * the allocator late, or half an allocator, is refused with its message. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define TAG 0x5054574d414c4c43ull /* "PTWMALLC" */
#define PARKED_MAX 4              /* helper records parked after two-thread runs */

typedef struct head {
    uint64_t tag;
    size_t size;
    uint64_t pad; /* 32 bytes: the user part keeps malloc's alignment */
    uint64_t pad2;
} head;

static size_t g_live, g_calls, g_bad;

static void *t_malloc(void *opaque, size_t size) {
    head *h = (head *)malloc(sizeof(head) + size);
    (void)opaque;
    if (!h) return NULL;
    h->tag = TAG;
    h->size = size;
    g_live++;
    g_calls++;
    return h + 1;
}

static head *t_head(void *p) {
    head *h = (head *)p - 1;
    if (h->tag != TAG) g_bad++;
    return h;
}

static void *t_realloc(void *opaque, void *p, size_t size) {
    head *h, *n;
    (void)opaque;
    if (!p) return t_malloc(opaque, size);
    h = t_head(p);
    n = (head *)realloc(h, sizeof(head) + size);
    if (!n) return NULL;
    n->size = size;
    g_calls++;
    return n + 1;
}

static void t_free(void *opaque, void *p) {
    head *h;
    (void)opaque;
    if (!p) return;
    h = t_head(p);
    h->tag = 0;
    g_live--;
    free(h);
}

/* Compress and decode the file's tensors, load one through a source, and
 * round-trip it as a checkpoint directory. */
static void exercise(const char *name, int threads) {
    const char *path = tu_corpus_path(name);
    ptwm_source *s = NULL;
    ptwm_err err;
    ptwm_tensor_info t;
    ptwm_tensor_desc d;
    ptwm_reader *r = NULL;
    uint8_t *bytes = NULL, *back = NULL;
    void *blob = NULL;
    size_t len = 0;
    char out[1024], restored[1024];
    static int run;
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    p.threads = o.threads = threads;
    CHECK_ERR(ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    if (!s) return;
    ptwm_source_set_threads(s, threads);
    CHECK_ERR(ptwm_source_tensor(s, 0, &t, &err), &err, PTWM_OK, NULL);
    bytes = (uint8_t *)malloc((size_t)t.nbytes);
    back = (uint8_t *)malloc((size_t)t.nbytes);
    CHECK_ERR(ptwm_source_read(s, 0, 0, bytes, (size_t)t.nbytes, &err), &err, PTWM_OK, NULL);
    d = (ptwm_tensor_desc){t.name, t.dtype, t.ndim, t.shape, bytes, t.nbytes};
    CHECK_ERR(ptwm_compress_blob(&d, 1, NULL, &p, &blob, &len, &err), &err, PTWM_OK, NULL);
    CHECK(blob && t_head(blob)->size >= len);
    CHECK_ERR(ptwm_reader_open_memory(blob, len, "blob", &r, &err), &err, PTWM_OK, NULL);
    ptwm_reader_set_threads(r, threads);
    CHECK_ERR(ptwm_reader_decode(r, 0, back, (size_t)t.nbytes, &err), &err, PTWM_OK, NULL);
    CHECK(memcmp(bytes, back, (size_t)t.nbytes) == 0);
    ptwm_reader_close(r);
    ptwm_free(blob);
    ptwm_source_close(s);
    run++;
    snprintf(out, sizeof out, "%s/ck%d", tu_tmpdir(), run);
    snprintf(restored, sizeof restored, "%s/back%d", tu_tmpdir(), run);
    CHECK_ERR(ptwm_compress_checkpoint(path, out, &o, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_decompress_checkpoint(out, restored, &o, &err), &err, PTWM_OK, NULL);
    free(bytes);
    free(back);
}

int main(void) {
    static const ptwm_allocator hook = {t_malloc, t_realloc, t_free, NULL};
    ptwm_allocator half = hook;
    ptwm_err err;
    half.free_fn = NULL;
    CHECK_ERR(ptwm_set_allocator(&half, &err), &err, PTWM_ERR_INVALID_ARG,
              "malloc_fn, realloc_fn and free_fn are all required");
    CHECK_ERR(ptwm_set_allocator(&hook, &err), &err, PTWM_OK, NULL);
    exercise("emotion.bf16.safetensors", 1);
    CHECK_MSG(g_calls > 0, "no allocation went through the hook");
    CHECK_MSG(g_live == 0, "%zu blocks still allocated after everything was closed", g_live);
    /* Two threads: the helper threads a run lends park afterwards, each
     * keeping its small record until it exits or the library unloads (how
     * many depends on timing); anything more is a leak. */
    exercise("emotion.bf16.safetensors", 2);
    exercise("emotion.f32.safetensors", 2);
    CHECK_MSG(g_live <= PARKED_MAX, "%zu blocks left by two-thread runs", g_live);
    CHECK_MSG(g_bad == 0, "%zu blocks not from the hook reached it", g_bad);
    CHECK_ERR(ptwm_set_allocator(NULL, &err), &err, PTWM_ERR_INVALID_ARG,
              "has allocated memory already");
    return tu_finish("test_memory");
}
