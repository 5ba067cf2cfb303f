/* The .ptwm writer's structures and the calls its files make of one
 * another; nothing outside the writer includes this. The writer, by
 * responsibility (docs/ARCHITECTURE.md, "The container"):
 *
 *   write_open.c    the handle: parameters, open, free, the source header and
 *                   metadata it records; the one-call forms
 *   write_add.c     adding a tensor: checked, cut into chunks that fill the
 *                   ring's slots (copied, borrowed or read), with base chunks
 *   write_ring.c    the job ring: chunks coded by the queue's workers; slots
 *                   reclaimed, oldest first, by the writing thread
 *   write_pull.c    chunks read on the coding threads, hashed in job order
 *   write_append.c  coded chunks appended in job order; payloads written once
 *   write_finish.c  the table, footer and header version; finishing
 *   write_shared.c  writers of one context on its threads; the deferred
 *                   finish (ptwm_writer_finish_later) and commit
 *
 * Threads. The writing thread (the caller) adds tensors, fills and reclaims
 * slots and finishes; workers read pulled jobs, hash them in job order (under
 * hmu, which is never held with rmu), code jobs and append them. A slot between its
 * submit and its reclaim belongs to its job: the writing thread touches it
 * again only after ptwm_queue_wait.
 *
 * rmu guards what appending touches: the output (pos, the image or file,
 * the direct output), the sharing store, the tensor array and its chunk
 * entries, the counts (coded_total, raw_done, min_version), the ring's head and its
 * jobs' `coded` flags, the free output buffers (outs), the payloads placed
 * in an image and not yet copied (copies, copying) and the sticky failure
 * (failed, ferr). It is taken only where another thread may append
 * (nworkers > 1). Under it appending may take the context's buffer lock
 * (ptwm_ctx_take) and the direct output's writing thread (dout.h); neither
 * calls back into the writer, and nothing takes rmu while holding them.
 *
 * Order. Jobs are submitted in order; a job is appended once it and every
 * earlier one are coded, by whichever thread codes the last of them, so the
 * file is the same for any thread count. The first failure sticks (under
 * rmu): later jobs are still coded and taken back, never written, and every
 * later call returns it (a failed writer is only finished, which returns it
 * too, or freed). */
#ifndef PTWM_WRITER_IMPL_H
#define PTWM_WRITER_IMPL_H

#include "common.h"
#include "container_base.h"
#include "chunk.h"
#include "container_format.h"
#include "dout.h"
#include "fileio.h"
#include "hash.h"
#include "writer.h"
#include "threads.h"
#include "workspace.h"

#include <pthread.h>

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
    uint8_t *raw;               /* the job's copy of the chunk (raw_cap bytes), from
                                 * the writer's free buffers until reclaimed */
    size_t raw_cap;
    const uint8_t *src;         /* the bytes to code: raw, or the caller's (borrowing) */
    size_t raw_len;
    uint8_t *out;               /* an output buffer (out_cap bytes, room for the job's
                                 * work bound) taken from the writer's free ones
                                 * while the job is coded and appended; NULL when
                                 * coded in place */
    size_t out_cap;
    uint8_t *dst;               /* where the payload is coded: out, or (the oldest
                                 * pending job of an in-memory writer) straight into
                                 * the image at its end */
    size_t dst_cap;             /* slot_size, or the image's room (a work bound) */
    size_t out_len;
    uint8_t chain;
    uint64_t phash;             /* ptwm_writer_payload_hash of out[0..out_len) */
    uint32_t pcrc;              /* CRC32 of out[0..out_len): the chunk entry's check */
    uint8_t *base_buf;          /* the job's copy of a base chunk (base_cap bytes),
                                 * as raw */
    size_t base_cap;
    const uint8_t *base;        /* the base chunk (base_buf), or NULL: the tensor has none */
    uint8_t based;              /* the payload is coded against it */
    uint32_t base_crc;          /* then the base chunk's CRC32 */
    unsigned min_version;       /* the container version its payload needs (0: any) */
    int hash_raw;               /* the chunk is its tensor: hash it (into raw_hash) */
    uint8_t raw_hash[16];
    /* Pulled (ptwm_writer_add_pulled): the worker reads the chunk into raw,
     * bytes [rd_off, rd_off + raw_len) of tensor rd_key of rd_h, and it is
     * hashed in job order (write_pull.c) as HS_* of hs say. */
    ptwm_keyed_read_fn rd;      /* NULL: read, copied or borrowed when queued */
    void *rd_h;
    size_t rd_key;
    uint64_t rd_off;
    const char *tname;          /* the tensor's name (its block does not move) */
    uint8_t hs;
    int hready;                 /* its turn to be hashed may come (under hmu) */
    int hskip;                  /* its read failed: not hashed (set with hready) */
    int streamed;               /* HS_LAST hashed: its tensor's digest in stream_hash */
    uint8_t stream_hash[16];
    int hpassed, pdone;         /* through the hash step; coded (under hmu): a pulled
                                 * job's raw goes back to `pulls` once both are set */
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

