/* Thread pool with parallel-for, and an ordered work queue; see threads.h.
 *
 * One mutex guards everything: tasks are chunks of a megabyte or so that
 * take milliseconds, so a lock per claimed task costs nothing measurable and
 * keeps the pool easy to reason about. A run bumps `gen`; idle workers wait
 * for a generation they have not seen. A worker that wakes after the run has
 * ended finds no task left and goes back to sleep without touching fn/ctx.
 *
 * Threads are lent, not created, per pool or queue: a helper thread that
 * has served one parks and serves the next, and exits after HELPER_IDLE_MS
 * with nothing to do. This park is the one process-wide state of the
 * library; it ends cleanly at exit or dlclose (park_close). Creating a
 * thread per call (its stack faulted in afresh) kept the second core idle
 * at the start of every call (docs/ARCHITECTURE.md, "Threads"). */
#include "threads.h"
#include "fileio.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define HELPER_IDLE_MS 2000

/* ---- helper threads ------------------------------------------------------- */

/* Every helper is joinable and is joined by the library: a helper is busy
 * (running a task), parked (waiting for one, in `parked`), or ended (in
 * `ended`, waiting to be joined by the next lend or by park_close). No
 * library code runs on a helper once park_close returns. */
typedef struct helper {
    pthread_t th;
    pthread_cond_t wake;
    void *(*fn)(void *);
    void *arg;                /* NULL fn: not busy */
    struct helper *next;      /* in `parked` or `ended` */
} helper;

static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_idle = PTHREAD_COND_INITIALIZER; /* a busy helper finished */
static helper *parked, *ended;
static unsigned nbusy;
static int park_closing;      /* the library is being unloaded or the process ends */
static pthread_once_t park_once = PTHREAD_ONCE_INIT;

/* A forked child has none of the parent's threads: it starts afresh. */
static void park_after_fork(void) {
    pthread_mutex_init(&park_mu, NULL);
    pthread_cond_init(&park_idle, NULL);
    parked = ended = NULL;
    nbusy = 0;
}

static void park_init(void) { pthread_atfork(NULL, NULL, park_after_fork); }

/* Join and free a list of ended helpers (park_mu not held). */
static void join_ended(helper *h) {
    helper *next;
    for (; h; h = next) {
        next = h->next;
        pthread_join(h->th, NULL);
        pthread_cond_destroy(&h->wake);
        ptwm_free(h);
    }
}

/* At exit or dlclose every helper is stopped and joined: a helper waking
 * from its idle wait after the library's code is unmapped would crash the
 * process. A busy helper is waited for. The helpers hold no memory of the
 * codec (workspaces belong to writers and readers), so nothing else needs
 * tearing down and no destructor order matters. */
__attribute__((destructor)) static void park_close(void) {
    helper *h;
    pthread_mutex_lock(&park_mu);
    park_closing = 1;
    for (h = parked; h; h = h->next) pthread_cond_signal(&h->wake);
    while (nbusy || parked) pthread_cond_wait(&park_idle, &park_mu);
    h = ended;
    ended = NULL;
    pthread_mutex_unlock(&park_mu);
    join_ended(h);
}

/* Move h from `parked` to `ended` (park_mu held). */
static void park_end(helper *h) {
    helper **pp = &parked;
    while (*pp != h) pp = &(*pp)->next;
    *pp = h->next;
    h->next = ended;
    ended = h;
}

