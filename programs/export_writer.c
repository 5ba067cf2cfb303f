/* ptwm export's writer thread (export_writer.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export_writer.h"

/* Start writeback after every this many bytes, without waiting: the fsync of
 * the commit then waits for the last few MiB only. */
#define WRITEBACK_STEP ((uint64_t)8 << 20)

struct export_writer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    const char *path;
    uint8_t *buf[2];
    size_t len[2];
    int full[2];        /* handed over, not yet written */
    int next_fill;      /* the caller's buffer */
    int stop;
    int error;          /* errno of the first failed write, or 0 */
    int reported;       /* its message printed (once, by push or close) */
    uint64_t pushed;    /* bytes handed over */
};

/* Advice only: an I/O error shows at the commit's fsync. */
static void start_writeback(int fd, uint64_t off, uint64_t len) {
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
    (void)off;
    (void)len;
#endif
}

/* All of buf at offset off, retrying short writes: 0 or an errno. */
static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off) {
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static void *writer_main(void *arg) {
    export_writer *w = (export_writer *)arg;
    uint64_t off = 0, synced = 0;
    int b = 0;
    for (;;) {
        int e = 0;
        pthread_mutex_lock(&w->mu);
        while (!w->full[b] && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->full[b]) {
            pthread_mutex_unlock(&w->mu);
            return NULL;
        }
        pthread_mutex_unlock(&w->mu);
        if (!w->error) e = pwrite_all(w->fd, w->buf[b], w->len[b], off);
        off += w->len[b];
        if (!e && off - synced >= WRITEBACK_STEP) {
            start_writeback(w->fd, synced, off - synced);
            synced = off;
        }
        pthread_mutex_lock(&w->mu);
        if (e && !w->error) w->error = e;
        w->full[b] = 0;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        b ^= 1;
    }
}

export_writer *export_writer_open(int fd, const char *path, size_t cap) {
    export_writer *w = (export_writer *)calloc(1, sizeof(*w));
    if (!w) return NULL;
    w->fd = fd;
    w->path = path;
    w->buf[0] = (uint8_t *)malloc(cap);
    w->buf[1] = (uint8_t *)malloc(cap);
    if (!w->buf[0] || !w->buf[1] || pthread_mutex_init(&w->mu, NULL) != 0) goto fail;
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        goto fail;
    }
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        goto fail;
    }
    return w;
fail:
    free(w->buf[0]);
    free(w->buf[1]);
    free(w);
    return NULL;
}

uint8_t *export_writer_buffer(export_writer *w) {
    int b = w->next_fill;
    pthread_mutex_lock(&w->mu);
    while (w->full[b]) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return w->buf[b];
}

/* The failed write's message, printed by whichever call meets it first. */
static int report(export_writer *w, int e) {
    if (!w->reported)
        fprintf(stderr, "ptwm: export: write to '%s' failed: %s\n", w->path, strerror(e));
    w->reported = 1;
    return -1;
}

int export_writer_push(export_writer *w, size_t len) {
    int b = w->next_fill, e;
    pthread_mutex_lock(&w->mu);
    w->len[b] = len;
    w->full[b] = 1;
    e = w->error;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    w->next_fill = b ^ 1;
    w->pushed += len;
    return e ? report(w, e) : 0;
}

int export_writer_close(export_writer *w, uint64_t *written) {
    int e;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    e = w->error;
    *written = w->pushed;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->buf[0]);
    free(w->buf[1]);
    if (e) report(w, e);
    free(w);
    return e ? -1 : 0;
}