/* A payload coded apart, placed in an in-memory image under rmu and copied
 * there outside it (write_append.c): its output buffer (given back once
 * copied; NULL: a free entry) and where it goes. */
typedef struct wcopy {
    uint8_t *src;
    size_t cap, off, len;
    int taken;                  /* a thread is copying it */
} wcopy;

struct ptwm_writer {
    ptwm_cparams p;             /* p.base unused: the base is `base` */
    ptwm_base base;             /* tensors are coded against (base.ops NULL: none) */
    int to_file;
    ptwm_atomic_file af;
    ptwm_dout *dout;            /* appends past the page cache, once the file is large */
    int dout_tried;
    wbuf mem;
    int mem_fixed;              /* mem is the caller's buffer (ptwm_compress_into): it
                                 * never grows and is never freed */
    size_t populated;           /* an in-memory writer's image is faulted in up to
                                 * here (rmu; a hint: ptwm_populate) */
    /* An in-memory writer with several workers copies large payloads coded
     * apart into the image outside rmu: `window` entries, of which `nplaced`
     * wait to be taken and `copying` are taken and not yet copied (with all
     * in use, a payload is copied as it is appended). The image does not
     * move while any is being copied; `copied` signals when none is. */
    wcopy *copies;
    size_t nplaced, copying;
    pthread_cond_t copied;
    /* Appending (under rmu, by whichever thread retires a job): the image or
     * file, pos, the sharing store, chunk entries, the counts, failure. */
    pthread_mutex_t rmu;
    uint64_t pos, coded_total, raw_done;
    unsigned min_version;       /* the newest container version a payload needs (0: none) */
    unsigned max_streams;       /* rANS streams a plane may take (p.format_version) */
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
    uint64_t held, budget;      /* raw bytes of the slots in use, and their bound */
    size_t bound;               /* ptwm_chunk_bound(chunk_size) */
    size_t slot_size;           /* ptwm_chunk_work_bound(chunk_size): planes are coded
                                 * in place in slot buffers (pages past what the
                                 * stages write are never touched) */
    uint8_t **scratch;          /* one slot-sized buffer per worker */
    ptwm_ws **ws;               /* one codec workspace per worker (the context's) */
    ptwm_ctx *ctx;              /* work memory: the caller's (claimed) or own_ctx */
    ptwm_ctx *own_ctx;
    wbuf *outs;                 /* output buffers of appended jobs (p, cap), for
                                 * the next jobs, last returned first (rmu) */
    size_t nouts;
    wbuf *raws;                 /* the same for reclaimed jobs' chunk copies
                                 * (writing thread only) */
    size_t nraws;
    pstore dedup;               /* payloads already written, by content */
    /* Hashing pulled chunks in job order (write_pull.c), under hmu: the
     * oldest job not yet through the hash step, and the stream of the
     * tensor it belongs to. */
    pthread_mutex_t hmu;
    size_t hhead;
    int hashing;                /* a thread has the duty of hashing from hhead on
                                 * (hmu); only it touches hstream */
    ptwm_xxh128 hstream;
    wbuf *pulls;                /* free buffers pulled chunks are read into (hmu):
                                 * held only while a chunk is read, coded and
                                 * hashed, so a few serve the file (a buffer per
                                 * queued slot was fresh memory, faulted in) */
    size_t npulls;
    uint8_t *cmp;               /* file writers: a written payload read back */
};