static void *helper_main(void *arg) {
    helper *h = (helper *)arg;
    pthread_mutex_lock(&park_mu);
    for (;;) {
        void *(*fn)(void *) = h->fn;
        void *fa = h->arg;
        if (fn) {
            pthread_mutex_unlock(&park_mu);
            fn(fa);
            pthread_mutex_lock(&park_mu);
            h->fn = NULL;
            nbusy--;
            h->next = parked;
            parked = h;
            if (park_closing) pthread_cond_broadcast(&park_idle);
            continue;
        }
        if (park_closing) break;
        {
            struct timespec until;
            int rc = 0;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += HELPER_IDLE_MS / 1000;
            until.tv_nsec += (long)(HELPER_IDLE_MS % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            while (!h->fn && rc != ETIMEDOUT && !park_closing)
                rc = pthread_cond_timedwait(&h->wake, &park_mu, &until);
            if (!h->fn && !park_closing) break; /* idle too long */
        }
    }
    /* Ended: joined by the next lend, or by park_close. */
    park_end(h);
    if (park_closing) pthread_cond_broadcast(&park_idle);
    pthread_mutex_unlock(&park_mu);
    return NULL;
}

/* Run fn(arg) on a parked helper, or a new one; 0 on success. The caller
 * learns that fn returned through its own state (fn signals it last). */
static int helper_lend(void *(*fn)(void *), void *arg) {
    helper *h, *done;
    int ok;
    pthread_once(&park_once, park_init);
    pthread_mutex_lock(&park_mu);
    done = ended;
    ended = NULL;
    h = parked;
    if (h) {
        parked = h->next;
        h->fn = fn;
        h->arg = arg;
        nbusy++;
        pthread_cond_signal(&h->wake);
    }
    pthread_mutex_unlock(&park_mu);
    join_ended(done);
    if (h) return 0;
    h = (helper *)ptwm_calloc(1, sizeof(*h));
    if (!h) return -1;
    pthread_cond_init(&h->wake, NULL);
    h->fn = fn;
    h->arg = arg;
    /* h->th is written under park_mu before the helper can read it (it
     * takes park_mu first). */
    pthread_mutex_lock(&park_mu);
    ok = pthread_create(&h->th, NULL, helper_main, h) == 0;
    if (ok) nbusy++;
    pthread_mutex_unlock(&park_mu);
    if (!ok) {
        pthread_cond_destroy(&h->wake);
        ptwm_free(h);
        return -1;
    }
    return 0;
}

typedef struct pool_worker {
    void *owner;          /* the ptwm_pool or ptwm_queue */
    unsigned id;
    int in;               /* a helper runs it (under the owner's mutex) */
} pool_worker;

/* Lend helpers running fn(&w[k]) as workers 1..n of `owner`, each counted
 * in *live (under mu) before it can run, so the owner can wait for them to
 * return; returns how many were lent (fewer threads than asked still give
 * the same results, only slower). */
static unsigned lend_workers(pthread_mutex_t *mu, unsigned *live, pool_worker *w, unsigned n,
                             void *owner, void *(*fn)(void *)) {
    unsigned k;
    for (k = 0; k < n; k++) {
        int lent;
        w[k].owner = owner;
        w[k].id = k + 1;
        pthread_mutex_lock(mu);
        (*live)++;
        w[k].in = 1;
        pthread_mutex_unlock(mu);
        lent = helper_lend(fn, &w[k]) == 0;
        if (!lent) {
            pthread_mutex_lock(mu);
            (*live)--;
            w[k].in = 0;
            pthread_mutex_unlock(mu);
            break;
        }
    }
    return k;
}

struct ptwm_pool {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    pool_worker *w;
    unsigned size;        /* workers including the caller */
    unsigned started;     /* helpers actually lent */
    unsigned live;        /* helpers not yet returned */
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
    /* The last touch of the pool: ptwm_pool_free may free it once live is
     * 0 and the mutex is released. */
    if (--p->live == 0) pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ptwm_error ptwm_pool_create(int threads, ptwm_pool **out, ptwm_err *err) {
    ptwm_pool *p;
    unsigned n = ptwm_threads_resolve(threads);
    *out = NULL;
    p = (ptwm_pool *)ptwm_calloc(1, sizeof(*p));
    if (!p) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a thread pool");
    p->size = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n > 1) {
        p->w = (pool_worker *)ptwm_calloc(n - 1, sizeof(pool_worker));
        if (!p->w) {
            ptwm_pool_free(p);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %u threads", n);
        }
        p->started = lend_workers(&p->mu, &p->live, p->w, n - 1, p, pool_main);
        /* Fewer threads than asked still gives the same results, only slower. */
        p->size = p->started + 1;
    }
    *out = p;
    return PTWM_OK;
}

void ptwm_pool_free(ptwm_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    while (p->live > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    ptwm_free(p->w);
    ptwm_free(p);
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

/* Fields a waiter polls without the mutex (spin) are written atomically,
 * still under the mutex. */
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

/* Before sleeping on a condition variable, a waiter polls for up to SPIN_NS:
 * on a virtual machine a sleeping thread took up to several milliseconds
 * to wake after a signal (docs/ARCHITECTURE.md, "Threads"), while the ring
 * usually refills within tens of microseconds. Returns early once *count is
 * nonzero, *state (if given) equals `want`, or *quit (if given) is set. */
#define SPIN_NS 200000L
static void spin(const size_t *count, const uint8_t *state, uint8_t want, const int *quit) {
    struct timespec t0, t;
    unsigned k;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (k = 1;; k++) {
        if (GET(*count) || (state && GET(*state) == want) || (quit && GET(*quit))) return;
        ptwm_spin_pause();
        if ((k & 63) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > SPIN_NS) return;
        }
    }
}

struct ptwm_queue {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pool_worker *w;
    unsigned size, started;
    unsigned live;            /* helpers not yet returned */
    int spin;                 /* poll before sleeping: no more threads than cores */
    unsigned sleepers;        /* callers asleep on `done` waiting for a slot */
    int rest;                 /* no task is coming soon: a helper with none to run
                               * leaves for the park (set by ptwm_queue_rest and free,
                               * cleared by a submit) */
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
    SET(q->count, q->count - 1);
    SET(q->state[s], SLOT_RUNNING);
    pthread_mutex_unlock(&q->mu);
    q->fn(q->ctx, s, id);
    pthread_mutex_lock(&q->mu);
    SET(q->state[s], SLOT_DONE);
    if (q->sleepers) {
        /* Woken while we held mu, the caller ran on this core and went
         * straight back to sleep on it: wake it once mu is free (it checks
         * the state under mu before it sleeps, so none is lost). */
        pthread_mutex_unlock(&q->mu);
        pthread_cond_broadcast(&q->done);
        pthread_mutex_lock(&q->mu);
    }
}

static void *queue_main(void *arg) {
    pool_worker *w = (pool_worker *)arg;
    ptwm_queue *q = (ptwm_queue *)w->owner;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (!q->count && !q->quit && !q->rest) {
            pthread_mutex_unlock(&q->mu);
            if (q->spin) spin(&q->count, NULL, 0, &q->rest);
            pthread_mutex_lock(&q->mu);
        }
        while (!q->count && !q->quit && !q->rest) pthread_cond_wait(&q->work, &q->mu);
        if (q->count) queue_run_one(q, w->id, SIZE_MAX);
        else break;
    }
    /* The last touch of the queue (see pool_main); at rest the helper goes
     * back to the park, and a later submit lends one again. */
    w->in = 0;
    if (--q->live == 0) pthread_cond_broadcast(&q->done);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

ptwm_error ptwm_queue_create(int threads, size_t nslots, ptwm_task_fn fn, void *ctx,
                             ptwm_queue **out, ptwm_err *err) {
    ptwm_queue *q;
    unsigned n = ptwm_threads_resolve(threads);
    *out = NULL;
    q = (ptwm_queue *)ptwm_calloc(1, sizeof(*q));
    if (!q) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a work queue");
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    q->fn = fn;
    q->ctx = ctx;
    q->nslots = nslots ? nslots : 1;
    q->size = 1;
    q->state = (uint8_t *)ptwm_calloc(q->nslots, 1);
    q->weight = (uint64_t *)ptwm_calloc(q->nslots, sizeof(uint64_t));
    q->ready = (size_t *)ptwm_calloc(q->nslots, sizeof(size_t));
    if (n > 1) q->w = (pool_worker *)ptwm_calloc(n - 1, sizeof(pool_worker));
    if (!q->state || !q->weight || !q->ready || (n > 1 && !q->w)) {
        ptwm_queue_free(q);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a work queue");
    }
    /* Polling threads would take time from working ones on a shared core. */
    q->spin = n <= (unsigned)ptwm_cpu_count();
    if (n > 1) q->started = lend_workers(&q->mu, &q->live, q->w, n - 1, q, queue_main);
    q->size = q->started + 1;
    *out = q;
    return PTWM_OK;
}

unsigned ptwm_queue_size(const ptwm_queue *q) {
    return q ? q->size : 1;
}

/* Lend a helper again to each worker whose helper left at rest. */
static void queue_relend(ptwm_queue *q) {
    unsigned k;
    for (k = 0; k < q->started; k++) {
        int out;
        pthread_mutex_lock(&q->mu);
        out = !q->w[k].in && !q->quit;
        if (out) {
            q->w[k].in = 1;
            q->live++;
        }
        pthread_mutex_unlock(&q->mu);
        if (out && helper_lend(queue_main, &q->w[k]) != 0) {
            /* (fewer threads still give the same results, only slower) */
            pthread_mutex_lock(&q->mu);
            q->w[k].in = 0;
            if (--q->live == 0) pthread_cond_broadcast(&q->done);
            pthread_mutex_unlock(&q->mu);
        }
    }
}

void ptwm_queue_submit(ptwm_queue *q, size_t slot, uint64_t weight) {
    int relend;
    pthread_mutex_lock(&q->mu);
    SET(q->state[slot], SLOT_READY);
    SET(q->rest, 0);
    q->weight[slot] = weight;
    q->ready[q->count] = slot;
    SET(q->count, q->count + 1);
    relend = q->live < q->started;
    pthread_mutex_unlock(&q->mu);
    /* (signalled with mu free: a woken helper that preempts this thread
     * does not then wait for mu) */
    pthread_cond_signal(&q->work);
    if (relend) queue_relend(q);
}

void ptwm_queue_wait(ptwm_queue *q, size_t slot) {
    pthread_mutex_lock(&q->mu);
    while (q->state[slot] != SLOT_DONE) {
        if (q->count) {
            queue_run_one(q, 0, slot);
        } else {
            pthread_mutex_unlock(&q->mu);
            if (q->spin) spin(&q->count, &q->state[slot], SLOT_DONE, NULL);
            pthread_mutex_lock(&q->mu);
            if (!q->count && q->state[slot] != SLOT_DONE) {
                q->sleepers++;
                pthread_cond_wait(&q->done, &q->mu);
                q->sleepers--;
            }
        }
    }
    SET(q->state[slot], SLOT_FREE);
    pthread_mutex_unlock(&q->mu);
}

int ptwm_queue_help(ptwm_queue *q, size_t want) {
    int ran = 0;
    if (!GET(q->count)) return 0;
    pthread_mutex_lock(&q->mu);
    if (q->count && (want == SIZE_MAX || (want < q->nslots && q->state[want] == SLOT_READY))) {
        queue_run_one(q, 0, want);
        ran = 1;
    }
    pthread_mutex_unlock(&q->mu);
    return ran;
}

void ptwm_queue_rest(ptwm_queue *q) {
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    SET(q->rest, 1);
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
}

void ptwm_queue_free(ptwm_queue *q) {
    size_t s;
    if (!q) return;
    if (q->state)
        for (s = 0; s < q->nslots; s++)
            if (q->state[s] != SLOT_FREE) ptwm_queue_wait(q, s);
    pthread_mutex_lock(&q->mu);
    SET(q->rest, 1);
    SET(q->quit, 1);
    pthread_cond_broadcast(&q->work);
    while (q->live > 0) pthread_cond_wait(&q->done, &q->mu);
    pthread_mutex_unlock(&q->mu);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    ptwm_free(q->w);
    ptwm_free(q->state);
    ptwm_free(q->weight);
    ptwm_free(q->ready);
    ptwm_free(q);
}
