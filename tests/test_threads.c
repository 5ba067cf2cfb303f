/* Thread pool and ordered queue: every task runs exactly once, results come
 * back in submission order, helper threads are reused from one pool or
 * queue to the next, and a forked child (which has none of the parent's
 * parked helpers) still gets its work done. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "threads.h"

/* ThreadSanitizer stops a multi-threaded process's child from starting
 * threads unless told otherwise; the fork test is about exactly that. */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifdef TEST_TSAN
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }
#endif

#define SLOTS 8
#define JOBS 300

typedef struct qstate {
    atomic_int runs[SLOTS];
    size_t job_of[SLOTS];   /* the job each slot holds (written by the caller) */
    size_t result[SLOTS];   /* job * 3 + 1, written by the task */
    atomic_int max_worker;
} qstate;

static void q_task(void *ctx, size_t slot, unsigned worker) {
    qstate *s = (qstate *)ctx;
    int w = (int)worker, m = atomic_load(&s->max_worker);
    atomic_fetch_add(&s->runs[slot], 1);
    s->result[slot] = s->job_of[slot] * 3 + 1;
    while (w > m && !atomic_compare_exchange_weak(&s->max_worker, &m, w)) {
    }
}

/* JOBS jobs through a ring of SLOTS, collected in order; 0 if all held. */
static int run_queue(int threads) {
    qstate s;
    ptwm_queue *q;
    ptwm_err err;
    size_t next = 0, done = 0, k;
    int bad = 0;
    memset(&s, 0, sizeof(s));
    if (ptwm_queue_create(threads, SLOTS, q_task, &s, &q, &err) != PTWM_OK) return 1;
    while (done < JOBS) {
        while (next < JOBS && next - done < SLOTS) {
            size_t slot = next % SLOTS;
            s.job_of[slot] = next;
            atomic_store(&s.runs[slot], 0);
            ptwm_queue_submit(q, slot, (uint64_t)(next % 5 + 1));
            next++;
        }
        k = done % SLOTS;
        ptwm_queue_wait(q, k);
        if (atomic_load(&s.runs[k]) != 1 || s.result[k] != done * 3 + 1) bad = 1;
        done++;
    }
    if ((unsigned)atomic_load(&s.max_worker) >= ptwm_queue_size(q)) bad = 1;
    ptwm_queue_free(q);
    return bad;
}

typedef struct pstate {
    atomic_int hits[JOBS];
} pstate;

static void p_task(void *ctx, size_t i, unsigned worker) {
    (void)worker;
    atomic_fetch_add(&((pstate *)ctx)->hits[i], 1);
}

static int run_pool(int threads) {
    static pstate s;
    ptwm_pool *p;
    ptwm_err err;
    size_t i;
    int r, bad = 0;
    if (ptwm_pool_create(threads, &p, &err) != PTWM_OK) return 1;
    for (r = 0; r < 3; r++) {
        for (i = 0; i < JOBS; i++) atomic_store(&s.hits[i], 0);
        ptwm_pool_run(p, JOBS, p_task, &s);
        for (i = 0; i < JOBS; i++) bad |= atomic_load(&s.hits[i]) != 1;
    }
    ptwm_pool_free(p);
    return bad;
}

static void test_queue_and_pool(void) {
    int r, t;
    for (r = 0; r < 40; r++)
        for (t = 1; t <= 4; t++) {
            CHECK_MSG(run_queue(t) == 0, "queue round %d, %d threads: a task ran twice, not at "
                                         "all, or out of order", r, t);
            CHECK_MSG(run_pool(t) == 0, "pool round %d, %d threads: a task ran twice or not at all",
                      r, t);
        }
}

/* Helpers are parked in the parent now; the child must not wait for them. */
static void test_fork(void) {
    pid_t pid;
    int status = 0;
    CHECK(run_queue(3) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(20); /* a hang becomes a failure, not a stuck test run */
        _exit(run_queue(3) || run_pool(3) ? 1 : 0);
    }
    if (pid > 0) {
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "forked child: queue or pool failed (status 0x%x)", status);
    }
}

/* ptwm_queue_help on one thread: runs the slot asked for only while it
 * waits to run, else the heaviest waiting slot when asked for none; a slot
 * it ran is then waited for without running again. */
static void test_help(void) {
    qstate s;
    ptwm_queue *q;
    ptwm_err err;
    size_t k;
    memset(&s, 0, sizeof(s));
    CHECK(ptwm_queue_create(1, SLOTS, q_task, &s, &q, &err) == PTWM_OK);
    for (k = 0; k < 4; k++) {
        s.job_of[k] = k;
        ptwm_queue_submit(q, k, k == 2 ? 9 : 1);
    }
    CHECK(ptwm_queue_help(q, 1) == 1);
    CHECK(atomic_load(&s.runs[1]) == 1 && atomic_load(&s.runs[0]) == 0);
    CHECK(ptwm_queue_help(q, 1) == 0);    /* ran already */
    CHECK(ptwm_queue_help(q, 5) == 0);    /* never submitted */
    CHECK(ptwm_queue_help(q, SLOTS + 3) == 0); /* no such slot */
    CHECK(ptwm_queue_help(q, SIZE_MAX) == 1);
    CHECK(atomic_load(&s.runs[2]) == 1 && atomic_load(&s.runs[0]) == 0 && atomic_load(&s.runs[3]) == 0);
    for (k = 0; k < 4; k++) {
        ptwm_queue_wait(q, k);
        CHECK(atomic_load(&s.runs[k]) == 1 && s.result[k] == k * 3 + 1);
    }
    CHECK(ptwm_queue_help(q, SIZE_MAX) == 0);
    ptwm_queue_free(q);
}

/* ptwm_queue_rest sends the helpers back to the park; a later submit must
 * lend them again. Slot 0's task waits (up to 5 s) until a task has run on
 * another worker, which only a helper can do while the caller runs slot 0:
 * with no helper lent, the wait ends with none. */
typedef struct rstate {
    atomic_int runs[2];
    atomic_int helper_ran;
} rstate;

static void r_task(void *ctx, size_t slot, unsigned worker) {
    rstate *s = (rstate *)ctx;
    int k;
    atomic_fetch_add(&s->runs[slot], 1);
    if (worker) atomic_store(&s->helper_ran, 1);
    for (k = 0; slot == 0 && k < 5000 && !atomic_load(&s->helper_ran); k++) usleep(1000);
}

static void test_rest(void) {
    int threads, round;
    for (threads = 2; threads <= 3; threads++) {
        rstate s;
        ptwm_queue *q;
        ptwm_err err;
        CHECK(ptwm_queue_create(threads, 2, r_task, &s, &q, &err) == PTWM_OK);
        for (round = 0; round < 3; round++) {
            memset(&s, 0, sizeof(s));
            ptwm_queue_submit(q, 0, 1);
            ptwm_queue_submit(q, 1, 9); /* the heavier: a helper's first pick */
            ptwm_queue_wait(q, 0);
            ptwm_queue_wait(q, 1);
            CHECK_MSG(atomic_load(&s.helper_ran), "%d threads, round %d: no helper ran a task",
                      threads, round);
            CHECK(atomic_load(&s.runs[0]) == 1 && atomic_load(&s.runs[1]) == 1);
            ptwm_queue_rest(q);
            usleep(20000); /* time for the helpers to leave */
        }
        ptwm_queue_free(q);
    }
}

int main(void) {
    test_help();
    test_rest();
    test_queue_and_pool();
    test_fork();
    return tu_finish("test_threads");
}
