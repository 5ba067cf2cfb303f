/* Pulled chunks (ptwm_writer_add_pulled): each is read by the worker that
 * codes it, not by the writing thread, so the reads of a file run on every
 * coding thread and the bytes read are in the cache of the core that codes
 * them (read on the writing thread, half the chunks crossed to the other
 * core: docs/SCALING.md).
 *
 * A tensor of several chunks (pulled or not) is hashed as one stream in
 * chunk order, by the workers rather than the writing thread (which would
 * then be the one doing the most work alone). Every job passes a hash step in
 * job order: the worker that brings the oldest job not yet through it
 * (hhead) takes the duty and hashes that one and every later one already
 * read, outside hmu, before its own job is coded. No later job is appended
 * before that one, so a chunk is hashed before it is appended, its slot
 * reclaimed and its buffer reused. The last chunk's digest goes with its
 * job into the tensor's entry when appended (retire_job).
 *
 * A pulled chunk's buffer is taken when it is read and given back once it
 * is coded and hashed (whichever comes last; both before the job can be
 * appended), so buffers exist for the chunks being coded, not for every
 * queued slot. */
#include "writer_impl.h"

PTWM_INLINE void hmu_lock(ptwm_writer *w) {
    if (w->nworkers > 1) pthread_mutex_lock(&w->hmu);
}
PTWM_INLINE void hmu_unlock(ptwm_writer *w) {
    if (w->nworkers > 1) pthread_mutex_unlock(&w->hmu);
}

/* Job j's part of its tensor's stream (j a part of one, read: a chunk whose
 * read failed is not hashed, the writer fails with it), by the thread with
 * the hashing duty, outside hmu; the stream's state was made when the
 * tensor was added, so resetting it cannot fail. Only this step writes
 * j->streamed and j->stream_hash, which j's own worker does not touch; it
 * reads what j's worker set before the step (src, hskip), not rc, which
 * that worker may be setting meanwhile. */
static void hash_step(ptwm_writer *w, wjob *j) {
    if (j->hs & HS_FIRST) ptwm_xxh128_begin(&w->hstream, NULL);
    ptwm_xxh128_update(&w->hstream, j->src, j->raw_len);
    if (j->hs & HS_LAST) {
        ptwm_xxh128_digest(&w->hstream, j->stream_hash);
        j->streamed = 1;
    }
}

/* A pulled job's buffer back to the free ones, once it is coded and, if
 * part of a stream, hashed (hmu held). Helpers take the largest queued job
 * first, so the hash step's turn may come long after a chunk is coded:
 * holding every chunk's buffer until then made a two-thread compress fault
 * in 5x the fresh memory of one thread. */
static void give_back(ptwm_writer *w, wjob *j) {
    if (!j->rd || !j->raw || !j->pdone || (!j->hpassed && (j->hs & HS_PART))) return;
    ptwm_writer_buf_put(w->ctx, w->pulls, &w->npulls, w->window, j->raw, j->raw_cap);
    j->raw = NULL;
    j->src = NULL;
}

/* Read pulled job j into a buffer of the free ones (its own failure). */
static void read_pulled(ptwm_writer *w, wjob *j) {
    hmu_lock(w);
    j->raw = ptwm_writer_buf_take(w->ctx, w->pulls, &w->npulls, j->raw_len, (size_t)w->p.chunk_size,
                                  &j->raw_cap);
    hmu_unlock(w);
    j->src = j->raw;
    if (!j->raw) {
        j->rc = ptwm_fail(&j->err, PTWM_ERR_NOMEM, "tensor '%s': out of memory for a chunk buffer of %zu bytes",
                          j->tname, j->raw_len);
        return;
    }
    j->rc = j->rd(j->rd_h, j->rd_key, j->rd_off, j->raw, j->raw_len, &j->err);
    if (j->rc)
        ptwm_err_prefix(&j->err, "tensor '%s': reading bytes %llu..%llu", j->tname,
                        (unsigned long long)j->rd_off, (unsigned long long)(j->rd_off + j->raw_len));
}

/* The hash step runs outside hmu: the thread that finds the oldest job
 * ready takes the duty (hashing) and hashes it and every later one made
 * ready meanwhile; others only mark theirs ready. Hashing under hmu kept the
 * other thread waiting for the lock about ten times a call of the 128 MB
 * BF16 file, 0.1-0.2 ms each (docs/SCALING.md, "Hashing outside the lock").
 * The duty is always the puller's of the run's first job, which is coded,
 * and so lets any later job be appended, only once the run is over. */
int ptwm_writer_pull(ptwm_writer *w, wjob *j) {
    if (j->rd) read_pulled(w, j);
    hmu_lock(w);
    j->hskip = j->rc != PTWM_OK;
    j->hready = 1;
    if (!w->hashing) {
        w->hashing = 1;
        while (w->jobs[w->hhead].hready) {
            wjob *h = &w->jobs[w->hhead];
            if ((h->hs & HS_PART) && !h->hskip) { /* (a part of a stream, read) */
                hmu_unlock(w);
                hash_step(w, h);
                hmu_lock(w);
            }
            h->hready = 0;
            h->hpassed = 1;
            give_back(w, h);
            w->hhead = (w->hhead + 1) % w->window;
        }
        w->hashing = 0;
    }
    hmu_unlock(w);
    return j->rc != PTWM_OK;
}

void ptwm_writer_pull_done(ptwm_writer *w, wjob *j) {
    if (!j->rd) return;
    hmu_lock(w);
    j->pdone = 1;
    give_back(w, j);
    hmu_unlock(w);
}
