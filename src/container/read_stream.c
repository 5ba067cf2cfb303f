/* Whole tensors of .ptwm readers streamed: to a sink in table order
 * (ptwm_reader_stream_all, ptwm_reader_verify), or into files through one
 * ring and one set of threads across readers (ptwm_fstream, the shards of a
 * directory: a file's last chunks decode while the next file's first ones
 * do).
 *
 * Order: chunks retire in submission order on the calling thread, which
 * hashes them, hands them to the sink and checks each tensor's payload hash
 * at its last chunk; a file is finished (its owner's `done` called, once)
 * when it is sealed (ptwm_fstream_end) and its last chunk has retired and
 * been written. After a failure, the rest is retired quietly and every file
 * still open is finished failed. Runs on the calling thread only; the
 * ring's locks are read_ring.h's. */
#include "read_ring.h"
#include "container_format.h"
#include "context.h"
#include "fileio.h"
#include "flusher.h"
#include "threads.h"

/* A file's last chunk has retired (or the stream failed): hand it to its
 * owner, once. */
static ptwm_error file_finish(ptwm_fstream_file *f, ptwm_error rc, ptwm_err *err) {
    ptwm_error r2;
    /* Every chunk is written (retired): no thread adds to the flusher now.
     * A failed flush fails the file: its fsync may not fail again. */
    ptwm_error rf = ptwm_flusher_stop(f->fl, rc ? NULL : err);
    if (rf && !rc) rc = rf;
    r2 = f->done(f->ctx, rc, rc ? NULL : err);
    ptwm_free(f);
    return rc ? rc : r2;
}

/* Retire one streamed chunk: hash it into its tensor's state, hand it to the
 * sink, and finish its file if it was the file's last. */
static ptwm_error stream_retire(sdrive *d, ptwm_xxh128 *h, ptwm_sink_fn sink, void *ctx, ptwm_err *err) {
    sjob *j = NULL;
    const rtensor *t;
    const rchunk *c;
    ptwm_fstream_file *f;
    uint8_t got[16];
    int done = 0;
    ptwm_error rc;
    size_t k;
    /* One thread: decode the next chunks in order while what waits to be
     * written is small, so that retiring the first writes them all at once.
     * (On two threads this left the other thread without work a third of
     * the time; there a thread writes what is listed as it finishes.) With
     * an I/O thread, decode every chunk queued: the oldest was then decoded
     * and handed over a ring ago, and its write is done. */
    for (k = 0; d->nworkers == 1 && k < d->npending && (d->io || d->wq_bytes < WRITE_BATCH); k++)
        ptwm_queue_help(d->q, (d->head + k) % d->window);
    rc = ptwm_drive_retire(d, &j, err);
    t = &j->r->t[j->tensor];
    c = &t->chunks[j->chunk];
    f = j->file;
    j->file = NULL;
    if (!rc) rc = ptwm_drive_retired_hash(t, j, h, got, &done, err);
    if (!rc && sink) rc = sink(ctx, j->dst, c->raw, err);
    if (!rc && done) rc = ptwm_reader_check_hash(j->r, t, got, err);
    if (j->own_cap > SLOT_KEEP) {
        ptwm_ctx_give(d->ctx, j->own, j->own_cap);
        j->own = NULL;
        j->own_cap = 0;
    }
    if (!f) return rc;
    if (rc && !f->rc) f->rc = rc;
    if (--f->pending || !f->sealed) return rc;
    return file_finish(f, f->rc, rc ? NULL : err);
}

/* Queue tensors indices[0..n) of d->r (NULL: every tensor in table order),
 * tensor i's bytes for offset offs[i] of the current file if any, retiring
 * older chunks as the ring fills. */
