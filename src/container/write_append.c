/* Appending the .ptwm writer's coded chunks, in job order, under rmu: each
 * payload goes to the output (the image, the file, or past the page cache
 * once the file is large: dout.h; into an image on several threads it is
 * placed under rmu and copied outside it) and its chunk entry records where
 * it lies; a payload equal to one written before is not written again, its
 * entry names the earlier bytes (the sharing store, checked byte for byte).
 * After a failure jobs are still taken, never written. Only the table (a
 * few dozen bytes per chunk) stays in memory until the writer finishes. */
#include "writer_impl.h"
#include "context.h"
#include "hash.h"

#include <unistd.h>

/* Written past the page cache (dout.h), a payload would be read back from
 * the disk to be compared; small ones (zero or constant tensors, biases)
 * are kept in memory instead, up to KEEP_CAP bytes in all (a file of
 * repeated biases compared 1,229 payloads of 36-1,953 bytes, each a disk
 * read). The cap bounds what files without repeats pay for nothing. */
#define KEEP_MAX ((size_t)2 << 10)
#define KEEP_CAP ((size_t)2 << 20)

/* Room for n more bytes in an in-memory image (rmu held): an image that must
 * grow (and may move) first waits until no payload is being copied into it;
 * those placed and not yet taken are copied where they are taken. */
int ptwm_writer_image_room(ptwm_writer *w, size_t more) {
    if (!w->mem_fixed && more > w->mem.cap - w->mem.len)
        while (w->copying) pthread_cond_wait(&w->copied, &w->rmu);
    return image_reserve(w, more);
}

static ptwm_error image_full(const ptwm_writer *w, size_t n, ptwm_err *err) {
    return w->mem_fixed ? ptwm_fail(err, PTWM_ERR_DST_SIZE,
                                    "the image passes the destination's %zu bytes (%zu written, "
                                    "%zu more; ptwm_compress_bound gives a size that fits)",
                                    w->mem.cap, w->mem.len, n)
                        : ptwm_fail(err, PTWM_ERR_NOMEM,
                                    "out of memory growing a %zu-byte .ptwm image", w->mem.len);
}

/* Copy up to COPY_BATCH placed payloads at a time: the image's address is
 * read under rmu, the bytes go outside it. With the copies under rmu, a
 * two-thread compress into memory held the lock a fifth of its time (68 of
 * 89 MB copied at about 6 GB/s on the 128 MB BF16 file), which every other
 * thread's start and end of a job waited on (docs/SCALING.md). */
#define COPY_BATCH 8
static unsigned copy_delay_us;

void ptwm_writer_slow_copies(unsigned us) {
    __atomic_store_n(&copy_delay_us, us, __ATOMIC_RELAXED);
}

void ptwm_writer_copy_placed(ptwm_writer *w) {
    while (w->nplaced) {
        wcopy *c[COPY_BATCH];
        uint8_t *dst[COPY_BATCH];
        size_t k = 0, i;
        unsigned delay = __atomic_load_n(&copy_delay_us, __ATOMIC_RELAXED);
        for (i = 0; i < w->window && k < COPY_BATCH; i++)
            if (w->copies[i].src && !w->copies[i].taken) {
                c[k] = &w->copies[i];
                c[k]->taken = 1;
                dst[k++] = w->mem.p + w->copies[i].off;
            }
        w->nplaced -= k;
        w->copying += k;
        rmu_unlock(w);
        if (delay) usleep(delay);
        for (i = 0; i < k; i++) memcpy(dst[i], c[i]->src, c[i]->len);
        rmu_lock(w);
        for (i = 0; i < k; i++) {
            ptwm_writer_buf_put(w->ctx, w->outs, &w->nouts, w->window, c[i]->src, c[i]->cap);
            c[i]->src = NULL;
            c[i]->taken = 0;
        }
        w->copying -= k;
        if (!w->copying) pthread_cond_broadcast(&w->copied);
    }
}

/* The bytes of the payload appended at `offset` of an in-memory image: its
 * output buffer while it waits for its copy or is being copied (rmu held,
 * so neither ends meanwhile), else the image. */
static const uint8_t *image_bytes(const ptwm_writer *w, uint64_t offset) {
    size_t i;
    for (i = 0; w->nplaced + w->copying && i < w->window; i++)
        if (w->copies[i].src && w->copies[i].off == offset) return w->copies[i].src;
    return w->mem.p + offset;
}