/* A growable byte buffer: the image of an in-memory writer, the table. */
PTWM_INLINE int wbuf_reserve(wbuf *b, size_t more) {
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

PTWM_INLINE int wbuf_put(wbuf *b, const void *src, size_t n) {
    if (!wbuf_reserve(b, n)) return 0;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return 1;
}

PTWM_INLINE int wbuf_u8(wbuf *b, uint8_t v) {
    return wbuf_put(b, &v, 1);
}
PTWM_INLINE int wbuf_u16(wbuf *b, uint16_t v) {
    uint8_t x[2];
    ptwm_store_le16(x, v);
    return wbuf_put(b, x, 2);
}
PTWM_INLINE int wbuf_u32(wbuf *b, uint32_t v) {
    uint8_t x[4];
    ptwm_store_le32(x, v);
    return wbuf_put(b, x, 4);
}
PTWM_INLINE int wbuf_u64(wbuf *b, uint64_t v) {
    uint8_t x[8];
    ptwm_store_le64(x, v);
    return wbuf_put(b, x, 8);
}

/* write_ring.c: the writer's buffers for chunk copies and payloads, kept in
 * stacks of free ones (s, *n entries, at most limit), the last given back on
 * top (still in cache). Take the topmost of at least need bytes, else one
 * from the context sized for need (at most max); its size into *cap. */
uint8_t *ptwm_writer_buf_take(ptwm_ctx *ctx, wbuf *s, size_t *n, size_t need, size_t max,
                              size_t *cap);
/* Put p (cap bytes) on the stack; a full one gives its bottom (least recently
 * used) back to the context. */
void ptwm_writer_buf_put(ptwm_ctx *ctx, wbuf *s, size_t *n, size_t limit, uint8_t *p, size_t cap);

/* rmu, taken only where another thread may append (a one-thread writer
 * appends on the writing thread alone: six lock pairs a chunk would cost
 * time for nothing; docs/ARCHITECTURE.md, "Measurements behind the code"). */
PTWM_INLINE void rmu_lock(const ptwm_writer *w) {
    if (w->nworkers > 1) pthread_mutex_lock((pthread_mutex_t *)&w->rmu);
}
PTWM_INLINE void rmu_unlock(const ptwm_writer *w) {
    if (w->nworkers > 1) pthread_mutex_unlock((pthread_mutex_t *)&w->rmu);
}

/* Room for `more` bytes past the image's end: grown if it is the writer's,
 * else within the caller's buffer. */
PTWM_INLINE int image_reserve(ptwm_writer *w, size_t more) {
    if (!w->mem_fixed) return wbuf_reserve(&w->mem, more);
    return more <= w->mem.cap - w->mem.len;
}

/* image_reserve, waiting first for the copies into an image that must grow
 * (write_append.c; rmu held). */
int ptwm_writer_image_room(ptwm_writer *w, size_t more);

/* Record a failure (rmu held; its message, if any, in ferr first). Stored
 * atomically: the writing thread reads it without rmu (w_failed). */
PTWM_INLINE ptwm_error w_fail(ptwm_writer *w, ptwm_error rc) {
    if (!w->failed) __atomic_store_n(&w->failed, rc, __ATOMIC_RELEASE);
    return rc;
}

/* The same from the writing thread, outside rmu. */
PTWM_INLINE ptwm_error w_fail_caller(ptwm_writer *w, ptwm_error rc) {
    rmu_lock(w);
    w_fail(w, rc);
    rmu_unlock(w);
    return rc;
}

/* The sticky failure, read by the writing thread: "writer already failed"
 * into err if there is one. */
PTWM_INLINE ptwm_error w_failed(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc = __atomic_load_n(&w->failed, __ATOMIC_ACQUIRE);
    return rc ? ptwm_fail(err, rc, "writer already failed") : PTWM_OK;
}

/* The threads the writers of one context share (write_shared.c): one queue
 * over two rings of `window` slots, the writer on each, and the writer
 * finished with ptwm_writer_finish_later, not yet settled. Touched by the
 * writing thread only; workers read `ring` to find a slot's writer, which
 * does not change while the slot has a job. */
typedef struct wshared {
    ptwm_queue *q;
    unsigned threads;
    size_t window;
    ptwm_writer *ring[2];       /* the writer on each ring, or NULL */
    ptwm_writer *detached;      /* finished, not yet settled */
} wshared;

/* write_ring.c: code job i of the writer ctx on worker `worker`, then append
 * what is ready (the queue's task). */
void ptwm_writer_encode_task(void *ctx, size_t i, unsigned worker);
/* Take back the oldest slot in use (waiting for its job, coding queued jobs
 * meanwhile); the writer's failure, if any, with its message. */
ptwm_error ptwm_writer_reclaim_one(ptwm_writer *w, ptwm_err *err);
/* Take back every slot in use; the first failure. */
ptwm_error ptwm_writer_drain(ptwm_writer *w, ptwm_err *err);

/* write_pull.c: the hash step a job's stream takes (wjob.hs): a chunk of a
 * tensor hashed as a stream, its first, its last. */
#define HS_PART 1
#define HS_FIRST 2
#define HS_LAST 4
/* A job's start on its worker: a pulled chunk read, then every job through
 * the hash step in job order. Nonzero if the job failed (j->rc). */
int ptwm_writer_pull(ptwm_writer *w, wjob *j);
/* A pulled job is coded: its buffer goes back once it is hashed too. */
void ptwm_writer_pull_done(ptwm_writer *w, wjob *j);

/* write_append.c: append n bytes to the output (image, file or direct
 * output; rmu held, or on the writing thread while no job is pending). */
ptwm_error ptwm_writer_emit(ptwm_writer *w, const void *src, size_t n, ptwm_err *err);
/* The sharing store's key of a payload (computed by the worker that coded it). */
uint64_t ptwm_writer_payload_hash(const uint8_t *p, size_t n);
/* Append the coded jobs at the front of the ring, in job order (rmu held). */
void ptwm_writer_retire_ready(ptwm_writer *w);
/* Copy the payloads placed in the image, outside rmu (held on entry and on
 * return), until none is left to take. */
void ptwm_writer_copy_placed(ptwm_writer *w);

/* write_finish.c: drain the ring, append the table and footer and set the
 * header's version (the file is then whole, not yet committed). */
ptwm_error ptwm_writer_finish_common(ptwm_writer *w, ptwm_err *err);

/* write_shared.c: put w, on its context's threads, on a free ring of the
 * context's queue (made, or remade for another thread count, as needed). */
ptwm_error ptwm_writer_share(ptwm_writer *w, ptwm_err *err);
/* Settle the detached writer of sh, if any: finish it, queue its commit. */
void ptwm_writer_settle(wshared *sh);

#endif