static ptwm_error queue_tensors(sdrive *d, ptwm_xxh128 *h, const size_t *indices, size_t n,
                                const uint64_t *offs, ptwm_sink_fn sink, void *ctx, ptwm_err *err) {
    ptwm_reader *r = d->r;
    ptwm_error rc = PTWM_OK;
    size_t i;
    uint64_t k;
    for (i = 0; indices && i < n; i++)
        if (indices[i] >= r->nt)
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", indices[i], r->nt);
    for (i = 0; i < n; i++) {
        const rtensor *t = &r->t[indices ? indices[i] : i];
        for (k = 0; k < t->nchunks; k++) {
            if (t->chunks[k].raw <= SLOT_KEEP) d->max_raw = PTWM_MAX(d->max_raw, t->chunks[k].raw);
            /* workers read max_coded while more tensors are queued */
            if (t->chunks[k].coded <= SLOT_KEEP && t->chunks[k].coded > d->max_coded)
                __atomic_store_n(&d->max_coded, (size_t)t->chunks[k].coded, __ATOMIC_RELAXED);
        }
    }
    if (d->ring_cap < d->units * d->max_raw) {
        /* A larger ring, once the chunks in the old one have retired. */
        while (d->npending && !rc) rc = stream_retire(d, h, sink, ctx, err);
        if (rc) return rc;
        ptwm_ctx_give(d->ctx, d->ring, d->ring_cap);
        d->ring_cap = d->units * d->max_raw;
        d->ring_head = d->ring_tail = 0;
        if (!(d->ring = (uint8_t *)ptwm_ctx_take(d->ctx, d->ring_cap))) {
            d->ring_cap = 0;
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu bytes of decoded chunks",
                             d->units * d->max_raw);
        }
    }
    for (i = 0; i < n && !rc; i++) {
        size_t ti = indices ? indices[i] : i;
        const rtensor *t = &r->t[ti];
        if (t->nchunks == 0 && (t->flags & PTWM_TF_PAYLOAD_HASH)) {
            /* An empty tensor's hash is that of no bytes; it has no chunk to carry the check. */
            uint8_t got[16];
            while (d->npending && !rc) rc = stream_retire(d, h, sink, ctx, err);
            ptwm_xxh128_oneshot("", 0, got);
            if (!rc) rc = ptwm_reader_check_hash(r, t, got, err);
        }
        for (k = 0; k < t->nchunks && !rc; k++) {
            /* Bound the raw bytes in flight too: a few coded bytes may stand
             * for a 256 MiB constant chunk, and the ring has many slots. */
            while (d->npending && !rc &&
                   (d->npending == d->window || d->inflight + t->chunks[k].raw > STREAM_BUDGET ||
                    !ptwm_drive_ring_fits(d, t->chunks[k].raw)))
                rc = stream_retire(d, h, sink, ctx, err);
            if (!rc) rc = ptwm_drive_submit(d, i, ti, k, NULL, offs ? offs[i] : 0, err);
        }
    }
    return rc;
}

/* Retire everything still queued: cleanly while nothing failed, then
 * quietly (files of chunks retired after a failure are finished failed). */
static ptwm_error drain(sdrive *d, ptwm_xxh128 *h, ptwm_sink_fn sink, void *ctx, ptwm_error rc,
                        ptwm_err *err) {
    ptwm_queue_rest(d->q);   /* nothing more is submitted */
    while (d->npending && !rc) rc = stream_retire(d, h, sink, ctx, err);
    while (d->npending) {
        sjob *j = NULL;
        ptwm_fstream_file *f;
        (void)ptwm_drive_retire(d, &j, NULL);
        f = j->file;
        j->file = NULL;
        if (f && !--f->pending && f->sealed) (void)file_finish(f, f->rc ? f->rc : rc, NULL);
    }
    return rc;
}

ptwm_error ptwm_reader_stream_all(ptwm_reader *r, ptwm_sink_fn sink, void *ctx, ptwm_err *err) {
    sdrive d;
    ptwm_xxh128 h = {NULL};
    ptwm_error rc;
    if (!r) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader");
    if (!(rc = ptwm_drive_init(&d, r, r->threads, 3, 1, err)))
        rc = drain(&d, &h, sink, ctx, queue_tensors(&d, &h, NULL, r->nt, NULL, sink, ctx, err), err);
    ptwm_xxh128_free(&h);
    ptwm_drive_free(&d);
    return rc;
}

struct ptwm_fstream {
    sdrive d;
    ptwm_xxh128 h;
    ptwm_sink_fn sink;
    void *ctx;
    ptwm_error rc;               /* the first failure: every later call returns it */
    ptwm_err err;
};

ptwm_error ptwm_fstream_open(int threads, ptwm_sink_fn progress, void *ctx, ptwm_fstream **out,
                             ptwm_err *err) {
    ptwm_fstream *s;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output handle");
    *out = NULL;
    if (!(s = (ptwm_fstream *)ptwm_calloc(1, sizeof(*s))))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a stream");
    s->sink = progress;
    s->ctx = ctx;
    if ((rc = ptwm_drive_init(&s->d, NULL, threads, 3, 1, err))) {
        ptwm_drive_free(&s->d);
        ptwm_free(s);
        return rc;
    }
    *out = s;
    return PTWM_OK;
}

static ptwm_error fstream_failed(ptwm_fstream *s, ptwm_err *err) {
    if (err) *err = s->err;
    return s->rc;
}

static ptwm_error fstream_note(ptwm_fstream *s, ptwm_error rc, ptwm_err *err) {
    if (rc && !s->rc) {
        s->rc = rc;
        if (err) s->err = *err;
    }
    return rc;
}