ptwm_error ptwm_writer_emit(ptwm_writer *w, const void *src, size_t n, ptwm_err *err) {
    if (w->dout) {
        ptwm_error rc = ptwm_dout_append(w->dout, src, n, err);
        if (rc) return rc;
    } else if (w->to_file) {
        ptwm_error rc = ptwm_write_full(w->af.fd, src, n, w->af.final_path, err);
        if (rc) return rc;
        /* The disk writes what is done while the rest is coded: the fsync
         * that commits the file then waits for the last few MiB only. */
        if ((w->pos + n) / PTWM_WRITEBACK_STEP != w->pos / PTWM_WRITEBACK_STEP)
            ptwm_start_writeback(w->af.fd, 0, 0);
        /* A file this large goes on past the page cache (dout.h); one
         * coded from a large source does from its first payload, since
         * the page cache's fresh pages cost more than writing direct. */
        if (!w->dout_tried &&
            (w->pos + n >= PTWM_DOUT_MIN || w->src_file_size >= 2 * PTWM_DOUT_MIN)) {
            w->dout_tried = 1;
            if ((rc = ptwm_dout_open(w->af.fd, w->af.tmp_path, w->af.final_path, w->pos + n,
                                     &w->dout, err)))
                return rc;
        }
    } else if (!ptwm_writer_image_room(w, n)) {
        return image_full(w, n, err);
    } else {
        if (n) memcpy(w->mem.p + w->mem.len, src, n);
        w->mem.len += n;
    }
    w->pos += n;
    return PTWM_OK;
}

/* The key of a payload in the sharing store (computed by the worker that
 * coded it, off the appending thread): its length, its first 96 bytes and
 * its last 32. The first hold the chunk header, whose plane CRCs (when
 * written) fingerprint every coded byte; equal keys are confirmed byte for
 * byte before a payload is shared, so a weak key costs a compare, never a
 * wrong file, where hashing whole payloads cost compress time
 * (docs/ARCHITECTURE.md, "Measurements behind the code"). */
#define KEY_HEAD 96
#define KEY_TAIL 32
uint64_t ptwm_writer_payload_hash(const uint8_t *p, size_t n) {
    uint8_t h[16], k[8 + KEY_HEAD + KEY_TAIL];
    size_t kl = 8;
    uint64_t v;
    ptwm_store_le64(k, (uint64_t)n);
    if (n <= KEY_HEAD + KEY_TAIL) {
        memcpy(k + kl, p, n);
        kl += n;
    } else {
        memcpy(k + kl, p, KEY_HEAD);
        memcpy(k + kl + KEY_HEAD, p + n - KEY_TAIL, KEY_TAIL);
        kl += KEY_HEAD + KEY_TAIL;
    }
    ptwm_xxh128_oneshot(k, kl, h);
    memcpy(&v, h, 8);
    return v | 1; /* never 0, the empty mark */
}

/* Whether the `len` bytes at `offset` of the output equal p. */
static int payload_equal(ptwm_writer *w, uint64_t offset, const uint8_t *p, size_t len) {
    if (!w->to_file) return memcmp(image_bytes(w, offset), p, len) == 0;
    if (!w->cmp && !(w->cmp = (uint8_t *)ptwm_ctx_take(w->ctx, w->bound))) return 0;
    if (len > w->bound ||
        (w->dout ? ptwm_dout_pread(w->dout, w->cmp, len, offset, NULL)
                 : ptwm_pread_full(w->af.fd, w->cmp, len, offset, w->af.final_path, NULL)))
        return 0;
    return memcmp(w->cmp, p, len) == 0;
}

/* The offset of an earlier payload equal to p (UINT64_MAX if none); else
 * records p as written at `at`. A full or unallocatable store only stops
 * sharing. */
static uint64_t payload_find_or_add(ptwm_writer *w, const uint8_t *p, size_t len, uint64_t h,
                                    uint64_t at) {
    pstore *d = &w->dedup;
    size_t i;
    if (d->used * 2 >= d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024, k;
        pslot *ns = (pslot *)ptwm_calloc(cap, sizeof(pslot));
        if (!ns) return UINT64_MAX;
        for (k = 0; k < d->cap; k++) {
            size_t j;
            if (!d->slot[k].hash) continue;
            for (j = d->slot[k].hash & (cap - 1); ns[j].hash; j = (j + 1) & (cap - 1)) {
            }
            ns[j] = d->slot[k];
        }
        ptwm_free(d->slot);
        d->slot = ns;
        d->cap = cap;
    }
    for (i = h & (d->cap - 1); d->slot[i].hash; i = (i + 1) & (d->cap - 1))
        if (d->slot[i].hash == h && d->slot[i].len == len &&
            (d->slot[i].kept ? memcmp(d->keep + d->slot[i].kept - 1, p, len) == 0
                             : payload_equal(w, d->slot[i].offset, p, len)))
            return d->slot[i].offset;
    d->slot[i].hash = h;
    d->slot[i].offset = at;
    d->slot[i].len = (uint32_t)len;
    d->slot[i].kept = 0;
    d->used++;
    /* (doubling from 64 bytes, the buffer never passes KEEP_CAP, a power of 2) */
    if (w->dout && len <= KEEP_MAX && d->keep_len + len <= KEEP_CAP &&
        ptwm_grow((void **)&d->keep, &d->keep_cap, d->keep_len + len, 1)) {
        memcpy(d->keep + d->keep_len, p, len);
        d->slot[i].kept = (uint32_t)d->keep_len + 1;
        d->keep_len += len;
    }
    return UINT64_MAX;
}

