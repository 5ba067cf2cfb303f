/* A small thread pool running parallel-for loops.
 *
 * ptwm_pool_run(pool, n, fn, ctx) calls fn(ctx, i, worker) once for every
 * i in [0, n) and returns when all have finished. The calling thread works
 * too (as worker 0), so a pool of one thread creates no threads at all.
 * Tasks are claimed in increasing order but finish in any order: a caller
 * that needs ordered results writes them to slot i and reads the slots in
 * order after the run, which is how the writer and reader keep their output
 * identical for any thread count. `worker` (< ptwm_pool_size) indexes
 * per-thread scratch space.
 *
 * A pool is used by one caller at a time. */
#ifndef PTWM_THREADS_H
#define PTWM_THREADS_H

#include "common.h"

/* Threads a pool or queue may have (more are capped to this). */
#define PTWM_POOL_MAX 256

typedef struct ptwm_pool ptwm_pool;
typedef void (*ptwm_task_fn)(void *ctx, size_t task, unsigned worker);

/* threads <= 0: one per core (ptwm_cpu_count). Capped at PTWM_POOL_MAX. */
ptwm_error ptwm_pool_create(int threads, ptwm_pool **out, ptwm_err *err);
void ptwm_pool_free(ptwm_pool *p);
unsigned ptwm_pool_size(const ptwm_pool *p);
void ptwm_pool_run(ptwm_pool *p, size_t ntasks, ptwm_task_fn fn, void *ctx);
/* An ordered work queue over a ring of `nslots` slots: the caller fills a
 * slot and submits it with a weight (its expected work), workers run
 * fn(ctx, slot, worker) heaviest ready slot first (the oldest among equal
 * ones), and the caller collects slots in the order it submitted them with
 * ptwm_queue_wait, which runs queued tasks itself while it waits (so the
 * caller is worker 0 and `threads` counts it). This keeps every thread busy
 * across tensor and window boundaries while output stays in input order.
 * One caller thread; slot states are the caller's bookkeeping plus ours. */
typedef struct ptwm_queue ptwm_queue;

ptwm_error ptwm_queue_create(int threads, size_t nslots, ptwm_task_fn fn, void *ctx,
                             ptwm_queue **out, ptwm_err *err);
/* Waits for every submitted slot, then stops the threads. NULL is fine. */
void ptwm_queue_free(ptwm_queue *q);
unsigned ptwm_queue_size(const ptwm_queue *q);
void ptwm_queue_submit(ptwm_queue *q, size_t slot, uint64_t weight);
/* Return once `slot` (submitted earlier) has run; the slot is free again. */
void ptwm_queue_wait(ptwm_queue *q, size_t slot);
/* Run one submitted task that no thread has taken yet, on the calling
 * thread as worker 0: slot `want` if it waits to run, or with want SIZE_MAX
 * the heaviest waiting; 0 if none ran. For a caller that waits on
 * something else than a slot, or runs tasks ahead in its own order. */
int ptwm_queue_help(ptwm_queue *q, size_t want);
/* The caller submits nothing more for now (it is finishing): helpers that
 * find no task go back to the park at once instead of polling and then
 * sleeping on the queue (near the end of a short call the polling was CPU
 * time and nothing else). A later submit lends them again. */
void ptwm_queue_rest(ptwm_queue *q);

/* One step of a polling loop: tells the core that this thread spins. */
static inline void ptwm_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The thread count a `threads` parameter means (0 or less: all cores). */
unsigned ptwm_threads_resolve(int threads);

#endif
