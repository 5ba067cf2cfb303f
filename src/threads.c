/* Thread pool with parallel-for; see threads.h.
 *
 * One mutex guards everything: tasks are chunks of a megabyte or so that
 * take milliseconds, so a lock per claimed task costs nothing measurable and
 * keeps the pool easy to reason about. A run bumps `gen`; idle workers wait
 * for a generation they have not seen. A worker that wakes after the run has
 * ended finds no task left and goes back to sleep without touching fn/ctx. */
#include "threads.h"
#include "fileio.h"

#include <pthread.h>
#include <stdlib.h>

#define PTWM_POOL_MAX 256

typedef struct pool_worker {
    void *owner;          /* the ptwm_pool or ptwm_queue */
    unsigned id;
} pool_worker;

struct ptwm_pool {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    pthread_t *th;
    pool_worker *w;
    unsigned size;        /* workers including the caller */
    unsigned started;     /* threads actually created */
    unsigned long gen;
    int quit;
    ptwm_task_fn fn;
    void *ctx;
    size_t ntasks, next;
    unsigned active;
};

unsigned ptwm_threads_resolve(int threads) {
    unsigned n = threads > 0 ? (unsigned)threads : (unsigned)ptwm_cpu_count();
    if (n < 1) n = 1;
    if (n > PTWM_POOL_MAX) n = PTWM_POOL_MAX;
    return n;
}

/* Claim and run tasks until none is left; called with mu held, returns with it held. */
static void pool_drain(ptwm_pool *p, unsigned id) {
    while (p->next < p->ntasks) {
        size_t t = p->next++;
        ptwm_task_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, t, id);
        pthread_mutex_lock(&p->mu);
    }
}

static void *pool_main(void *arg) {
    pool_worker *w = (pool_worker *)arg;
    ptwm_pool *p = (ptwm_pool *)w->owner;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) break;
        seen = p->gen;
        p->active++;
        pool_drain(p, w->id);
        if (--p->active == 0) pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ptwm_error ptwm_pool_create(int threads, ptwm_pool **out, ptwm_err *err) {
    ptwm_pool *p;
    unsigned i, n = ptwm_threads_resolve(threads);
    *out = NULL;
    p = (ptwm_pool *)calloc(1, sizeof(*p));
    if (!p) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a thread pool");
    p->size = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n > 1) {
        p->th = (pthread_t *)calloc(n - 1, sizeof(pthread_t));
        p->w = (pool_worker *)calloc(n - 1, sizeof(pool_worker));
        if (!p->th || !p->w) {
            ptwm_pool_free(p);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %u threads", n);
        }
        for (i = 0; i + 1 < n; i++) {
            p->w[i].owner = p;
            p->w[i].id = i + 1;
            if (pthread_create(&p->th[i], NULL, pool_main, &p->w[i]) != 0) break;
            p->started++;
        }
        /* Fewer threads than asked still gives the same results, only slower. */
        p->size = p->started + 1;
    }
    *out = p;
    return PTWM_OK;
}

void ptwm_pool_free(ptwm_pool *p) {
    unsigned i;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (i = 0; i < p->started; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->th);
    free(p->w);
    free(p);
}

unsigned ptwm_pool_size(const ptwm_pool *p) {
    return p ? p->size : 1;
}