ptwm_error ptwm_fstream_begin(ptwm_fstream *s, int fd, const char *path, ptwm_fstream_done_fn done,
                              void *ctx, ptwm_err *err) {
    ptwm_fstream_file *f;
    if (!s || fd < 0 || !done) {
        if (done) done(ctx, PTWM_ERR_INVALID_ARG, NULL);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no stream, file or callback");
    }
    if (s->rc || s->d.file) {
        done(ctx, s->rc ? s->rc : PTWM_ERR_INVALID_ARG, NULL);
        if (s->rc) return fstream_failed(s, err);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: the last file was not ended");
    }
    if (!(f = (ptwm_fstream_file *)ptwm_calloc(1, sizeof(*f)))) {
        done(ctx, PTWM_ERR_NOMEM, NULL);
        return fstream_note(s, ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory"), err);
    }
    f->fd = fd;
    f->path = path;
    f->done = done;
    f->ctx = ctx;
    /* One decoding thread: write on another core (without one, or if the
     * thread does not start, the decoding thread writes). */
    if (!s->d.io && s->d.nworkers == 1 && ptwm_cpu_count() > 1) (void)ptwm_io_start(&s->d.io, NULL);
    s->d.file = f;
    return PTWM_OK;
}

/* The blocks the tensors will fill, allocated at once: on a 128 MiB restore
 * (ext4) that took 8% off one thread's time and 7% off two threads' (ext4
 * reserved each 4 KiB block as it was written, and every write past the
 * end moved the file size). Returns the bytes they span (0: none, or
 * offsets out of range). */
static uint64_t allocate_tensors(int fd, const ptwm_reader *r, const size_t *indices, size_t n,
                                 const uint64_t *offs) {
    uint64_t lo = UINT64_MAX, hi = 0, end;
    size_t i;
    for (i = 0; i < n; i++) {
        if (indices[i] >= r->nt || ptwm_add_overflow(offs[i], r->t[indices[i]].nbytes, &end)) return 0;
        lo = PTWM_MIN(lo, offs[i]);
        hi = PTWM_MAX(hi, end);
    }
    if (hi <= lo) return 0;
    ptwm_allocate_range(fd, lo, hi - lo);
    return hi - lo;
}

ptwm_error ptwm_fstream_add(ptwm_fstream *s, ptwm_reader *r, const size_t *indices, size_t n,
                            const uint64_t *offs, ptwm_err *err) {
    ptwm_fstream_file *f;
    if (!s || !r || !s->d.file || !offs || (n && !indices))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no file begun, reader or offsets");
    if (s->rc) return fstream_failed(s, err);
    s->d.r = r;
    f = s->d.file;
    /* A large file is flushed as it is written (flusher.h); its chunks
     * queued before may be writing already, hence the atomic store. */
    if (allocate_tensors(f->fd, r, indices, n, offs) >= 2 * PTWM_FLUSH_STEP && !f->fl) {
        ptwm_flusher *fl;
        ptwm_flusher_start(f->fd, f->path, 0, &fl);
        __atomic_store_n(&f->fl, fl, __ATOMIC_RELEASE);
    }
    return fstream_note(s, queue_tensors(&s->d, &s->h, indices, n, offs, s->sink, s->ctx, err), err);
}

ptwm_error ptwm_fstream_end(ptwm_fstream *s, ptwm_err *err) {
    ptwm_fstream_file *f = s ? s->d.file : NULL;
    if (!f) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no file begun");
    f->sealed = 1;
    s->d.file = NULL;   /* its chunks in flight finish it as they retire */
    if (f->pending) return s->rc ? fstream_failed(s, err) : PTWM_OK;
    return fstream_note(s, file_finish(f, s->rc, s->rc ? NULL : err), err);
}

ptwm_error ptwm_fstream_close(ptwm_fstream *s, ptwm_err *err) {
    ptwm_error rc;
    if (!s) return PTWM_OK;
    if (s->d.file) {   /* begun and never ended: it cannot be complete */
        ptwm_fstream_file *f = s->d.file;
        f->sealed = 1;
        s->d.file = NULL;
        fstream_note(s, ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream closed with a file not ended"),
                     err);
        if (!f->pending) (void)file_finish(f, s->rc, NULL);
    }
    rc = s->rc ? fstream_failed(s, err) : PTWM_OK;
    rc = drain(&s->d, &s->h, s->sink, s->ctx, rc, err);
    ptwm_xxh128_free(&s->h);
    ptwm_drive_free(&s->d);
    ptwm_free(s);
    return rc;
}

/* One file through a stream of its own. */
static ptwm_error done_nothing(void *ctx, ptwm_error rc, ptwm_err *err) {
    (void)ctx;
    (void)err;
    return rc;
}

ptwm_error ptwm_reader_stream_to_file(ptwm_reader *r, const size_t *indices, size_t n, int fd,
                                      const char *path, const uint64_t *offs, ptwm_sink_fn sink,
                                      void *ctx, ptwm_err *err) {
    ptwm_fstream *s = NULL;
    ptwm_error rc, r2;
    if (!r || fd < 0 || !offs || (n && !indices))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no file, offsets or tensors");
    if ((rc = ptwm_fstream_open(r->threads, sink, ctx, &s, err))) return rc;
    rc = ptwm_fstream_begin(s, fd, path, done_nothing, NULL, err);
    if (!rc) rc = ptwm_fstream_add(s, r, indices, n, offs, err);
    if (!rc) rc = ptwm_fstream_end(s, err);
    r2 = ptwm_fstream_close(s, rc ? NULL : err);
    return rc ? rc : r2;
}

ptwm_error ptwm_reader_verify(ptwm_reader *r, ptwm_err *err) {
    return ptwm_reader_stream_all(r, NULL, NULL, err);
}
