/* The decode ring (read_ring.h): jobs submitted in order, decoded by the
 * queue's workers, retired oldest first. A worker reads its chunk's payload
 * (pread into its own buffer, or the image in memory), decodes it into the
 * caller's buffer, the byte ring or its slot's own buffer, hashes a tensor of
 * one chunk, and, streaming into a file, lists the chunk for writing
 * (read_io.c). Retiring waits for the job, then for its write, before the
 * ring bytes behind it are reused. */
#include "read_ring.h"
#include "container_format.h"
#include "context.h"
#include "fileio.h"

/* *p with room for need bytes, from the context's buffers. */
static int grow(ptwm_ctx *ctx, uint8_t **p, size_t *cap, size_t need) {
    uint8_t *q;
    if (*cap >= need && *p) return 1;
    if (!need) need = 1;
    q = (uint8_t *)ptwm_ctx_take(ctx, need);
    if (!q) return 0;
    ptwm_ctx_give(ctx, *p, *cap);
    *p = q;
    *cap = need;
    return 1;
}

static void sjob_task(void *ctx, size_t slot, unsigned worker) {
    sdrive *d = (sdrive *)ctx;
    sjob *j = &d->jobs[slot];
    const ptwm_reader *r = j->r;
    const rtensor *t = &r->t[j->tensor];
    const rchunk *c = &t->chunks[j->chunk];
    const uint8_t *src = r->mem ? r->mem + c->offset : NULL;
    j->rc = PTWM_OK;
    if (!src) {
        if (worker >= d->nworkers ||
            !grow(d->ctx, &d->coded[worker], &d->coded_cap[worker],
                  PTWM_MAX(c->coded, __atomic_load_n(&d->max_coded, __ATOMIC_RELAXED)))) {
            j->rc = ptwm_fail(&j->err, PTWM_ERR_NOMEM, "out of memory for %u coded bytes", c->coded);
            return;
        }
        if ((j->rc = ptwm_pread_full(r->fd, d->coded[worker], c->coded, c->offset, r->label, &j->err)))
            return;
        src = d->coded[worker];
    }
    j->rc = ptwm_reader_decode_chunk(r, d->ws[worker], t, c, src, j->dst, &j->err);
    /* A tensor of one chunk is hashed here, in parallel and while its bytes
     * are in cache; longer tensors are hashed in order as chunks retire. */
    if (!j->rc && t->nchunks == 1 && (t->flags & PTWM_TF_PAYLOAD_HASH))
        ptwm_xxh128_oneshot(j->dst, c->raw, j->hash);
    /* Bytes that fail their hash later are in the file, which the caller
     * then never commits. */
    if (!j->rc && j->file) {
        pthread_mutex_lock(&d->wq_mu);
        __atomic_store_n(&j->unwritten, 1, __ATOMIC_RELAXED);
        d->wq[d->nwq++] = slot;
        d->wq_bytes += c->raw;
        pthread_mutex_unlock(&d->wq_mu);
        /* One thread: the caller writes as it retires (stream_retire), or
         * hands 256 KiB at a time to the I/O thread (a hand-over a chunk
         * woke that thread, and on a busy machine preempted this one, for
         * every small tensor). Only this thread touches wq_bytes then. */
        if (d->nworkers > 1 || (d->io && d->wq_bytes >= WRITE_BATCH)) ptwm_drive_write_listed(d, 0);
    }
}

/* Work memory for n workers: the reader's context when the drive serves
 * one reader, else its own (freed by ptwm_drive_free). */
static ptwm_error drive_workspaces(sdrive *d, unsigned n, ptwm_err *err) {
    ptwm_error rc;
    if (d->r) {
        if ((rc = ptwm_reader_workspaces(d->r, n, err))) return rc;
        d->ctx = d->r->ctx;
        d->ws = d->r->ws;
        return PTWM_OK;
    }
    if ((rc = ptwm_ctx_create(&d->own_ctx, err))) return rc;
    d->ctx = d->own_ctx;
    return ptwm_ctx_workspaces(d->ctx, n, &d->ws, err);
}

