/* The .ptwm writer's job ring: one pass, bounded memory.
 *
 * Each tensor's chunks join a ring of at most `window` pending jobs. Workers
 * code jobs as they are queued, across tensor boundaries, with every
 * candidate chain (and against the base chunk, where there is one), keeping
 * the smallest payload; the thread that finishes the oldest pending job
 * appends it and every later job already coded, in job order (under rmu,
 * write_append.c), so the file is the same for any thread count and a
 * worker's payload is copied while it is still in that worker's cache. The
 * writing thread reclaims slots oldest first, coding queued jobs itself
 * while it waits.
 *
 * Output buffers are not tied to slots: a job takes one when it starts
 * (unless it is coded in place: the oldest pending job is coded straight
 * into the image's end, or into the direct output's staging memory at its
 * end, since nothing else appends until it is appended) and gives it back
 * when appended, and the
 * last given back is taken first, so a few warm buffers serve the whole
 * ring. A slot's output is ptwm_chunk_work_bound(chunk) of address space,
 * room for the stages to code in place, touched only as far as they write. */
#include "writer_impl.h"
#include "context.h"
#include "hash.h"

/* The payload in the worker's scratch buffer (len bytes, chain c) is
 * smaller than the job's: it becomes the job's. */
static void keep_scratch(ptwm_writer *w, wjob *j, unsigned worker, size_t len, unsigned c) {
    if (j->dst == j->out && j->out_cap == w->slot_size) {
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

/* A new buffer for need bytes (need <= max) is a power of two from 128 KiB
 * for small needs, so that it serves later jobs of about its size, else max:
 * sized to their jobs, a ring deep enough for runs of small tensors does not
 * hold (and touch) a chunk-sized buffer for each. */
static size_t buf_size(size_t need, size_t max) {
    size_t s = (size_t)1 << 17;
    while (s < need && s < max / 2) s <<= 1;
    return s >= need ? s : max;
}

uint8_t *ptwm_writer_buf_take(ptwm_ctx *ctx, wbuf *s, size_t *n, size_t need, size_t max,
                              size_t *cap) {
    size_t k = *n;
    uint8_t *p;
    while (k && s[k - 1].cap < need) k--;
    if (!k) return (uint8_t *)ptwm_ctx_take_fit(ctx, buf_size(need, max), cap);
    p = s[k - 1].p;
    *cap = s[k - 1].cap;
    memmove(s + k - 1, s + k, (*n - k) * sizeof(wbuf));
    (*n)--;
    return p;
}

void ptwm_writer_buf_put(ptwm_ctx *ctx, wbuf *s, size_t *n, size_t limit, uint8_t *p, size_t cap) {
    if (!p) return;
    if (*n == limit) {
        ptwm_ctx_give(ctx, s[0].p, s[0].cap);
        memmove(s, s + 1, --*n * sizeof(wbuf));
    }
    s[*n].p = p;
    s[(*n)++].cap = cap;
}

/* Populating the image ahead of its end, a step at a time: a payload coded
 * apart is copied into the image under rmu, and there the first touch of
 * fresh pages (the kernel zeroing each, 2 MiB at a time with huge pages)
 * held up every thread waiting for rmu (docs/ARCHITECTURE.md, "Threads"). */
#define POPULATE_STEP ((size_t)2 << 20)

/* The part of an in-memory image a thread coding a job apart faults in
 * before its payload is appended: up to a step per thread past the image's
 * end, within its room, at least a step at a time. Its start into *a and
 * end into *b; NULL if none (rmu held). The image moving meanwhile makes
 * the hint stale, never wrong: populating leaves bytes as they are. */
static uint8_t *populate_claim(ptwm_writer *w, size_t *a, size_t *b) {
    size_t want = w->mem.len + POPULATE_STEP * w->nworkers;
    if (want > w->mem.cap) want = w->mem.cap;
    if (w->populated < w->mem.len) w->populated = w->mem.len;
    if (want < w->populated + POPULATE_STEP) return NULL;
    *a = w->populated;
    *b = w->populated = want;
    return w->mem.p;
}

/* Job j is coded (or failed): append what is ready. */
static void job_done(ptwm_writer *w, wjob *j) {
    ptwm_writer_pull_done(w, j);
    rmu_lock(w);
    j->coded = 1;
    ptwm_writer_retire_ready(w);
    ptwm_writer_copy_placed(w);
    rmu_unlock(w);
}

/* Code job i. The oldest pending job is coded straight into the output's
 * end (an in-memory writer's image, or the direct output's staging memory):
 * every earlier payload is there, and nothing else appends until this job
 * is appended. Then the coded jobs at the front of the ring are appended. */
void ptwm_writer_encode_task(void *ctx, size_t i, unsigned worker) {
    ptwm_writer *w = (ptwm_writer *)ctx;
    wjob *j = &w->jobs[i];
    ptwm_chunk_params cp;
    unsigned c;
    size_t need, pa = 0, pb = 0;
    uint8_t *image = NULL;
    if (ptwm_writer_pull(w, j)) {
        job_done(w, j);
        return;
    }
    cp.method = w->p.method;
    cp.zstd_level = w->p.zstd_level;
    cp.emit_crc = j->plane_crc;
    cp.columns = (size_t)j->columns;
    cp.max_streams = w->max_streams;
    need = ptwm_chunk_work_bound(j->raw_len);
    /* Room for the stages' bounds (pages past what is written are never
     * touched); appending it then copies nothing (docs/ARCHITECTURE.md,
     * "Threads"). An equal earlier payload just leaves it unused. */
    j->dst = NULL;
    rmu_lock(w);
    if (!w->to_file && i == w->head && !w->failed) {
        if (ptwm_writer_image_room(w, need)) {
            j->dst = w->mem.p + w->mem.len;
            j->dst_cap = need;
        }
    } else if (w->dout && i == w->head && !w->failed) {
        /* (a room short of the bound codes through the workspace, then
         * into it: no worse than coding apart) */
        ptwm_error rc = ptwm_dout_room(w->dout, need, &j->dst, &j->dst_cap, &w->ferr);
        if (rc) w_fail(w, rc);
        else if (j->dst_cap < ptwm_chunk_bound(j->raw_len)) j->dst = NULL;
    }
    /* Else the buffer appended last: this thread has often just copied it
     * into the image, so it is still in cache (a buffer per slot was cold:
     * docs/ARCHITECTURE.md, "Threads"). */
    if (!j->dst) j->out = ptwm_writer_buf_take(w->ctx, w->outs, &w->nouts, need, w->slot_size, &j->out_cap);
    if (!j->dst && !w->to_file && w->nworkers > 1) image = populate_claim(w, &pa, &pb);
    rmu_unlock(w);
    if (image) ptwm_populate(image + pa, pb - pa);
    if (!j->dst) {
        if (!j->out) {
            j->rc = ptwm_fail(&j->err, PTWM_ERR_NOMEM, "out of memory for a chunk buffer of %zu bytes",
                              need);
            job_done(w, j);
            return;
        }
        j->dst = j->out;
        j->dst_cap = j->out_cap;
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
        j->phash = ptwm_writer_payload_hash(j->dst, j->out_len);
        j->pcrc = ptwm_crc32(0, j->dst, j->out_len);
        j->min_version = ptwm_chunk_min_version(j->dst, j->out_len, j->raw_len);
    }
    if (!j->rc && j->hash_raw) ptwm_xxh128_oneshot(j->src, j->raw_len, j->raw_hash);
    job_done(w, j);
}

/* Take back the oldest slot in use, coding queued jobs while its job is not
 * done. A job is appended when it and every earlier one are coded, so once
 * this slot's job (and, before it, every earlier one) is done, it has been
 * appended. Returns the writer's failure, if any, with its message. */
ptwm_error ptwm_writer_reclaim_one(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc;
    uint64_t done;
    wjob *j = &w->jobs[w->reclaim];
    ptwm_queue_wait(w->queue, w->slot0 + w->reclaim);
    w->held -= j->raw_len;
    /* Its copies serve the next jobs (the writing thread's own stack). */
    ptwm_writer_buf_put(w->ctx, w->raws, &w->nraws, w->window, j->raw, j->raw_cap);
    ptwm_writer_buf_put(w->ctx, w->raws, &w->nraws, w->window, j->base_buf, j->base_cap);
    j->raw = j->base_buf = NULL;
    w->reclaim = (w->reclaim + 1) % w->window;
    w->nheld--;
    /* (without rmu, which every job's start and end takes: the failure is
     * stored atomically after its message, and its message is read under
     * rmu only when there is one) */
    rc = __atomic_load_n(&w->failed, __ATOMIC_ACQUIRE);
    if (rc && err) {
        rmu_lock(w);
        *err = w->ferr;
        rmu_unlock(w);
    }
    if (!rc && w->p.progress) {
        done = __atomic_load_n(&w->raw_done, __ATOMIC_RELAXED);
        w->p.progress(w->p.progress_ctx, done, w->p.progress_total);
    }
    return rc;
}

ptwm_error ptwm_writer_drain(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc = PTWM_OK, r;
    ptwm_queue_rest(w->queue);
    while (w->nheld)
        if ((r = ptwm_writer_reclaim_one(w, err)) && !rc) rc = r;
    return rc;
}
