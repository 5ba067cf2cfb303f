/* Adding a tensor to a .ptwm writer: its description and candidate chains
 * checked into one block, its entry appended to the tensor array (under
 * rmu: appending threads read it), then its chunks cut into ring slots in
 * order, each copied into the slot's buffer, borrowed from the caller
 * (one-call forms), read through the caller's callback or left for its
 * worker to read (pulled), and with a base, its base chunk read beside it.
 * A tensor's payload hash is computed by the workers (write_pull.c). Each slot
 * is submitted to the queue once filled; a full ring first reclaims its
 * oldest slot (write_ring.c). Runs on the writing thread. */
#include "writer_impl.h"
#include "container_format.h"
#include "context.h"
#include "hash.h"

static ptwm_error prepare_tensor(ptwm_writer *w, const ptwm_tensor_desc *d,
                                 const ptwm_chain_list *chains, wtensor *t, ptwm_err *err) {
    uint64_t nbytes, total = 0;
    size_t i, name_len;
    unsigned n;
    ptwm_error rc;
    uint8_t std_chain[PTWM_CHAIN_MAX_BYTES];
    size_t std_len = 0;
    const uint8_t *const *cp;
    const size_t *cl;

    memset(t, 0, sizeof(*t));
    if (!d || !d->name) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor without a name");
    if (strlen(d->name) > PTWM_MAX_NAME)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "tensor name of %zu bytes (max %d)", strlen(d->name),
                         PTWM_MAX_NAME);
    if ((unsigned)d->dtype >= PTWM_DTYPE_COUNT)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "tensor '%s': unknown dtype %d", d->name, (int)d->dtype);
    if (d->ndim > PTWM_MAX_NDIM || (d->ndim && !d->shape))
        return ptwm_fail(err, PTWM_ERR_SHAPE, "tensor '%s': %u dims (max %d)", d->name, d->ndim,
                         PTWM_MAX_NDIM);
    if ((rc = ptwm_tensor_nbytes(d->dtype, d->shape, d->ndim, &nbytes, err))) {
        ptwm_err_prefix(err, "tensor '%s'", d->name);
        return rc;
    }
    if (nbytes != d->nbytes)
        return ptwm_fail(err, PTWM_ERR_SHAPE, "tensor '%s': %llu bytes given, shape and %s need %llu",
                         d->name, (unsigned long long)d->nbytes, ptwm_dtype_name(d->dtype),
                         (unsigned long long)nbytes);
    if (chains && (chains->count < 1 || chains->count > PTWM_FMT_MAX_CHAINS || !chains->chains ||
                   !chains->lens))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': %zu candidate chains (1..%u)",
                         d->name, chains->count, PTWM_FMT_MAX_CHAINS);
    if (chains) {
        n = (unsigned)chains->count;
        cp = chains->chains;
        cl = chains->lens;
        for (i = 0; i < n; i++) {
            if (!cp[i] || cl[i] > PTWM_CHAIN_MAX_BYTES)
                return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': chain %zu is NULL or over %d bytes",
                                 d->name, i, PTWM_CHAIN_MAX_BYTES);
            if ((rc = ptwm_chain_validate(cp[i], cl[i], d->dtype, err))) {
                ptwm_err_prefix(err, "tensor '%s': chain %zu", d->name, i);
                return rc;
            }
            total += cl[i];
        }
    } else {
        if ((rc = ptwm_chain_standard(d->dtype, w->p.method, std_chain, sizeof(std_chain), &std_len,
                                      err))) {
            ptwm_err_prefix(err, "tensor '%s'", d->name);
            return rc;
        }
        n = 1;
        total = std_len;
        cp = NULL;
        cl = NULL;
    }
    {
        /* One block: chunk entries, shape, chains, name (8-byte parts first). */
        uint64_t nchunks, size;
        uint8_t *q, *chain_at;
        t->chunk_size = ptwm_fmt_tensor_chunk(w->p.chunk_size, d->dtype);
        nchunks = nbytes / t->chunk_size + (nbytes % t->chunk_size != 0);
        name_len = strlen(d->name);
        if (ptwm_mul_overflow(nchunks, sizeof(wchunk), &size) ||
            ptwm_add_overflow(size, (uint64_t)d->ndim * 8 + total + name_len + 1, &size) ||
            !(t->chunks = (wchunk *)ptwm_calloc(1, size)))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "tensor '%s': out of memory for %llu chunk entries",
                             d->name, (unsigned long long)nchunks);
        t->nchunks = nchunks;
        q = (uint8_t *)(t->chunks + nchunks);
        if (d->ndim) memcpy(q, d->shape, (size_t)d->ndim * 8);
        t->shape = (const uint64_t *)q;
        chain_at = q + (size_t)d->ndim * 8;
        t->chain_bytes = chain_at;
        t->name = (char *)chain_at + total;
        memcpy(t->name, d->name, name_len + 1);
        t->nchains = n;
        for (i = 0; i < n; i++) {
            const uint8_t *src = cp ? cp[i] : std_chain;
            size_t len = cl ? cl[i] : std_len;
            memcpy(chain_at, src, len);
            t->chain_len[i] = (uint16_t)len;
            chain_at += len;
        }
    }
    t->dtype = d->dtype;
    t->ndim = d->ndim;
    t->nbytes = nbytes;
    t->flags = (uint8_t)((w->p.no_payload_hash ? 0 : PTWM_TF_PAYLOAD_HASH) |
                         (w->p.no_plane_crc ? 0 : PTWM_TF_PLANE_CRC));
    return PTWM_OK;
}