void ptwm_pool_run(ptwm_pool *p, size_t ntasks, ptwm_task_fn fn, void *ctx) {
    if (ntasks == 0) return;
    if (p->started == 0 || ntasks == 1) {
        size_t i;
        for (i = 0; i < ntasks; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->ntasks = ntasks;
    p->next = 0;
    p->gen++;
    pthread_cond_broadcast(&p->start);
    pool_drain(p, 0);
    while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- ordered queue ------------------------------------------------------- */

enum { SLOT_FREE = 0, SLOT_READY = 1, SLOT_RUNNING = 2, SLOT_DONE = 3 };

struct ptwm_queue {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t *th;
    pool_worker *w;
    unsigned size, started;
    int quit;
    ptwm_task_fn fn;
    void *ctx;
    size_t nslots;
    uint8_t *state;
    uint64_t *weight;         /* of each slot, as submitted */
    size_t *ready;            /* the ready slots, in no order */
    size_t count;
};

/* Run slot `want` if it is ready, else the heaviest ready slot (the first
 * submitted of equal ones); called and returns with mu held. The caller,
 * waiting for the oldest slot, runs that one itself and keeps the ring
 * moving; the other threads take the heaviest first, so the last tasks of a
 * run are the small ones and no thread waits long on another's big task at
 * the end (longest-processing-time order). */
static void queue_run_one(ptwm_queue *q, unsigned id, size_t want) {
    size_t i, best = 0, s;
    for (i = 0; i < q->count; i++) {
        if (q->ready[i] == want) {
            best = i;
            break;
        }
        if (q->weight[q->ready[i]] > q->weight[q->ready[best]]) best = i;
    }
    s = q->ready[best];
    /* keep submission order among the rest: equal weights go oldest first */
    memmove(q->ready + best, q->ready + best + 1, (q->count - best - 1) * sizeof(size_t));
    q->count--;
    q->state[s] = SLOT_RUNNING;
    pthread_mutex_unlock(&q->mu);
    q->fn(q->ctx, s, id);
    pthread_mutex_lock(&q->mu);
    q->state[s] = SLOT_DONE;
    pthread_cond_broadcast(&q->done);
}

static void *queue_main(void *arg) {
    pool_worker *w = (pool_worker *)arg;
    ptwm_queue *q = (ptwm_queue *)w->owner;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->count && !q->quit) pthread_cond_wait(&q->work, &q->mu);
        if (q->count) queue_run_one(q, w->id, SIZE_MAX);
        else if (q->quit) break;
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

ptwm_error ptwm_queue_create(int threads, size_t nslots, ptwm_task_fn fn, void *ctx,
                             ptwm_queue **out, ptwm_err *err) {
    ptwm_queue *q;
    unsigned i, n = ptwm_threads_resolve(threads);
    *out = NULL;
    q = (ptwm_queue *)calloc(1, sizeof(*q));
    if (!q) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a work queue");
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    q->fn = fn;
    q->ctx = ctx;
    q->nslots = nslots ? nslots : 1;
    q->size = 1;
    q->state = (uint8_t *)calloc(q->nslots, 1);
    q->weight = (uint64_t *)calloc(q->nslots, sizeof(uint64_t));
    q->ready = (size_t *)calloc(q->nslots, sizeof(size_t));
    if (n > 1) {
        q->th = (pthread_t *)calloc(n - 1, sizeof(pthread_t));
        q->w = (pool_worker *)calloc(n - 1, sizeof(pool_worker));
    }
    if (!q->state || !q->weight || !q->ready || (n > 1 && (!q->th || !q->w))) {
        ptwm_queue_free(q);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a work queue");
    }
    for (i = 0; i + 1 < n; i++) {
        q->w[i].owner = q;
        q->w[i].id = i + 1;
        if (pthread_create(&q->th[i], NULL, queue_main, &q->w[i]) != 0) break;
        q->started++;
    }
    q->size = q->started + 1;
    *out = q;
    return PTWM_OK;
}

unsigned ptwm_queue_size(const ptwm_queue *q) {
    return q ? q->size : 1;
}

void ptwm_queue_submit(ptwm_queue *q, size_t slot, uint64_t weight) {
    pthread_mutex_lock(&q->mu);
    q->state[slot] = SLOT_READY;
    q->weight[slot] = weight;
    q->ready[q->count++] = slot;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->mu);
}

void ptwm_queue_wait(ptwm_queue *q, size_t slot) {
    pthread_mutex_lock(&q->mu);
    while (q->state[slot] != SLOT_DONE) {
        if (q->count) queue_run_one(q, 0, slot);
        else if (q->state[slot] != SLOT_DONE) pthread_cond_wait(&q->done, &q->mu);
    }
    q->state[slot] = SLOT_FREE;
    pthread_mutex_unlock(&q->mu);
}

void ptwm_queue_free(ptwm_queue *q) {
    size_t s;
    unsigned i;
    if (!q) return;
    if (q->state)
        for (s = 0; s < q->nslots; s++)
            if (q->state[s] != SLOT_FREE) ptwm_queue_wait(q, s);
    pthread_mutex_lock(&q->mu);
    q->quit = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
    for (i = 0; i < q->started; i++) pthread_join(q->th[i], NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    free(q->th);
    free(q->w);
    free(q->state);
    free(q->weight);
    free(q->ready);
    free(q);
}