/* `per_thread` chunks in flight per thread: enough that no thread waits
 * for the consumer; deeper when slots hold no buffers (an image in memory
 * decoded into the caller's buffers, where the consumer also hashes;
 * docs/ARCHITECTURE.md, "Threads"). Streaming (ring 1), that many of the
 * largest chunk fit the byte ring, and four times as many slots hold
 * smaller ones. */
#define RING_SLOTS 4
ptwm_error ptwm_drive_init(sdrive *d, ptwm_reader *r, int threads, size_t per_thread, int ring,
                           ptwm_err *err) {
    ptwm_error rc;
    memset(d, 0, sizeof(*d));
    d->r = r;
    d->units = per_thread * (size_t)ptwm_threads_resolve(threads) + 2;
    d->window = ring ? RING_SLOTS * d->units : d->units;
    d->jobs = (sjob *)ptwm_calloc(d->window, sizeof(sjob));
    d->wq = (size_t *)ptwm_calloc(d->window, sizeof(size_t));
    pthread_mutex_init(&d->write_mu, NULL);
    pthread_mutex_init(&d->wq_mu, NULL);
    d->mu_ready = 1;
    if (!d->jobs) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if ((rc = ptwm_queue_create(threads, d->window, sjob_task, d, &d->q, err))) return rc;
    d->nworkers = ptwm_queue_size(d->q);
    /* No job runs before the first submit: the workspaces are there first. */
    if ((rc = drive_workspaces(d, d->nworkers, err))) {
        d->nworkers = 0;
        return rc;
    }
    d->coded = (uint8_t **)ptwm_calloc(d->nworkers, sizeof(uint8_t *));
    d->coded_cap = (size_t *)ptwm_calloc(d->nworkers, sizeof(size_t));
    if (!d->coded || !d->coded_cap || !d->wq) {
        d->nworkers = 0;   /* no task runs before the first submit */
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    return PTWM_OK;
}

void ptwm_drive_free(sdrive *d) {
    size_t i;
    ptwm_io_stop(d->io);   /* writes of ring bytes finish first */
    ptwm_queue_free(d->q);   /* waits for running jobs before their buffers go */
    if (d->jobs)
        for (i = 0; i < d->window; i++) ptwm_ctx_give(d->ctx, d->jobs[i].own, d->jobs[i].own_cap);
    for (i = 0; d->coded && i < d->nworkers; i++) ptwm_ctx_give(d->ctx, d->coded[i], d->coded_cap[i]);
    ptwm_ctx_give(d->ctx, d->ring, d->ring_cap);
    ptwm_free(d->coded);
    ptwm_free(d->coded_cap);
    ptwm_free(d->jobs);
    ptwm_free(d->wq);
    if (d->mu_ready) {
        pthread_mutex_destroy(&d->write_mu);
        pthread_mutex_destroy(&d->wq_mu);
    }
    ptwm_ctx_free(d->own_ctx);
}

/* Where a chunk of n bytes (at most ring_cap) goes in the byte ring: at its
 * head, or at the start of the ring's next turn if it would wrap. */
static uint64_t ring_place(const sdrive *d, size_t n) {
    uint64_t at = d->ring_head;
    if (at % d->ring_cap + n > d->ring_cap) at += d->ring_cap - at % d->ring_cap;
    return at;
}

/* Whether a chunk of n bytes fits in the byte ring beside those in flight. */
int ptwm_drive_ring_fits(const sdrive *d, size_t n) {
    return n > SLOT_KEEP || ring_place(d, n) + n - d->ring_tail <= d->ring_cap;
}

/* Queue chunk k of tensor t (into dst; if NULL, the byte ring or for a
 * chunk over SLOT_KEEP the slot's own buffer). */
ptwm_error ptwm_drive_submit(sdrive *d, size_t item, size_t t, uint64_t k, uint8_t *dst,
                             uint64_t file_off, ptwm_err *err) {
    size_t slot = (d->head + d->npending) % d->window;
    sjob *j = &d->jobs[slot];
    const rchunk *c = &d->r->t[t].chunks[k];
    if (!dst && c->raw <= SLOT_KEEP) {
        uint64_t at = ring_place(d, c->raw);
        dst = d->ring + at % d->ring_cap;
        d->ring_head = at + c->raw;
    } else if (!dst && !grow(d->ctx, &j->own, &j->own_cap, c->raw)) {
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a chunk of %u bytes", c->raw);
    }
    j->ring_end = d->ring_head;
    j->r = d->r;
    j->file = d->file;
    if (j->file) j->file->pending++;
    j->item = item;
    j->tensor = t;
    j->chunk = k;
    j->dst = dst ? dst : j->own;
    j->file_off = file_off + c->start;
    d->inflight += c->raw;
    d->npending++;
    ptwm_queue_submit(d->q, slot, c->raw);
    return PTWM_OK;
}

/* Job j's chunk is decoded and listed for writing: write the list, or, while
 * another thread writes it (that thread empties the list before it stops),
 * decode chunks nobody has taken, polling briefly before sleeping. */
static void wait_written(sdrive *d, sjob *j) {
    unsigned k = 0;
    ptwm_drive_write_listed(d, 0);
    /* With a writing thread, decode what waits, then sleep on it. */
    while (__atomic_load_n(&j->unwritten, __ATOMIC_ACQUIRE) && k < (d->io ? 1 : 20000))
        if (!ptwm_queue_help(d->q, SIZE_MAX)) {
            ptwm_spin_pause();
            k++;
        }
    if (__atomic_load_n(&j->unwritten, __ATOMIC_ACQUIRE)) ptwm_drive_write_listed(d, 1);
    /* listed no more: written, or with the writing thread */
    if (d->io) ptwm_io_wait(d->io, &j->unwritten);
}

/* Take back the oldest job; *out points at it until the next submit. */
ptwm_error ptwm_drive_retire(sdrive *d, sjob **out, ptwm_err *err) {
    sjob *j = &d->jobs[d->head];
    ptwm_queue_wait(d->q, d->head);
    if (__atomic_load_n(&j->unwritten, __ATOMIC_ACQUIRE)) wait_written(d, j);
    d->ring_tail = j->ring_end;
    d->head = (d->head + 1) % d->window;
    d->npending--;
    d->inflight -= j->r->t[j->tensor].chunks[j->chunk].raw;
    *out = j;
    if (j->rc) {
        const rtensor *t = &j->r->t[j->tensor];
        if (err) *err = j->err;
        ptwm_err_prefix(err, "file '%s': tensor '%s' chunk %llu of %llu", j->r->label, t->name,
                        (unsigned long long)j->chunk, (unsigned long long)t->nchunks);
    }
    return j->rc;
}

/* Add a retired chunk to its tensor's payload hash: a tensor of one chunk
 * was hashed by the worker; longer ones go through the running state h (jobs
 * retire in order; the state is kept for the next tensor). *done is set, and
 * got filled, once the tensor is complete and hashed. */
ptwm_error ptwm_drive_retired_hash(const rtensor *t, const sjob *j, ptwm_xxh128 *h,
                                   uint8_t got[16], int *done, ptwm_err *err) {
    ptwm_error rc;
    *done = 0;
    if (!(t->flags & PTWM_TF_PAYLOAD_HASH)) return PTWM_OK;
    if (t->nchunks == 1) {
        memcpy(got, j->hash, 16);
    } else {
        if (j->chunk == 0 && (rc = ptwm_xxh128_begin(h, err))) return rc;
        ptwm_xxh128_update(h, j->dst, t->chunks[j->chunk].raw);
        if (j->chunk + 1 != t->nchunks) return PTWM_OK;
        ptwm_xxh128_digest(h, got);
    }
    *done = 1;
    return PTWM_OK;
}
