/* A writing thread (see iothread.h). */
#include <pthread.h>
#include "iothread.h"

typedef struct ioreq {
    struct ioreq *next;
    int fd;
    const char *path;
    size_t n;
    void *bufs[PTWM_WRITEV_MAX];
    size_t lens[PTWM_WRITEV_MAX];
    uint64_t off;
    ptwm_io_done_fn done;
    void *arg;
} ioreq;

struct ptwm_io {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, idle;   /* a write was queued; a write is done */
    ioreq *head, *tail;
    int stop;
};

/* Take the oldest queued write and run it; called and returns with mu held. */
static void run_one(ptwm_io *io) {
    ioreq *r = io->head;
    ptwm_error rc;
    ptwm_err e;
    io->head = r->next;
    if (!r->next) io->tail = NULL;
    pthread_mutex_unlock(&io->mu);
    rc = ptwm_pwritev_full(r->fd, r->bufs, r->lens, r->n, r->off, r->path, &e);
    r->done(r->arg, rc, rc ? &e : NULL);
    ptwm_free(r);
    /* A waiter looks at its flag under mu before it sleeps: it is asleep,
     * or sees the flag clear, by the time mu is ours. */
    pthread_mutex_lock(&io->mu);
    pthread_cond_broadcast(&io->idle);
}

static void *io_main(void *arg) {
    ptwm_io *io = (ptwm_io *)arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        if (io->head) {
            run_one(io);
        } else if (io->stop) {
            break;
        } else {
            pthread_cond_wait(&io->work, &io->mu);
        }
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

ptwm_error ptwm_io_start(ptwm_io **out, ptwm_err *err) {
    ptwm_io *io = (ptwm_io *)ptwm_calloc(1, sizeof(*io));
    *out = NULL;
    if (!io) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a writing thread");
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->work, NULL);
    pthread_cond_init(&io->idle, NULL);
    if (pthread_create(&io->thread, NULL, io_main, io)) {
        pthread_cond_destroy(&io->idle);
        pthread_cond_destroy(&io->work);
        pthread_mutex_destroy(&io->mu);
        ptwm_free(io);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "cannot start a writing thread");
    }
    *out = io;
    return PTWM_OK;
}

ptwm_error ptwm_io_put(ptwm_io *io, int fd, const char *path, void *const *bufs,
                       const size_t *lens, size_t n, uint64_t off, ptwm_io_done_fn done, void *arg,
                       ptwm_err *err) {
    ioreq *r;
    if (n > PTWM_WRITEV_MAX)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: %zu pieces in one write (max %d)",
                         path ? path : "(file)", n, PTWM_WRITEV_MAX);
    if (!(r = (ioreq *)ptwm_malloc(sizeof(*r))))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a write request");
    r->next = NULL;
    r->fd = fd;
    r->path = path;
    r->n = n;
    memcpy(r->bufs, bufs, n * sizeof(bufs[0]));
    memcpy(r->lens, lens, n * sizeof(lens[0]));
    r->off = off;
    r->done = done;
    r->arg = arg;
    pthread_mutex_lock(&io->mu);
    if (io->tail) io->tail->next = r;
    else io->head = r;
    io->tail = r;
    pthread_mutex_unlock(&io->mu);
    /* (with mu free: the writing thread, woken, may run on this core at
     * once, and would otherwise wait for mu while this thread waits to
     * run) */
    pthread_cond_signal(&io->work);
    return PTWM_OK;
}

void ptwm_io_wait(ptwm_io *io, const int *flag) {
    pthread_mutex_lock(&io->mu);
    /* A writing thread that has not got to them (its core is busy with
     * other work) leaves the queued writes to the waiter. */
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
        if (io->head) run_one(io);
        else pthread_cond_wait(&io->idle, &io->mu);
    }
    pthread_mutex_unlock(&io->mu);
}

void ptwm_io_stop(ptwm_io *io) {
    if (!io) return;
    pthread_mutex_lock(&io->mu);
    io->stop = 1;
    pthread_cond_signal(&io->work);
    pthread_mutex_unlock(&io->mu);
    pthread_join(io->thread, NULL);
    pthread_cond_destroy(&io->idle);
    pthread_cond_destroy(&io->work);
    pthread_mutex_destroy(&io->mu);
    ptwm_free(io);
}
