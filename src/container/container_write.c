/* The .ptwm writer (docs/FORMAT.md).
 *
 * One pass, bounded memory: each tensor's raw bytes are cut into chunks that
 * join a ring of at most `window` pending jobs (owned copies, so a caller's
 * buffer is free again when ptwm_writer_add returns; ptwm_compress_blob and
 * ptwm_compress_file, whose tensors outlive the writer, code them in place).
 * Workers code jobs as they are queued, across tensor boundaries; the
 * thread that finishes the oldest pending job appends it, and every later
 * job already coded, in job order (under `rmu`), so the file is the same for
 * any thread count and a worker's payload is copied while it is still in
 * that worker's cache. The writing thread reclaims slots oldest first
 * (coding queued jobs itself while it waits). A payload equal to one written
 * before is not written again: its entry names the earlier bytes. Only the
 * table (a few dozen bytes per chunk) stays in memory until
 * ptwm_writer_finish appends it with the footer. Peak memory is at most
 * window x (chunk + slot) plus one slot of scratch per thread (window = 3 x
 * threads + 2; borrowing writers, which hold no raw copies: 8 x threads
 * slots; one thread: one slot), and, for writers sharing a context's
 * threads, the previous writer's last chunks until this one has a chunk
 * queued per thread. A slot is ptwm_chunk_work_bound(chunk) of
 * address space, room for the stages to code in place, touched only as far
 * as they write (about the coded size). Output buffers are not tied to
 * slots: a job takes one when it starts (unless it is coded in place) and
 * gives it back when appended, and the last given back is taken first, so
 * a few warm buffers serve the whole ring. */
#include "container_format.h"
#include "container_read.h"
#include "context.h"
#include "dout.h"
#include "chunk.h"
#include "entropy.h"
#include "fileio.h"
#include "hash.h"
#include "options.h"
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct wchunk {
    uint64_t offset;
    uint32_t coded, raw;
    uint8_t chain;
    uint32_t crc;               /* CRC32 of the payload (the entry's check) */
    uint8_t based;              /* coded against the base chunk */
    uint32_t base_crc;          /* then the CRC32 of the base chunk */
} wchunk;

/* A tensor's variable parts share one allocation, `chunks`: the chunk
 * entries, then the shape, the candidate chains one after the other and the
 * name. One block and no fixed-size arrays per tensor keep a table of a
 * million small tensors near 200 bytes a tensor. */
typedef struct wtensor {
    wchunk *chunks;                             /* the block (owned) */
    const uint64_t *shape;                      /* ndim dims, in the block */
    const uint8_t *chain_bytes;                 /* concatenated candidate blobs, in the block */
    char *name;                                 /* in the block */
    uint64_t nbytes, chunk_size, nchunks;
    ptwm_dtype dtype;
    uint32_t ndim;
    unsigned nchains;
    uint16_t chain_len[PTWM_FMT_MAX_CHAINS];    /* at most PTWM_CHAIN_MAX_BYTES each */
    uint8_t flags;
    uint8_t hash[16];
    uint8_t base_hash[16];                      /* PTWM_TF_BASE: the base tensor's */
} wtensor;

/* A job carries copies of what a worker needs from its tensor: the tensor
 * array may be reallocated by the writing thread while workers run. */
typedef struct wjob {
    size_t tensor;
    uint64_t chunk;
    ptwm_dtype dtype;
    uint64_t columns;           /* the tensor's last dimension (0: under 2 dims) */
    int plane_crc;
    unsigned nchains;
    const uint8_t *chain_ptr[PTWM_FMT_MAX_CHAINS];   /* into the tensor's chain_bytes */
    size_t chain_len[PTWM_FMT_MAX_CHAINS];
    uint8_t *raw;               /* the slot's own copy of the chunk */
    const uint8_t *src;         /* the bytes to code: raw, or the caller's (borrowing) */
    size_t raw_len;
    uint8_t *out;               /* an output buffer (slot_size bytes) taken from the
                                 * writer's free ones while the job is coded and
                                 * appended; NULL when coded in place */
    uint8_t *dst;               /* where the payload is coded: out, or (the oldest
                                 * pending job of an in-memory writer) straight into
                                 * the image at its end */
    size_t dst_cap;             /* slot_size, or the image's room (a work bound) */
    size_t out_len;
    uint8_t chain;
    uint64_t phash;             /* payload_hash of out[0..out_len) */
    uint32_t pcrc;              /* CRC32 of out[0..out_len): the chunk entry's check */
    uint8_t *base_buf;          /* the slot's copy of a base chunk (made when first needed) */
    const uint8_t *base;        /* the base chunk (base_buf), or NULL: the tensor has none */
    uint8_t based;              /* the payload is coded against it */
    uint32_t base_crc;          /* then the base chunk's CRC32 */
    int x2;                     /* the payload needs PTWM_FMT_X2_VERSION */
    int hash_raw;               /* the chunk is its tensor: hash it (into raw_hash) */
    uint8_t raw_hash[16];
    int coded;                  /* done, not yet appended (under rmu) */
    ptwm_error rc;
    ptwm_err err;
} wjob;

/* Payloads already written, by a hash of their bytes (open addressing,
 * at most half full): a chunk whose coded bytes equal an earlier chunk's
 * (tied or repeated tensors, repeated constant chunks) points its entry at
 * those bytes instead of writing them again. Only equal bytes are shared,
 * checked byte for byte, so every entry still decodes to its own chunk. */
typedef struct pslot {
    uint64_t hash;     /* 0: empty */
    uint64_t offset;
    uint32_t len;
    uint32_t kept;     /* 1 + where a copy of it starts in pstore.keep; 0: none */
} pslot;

/* Written past the page cache (dout.h), a payload would be read back from
 * the disk to be compared; small ones (zero or constant tensors, biases)
 * are kept in memory instead, up to KEEP_CAP bytes in all (a file of
 * repeated biases compared 1,229 payloads of 36-1,953 bytes, each a disk
 * read). The cap bounds what files without repeats pay for nothing. */
#define KEEP_MAX ((size_t)2 << 10)
#define KEEP_CAP ((size_t)2 << 20)

typedef struct pstore {
    pslot *slot;
    size_t cap, used;
    uint8_t *keep;
    size_t keep_len, keep_cap;
} pstore;

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

struct ptwm_writer {
    ptwm_cparams p;
    int to_file;
    ptwm_atomic_file af;
    ptwm_dout *dout;            /* appends past the page cache, once the file is large */
    int dout_tried;
    wbuf mem;
    /* Appending (under rmu, by whichever thread retires a job): the image or
     * file, pos, the sharing store, chunk entries, the counts, failure. */
    pthread_mutex_t rmu;
    uint64_t pos, coded_total, raw_done;
    int x2;                     /* a payload needs PTWM_FMT_X2_VERSION */
    ptwm_error failed;          /* sticky: a failed writer only accepts free/finish */
    ptwm_err ferr;              /* the failure's message, for the writing thread */
    wtensor *t;
    size_t nt, capt;
    ptwm_kv *meta;
    size_t nmeta;
    uint8_t *src_header;        /* owned, with its 8-byte length; or */
    const char *src_json;       /* borrowed, without it */
    size_t src_header_len;      /* with the 8-byte length */
    char *src_name;
    uint64_t src_file_size;
    int has_source;
    int borrow;                 /* callers' tensor bytes outlive the writer: code them in place */
    ptwm_queue *queue;          /* its own, or the context's (sh) */
    struct wshared *sh;         /* the context's shared threads, or NULL */
    size_t slot0;               /* the ring's first slot in the queue */
    int claimed;                /* holds the caller's context */
    uint64_t *size_out;         /* detached (ptwm_writer_finish_later): its size, once whole */
    unsigned nworkers;
    wjob *jobs;                 /* a ring of `window` slots */
    size_t window;
    size_t head;                /* oldest job not appended (rmu); a slot whose job is
                                 * coded and not yet appended has `coded` set */
    size_t reclaim, nheld;      /* oldest slot not reclaimed; slots in use (writing
                                 * thread only) */
    size_t bound;               /* ptwm_chunk_bound(chunk_size) */
    size_t slot_size;           /* ptwm_chunk_work_bound(chunk_size): planes are coded
                                 * in place in slot buffers (pages past what the
                                 * stages write are never touched) */
    uint8_t **scratch;          /* one slot-sized buffer per worker */
    ptwm_ws **ws;               /* one codec workspace per worker (the context's) */
    ptwm_ctx *ctx;              /* work memory: the caller's (claimed) or own_ctx */
    ptwm_ctx *own_ctx;
    uint8_t **outs;             /* output buffers of appended jobs, for the next
                                 * jobs, last returned first (rmu) */
    size_t nouts;
    pstore dedup;               /* payloads already written, by content */
    uint8_t *cmp;               /* file writers: a written payload read back */
};

