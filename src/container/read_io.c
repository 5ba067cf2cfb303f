/* Decoded chunks written into their files (read_ring.h): the chunks listed
 * by the workers are written in runs lying back to back, one pwritev a run,
 * by one thread at a time (write_mu; the list is wq under wq_mu), or handed
 * to the I/O thread (iothread.h) when one decoding thread has a core to
 * spare. Writeback of each file is started every DECODE_WRITEBACK_STEP
 * bytes by the thread writing, so the fsync that commits it waits little. */
#include "read_ring.h"
#include "fileio.h"
#include "flusher.h"

/* The disk writes what is done while the rest decodes, and the fsync that
 * commits the file waits for the last MiB or two only; the thread writing
 * starts it, not the one retiring (one thread writes a file at a time). */
static void start_writeback_every(ptwm_fstream_file *f, uint64_t bytes) {
    ptwm_flusher_add(__atomic_load_n(&f->fl, __ATOMIC_ACQUIRE), bytes);
    /* atomic: a writing thread and a thread waiting on it may both write */
    if (__atomic_add_fetch(&f->unsynced, bytes, __ATOMIC_RELAXED) >= DECODE_WRITEBACK_STEP &&
        __atomic_exchange_n(&f->unsynced, 0, __ATOMIC_RELAXED) >= DECODE_WRITEBACK_STEP)
        ptwm_start_writeback(f->fd, 0, 0);
}

/* Order slots by file, then by offset in it (insertion sort: the list is
 * short and mostly in order already). */
static void sort_by_file_off(const sdrive *d, size_t *slots, size_t n) {
    size_t i, k;
    for (i = 1; i < n; i++) {
        size_t s = slots[i];
        const sjob *a = &d->jobs[s];
        for (k = i; k > 0; k--) {
            const sjob *b = &d->jobs[slots[k - 1]];
            if ((uintptr_t)b->file < (uintptr_t)a->file ||
                (b->file == a->file && b->file_off <= a->file_off))
                break;
            slots[k] = slots[k - 1];
        }
        slots[k] = s;
    }
}

/* A run handed to the writing thread. */
typedef struct io_run {
    sdrive *d;
    uint64_t bytes;
    size_t n;
    size_t slots[PTWM_WRITEV_MAX];
} io_run;

/* The writing thread is done with a run: its chunks carry the error, if
 * any, and are written. */
static void io_run_done(void *arg, ptwm_error rc, const ptwm_err *e) {
    io_run *run = (io_run *)arg;
    size_t k;
    if (!rc) start_writeback_every(run->d->jobs[run->slots[0]].file, run->bytes);
    for (k = 0; k < run->n; k++) {
        sjob *b = &run->d->jobs[run->slots[k]];
        if (rc) {
            b->rc = rc;
            b->err = *e;
        }
        __atomic_store_n(&b->unwritten, 0, __ATOMIC_RELEASE);
    }
    ptwm_free(run);
}

/* Hand a run of m chunks to the writing thread; 0 if it could not be (the
 * caller writes it). */
static int put_run(sdrive *d, const size_t *slots, size_t m, void *const *bufs, const size_t *lens,
                   uint64_t end) {
    sjob *a = &d->jobs[slots[0]];
    io_run *run = (io_run *)ptwm_malloc(sizeof(*run));
    if (!run) return 0;
    run->d = d;
    run->bytes = end - a->file_off;
    run->n = m;
    memcpy(run->slots, slots, m * sizeof(size_t));
    if (ptwm_io_put(d->io, a->file->fd, a->file->path, bufs, lens, m, a->file_off, io_run_done, run,
                    NULL)) {
        ptwm_free(run);
        return 0;
    }
    return 1;
}

/* Write runs of listed chunks: n slots sorted by file and offset; the
 * chunks of a run that fails all carry its error. Called with write_mu. */
static void write_runs(sdrive *d, size_t *slots, size_t n) {
    size_t i = 0, k;
    while (i < n) {
        sjob *a = &d->jobs[slots[i]];
        void *bufs[PTWM_WRITEV_MAX];
        size_t lens[PTWM_WRITEV_MAX], m = 0;
        uint64_t end = a->file_off;
        ptwm_error rc;
        ptwm_err e;
        while (i + m < n && m < PTWM_WRITEV_MAX) {
            sjob *b = &d->jobs[slots[i + m]];
            if (b->file != a->file || b->file_off != end) break;
            bufs[m] = b->dst;
            lens[m] = b->r->t[b->tensor].chunks[b->chunk].raw;
            end += lens[m++];
        }
        if (d->io && put_run(d, slots + i, m, bufs, lens, end)) {
            i += m;
            continue;
        }
        rc = ptwm_pwritev_full(a->file->fd, bufs, lens, m, a->file_off, a->file->path, &e);
        if (!rc) start_writeback_every(a->file, end - a->file_off);
        for (k = 0; k < m; k++) {
            sjob *b = &d->jobs[slots[i + k]];
            if (rc) {
                b->rc = rc;
                b->err = e;
            }
            __atomic_store_n(&b->unwritten, 0, __ATOMIC_RELEASE);
        }
        i += m;
    }
}

/* Write every chunk in the list, unless another thread is writing (wait 0:
 * then that thread takes them) or until none is left (wait 1). Whoever
 * lets go of write_mu looks at the list again, so no chunk is left behind
 * by a thread that found write_mu taken. */
void ptwm_drive_write_listed(sdrive *d, int wait) {
    size_t batch[PTWM_WRITEV_MAX * 2], n, k;
    if (wait) pthread_mutex_lock(&d->write_mu);
    else if (pthread_mutex_trylock(&d->write_mu)) return;
    for (;;) {
        pthread_mutex_lock(&d->wq_mu);
        n = PTWM_MIN(d->nwq, sizeof(batch) / sizeof(batch[0]));
        memcpy(batch, d->wq, n * sizeof(size_t));
        memmove(d->wq, d->wq + n, (d->nwq - n) * sizeof(size_t));
        d->nwq -= n;
        for (k = 0; k < n; k++)
            d->wq_bytes -= d->jobs[batch[k]].r->t[d->jobs[batch[k]].tensor].chunks[d->jobs[batch[k]].chunk].raw;
        pthread_mutex_unlock(&d->wq_mu);
        if (n) {
            sort_by_file_off(d, batch, n);
            write_runs(d, batch, n);
            continue;
        }
        pthread_mutex_unlock(&d->write_mu);
        pthread_mutex_lock(&d->wq_mu);
        n = d->nwq;
        pthread_mutex_unlock(&d->wq_mu);
        if (!n || pthread_mutex_trylock(&d->write_mu)) return;
    }
}