static void wtensor_free(wtensor *t) {
    ptwm_free(t->chunks);
}

/* The base tensor of t: the writer's base holds one of its name, dtype and
 * shape (and bytes). Its index into *bi. */
static int base_match(const ptwm_writer *w, const wtensor *t, size_t *bi) {
    ptwm_tensor_info b;
    if (!w->base.ops || !t->nbytes || w->base.ops->find(w->base.h, t->name, bi) ||
        w->base.ops->tensor(w->base.h, *bi, &b))
        return 0;
    return b.dtype == t->dtype && b.ndim == t->ndim &&
           (!t->ndim || memcmp(b.shape, t->shape, (size_t)t->ndim * 8) == 0);
}

/* The base chunk of job j, bytes [off, off + len) of base tensor bi, read
 * on the writing thread (a .ptwm base decodes them) and hashed in order. */
static ptwm_error read_base_chunk(ptwm_writer *w, wjob *j, size_t bi, uint64_t off, size_t len,
                                  ptwm_xxh128 *bh, ptwm_err *err) {
    ptwm_error rc;
    if (!(j->base_buf = ptwm_writer_buf_take(w->ctx, w->raws, &w->nraws, len, (size_t)w->p.chunk_size,
                                             &j->base_cap)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a base chunk of %zu bytes", len);
    if ((rc = w->base.ops->read(w->base.h, bi, off, j->base_buf, len, err))) {
        ptwm_err_prefix(err, "reading its base's bytes %llu..%llu", (unsigned long long)off,
                        (unsigned long long)(off + len));
        return rc;
    }
    ptwm_xxh128_update(bh, j->base_buf, len);
    j->base = j->base_buf;
    return PTWM_OK;
}

/* Append t to the writer's tensors (taken over), its index into *ti.
 * Appending threads read the tensor array under rmu: it moves under rmu.
 * The new entry needs no lock: no job of it is queued yet, and a worker
 * touches only its own job's tensor. */
static ptwm_error append_tensor(ptwm_writer *w, wtensor *t, size_t *ti, ptwm_err *err) {
    if (w->nt == w->capt) {
        size_t cap = w->capt ? w->capt * 2 : 16;
        wtensor *nt;
        rmu_lock(w);
        nt = (wtensor *)ptwm_realloc(w->t, (uint64_t)cap * sizeof(wtensor));
        if (nt) {
            w->t = nt;
            w->capt = cap;
        }
        rmu_unlock(w);
        if (!nt) {
            wtensor_free(t);
            return w_fail_caller(w, ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for the tensor table"));
        }
    }
    *ti = w->nt++;
    w->t[*ti] = *t;
    return PTWM_OK;
}

/* A pulled tensor's reads, and its source (write_pull.c). */
typedef struct wpull {
    ptwm_keyed_read_fn read;
    void *h;
    size_t key;
} wpull;

/* The bytes [off, off + len) of tensor t into job j's slot: read through
 * the caller's callback, borrowed from the caller's buffer, or copied into
 * the slot's own; or (pull) only its buffer, which its worker reads into.
 * A failure is the writer's. */
static ptwm_error fill_slot(ptwm_writer *w, wjob *j, const wtensor *t, const ptwm_tensor_desc *d,
                            ptwm_read_fn read, void *ctx, int pull, uint64_t off, size_t len,
                            ptwm_err *err) {
    ptwm_error rc;
    if (pull) {
        if (w->borrow)
            return w_fail_caller(w, ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                                              "pulled tensor on a borrowing writer"));
        j->raw = NULL; /* its worker takes a buffer and reads (write_pull.c) */
        return PTWM_OK;
    }
    if (!w->borrow && !(j->raw = ptwm_writer_buf_take(w->ctx, w->raws, &w->nraws, len,
                                                      (size_t)w->p.chunk_size, &j->raw_cap)))
        return w_fail_caller(w, ptwm_fail(err, PTWM_ERR_NOMEM,
                                          "out of memory for a chunk buffer of %zu bytes", len));
    if (read && !j->raw)
        return w_fail_caller(w, ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                                          "streamed tensor on a borrowing writer"));
    if (read) {
        if ((rc = read(ctx, off, j->raw, len, err))) {
            ptwm_err_prefix(err, "tensor '%s': reading bytes %llu..%llu", t->name,
                            (unsigned long long)off, (unsigned long long)(off + len));
            return w_fail_caller(w, rc);
        }
        j->src = j->raw;
    } else if (w->borrow) {
        j->src = (const uint8_t *)d->data + off;
    } else {
        memcpy(j->raw, (const uint8_t *)d->data + off, len);
        j->src = j->raw;
    }
    return PTWM_OK;
}

/* What job j (chunk k of tensor ti, t, len bytes) carries of its tensor:
 * copies, since the tensor array may move while workers run. */
static void describe_job(wjob *j, const wtensor *t, size_t ti, uint64_t k, size_t len) {
    const uint8_t *q = t->chain_bytes;
    unsigned c;
    j->tensor = ti;
    j->chunk = k;
    j->dtype = t->dtype;
    j->columns = t->ndim >= 2 ? t->shape[t->ndim - 1] : 0;
    j->plane_crc = (t->flags & PTWM_TF_PLANE_CRC) != 0;
    j->hash_raw = t->nchunks == 1 && (t->flags & PTWM_TF_PAYLOAD_HASH);
    j->nchains = t->nchains;
    for (c = 0; c < t->nchains; q += t->chain_len[c++]) {
        j->chain_ptr[c] = q;
        j->chain_len[c] = t->chain_len[c];
    }
    j->raw_len = len;
    j->rd = NULL;
    j->hs = 0;
    j->streamed = 0;
    j->hpassed = j->pdone = 0;
    j->rc = PTWM_OK; /* (coded is 0: cleared when the slot's last job was appended) */
}

/* What job j (chunk k of tensor t, at off) needs of write_pull.c: the read
 * its worker makes, if pulled (pl); for a tensor of several chunks, its part
 * in the stream the workers hash in job order. */
static void describe_pull_and_hash(wjob *j, const wtensor *t, const wpull *pl, uint64_t k, uint64_t off) {
    if (pl) {
        j->rd = pl->read;
        j->rd_h = pl->h;
        j->rd_key = pl->key;
        j->rd_off = off;
    }
    j->tname = t->name;
    if (t->nchunks > 1 && (t->flags & PTWM_TF_PAYLOAD_HASH))
        j->hs = (uint8_t)(HS_PART | (k == 0 ? HS_FIRST : 0) | (k + 1 == t->nchunks ? HS_LAST : 0));
}

/* The digest of h, if begun, into tensor ti's base hash (base) or payload
 * hash, under rmu (appending threads read the array). */
static void end_hash(ptwm_writer *w, ptwm_xxh128 *h, size_t ti, int base) {
    uint8_t hash[16];
    if (!h->state) return;
    ptwm_xxh128_end(h, hash);
    rmu_lock(w);
    memcpy(base ? w->t[ti].base_hash : w->t[ti].hash, hash, 16);
    rmu_unlock(w);
}

/* The payload hash of tensor t: by the worker of a tensor of one chunk; in
 * job order by the workers for a tensor of several (the writer's stream
 * made here, so that they never fail to start it: hashed on the writing
 * thread, 1.4% of a one-thread compress was work only that thread did);
 * an empty tensor's, the hash of no bytes, into *h here. */
static ptwm_error begin_hash(ptwm_writer *w, const wtensor *t, ptwm_xxh128 *h, ptwm_err *err) {
    if (!(t->flags & PTWM_TF_PAYLOAD_HASH) || t->nchunks == 1) return PTWM_OK;
    if (t->nchunks > 1) return w->hstream.state ? PTWM_OK : ptwm_xxh128_begin(&w->hstream, err);
    return ptwm_xxh128_begin(h, err);
}

static ptwm_error add_common(ptwm_writer *w, const ptwm_tensor_desc *d, const ptwm_chain_list *chains,
                             ptwm_read_fn read, void *ctx, const wpull *pl, ptwm_err *err) {
    wtensor t;
    ptwm_xxh128 h = {NULL}, bh = {NULL};
    size_t bi = 0;
    ptwm_error rc;
    uint64_t k, off = 0;
    size_t ti = 0;
    if (!w) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer");
    if ((rc = w_failed(w, err))) return rc;
    if (!read && !pl && d && d->nbytes && !d->data)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s' has no data", d->name ? d->name : "");
    if ((rc = prepare_tensor(w, d, chains, &t, err))) {
        wtensor_free(&t);
        return rc;   /* a rejected tensor leaves the writer usable */
    }
    if (base_match(w, &t, &bi)) {
        if ((rc = ptwm_xxh128_begin(&bh, err))) {
            wtensor_free(&t);
            return rc;
        }
        t.flags |= PTWM_TF_BASE;
    }
    if ((rc = append_tensor(w, &t, &ti, err))) {
        ptwm_xxh128_free(&bh);
        return rc;
    }
    if ((rc = begin_hash(w, &t, &h, err))) {
        ptwm_xxh128_free(&bh);
        return w_fail_caller(w, rc);
    }
    for (k = 0; k < t.nchunks; k++) {
        wjob *j;
        size_t len = (size_t)PTWM_MIN(t.chunk_size, t.nbytes - off), slot;
        /* A chunk queued per thread keeps the threads busy while the last
         * writer's chunks finish: it is settled then, and its buffers serve
         * this writer from here. */
        if (w->sh && w->nheld >= w->nworkers) ptwm_writer_settle(w->sh);
        while (w->nheld == w->window || (w->nheld && w->held + len > w->budget))
            if ((rc = ptwm_writer_reclaim_one(w, err))) break;
        if (rc) break;
        slot = (w->reclaim + w->nheld) % w->window;
        j = &w->jobs[slot];
        if ((rc = fill_slot(w, j, &t, d, read, ctx, pl != NULL, off, len, err))) break;
        j->base = NULL;
        if (bh.state && (rc = read_base_chunk(w, j, bi, off, len, &bh, err))) {
            ptwm_err_prefix(err, "tensor '%s'", t.name);
            w_fail_caller(w, rc);
            break;
        }
        describe_job(j, &t, ti, k, len);
        describe_pull_and_hash(j, &t, pl, k, off);
        w->nheld++;
        w->held += len;
        ptwm_queue_submit(w->queue, w->slot0 + slot, (uint64_t)len * t.nchains);
        off += len;
    }
    if (rc) {
        ptwm_xxh128_free(&h);
        ptwm_xxh128_free(&bh);
        return rc;
    }
    end_hash(w, &bh, ti, 1);
    end_hash(w, &h, ti, 0);
    return PTWM_OK;
}

ptwm_error ptwm_writer_add(ptwm_writer *w, const ptwm_tensor_desc *desc,
                           const ptwm_chain_list *chains, ptwm_err *err) {
    return add_common(w, desc, chains, NULL, NULL, NULL, err);
}

ptwm_error ptwm_writer_add_stream(ptwm_writer *w, const ptwm_tensor_desc *desc,
                                  const ptwm_chain_list *chains, ptwm_read_fn read, void *ctx,
                                  ptwm_err *err) {
    if (!read) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL read callback");
    return add_common(w, desc, chains, read, ctx, NULL, err);
}

ptwm_error ptwm_writer_add_pulled(ptwm_writer *w, const ptwm_tensor_desc *desc,
                                  const ptwm_chain_list *chains, ptwm_keyed_read_fn read, void *h,
                                  size_t key, ptwm_err *err) {
    wpull pl;
    if (!read) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL read callback");
    pl.read = read;
    pl.h = h;
    pl.key = key;
    return add_common(w, desc, chains, NULL, NULL, &pl, err);
}
