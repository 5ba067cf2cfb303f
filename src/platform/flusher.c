/* A flusher (see flusher.h). */
#include "flusher.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

struct ptwm_flusher {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int fd;
    const char *path;
    uint64_t added, flushed;   /* bytes written; bytes the last flush started covers */
    int stop;
    ptwm_error rc;
    ptwm_err err;
};

/* As the commit's fsync: file systems that cannot sync say EINVAL or EROFS. */
static int flush_fd(int fd) {
#if defined(_POSIX_SYNCHRONIZED_IO) && _POSIX_SYNCHRONIZED_IO > 0
    int r = fdatasync(fd);
#else
    int r = fsync(fd);
#endif
    return r == 0 || errno == EINVAL || errno == EROFS ? 0 : -1;
}

static uint64_t g_flushes; /* atomic: every flusher's, for tests */

uint64_t ptwm_flusher_flushes(void) {
    return __atomic_load_n(&g_flushes, __ATOMIC_RELAXED);
}

/* A flush asked for (a step's bytes since the last) runs even when the stop
 * comes first: the commit's fsync then finds it done. */
static void *flusher_main(void *arg) {
    ptwm_flusher *f = (ptwm_flusher *)arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        if (f->added - f->flushed < PTWM_FLUSH_STEP || f->rc) {
            if (f->stop) break;
            pthread_cond_wait(&f->wake, &f->mu);
            continue;
        }
        f->flushed = f->added;
        pthread_mutex_unlock(&f->mu);
        if (flush_fd(f->fd) != 0) {
            int e = errno;
            pthread_mutex_lock(&f->mu);
            f->rc = ptwm_fail(&f->err, PTWM_ERR_IO, "%s: fdatasync: %s", f->path, strerror(e));
            continue;
        }
        __atomic_add_fetch(&g_flushes, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

void ptwm_flusher_start(int fd, const char *path, uint64_t done, ptwm_flusher **out) {
    ptwm_flusher *f = (ptwm_flusher *)ptwm_calloc(1, sizeof(*f));
    *out = NULL;
    if (!f) return;
    f->fd = fd;
    f->path = path;
    f->added = done;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->wake, NULL);
    if (pthread_create(&f->thread, NULL, flusher_main, f)) {
        pthread_cond_destroy(&f->wake);
        pthread_mutex_destroy(&f->mu);
        ptwm_free(f);
        return;
    }
    *out = f;
}

void ptwm_flusher_add(ptwm_flusher *f, uint64_t n) {
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->added += n;
    if (f->added - f->flushed >= PTWM_FLUSH_STEP) pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->mu);
}

ptwm_error ptwm_flusher_stop(ptwm_flusher *f, ptwm_err *err) {
    ptwm_error rc;
    if (!f) return PTWM_OK;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    rc = f->rc;
    if (rc && err) *err = f->err;
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->mu);
    ptwm_free(f);
    return rc;
}