/* ---- growable byte buffer ------------------------------------------------ */

static int wbuf_reserve(wbuf *b, size_t more) {
    size_t need, cap;
    uint8_t *q;
    if (more > SIZE_MAX - b->len) return 0;
    need = b->len + more;
    if (need <= b->cap) return 1;
    cap = b->cap ? b->cap : 4096;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    q = (uint8_t *)ptwm_realloc(b->p, cap);
    if (!q) return 0;
    b->p = q;
    b->cap = cap;
    return 1;
}

static int wbuf_put(wbuf *b, const void *src, size_t n) {
    if (!wbuf_reserve(b, n)) return 0;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return 1;
}

static int wbuf_u8(wbuf *b, uint8_t v) {
    return wbuf_put(b, &v, 1);
}
static int wbuf_u16(wbuf *b, uint16_t v) {
    uint8_t x[2];
    ptwm_store_le16(x, v);
    return wbuf_put(b, x, 2);
}
static int wbuf_u32(wbuf *b, uint32_t v) {
    uint8_t x[4];
    ptwm_store_le32(x, v);
    return wbuf_put(b, x, 4);
}
static int wbuf_u64(wbuf *b, uint64_t v) {
    uint8_t x[8];
    ptwm_store_le64(x, v);
    return wbuf_put(b, x, 8);
}

/* ---- output -------------------------------------------------------------- */

static ptwm_error w_emit(ptwm_writer *w, const void *src, size_t n, ptwm_err *err) {
    if (w->dout) {
        ptwm_error rc = ptwm_dout_append(w->dout, src, n, err);
        if (rc) return rc;
    } else if (w->to_file) {
        ptwm_error rc = ptwm_write_full(w->af.fd, src, n, w->af.final_path, err);
        if (rc) return rc;
        /* The disk writes what is done while the rest is coded: the fsync
         * that commits the file then waits for the last few MiB only. */
        if ((w->pos + n) / PTWM_WRITEBACK_STEP != w->pos / PTWM_WRITEBACK_STEP)
            ptwm_start_writeback(w->af.fd, 0, 0);
        /* A file this large goes on past the page cache (dout.h). */
        if (!w->dout_tried && w->pos + n >= PTWM_DOUT_MIN) {
            w->dout_tried = 1;
            if ((rc = ptwm_dout_open(w->af.fd, w->af.tmp_path, w->af.final_path, w->pos + n,
                                     &w->dout, err)))
                return rc;
        }
    } else if (!wbuf_put(&w->mem, src, n)) {
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory growing a %zu-byte .ptwm image",
                         w->mem.len);
    }
    w->pos += n;
    return PTWM_OK;
}

/* rmu, taken only where another thread may append (a one-thread writer
 * appends on the writing thread alone: six lock pairs a chunk would cost
 * time for nothing; docs/ARCHITECTURE.md, "Measurements behind the code"). */
static void rmu_lock(const ptwm_writer *w) {
    if (w->nworkers > 1) pthread_mutex_lock((pthread_mutex_t *)&w->rmu);
}
static void rmu_unlock(const ptwm_writer *w) {
    if (w->nworkers > 1) pthread_mutex_unlock((pthread_mutex_t *)&w->rmu);
}

/* Record a failure (rmu held). */
static ptwm_error w_fail(ptwm_writer *w, ptwm_error rc) {
    if (!w->failed) w->failed = rc;
    return rc;
}

/* The same from the writing thread, outside rmu. */
static ptwm_error w_fail_caller(ptwm_writer *w, ptwm_error rc) {
    rmu_lock(w);
    w_fail(w, rc);
    rmu_unlock(w);
    return rc;
}

/* The sticky failure, read by the writing thread: "writer already failed"
 * into err if there is one. */
static ptwm_error w_failed(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc;
    rmu_lock(w);
    rc = w->failed;
    rmu_unlock(w);
    return rc ? ptwm_fail(err, rc, "writer already failed") : PTWM_OK;
}

/* ---- setup --------------------------------------------------------------- */

static void encode_task(void *ctx, size_t i, unsigned worker);
static ptwm_error finish_common(ptwm_writer *w, ptwm_err *err);

/* Writers given the same context share its threads: one queue over two
 * rings of `window` slots that successive writers take in turn. A writer
 * finished with ptwm_writer_finish_later is detached: its last chunks code
 * on its ring while the next writer fills the other, so a shard's end
 * leaves no thread idle. The writing thread settles it (waits for its
 * chunks, appends its table, queues its commit) once the next writer has a
 * chunk queued per thread, at the next finish, or in ptwm_ctx_commit_wait.
 * Two rings at most are held, so memory stays bounded by threads x chunk. */
typedef struct wshared {
    ptwm_queue *q;
    unsigned threads;
    size_t window;
    ptwm_writer *ring[2];       /* the writer on each ring, or NULL */
    ptwm_writer *detached;      /* finished, not yet settled */
} wshared;

static void shared_task(void *ctx, size_t s, unsigned worker) {
    wshared *sh = (wshared *)ctx;
    encode_task(sh->ring[s / sh->window], s % sh->window, worker);
}

/* Settle the detached writer, if any; its failure is kept as the
 * context's (the next finish, open or ptwm_ctx_commit_wait returns it). */
static void settle(wshared *sh) {
    ptwm_writer *w = sh->detached;
    ptwm_err e;
    ptwm_error rc;
    if (!w) return;
    sh->detached = NULL;
    rc = finish_common(w, &e);
    if (!rc) {
        *w->size_out = w->pos;
        rc = ptwm_ctx_commit_later(w->ctx, &w->af, &e);
    }
    if (rc) ptwm_ctx_commit_fail(w->ctx, rc, &e);
    ptwm_writer_free(w);
}

static void shared_free(void *p) {
    wshared *sh = (wshared *)p;
    settle(sh);
    ptwm_queue_free(sh->q);
    ptwm_free(sh);
}

/* Put w on a free ring of its context's queue (made, or remade for another
 * thread count, as needed). */
static ptwm_error shared_join(ptwm_writer *w, ptwm_err *err) {
    wshared *sh = (wshared *)ptwm_ctx_writers(w->ctx);
    ptwm_error rc;
    int r;
    if (!sh) {
        if (!(sh = (wshared *)ptwm_calloc(1, sizeof(*sh))))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a work queue");
        ptwm_ctx_set_writers(w->ctx, sh, shared_free);
    }
    if (sh->q && (sh->threads != w->nworkers || sh->window != w->window)) {
        settle(sh);
        ptwm_queue_free(sh->q);
        sh->q = NULL;
    }
    if (!sh->q) {
        if ((rc = ptwm_queue_create(w->p.threads, 2 * w->window, shared_task, sh, &sh->q, err)))
            return rc;
        sh->threads = w->nworkers;
        sh->window = w->window;
    }
    if (sh->ring[0] && sh->ring[1]) settle(sh); /* (one is the detached writer) */
    r = sh->ring[0] ? 1 : 0;
    sh->ring[r] = w;
    w->sh = sh;
    w->queue = sh->q;
    w->slot0 = (size_t)r * w->window;
    return PTWM_OK;
}

/* The key of a payload in the sharing store (computed by the worker that
 * coded it, off the appending thread): its length, its first 96 bytes and
 * its last 32. The first hold the chunk header, whose plane CRCs (when
 * written) fingerprint every coded byte; equal keys are confirmed byte for
 * byte before a payload is shared, so a weak key costs a compare, never a
 * wrong file, where hashing whole payloads cost compress time
 * (docs/ARCHITECTURE.md, "Measurements behind the code"). */
#define KEY_HEAD 96
#define KEY_TAIL 32
static uint64_t payload_hash(const uint8_t *p, size_t n) {
    uint8_t h[16], k[8 + KEY_HEAD + KEY_TAIL];
    size_t kl = 8;
    uint64_t v;
    ptwm_store_le64(k, (uint64_t)n);
    if (n <= KEY_HEAD + KEY_TAIL) {
        memcpy(k + kl, p, n);
        kl += n;
    } else {
        memcpy(k + kl, p, KEY_HEAD);
        memcpy(k + kl + KEY_HEAD, p + n - KEY_TAIL, KEY_TAIL);
        kl += KEY_HEAD + KEY_TAIL;
    }
    ptwm_xxh128_oneshot(k, kl, h);
    memcpy(&v, h, 8);
    return v | 1; /* never 0, the empty mark */
}

