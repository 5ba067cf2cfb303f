/* Writers given the same context share its threads (docs/ARCHITECTURE.md,
 * "Threads"): one queue over two rings of `window` slots that successive
 * writers take in turn. A writer finished with ptwm_writer_finish_later is
 * detached: its last chunks code on its ring while the next writer fills
 * the other, so a shard's end leaves no thread idle. The writing thread
 * settles it (waits for its chunks, appends its table and footer, queues
 * its commit on the context's committer thread: context.h) once the next
 * writer has a chunk queued per thread, at the next finish, at an open that
 * needs its ring, in ptwm_ctx_commit_wait, or when the context is freed. Two
 * rings at most are held, so memory stays bounded by threads x chunk.
 *
 * Order: a writer is settled before the next one finishes, so files are
 * committed in the order they were finished; a settled writer's failure is
 * kept as the context's and returned, naming its file, by the next open or
 * finish of a writer on the context and by ptwm_ctx_commit_wait. All of it
 * runs on the writing thread, without a lock of its own (the context's
 * committer has its own: context.c). */
#include "writer_impl.h"
#include "context.h"
#include "write_later.h"

static void shared_task(void *ctx, size_t s, unsigned worker) {
    wshared *sh = (wshared *)ctx;
    ptwm_writer_encode_task(sh->ring[s / sh->window], s % sh->window, worker);
}

/* Settle the detached writer, if any; its failure is kept as the
 * context's (the next finish, open or ptwm_ctx_commit_wait returns it). */
void ptwm_writer_settle(wshared *sh) {
    ptwm_writer *w = sh->detached;
    ptwm_err e;
    ptwm_error rc;
    if (!w) return;
    sh->detached = NULL;
    rc = ptwm_writer_finish_common(w, &e);
    if (!rc) {
        *w->size_out = w->pos;
        rc = ptwm_ctx_commit_later(w->ctx, &w->af, &e);
    }
    if (rc) ptwm_ctx_commit_fail(w->ctx, rc, &e);
    ptwm_writer_free(w);
}

static void shared_free(void *p) {
    wshared *sh = (wshared *)p;
    ptwm_writer_settle(sh);
    ptwm_queue_free(sh->q);
    ptwm_free(sh);
}

/* Put w on a free ring of its context's queue (made, or remade for another
 * thread count, as needed). */
ptwm_error ptwm_writer_share(ptwm_writer *w, ptwm_err *err) {
    wshared *sh = (wshared *)ptwm_ctx_writers(w->ctx);
    ptwm_error rc;
    int r;
    if (!sh) {
        if (!(sh = (wshared *)ptwm_calloc(1, sizeof(*sh))))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a work queue");
        ptwm_ctx_set_writers(w->ctx, sh, shared_free);
    }
    if (sh->q && (sh->threads != w->nworkers || sh->window != w->window)) {
        ptwm_writer_settle(sh);
        ptwm_queue_free(sh->q);
        sh->q = NULL;
    }
    if (!sh->q) {
        if ((rc = ptwm_queue_create(w->p.threads, 2 * w->window, shared_task, sh, &sh->q, err)))
            return rc;
        sh->threads = w->nworkers;
        sh->window = w->window;
    }
    if (sh->ring[0] && sh->ring[1]) ptwm_writer_settle(sh); /* (one is the detached writer) */
    r = sh->ring[0] ? 1 : 0;
    sh->ring[r] = w;
    w->sh = sh;
    w->queue = sh->q;
    w->slot0 = (size_t)r * w->window;
    return PTWM_OK;
}

ptwm_error ptwm_writer_finish_later(ptwm_writer *w, uint64_t *file_size, ptwm_err *err) {
    ptwm_error rc;
    if (!w || !file_size || !w->to_file) {
        ptwm_writer_free(w);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or size, or not a file writer");
    }
    if (!w->sh) { /* no context: committed now */
        rc = ptwm_writer_finish_common(w, err);
        if (!rc) *file_size = w->pos;
        if (!rc) rc = ptwm_atomic_commit(&w->af, err);
        ptwm_writer_free(w);
        return rc;
    }
    ptwm_writer_settle(w->sh);
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

ptwm_error ptwm_ctx_commit_wait(ptwm_ctx *ctx, ptwm_err *err) {
    if (!ctx) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL context");
    if (ptwm_ctx_writers(ctx)) ptwm_writer_settle((wshared *)ptwm_ctx_writers(ctx));
    return ptwm_ctx_commits_done(ctx, err);
}