/* Place job j's payload at the image's end, to be copied there outside rmu
 * (ptwm_writer_copy_placed), which gives its buffer back. rmu held. Smaller
 * payloads are copied as they are appended: their copy costs less than its
 * bookkeeping, and they are most of a file of small tensors. */
#define PLACE_MIN ((size_t)32 << 10)
static ptwm_error place_payload(ptwm_writer *w, wjob *j) {
    wcopy *c = w->copies;
    /* (waiting for room releases rmu: others may take or end copies, not
     * add them) */
    if (!ptwm_writer_image_room(w, j->out_len)) return image_full(w, j->out_len, &w->ferr);
    while (c->src) c++; /* a free entry: fewer than window in use */
    c->src = j->out;
    c->cap = j->out_cap;
    c->off = w->mem.len;
    c->len = j->out_len;
    w->nplaced++;
    j->out = NULL;
    w->mem.len += j->out_len;
    w->pos += j->out_len;
    return PTWM_OK;
}

/* Append a coded job, or point it at an equal payload written before;
 * failures are recorded (with their message) for the writing thread. After
 * a failure, jobs are still taken but not written. rmu held. */
static void retire_job(ptwm_writer *w, wjob *j) {
    wtensor *t = &w->t[j->tensor];
    wchunk *c = &t->chunks[j->chunk];
    ptwm_err e;
    ptwm_error rc;
    if (w->failed) return;
    if (j->rc) {
        e = j->err;
        ptwm_err_prefix(&e, "tensor '%s' chunk %llu of %llu", t->name, (unsigned long long)j->chunk,
                        (unsigned long long)t->nchunks);
        w->ferr = e;
        w_fail(w, j->rc);
        return;
    }
    if (j->out_len > UINT32_MAX) {
        w_fail(w, ptwm_fail(&w->ferr, PTWM_ERR_LIMIT, "tensor '%s' chunk %llu codes to %zu bytes",
                            t->name, (unsigned long long)j->chunk, j->out_len));
        return;
    }
    if (j->hash_raw) memcpy(t->hash, j->raw_hash, 16);
    if (j->streamed) memcpy(t->hash, j->stream_hash, 16);
    c->offset = payload_find_or_add(w, j->dst, j->out_len, j->phash, w->pos);
    c->coded = (uint32_t)j->out_len;
    c->raw = (uint32_t)j->raw_len;
    c->chain = j->chain;
    c->crc = j->pcrc;   /* a shared payload has equal bytes, so the same CRC */
    c->based = j->based;
    c->base_crc = j->base_crc;
    if (j->min_version > w->min_version) w->min_version = j->min_version;
    if (c->offset == UINT64_MAX) {
        c->offset = w->pos;
        if (j->dst != j->out && w->to_file) { /* coded in place, in the direct output */
            if ((rc = ptwm_dout_append_room(w->dout, j->out_len, &w->ferr))) {
                w_fail(w, rc);
                return;
            }
            w->pos += j->out_len;
        } else if (j->dst != j->out) {
            w->mem.len += j->out_len; /* coded in place at the image's end */
            w->pos += j->out_len;
        } else if (!w->to_file && w->nworkers > 1 && j->out_len >= PLACE_MIN &&
                   w->nplaced + w->copying < w->window) {
            if ((rc = place_payload(w, j))) {
                w_fail(w, rc);
                return;
            }
        } else if ((rc = ptwm_writer_emit(w, j->out, j->out_len, &w->ferr))) {
            w_fail(w, rc);
            return;
        }
        w->coded_total += j->out_len;
    }
    __atomic_store_n(&w->raw_done, w->raw_done + j->raw_len, __ATOMIC_RELAXED); /* (read without rmu) */
}

/* Append the coded jobs at the front of the ring, in job order. rmu held. */
void ptwm_writer_retire_ready(ptwm_writer *w) {
    while (w->jobs[w->head].coded) {
        wjob *j = &w->jobs[w->head];
        j->coded = 0;
        retire_job(w, j);
        if (j->out) {
            ptwm_writer_buf_put(w->ctx, w->outs, &w->nouts, w->window, j->out, j->out_cap);
            j->out = NULL;
        }
        w->head = (w->head + 1) % w->window;
    }
}