static ptwm_error check_params(const ptwm_cparams *p, ptwm_err *err) {
    if (p->method && !ptwm_method_name(p->method))
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown method %d (1..5; 0 = default)",
                         p->method);
    if (p->chunk_size && (p->chunk_size < PTWM_FMT_MIN_CHUNK || p->chunk_size > PTWM_FMT_MAX_CHUNK))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "chunk size %llu outside [%u, %llu]", (unsigned long long)p->chunk_size,
                         PTWM_FMT_MIN_CHUNK, (unsigned long long)PTWM_FMT_MAX_CHUNK);
    if (p->zstd_level < 0 || p->zstd_level > 22)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "zstd level %d outside [0, 22]", p->zstd_level);
    return PTWM_OK;
}

/* borrow: the caller's tensor bytes outlive the writer (compress_blob,
 * compress_file): chunks are coded in place, so slots need no raw buffer and
 * the ring can be deeper (more chunks queued ahead keeps every thread busy
 * to the end on files of a few MB). */
static ptwm_error writer_new(const ptwm_cparams *params, int borrow, ptwm_writer **out,
                             ptwm_err *err) {
    ptwm_cparams given;
    ptwm_writer *w;
    ptwm_error rc;
    size_t i;
    uint64_t chunk;
    *out = NULL;
    /* The caller's struct as far as its size reaches (options.h). */
    if ((rc = ptwm_cparams_read(params, &given, "opening a writer", err))) return rc;
    params = &given;
    if ((rc = check_params(params, err))) return rc;
    w = (ptwm_writer *)ptwm_calloc(1, sizeof(*w));
    if (!w) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a writer");
    pthread_mutex_init(&w->rmu, NULL);
    w->p = *params;
    if (!w->p.method) w->p.method = PTWM_METHOD_MICROSCALE;
    w->af.fd = -1;
    if (params->ctx) {
        if ((rc = ptwm_ctx_claim(params->ctx, "writer", err))) {
            ptwm_writer_free(w);
            return rc;
        }
        w->ctx = params->ctx;
        w->claimed = 1;
        if ((rc = ptwm_ctx_commit_failed(w->ctx, err))) { /* ptwm_writer_finish_later */
            ptwm_writer_free(w);
            return rc;
        }
    } else if ((rc = ptwm_ctx_create(&w->own_ctx, err))) {
        ptwm_writer_free(w);
        return rc;
    } else {
        w->ctx = w->own_ctx;
    }
    if (!w->p.chunk_size) w->p.chunk_size = PTWM_DEFAULT_CHUNK;
    chunk = w->p.chunk_size;
    w->bound = ptwm_chunk_bound((size_t)chunk);
    w->slot_size = ptwm_chunk_work_bound((size_t)chunk);
    w->nworkers = ptwm_threads_resolve(w->p.threads);
    w->borrow = borrow;
    /* Enough jobs per thread that a thread never waits for the writer (the
     * writing thread codes too, and while it does it submits nothing: 4
     * slots a thread left the second thread idle a quarter of the time).
     * One thread codes each
     * job as it waits for it: one slot, reused while warm in cache. */
    w->window = w->nworkers == 1 ? 1 : borrow ? 8 * (size_t)w->nworkers : 3 * (size_t)w->nworkers + 2;
    w->jobs = (wjob *)ptwm_calloc(w->window, sizeof(wjob));
    w->outs = (uint8_t **)ptwm_calloc(w->window, sizeof(uint8_t *));
    w->scratch = (uint8_t **)ptwm_calloc(w->nworkers, sizeof(uint8_t *));
    if (!w->jobs || !w->outs || !w->scratch) goto nomem;
    if ((rc = ptwm_ctx_workspaces(w->ctx, w->nworkers, &w->ws, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    /* A writer on its context's threads takes its slots' buffers as it first
     * fills them (add_common): the writer before it may still hold its own. */
    for (i = 0; i < w->window && !borrow && !w->claimed; i++)
        if (!(w->jobs[i].raw = (uint8_t *)ptwm_ctx_take(w->ctx, chunk))) goto nomem;
    for (i = 0; i < w->nworkers; i++)
        if (!(w->scratch[i] = (uint8_t *)ptwm_ctx_take(w->ctx, w->slot_size))) goto nomem;
    /* Borrowing writers (one-call forms) have a deeper ring of their own. */
    rc = w->claimed && !borrow ? shared_join(w, err)
                               : ptwm_queue_create(w->p.threads, w->window, encode_task, w, &w->queue, err);
    if (rc) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
nomem:
    ptwm_writer_free(w);
    return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu chunk buffers of %llu bytes",
                     2 * (size_t)(w->window + w->nworkers), (unsigned long long)chunk);
}

static ptwm_error write_head(ptwm_writer *w, ptwm_err *err) {
    uint8_t head[PTWM_FMT_HEAD_SIZE];
    memcpy(head, PTWM_FMT_MAGIC, PTWM_FMT_MAGIC_LEN);
    ptwm_store_le32(head + 8, PTWM_FMT_VERSION); /* raised at the end if a base was used */
    ptwm_store_le32(head + 12, 0);
    return w_emit(w, head, sizeof(head), err);
}

static ptwm_error open_file(const char *path, const ptwm_cparams *params, int borrow,
                            ptwm_writer **out, ptwm_err *err) {
    ptwm_writer *w;
    ptwm_error rc;
    if (!out || !path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL path or output handle");
    if ((rc = writer_new(params, borrow, &w, err))) return rc;
    w->to_file = 1;
    if ((rc = ptwm_atomic_open(path, &w->af, err)) || (rc = write_head(w, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
}

static ptwm_error open_memory(const ptwm_cparams *params, int borrow, ptwm_writer **out,
                              ptwm_err *err) {
    ptwm_writer *w;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output handle");
    if ((rc = writer_new(params, borrow, &w, err))) return rc;
    if ((rc = write_head(w, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
}

ptwm_error ptwm_writer_open_file(const char *path, const ptwm_cparams *params, ptwm_writer **out,
                                 ptwm_err *err) {
    return open_file(path, params, 0, out, err);
}

ptwm_error ptwm_writer_open_memory(const ptwm_cparams *params, ptwm_writer **out, ptwm_err *err) {
    return open_memory(params, 0, out, err);
}

void ptwm_writer_free(ptwm_writer *w) {
    size_t i;
    if (!w) return;
    /* First: workers may still use the buffers. */
    if (!w->sh) {
        ptwm_queue_free(w->queue);
    } else {
        for (; w->nheld; w->nheld--, w->reclaim = (w->reclaim + 1) % w->window)
            ptwm_queue_wait(w->queue, w->slot0 + w->reclaim);
        w->sh->ring[w->slot0 ? 1 : 0] = NULL;
    }
    ptwm_dout_free(w->dout);
    if (w->to_file) ptwm_atomic_abort(&w->af);
    ptwm_free(w->mem.p);
    for (i = 0; i < w->nt; i++) ptwm_free(w->t[i].chunks);
    ptwm_free(w->t);
    ptwm_kv_free(w->meta, w->nmeta);
    ptwm_free(w->src_header);
    ptwm_free(w->src_name);
    if (w->jobs)
        for (i = 0; i < w->window; i++) {
            ptwm_ctx_give(w->ctx, w->jobs[i].raw, (size_t)w->p.chunk_size);
            ptwm_ctx_give(w->ctx, w->jobs[i].out, w->slot_size);
            ptwm_free(w->jobs[i].base_buf);
        }
    ptwm_free(w->jobs);
    while (w->nouts) ptwm_ctx_give(w->ctx, w->outs[--w->nouts], w->slot_size);
    ptwm_free(w->outs);
    if (w->scratch)
        for (i = 0; i < w->nworkers; i++) ptwm_ctx_give(w->ctx, w->scratch[i], w->slot_size);
    ptwm_free(w->scratch);
    ptwm_free(w->dedup.slot);
    ptwm_free(w->dedup.keep);
    if (w->cmp) ptwm_ctx_give(w->ctx, w->cmp, w->bound);
    if (w->own_ctx) ptwm_ctx_free(w->own_ctx);
    else if (w->claimed) ptwm_ctx_release(w->ctx);
    pthread_mutex_destroy(&w->rmu);
    ptwm_free(w);
}

uint64_t ptwm_writer_coded_bytes(const ptwm_writer *w) {
    uint64_t n;
    if (!w) return 0;
    rmu_lock(w);
    n = w->coded_total;
    rmu_unlock(w);
    return n;
}

static char *dup_str(const char *s, size_t *len_out) {
    size_t n = strlen(s);
    char *d = (char *)ptwm_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    if (len_out) *len_out = n;
    return d;
}

/* What both ways of recording a source header check: the writer and the
 * file name (the header itself is checked by each). */
static ptwm_error check_source_args(ptwm_writer *w, const char *file_name, ptwm_err *err) {
    ptwm_error rc;
    if (!w) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer");
    if ((rc = w_failed(w, err))) return rc;
    if (file_name && strlen(file_name) > 4096)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "source file name of %zu bytes (max 4096)", strlen(file_name));
    return PTWM_OK;
}

ptwm_error ptwm_writer_borrow_source_json(ptwm_writer *w, const char *json, size_t json_len,
                                          const char *file_name, ptwm_err *err) {
    ptwm_error rc = check_source_args(w, file_name, err);
    if (rc) return rc;
    if ((!json && json_len) || json_len > PTWM_ST_MAX_HEADER)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source header of %zu bytes (NULL or over the cap)",
                         json_len);
    ptwm_free(w->src_header);
    ptwm_free(w->src_name);
    w->src_header = NULL;
    w->src_name = NULL;
    w->has_source = 0;
    w->src_json = json;
    w->src_header_len = json_len + 8;
    if (file_name && !(w->src_name = dup_str(file_name, NULL)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    w->has_source = 1;
    return PTWM_OK;
}

ptwm_error ptwm_writer_set_source_header(ptwm_writer *w, const void *header, size_t len,
                                         const char *file_name, ptwm_err *err) {
    ptwm_error rc;
    if (!w || (!header && len)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or header");
    if ((rc = check_source_args(w, file_name, err))) return rc;
    if (len < 8 || ptwm_load_le64(header) != len - 8 || len - 8 > PTWM_ST_MAX_HEADER)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "source header of %zu bytes does not start with its own JSON length", len);
    ptwm_free(w->src_header);
    ptwm_free(w->src_name);
    w->src_name = NULL;
    w->src_json = NULL;
    w->has_source = 0;
    w->src_header = (uint8_t *)ptwm_malloc(len);
    if (!w->src_header) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a %zu-byte header", len);
    memcpy(w->src_header, header, len);
    w->src_header_len = len;
    if (file_name && !(w->src_name = dup_str(file_name, NULL)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    w->has_source = 1;
    return PTWM_OK;
}

void ptwm_writer_set_source_size(ptwm_writer *w, uint64_t size) {
    if (w) w->src_file_size = size;
}

ptwm_error ptwm_writer_set_metadata(ptwm_writer *w, const ptwm_kv *meta, size_t n, ptwm_err *err) {
    size_t i, j;
    ptwm_error rc;
    if (!w || (!meta && n)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or metadata");
    if ((rc = w_failed(w, err))) return rc;
    for (i = 0; i < n; i++) {
        if (!meta[i].key || !meta[i].value)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "metadata entry %zu has a NULL key or value", i);
        for (j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return ptwm_fail(err, PTWM_ERR_DUPLICATE, "metadata key '%s' given twice", meta[i].key);
    }
    ptwm_kv_free(w->meta, w->nmeta);
    w->nmeta = 0;
    w->meta = (ptwm_kv *)ptwm_calloc(n ? n : 1, sizeof(ptwm_kv));
    if (!w->meta) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for metadata");
    for (i = 0; i < n; i++) {
        w->meta[i].key = dup_str(meta[i].key, NULL);
        w->meta[i].value = dup_str(meta[i].value, NULL);
        w->nmeta = i + 1;
        if (!w->meta[i].key || !w->meta[i].value)
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for metadata");
    }
    return PTWM_OK;
}

/* ---- coding the window --------------------------------------------------- */

static void retire_ready(ptwm_writer *w);

/* The payload in the worker's scratch buffer (len bytes, chain c) is
 * smaller than the job's: it becomes the job's. */
static void keep_scratch(ptwm_writer *w, wjob *j, unsigned worker, size_t len, unsigned c) {
    if (j->dst == j->out) {
        /* Both buffers are slot-sized: swap instead of copying. */
        uint8_t *tmp = j->out;
        j->dst = j->out = w->scratch[worker];
        w->scratch[worker] = tmp;
    } else {
        memcpy(j->dst, w->scratch[worker], len);
    }
    j->out_len = len;
    j->chain = (uint8_t)c;
}

/* A chunk with a base chunk is coded against it too (with the first
 * chain's entropy settings), and that payload kept where it is smaller:
 * a base never makes a chunk larger (docs/DELTA.md). */
static void encode_on_base(ptwm_writer *w, wjob *j, const ptwm_chunk_params *cp, unsigned worker) {
    size_t len;
    ptwm_error rc = ptwm_chunk_encode_base(w->ws[worker], j->chain_ptr[0], j->chain_len[0],
                                           j->dtype, cp, j->src, j->base, j->raw_len,
                                           w->scratch[worker], w->slot_size, &len, &j->err);
    if (rc) {
        j->rc = rc;
        return;
    }
    if (len >= j->out_len) return;
    keep_scratch(w, j, worker, len, 0);
    j->based = 1;
    j->base_crc = ptwm_crc32(0, j->base, j->raw_len);
}

/* Code job i. The oldest pending job of an in-memory writer is coded
 * straight into the image's end: every earlier payload is in the image, and
 * nothing else grows the image until this job is appended. Then the coded
 * jobs at the front of the ring are appended. */
static void encode_task(void *ctx, size_t i, unsigned worker) {
    ptwm_writer *w = (ptwm_writer *)ctx;
    wjob *j = &w->jobs[i];
    ptwm_chunk_params cp;
    unsigned c;
    cp.method = w->p.method;
    cp.zstd_level = w->p.zstd_level;
    cp.emit_crc = j->plane_crc;
    cp.columns = (size_t)j->columns;
    /* Room for the stages' bounds (pages past what is written are never
     * touched); appending it then copies nothing (docs/ARCHITECTURE.md,
     * "Threads"). An equal earlier payload just leaves it unused. */
    j->dst = NULL;
    rmu_lock(w);
    if (!w->to_file && i == w->head && !w->failed) {
        size_t room = ptwm_chunk_work_bound(j->raw_len);
        if (wbuf_reserve(&w->mem, room)) {
            j->dst = w->mem.p + w->mem.len;
            j->dst_cap = room;
        }
    }
    /* Else the buffer appended last: this thread has often just copied it
     * into the image, so it is still in cache (a buffer per slot was cold:
     * docs/ARCHITECTURE.md, "Threads"). */
    if (!j->dst && w->nouts) j->out = w->outs[--w->nouts];
    rmu_unlock(w);
    if (!j->dst) {
        if (!j->out && !(j->out = (uint8_t *)ptwm_ctx_take(w->ctx, w->slot_size))) {
            j->rc = ptwm_fail(&j->err, PTWM_ERR_NOMEM, "out of memory for a chunk buffer of %zu bytes",
                              w->slot_size);
            rmu_lock(w);
            j->coded = 1;
            retire_ready(w);
            rmu_unlock(w);
            return;
        }
        j->dst = j->out;
        j->dst_cap = w->slot_size;
    }
    j->rc = ptwm_chunk_encode(w->ws[worker], j->chain_ptr[0], j->chain_len[0], j->dtype, &cp, j->src, j->raw_len,
                              j->dst, j->dst_cap, &j->out_len, &j->err);
    j->chain = 0;
    j->based = 0;
    j->base_crc = 0;
    for (c = 1; c < j->nchains && !j->rc; c++) {
        size_t len;
        ptwm_error rc = ptwm_chunk_encode(w->ws[worker], j->chain_ptr[c], j->chain_len[c], j->dtype, &cp, j->src,
                                          j->raw_len, w->scratch[worker], w->slot_size, &len,
                                          &j->err);
        if (rc) j->rc = rc;
        else if (len < j->out_len) keep_scratch(w, j, worker, len, c);
    }
    if (j->base && !j->rc) encode_on_base(w, j, &cp, worker);
    if (!j->rc) {
        j->phash = payload_hash(j->dst, j->out_len);
        j->pcrc = ptwm_crc32(0, j->dst, j->out_len);
        j->x2 = ptwm_chunk_needs_x2(j->dst, j->out_len, j->raw_len);
    }
    if (!j->rc && j->hash_raw) ptwm_xxh128_oneshot(j->src, j->raw_len, j->raw_hash);
    rmu_lock(w);
    j->coded = 1;
    retire_ready(w);
    rmu_unlock(w);
}

/* Whether the `len` bytes at `offset` of the output equal p. */
static int payload_equal(ptwm_writer *w, uint64_t offset, const uint8_t *p, size_t len) {
    if (!w->to_file) return memcmp(w->mem.p + offset, p, len) == 0;
    if (!w->cmp && !(w->cmp = (uint8_t *)ptwm_ctx_take(w->ctx, w->bound))) return 0;
    if (len > w->bound ||
        (w->dout ? ptwm_dout_pread(w->dout, w->cmp, len, offset, NULL)
                 : ptwm_pread_full(w->af.fd, w->cmp, len, offset, w->af.final_path, NULL)))
        return 0;
    return memcmp(w->cmp, p, len) == 0;
}

/* The offset of an earlier payload equal to p (UINT64_MAX if none); else
 * records p as written at `at`. A full or unallocatable store only stops
 * sharing. */
static uint64_t payload_find_or_add(ptwm_writer *w, const uint8_t *p, size_t len, uint64_t h,
                                    uint64_t at) {
    pstore *d = &w->dedup;
    size_t i;
    if (d->used * 2 >= d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024, k;
        pslot *ns = (pslot *)ptwm_calloc(cap, sizeof(pslot));
        if (!ns) return UINT64_MAX;
        for (k = 0; k < d->cap; k++) {
            size_t j;
            if (!d->slot[k].hash) continue;
            for (j = d->slot[k].hash & (cap - 1); ns[j].hash; j = (j + 1) & (cap - 1)) {
            }
            ns[j] = d->slot[k];
        }
        ptwm_free(d->slot);
        d->slot = ns;
        d->cap = cap;
    }
    for (i = h & (d->cap - 1); d->slot[i].hash; i = (i + 1) & (d->cap - 1))
        if (d->slot[i].hash == h && d->slot[i].len == len &&
            (d->slot[i].kept ? memcmp(d->keep + d->slot[i].kept - 1, p, len) == 0
                             : payload_equal(w, d->slot[i].offset, p, len)))
            return d->slot[i].offset;
    d->slot[i].hash = h;
    d->slot[i].offset = at;
    d->slot[i].len = (uint32_t)len;
    d->slot[i].kept = 0;
    d->used++;
    /* (doubling from 64 bytes, the buffer never passes KEEP_CAP, a power of 2) */
    if (w->dout && len <= KEEP_MAX && d->keep_len + len <= KEEP_CAP &&
        ptwm_grow((void **)&d->keep, &d->keep_cap, d->keep_len + len, 1)) {
        memcpy(d->keep + d->keep_len, p, len);
        d->slot[i].kept = (uint32_t)d->keep_len + 1;
        d->keep_len += len;
    }
    return UINT64_MAX;
}

/* Append a coded job, or point it at an equal payload written before;
 * failures are recorded (with their message) for the writing thread. After
 * a failure, jobs are still taken but not written. rmu held. */
static void retire_job(ptwm_writer *w, wjob *j) {
    wtensor *t = &w->t[j->tensor];
    wchunk *c = &t->chunks[j->chunk];
    ptwm_err e;
    ptwm_error rc;
    if (w->failed) return;
    if (j->rc) {
        e = j->err;
        ptwm_err_prefix(&e, "tensor '%s' chunk %llu of %llu", t->name, (unsigned long long)j->chunk,
                        (unsigned long long)t->nchunks);
        w->ferr = e;
        w_fail(w, j->rc);
        return;
    }
    if (j->out_len > UINT32_MAX) {
        w_fail(w, ptwm_fail(&w->ferr, PTWM_ERR_LIMIT, "tensor '%s' chunk %llu codes to %zu bytes",
                            t->name, (unsigned long long)j->chunk, j->out_len));
        return;
    }
    if (j->hash_raw) memcpy(t->hash, j->raw_hash, 16);
    c->offset = payload_find_or_add(w, j->dst, j->out_len, j->phash, w->pos);
    c->coded = (uint32_t)j->out_len;
    c->raw = (uint32_t)j->raw_len;
    c->chain = j->chain;
    c->crc = j->pcrc;   /* a shared payload has equal bytes, so the same CRC */
    c->based = j->based;
    c->base_crc = j->base_crc;
    w->x2 |= j->x2;
    if (c->offset == UINT64_MAX) {
        c->offset = w->pos;
        if (j->dst != j->out) {
            w->mem.len += j->out_len; /* coded in place at the image's end */
            w->pos += j->out_len;
        } else if ((rc = w_emit(w, j->out, j->out_len, &w->ferr))) {
            w_fail(w, rc);
            return;
        }
        w->coded_total += j->out_len;
    }
    w->raw_done += j->raw_len;
}

/* Append the coded jobs at the front of the ring, in job order. rmu held. */
static void retire_ready(ptwm_writer *w) {
    while (w->jobs[w->head].coded) {
        wjob *j = &w->jobs[w->head];
        j->coded = 0;
        retire_job(w, j);
        if (j->out) {
            w->outs[w->nouts++] = j->out;
            j->out = NULL;
        }
        w->head = (w->head + 1) % w->window;
    }
}

/* Take back the oldest slot in use, coding queued jobs while its job is not
 * done. A job is appended when it and every earlier one are coded, so once
 * this slot's job (and, before it, every earlier one) is done, it has been
 * appended. Returns the writer's failure, if any, with its message. */
static ptwm_error reclaim_one(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc;
    uint64_t done;
    ptwm_queue_wait(w->queue, w->slot0 + w->reclaim);
    w->reclaim = (w->reclaim + 1) % w->window;
    w->nheld--;
    rmu_lock(w);
    rc = w->failed;
    if (rc && err) *err = w->ferr;
    done = w->raw_done;
    rmu_unlock(w);
    if (!rc && w->p.progress) w->p.progress(w->p.progress_ctx, done, w->p.progress_total);
    return rc;
}

static ptwm_error drain(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc = PTWM_OK, r;
    while (w->nheld)
        if ((r = reclaim_one(w, err)) && !rc) rc = r;
    return rc;
}

/* ---- adding tensors ------------------------------------------------------ */

static ptwm_error prepare_tensor(ptwm_writer *w, const ptwm_tensor_desc *d,
                                 const ptwm_chain_list *chains, wtensor *t, ptwm_err *err) {
    uint64_t nbytes, granule, total = 0;
    size_t i, name_len;
    unsigned n;
    ptwm_error rc;
    uint8_t std_chain[PTWM_CHAIN_MAX_BYTES];
    size_t std_len = 0;
    const uint8_t *const *cp;
    const size_t *cl;

    memset(t, 0, sizeof(*t));
    if (!d || !d->name) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor without a name");
    if (strlen(d->name) > PTWM_MAX_NAME)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "tensor name of %zu bytes (max %d)", strlen(d->name),
                         PTWM_MAX_NAME);
    if ((unsigned)d->dtype >= PTWM_DTYPE_COUNT)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "tensor '%s': unknown dtype %d", d->name, (int)d->dtype);
    if (d->ndim > PTWM_MAX_NDIM || (d->ndim && !d->shape))
        return ptwm_fail(err, PTWM_ERR_SHAPE, "tensor '%s': %u dims (max %d)", d->name, d->ndim,
                         PTWM_MAX_NDIM);
    if ((rc = ptwm_tensor_nbytes(d->dtype, d->shape, d->ndim, &nbytes, err))) {
        ptwm_err_prefix(err, "tensor '%s'", d->name);
        return rc;
    }
    if (nbytes != d->nbytes)
        return ptwm_fail(err, PTWM_ERR_SHAPE, "tensor '%s': %llu bytes given, shape and %s need %llu",
                         d->name, (unsigned long long)d->nbytes, ptwm_dtype_name(d->dtype),
                         (unsigned long long)nbytes);
    if (chains && (chains->count < 1 || chains->count > PTWM_FMT_MAX_CHAINS || !chains->chains ||
                   !chains->lens))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': %zu candidate chains (1..%u)",
                         d->name, chains->count, PTWM_FMT_MAX_CHAINS);
    if (chains) {
        n = (unsigned)chains->count;
        cp = chains->chains;
        cl = chains->lens;
        for (i = 0; i < n; i++) {
            if (!cp[i] || cl[i] > PTWM_CHAIN_MAX_BYTES)
                return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': chain %zu is NULL or over %d bytes",
                                 d->name, i, PTWM_CHAIN_MAX_BYTES);
            if ((rc = ptwm_chain_validate(cp[i], cl[i], d->dtype, err))) {
                ptwm_err_prefix(err, "tensor '%s': chain %zu", d->name, i);
                return rc;
            }
            total += cl[i];
        }
    } else {
        if ((rc = ptwm_chain_standard(d->dtype, w->p.method, std_chain, sizeof(std_chain), &std_len,
                                      err))) {
            ptwm_err_prefix(err, "tensor '%s'", d->name);
            return rc;
        }
        n = 1;
        total = std_len;
        cp = NULL;
        cl = NULL;
    }
    {
        /* One block: chunk entries, shape, chains, name (8-byte parts first). */
        uint64_t nchunks, size;
        uint8_t *q, *chain_at;
        granule = ptwm_fmt_granule(d->dtype);
        t->chunk_size = w->p.chunk_size / granule * granule;
        if (t->chunk_size < granule) t->chunk_size = granule;
        nchunks = nbytes / t->chunk_size + (nbytes % t->chunk_size != 0);
        name_len = strlen(d->name);
        if (ptwm_mul_overflow(nchunks, sizeof(wchunk), &size) ||
            ptwm_add_overflow(size, (uint64_t)d->ndim * 8 + total + name_len + 1, &size) ||
            !(t->chunks = (wchunk *)ptwm_calloc(1, size)))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "tensor '%s': out of memory for %llu chunk entries",
                             d->name, (unsigned long long)nchunks);
        t->nchunks = nchunks;
        q = (uint8_t *)(t->chunks + nchunks);
        if (d->ndim) memcpy(q, d->shape, (size_t)d->ndim * 8);
        t->shape = (const uint64_t *)q;
        chain_at = q + (size_t)d->ndim * 8;
        t->chain_bytes = chain_at;
        t->name = (char *)chain_at + total;
        memcpy(t->name, d->name, name_len + 1);
        t->nchains = n;
        for (i = 0; i < n; i++) {
            const uint8_t *src = cp ? cp[i] : std_chain;
            size_t len = cl ? cl[i] : std_len;
            memcpy(chain_at, src, len);
            t->chain_len[i] = (uint16_t)len;
            chain_at += len;
        }
    }
    t->dtype = d->dtype;
    t->ndim = d->ndim;
    t->nbytes = nbytes;
    t->flags = (uint8_t)((w->p.no_payload_hash ? 0 : PTWM_TF_PAYLOAD_HASH) |
                         (w->p.no_plane_crc ? 0 : PTWM_TF_PLANE_CRC));
    return PTWM_OK;
}

static void wtensor_free(wtensor *t) {
    ptwm_free(t->chunks);
}

/* The base tensor of t: the writer's base holds one of its name, dtype and
 * shape (and bytes). Its index into *bi. */
static int base_match(const ptwm_writer *w, const wtensor *t, size_t *bi) {
    ptwm_tensor_info b;
    if (!w->p.base || !t->nbytes || ptwm_source_find(w->p.base, t->name, bi, NULL) ||
        ptwm_source_tensor(w->p.base, *bi, &b, NULL))
        return 0;
    return b.dtype == t->dtype && b.ndim == t->ndim &&
           (!t->ndim || memcmp(b.shape, t->shape, (size_t)t->ndim * 8) == 0);
}

/* The base chunk of job j, bytes [off, off + len) of base tensor bi, read
 * on the writing thread (a .ptwm base decodes them) and hashed in order. */
static ptwm_error read_base_chunk(ptwm_writer *w, wjob *j, size_t bi, uint64_t off, size_t len,
                                  ptwm_xxh128 *bh, ptwm_err *err) {
    ptwm_error rc;
    if (!j->base_buf && !(j->base_buf = (uint8_t *)ptwm_malloc(w->p.chunk_size)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a base chunk of %llu bytes",
                         (unsigned long long)w->p.chunk_size);
    if ((rc = ptwm_source_read(w->p.base, bi, off, j->base_buf, len, err))) {
        ptwm_err_prefix(err, "reading its base's bytes %llu..%llu", (unsigned long long)off,
                        (unsigned long long)(off + len));
        return rc;
    }
    ptwm_xxh128_update(bh, j->base_buf, len);
    j->base = j->base_buf;
    return PTWM_OK;
}

static ptwm_error add_common(ptwm_writer *w, const ptwm_tensor_desc *d, const ptwm_chain_list *chains,
                             ptwm_read_fn read, void *ctx, ptwm_err *err) {
    wtensor t;
    ptwm_xxh128 h = {NULL}, bh = {NULL};
    size_t bi = 0;
    ptwm_error rc;
    uint64_t k, off = 0;
    size_t ti;
    if (!w) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer");
    if ((rc = w_failed(w, err))) return rc;
    if (!read && d && d->nbytes && !d->data)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s' has no data", d->name ? d->name : "");
    if ((rc = prepare_tensor(w, d, chains, &t, err))) {
        wtensor_free(&t);
        return rc;   /* a rejected tensor leaves the writer usable */
    }
    if (base_match(w, &t, &bi)) {
        if ((rc = ptwm_xxh128_begin(&bh, err))) {
            wtensor_free(&t);
            return rc;
        }
        t.flags |= PTWM_TF_BASE;
    }
    /* Appending threads read the tensor array: it moves under rmu. */
    rmu_lock(w);
    if (w->nt == w->capt) {
        size_t cap = w->capt ? w->capt * 2 : 16;
        wtensor *nt = (wtensor *)ptwm_realloc(w->t, (uint64_t)cap * sizeof(wtensor));
        if (!nt) {
            rmu_unlock(w);
            wtensor_free(&t);
            return w_fail_caller(w, ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for the tensor table"));
        }
        w->t = nt;
        w->capt = cap;
    }
    ti = w->nt++;
    w->t[ti] = t;
    rmu_unlock(w);
    /* A tensor of one chunk is hashed by the worker that codes it (in
     * parallel); others here (in order, as their chunks are queued; an empty
     * tensor gets the hash of no bytes). */
    if ((t.flags & PTWM_TF_PAYLOAD_HASH) && t.nchunks != 1 && (rc = ptwm_xxh128_begin(&h, err)))
        return w_fail_caller(w, rc);
    for (k = 0; k < t.nchunks; k++) {
        wjob *j;
        size_t len = (size_t)PTWM_MIN(t.chunk_size, t.nbytes - off), slot;
        /* A chunk queued per thread keeps the threads busy while the last
         * writer's chunks finish: it is settled then, and its buffers serve
         * this writer from here. */
        if (w->sh && w->nheld >= w->nworkers) settle(w->sh);
        if (w->nheld == w->window && (rc = reclaim_one(w, err))) break;
        slot = (w->reclaim + w->nheld) % w->window;
        j = &w->jobs[slot];
        if (!w->borrow && !j->raw && !(j->raw = (uint8_t *)ptwm_ctx_take(w->ctx, (size_t)w->p.chunk_size))) {
            rc = w_fail_caller(w, ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a chunk buffer of %llu bytes",
                                            (unsigned long long)w->p.chunk_size));
            break;
        }
        if (read && !j->raw) {
            rc = w_fail_caller(w, ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                                            "streamed tensor on a borrowing writer"));
            break;
        }
        if (read) {
            if ((rc = read(ctx, off, j->raw, len, err))) {
                ptwm_err_prefix(err, "tensor '%s': reading bytes %llu..%llu", t.name,
                                (unsigned long long)off, (unsigned long long)(off + len));
                w_fail_caller(w, rc);
                break;
            }
            j->src = j->raw;
        } else if (w->borrow) {
            j->src = (const uint8_t *)d->data + off;
        } else {
            memcpy(j->raw, (const uint8_t *)d->data + off, len);
            j->src = j->raw;
        }
        if (h.state) ptwm_xxh128_update(&h, j->src, len);
        j->base = NULL;
        if (bh.state && (rc = read_base_chunk(w, j, bi, off, len, &bh, err))) {
            ptwm_err_prefix(err, "tensor '%s'", t.name);
            w_fail_caller(w, rc);
            break;
        }
        j->tensor = ti;
        j->chunk = k;
        j->dtype = t.dtype;
        j->columns = t.ndim >= 2 ? t.shape[t.ndim - 1] : 0;
        j->plane_crc = (t.flags & PTWM_TF_PLANE_CRC) != 0;
        j->hash_raw = t.nchunks == 1 && (t.flags & PTWM_TF_PAYLOAD_HASH);
        j->nchains = t.nchains;
        {
            const uint8_t *q = t.chain_bytes;
            unsigned c;
            for (c = 0; c < t.nchains; q += t.chain_len[c++]) {
                j->chain_ptr[c] = q;
                j->chain_len[c] = t.chain_len[c];
            }
        }
        j->raw_len = len;
        j->rc = PTWM_OK; /* (coded is 0: cleared when the slot's last job was appended) */
        w->nheld++;
        ptwm_queue_submit(w->queue, w->slot0 + slot, (uint64_t)len * t.nchains);
        off += len;
    }
    if (rc) {
        ptwm_xxh128_free(&h);
        ptwm_xxh128_free(&bh);
        return rc;
    }
    if (bh.state) {
        uint8_t hash[16];
        ptwm_xxh128_end(&bh, hash);
        rmu_lock(w);
        memcpy(w->t[ti].base_hash, hash, 16);
        rmu_unlock(w);
    }
    if (h.state) {
        uint8_t hash[16];
        ptwm_xxh128_end(&h, hash);
        rmu_lock(w);
        memcpy(w->t[ti].hash, hash, 16);
        rmu_unlock(w);
    }
    return PTWM_OK;
}

ptwm_error ptwm_writer_add(ptwm_writer *w, const ptwm_tensor_desc *desc,
                           const ptwm_chain_list *chains, ptwm_err *err) {
    return add_common(w, desc, chains, NULL, NULL, err);
}

ptwm_error ptwm_writer_add_stream(ptwm_writer *w, const ptwm_tensor_desc *desc,
                                  const ptwm_chain_list *chains, ptwm_read_fn read, void *ctx,
                                  ptwm_err *err) {
    if (!read) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL read callback");
    return add_common(w, desc, chains, read, ctx, err);
}

/* ---- the table ----------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) {
    const wtensor *x = *(const wtensor *const *)a, *y = *(const wtensor *const *)b;
    return strcmp(x->name, y->name);
}

static ptwm_error check_duplicates(ptwm_writer *w, ptwm_err *err) {
    const wtensor **v;
    size_t i;
    if (w->nt < 2) return PTWM_OK;
    v = (const wtensor **)ptwm_malloc((uint64_t)w->nt * sizeof(*v));
    if (!v) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < w->nt; i++) v[i] = &w->t[i];
    qsort(v, w->nt, sizeof(*v), cmp_name);
    for (i = 1; i < w->nt; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0) {
            ptwm_error rc = ptwm_fail(err, PTWM_ERR_DUPLICATE, "tensor name '%s' added twice", v[i]->name);
            ptwm_free(v);
            return rc;
        }
    ptwm_free(v);
    return PTWM_OK;
}

/* A tensor with a base tensor none of whose chunks came out smaller against
 * it is written as without a base (no hash, no base fields in its entries). */
static uint8_t tensor_flags(const wtensor *t) {
    uint64_t k;
    if (!(t->flags & PTWM_TF_BASE)) return t->flags;
    for (k = 0; k < t->nchunks; k++)
        if (t->chunks[k].based) return t->flags;
    return (uint8_t)(t->flags & ~PTWM_TF_BASE);
}

static int put_tensor(wbuf *b, const wtensor *t) {
    size_t name_len = strlen(t->name);
    const uint8_t *q;
    uint64_t k;
    unsigned i;
    uint8_t flags = tensor_flags(t);
    int ok = wbuf_u32(b, (uint32_t)name_len) && wbuf_put(b, t->name, name_len) &&
             wbuf_u8(b, (uint8_t)t->dtype) && wbuf_u8(b, (uint8_t)t->ndim) && wbuf_u8(b, flags) &&
             wbuf_u8(b, (uint8_t)t->nchains);
    for (i = 0; ok && i < t->ndim; i++) ok = wbuf_u64(b, t->shape[i]);
    ok = ok && wbuf_u64(b, t->nbytes) && wbuf_u64(b, t->chunk_size);
    for (i = 0, q = t->chain_bytes; ok && i < t->nchains; q += t->chain_len[i++])
        ok = wbuf_u16(b, t->chain_len[i]) && wbuf_put(b, q, t->chain_len[i]);
    if (ok && (t->flags & PTWM_TF_PAYLOAD_HASH)) ok = wbuf_put(b, t->hash, 16);
    if (ok && (flags & PTWM_TF_BASE)) ok = wbuf_put(b, t->base_hash, 16);
    ok = ok && wbuf_u64(b, t->nchunks);
    for (k = 0; ok && k < t->nchunks; k++) {
        const wchunk *c = &t->chunks[k];
        ok = wbuf_u64(b, c->offset) && wbuf_u32(b, c->coded) && wbuf_u32(b, c->raw) &&
             wbuf_u8(b, c->chain) && wbuf_u32(b, c->crc);
        if (ok && (flags & PTWM_TF_BASE)) ok = wbuf_u8(b, c->based) && wbuf_u32(b, c->base_crc);
    }
    return ok;
}

/* A section: u8 id, u64 length, body. The body is written in place after a
 * head whose length is patched once the body is complete (no second copy of
 * a table that may hold a million tensors and a 100 MB source header). */
static int begin_section(wbuf *b, uint8_t id, size_t *start) {
    *start = b->len;
    return wbuf_u8(b, id) && wbuf_u64(b, 0);
}
static void end_section(wbuf *b, size_t start) {
    ptwm_store_le64(b->p + start + 1, (uint64_t)(b->len - start - PTWM_FMT_SECTION_HEAD));
}

static ptwm_error build_table(ptwm_writer *w, wbuf *tab, ptwm_err *err) {
    size_t i, at = 0;
    int ok = w->nt <= UINT32_MAX && begin_section(tab, PTWM_SEC_TENSORS, &at) &&
             wbuf_u32(tab, (uint32_t)w->nt);
    for (i = 0; ok && i < w->nt; i++) ok = put_tensor(tab, &w->t[i]);
    if (ok) end_section(tab, at);
    if (ok && w->nmeta) {
        ok = begin_section(tab, PTWM_SEC_METADATA, &at) && wbuf_u32(tab, (uint32_t)w->nmeta);
        for (i = 0; ok && i < w->nmeta; i++) {
            size_t kl = strlen(w->meta[i].key), vl = strlen(w->meta[i].value);
            ok = kl <= UINT32_MAX && vl <= UINT32_MAX && wbuf_u32(tab, (uint32_t)kl) &&
                 wbuf_put(tab, w->meta[i].key, kl) && wbuf_u32(tab, (uint32_t)vl) &&
                 wbuf_put(tab, w->meta[i].value, vl);
        }
        if (ok) end_section(tab, at);
    }
    if (ok && w->has_source) {
        size_t nl = w->src_name ? strlen(w->src_name) : 0;
        ok = begin_section(tab, PTWM_SEC_SOURCE, &at) && wbuf_u64(tab, w->src_header_len) &&
             (w->src_header ? wbuf_put(tab, w->src_header, w->src_header_len)
                            : wbuf_u64(tab, w->src_header_len - 8) &&
                                  wbuf_put(tab, w->src_json, w->src_header_len - 8)) &&
             wbuf_u32(tab, (uint32_t)nl) && wbuf_put(tab, w->src_name, nl) &&
             wbuf_u64(tab, w->src_file_size);
        if (ok) end_section(tab, at);
    }
    if (!ok) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory building the tensor table");
    return PTWM_OK;
}

/* Replace the table by one packed section (names, the source header that
 * repeats them, chains and sizes shrink ~10x) when that is smaller and the
 * reader's caps allow it. */
static ptwm_error pack_table(ptwm_ws *ws, wbuf *tab, ptwm_err *err) {
    wbuf packed = {NULL, 0, 0};
    size_t bound = ptwm_zstd_bound(tab->len), zlen = 0;
    uint64_t stored;
    ptwm_error rc;
    if (!bound || tab->len > PTWM_FMT_PACK_MAX) return PTWM_OK;
    if (!wbuf_reserve(&packed, PTWM_FMT_SECTION_HEAD + 8 + bound))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory packing the tensor table");
    rc = ptwm_zstd_encode(ws, tab->p, tab->len, PTWM_FMT_PACK_LEVEL, packed.p + PTWM_FMT_SECTION_HEAD + 8, bound,
                          &zlen);
    if (rc == PTWM_ERR_NOMEM) {
        ptwm_free(packed.p);
        return ptwm_fail(err, rc, "out of memory packing the tensor table");
    }
    stored = PTWM_FMT_SECTION_HEAD + 8 + (uint64_t)zlen;
    if (rc || stored >= tab->len || tab->len > PTWM_FMT_PACK_RATIO * stored) {
        ptwm_free(packed.p);     /* not worth it (or not allowed): keep the plain table */
        return PTWM_OK;
    }
    packed.p[0] = PTWM_SEC_PACKED;
    ptwm_store_le64(packed.p + 1, 8 + (uint64_t)zlen);
    ptwm_store_le64(packed.p + PTWM_FMT_SECTION_HEAD, tab->len);
    packed.len = (size_t)stored;
    ptwm_free(tab->p);
    *tab = packed;
    return PTWM_OK;
}

/* Version 7 only when a chunk has a rANS plane in two streams, else 6 only
 * when a tensor is coded against a base: a file whose base matched nothing
 * is a version-5 file, readable where version 6 is not. */
static uint32_t file_version(const ptwm_writer *w) {
    size_t i;
    if (w->x2) return PTWM_FMT_X2_VERSION;
    for (i = 0; w->p.base && i < w->nt; i++)
        if (tensor_flags(&w->t[i]) & PTWM_TF_BASE) return PTWM_FMT_BASE_VERSION;
    return PTWM_FMT_VERSION;
}

/* The header's version, written before the tensors were known. */
static ptwm_error set_head_version(ptwm_writer *w, uint32_t version, ptwm_err *err) {
    uint8_t v[4];
    if (version == PTWM_FMT_VERSION) return PTWM_OK;
    ptwm_store_le32(v, version);
    if (!w->to_file) {
        memcpy(w->mem.p + 8, v, sizeof(v));
        return PTWM_OK;
    }
    return ptwm_pwrite_full(w->af.fd, v, sizeof(v), 8, w->af.final_path, err);
}

static ptwm_error finish_common(ptwm_writer *w, ptwm_err *err) {
    wbuf tab = {NULL, 0, 0};
    uint8_t foot[PTWM_FMT_FOOT_SIZE];
    uint64_t table_offset;
    uint32_t version;
    ptwm_error rc;
    if (w->sh) settle(w->sh); /* files are committed in the order they were finished */
    if ((rc = w_failed(w, err))) return rc;
    if ((rc = drain(w, err))) return rc;
    if ((rc = check_duplicates(w, err))) return rc;
    if ((rc = build_table(w, &tab, err)) || (rc = pack_table(w->ws[0], &tab, err))) {
        ptwm_free(tab.p);
        return rc;
    }
    version = file_version(w);
    table_offset = w->pos;
    memset(foot, 0, sizeof(foot));
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_OFFSET, table_offset);
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_SIZE, tab.len);
    ptwm_store_le32(foot + PTWM_FOOT_TABLE_CRC, ptwm_crc32(0, tab.p, tab.len));
    ptwm_store_le32(foot + PTWM_FOOT_VERSION, version);
    ptwm_store_le64(foot + PTWM_FOOT_FILE_SIZE, table_offset + tab.len + PTWM_FMT_FOOT_SIZE);
    ptwm_store_le32(foot + PTWM_FOOT_CRC, ptwm_crc32(0, foot, PTWM_FOOT_CRC));
    memcpy(foot + PTWM_FOOT_END_MAGIC, PTWM_FMT_END_MAGIC, PTWM_FMT_MAGIC_LEN);
    rc = w_emit(w, tab.p, tab.len, err);
    ptwm_free(tab.p);
    if (!rc) rc = w_emit(w, foot, sizeof(foot), err);
    if (!rc && w->dout) rc = ptwm_dout_finish(w->dout, err);
    if (!rc) rc = set_head_version(w, version, err);
    return rc;
}

ptwm_error ptwm_writer_finish(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc;
    if (!w) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer");
    rc = finish_common(w, err);
    if (!rc && w->to_file) rc = ptwm_atomic_commit(&w->af, err);
    ptwm_writer_free(w);
    return rc;
}

ptwm_error ptwm_writer_finish_later(ptwm_writer *w, uint64_t *file_size, ptwm_err *err) {
    ptwm_error rc;
    if (!w || !file_size || !w->to_file) {
        ptwm_writer_free(w);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or size, or not a file writer");
    }
    if (!w->sh) { /* no context: committed now */
        rc = finish_common(w, err);
        if (!rc) *file_size = w->pos;
        if (!rc) rc = ptwm_atomic_commit(&w->af, err);
        ptwm_writer_free(w);
        return rc;
    }
    settle(w->sh);
    /* An earlier file's failure ends the run here, as it would have had
     * that file been finished at once. */
    if ((rc = ptwm_ctx_commit_failed(w->ctx, err)) || (rc = w_failed(w, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    /* Detached: its last chunks code while the caller goes on. */
    w->p.progress = NULL;
    w->size_out = file_size;
    ptwm_ctx_release(w->ctx);
    w->claimed = 0;
    w->sh->detached = w;
    return PTWM_OK;
}

ptwm_error ptwm_writer_finish_memory(ptwm_writer *w, void **out, size_t *len, ptwm_err *err) {
    ptwm_error rc;
    if (!w || !out || !len) {
        ptwm_writer_free(w);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or output");
    }
    *out = NULL;
    *len = 0;
    if (w->to_file) {
        ptwm_writer_free(w);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "a file writer has no memory image");
    }
    rc = finish_common(w, err);
    if (!rc) {
        *out = w->mem.p;
        *len = w->mem.len;
        w->mem.p = NULL;
    }
    ptwm_writer_free(w);
    return rc;
}

/* ---- one-call forms ------------------------------------------------------ */

static ptwm_error add_all(ptwm_writer *w, const ptwm_tensor_desc *tensors, size_t n,
                          const ptwm_chain_list *chains, ptwm_err *err) {
    size_t i;
    ptwm_error rc;
    if (n && !tensors) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL tensor list");
    for (i = 0; i < n; i++)
        if ((rc = ptwm_writer_add(w, &tensors[i], chains ? &chains[i] : NULL, err))) return rc;
    return PTWM_OK;
}

ptwm_error ptwm_compress_blob(const ptwm_tensor_desc *tensors, size_t n,
                              const ptwm_chain_list *chains, const ptwm_cparams *params, void **out,
                              size_t *len, ptwm_err *err) {
    ptwm_writer *w = NULL;
    ptwm_error rc;
    if (!out || !len) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output");
    *out = NULL;
    *len = 0;
    if ((rc = open_memory(params, 1, &w, err))) return rc; /* the tensors outlive the writer */
    {
        /* Room for the image at its raw size up front: growing by doubling
         * copied the image again at every step, on the thread that also
         * appends every chunk (pages are only touched as far as written).
         * If the reservation fails, the image grows as it goes. */
        uint64_t raw = 0;
        size_t i;
        for (i = 0; i < n && tensors; i++) raw += tensors[i].nbytes;
        if (raw < (uint64_t)SIZE_MAX / 2 && wbuf_reserve(&w->mem, (size_t)raw + 4096))
            ptwm_advise_huge(w->mem.p, w->mem.cap); /* fewer page faults as the image grows */
    }
    if ((rc = add_all(w, tensors, n, chains, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    return ptwm_writer_finish_memory(w, out, len, err);
}

ptwm_error ptwm_compress_file(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                              const ptwm_chain_list *chains, const ptwm_cparams *params,
                              ptwm_err *err) {
    ptwm_writer *w = NULL;
    ptwm_error rc;
    if ((rc = open_file(path, params, 1, &w, err))) return rc; /* the tensors outlive the writer */
    if ((rc = add_all(w, tensors, n, chains, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    return ptwm_writer_finish(w, err);
}

ptwm_error ptwm_ctx_commit_wait(ptwm_ctx *ctx, ptwm_err *err) {
    if (!ctx) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL context");
    if (ptwm_ctx_writers(ctx)) settle((wshared *)ptwm_ctx_writers(ctx));
    return ptwm_ctx_commits_done(ctx, err);
}
