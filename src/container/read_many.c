/* Whole tensors of one .ptwm reader into the caller's buffers
 * (ptwm_reader_decode_many): every chunk through the decode ring, decoded in
 * place in the caller's buffers; as chunks retire, in order, the calling
 * thread hashes them and checks each tensor's payload hash at its last
 * chunk (a tensor that fails is zeroed). */
#include "read_ring.h"
#include "container_format.h"

/* After job j retired cleanly: hash its chunk while the decoded bytes are
 * still in cache; at the tensor's last chunk, check its payload hash (a
 * tensor that fails is zeroed: never hand back wrong bytes). */
static ptwm_error hash_retired(const ptwm_reader *r, const sjob *j, ptwm_xxh128 *h, void *const *dsts,
                               const size_t *sizes, ptwm_err *err) {
    const rtensor *t = &r->t[j->tensor];
    uint8_t got[16];
    int done;
    ptwm_error rc = ptwm_drive_retired_hash(t, j, h, got, &done, err);
    if (rc || !done) return rc;
    if ((rc = ptwm_reader_check_hash(r, t, got, err))) memset(dsts[j->item], 0, sizes[j->item]);
    return rc;
}

ptwm_error ptwm_reader_decode_many(ptwm_reader *r, const size_t *indices, void *const *dsts,
                                   const size_t *sizes, size_t n, ptwm_err *err) {
    sdrive d;
    ptwm_xxh128 h = {NULL};
    ptwm_error rc = PTWM_OK, r2;
    size_t i;
    uint64_t k, chunks = 0;
    sjob *j = NULL;
    if (!r || (n && (!indices || !dsts || !sizes)))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or list");
    for (i = 0; i < n; i++) {
        const rtensor *t;
        if (indices[i] >= r->nt)
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", indices[i], r->nt);
        t = &r->t[indices[i]];
        if (sizes[i] != t->nbytes || (!dsts[i] && sizes[i]))
            return ptwm_fail(err, PTWM_ERR_DST_SIZE, "tensor '%s' has %llu bytes, buffer %zu", t->name,
                             (unsigned long long)t->nbytes, sizes[i]);
        chunks += t->nchunks;
    }
    if ((rc = ptwm_drive_init(&d, r, chunks <= 1 ? 1 : r->threads, r->mem ? 16 : 3, 0, err))) {
        ptwm_drive_free(&d);
        return rc;
    }
    /* Each chunk is hashed as it retires, on this thread, while the workers
     * decode the chunks behind it; a tensor is checked when its last chunk
     * retires (jobs retire in order). */
    for (i = 0; i < n && !rc; i++) {
        const rtensor *t = &r->t[indices[i]];
        for (k = 0; k < t->nchunks && !rc; k++) {
            if (d.npending == d.window &&
                ((rc = ptwm_drive_retire(&d, &j, err)) || (rc = hash_retired(r, j, &h, dsts, sizes, err))))
                break;
            rc = ptwm_drive_submit(&d, i, indices[i], k, (uint8_t *)dsts[i] + t->chunks[k].start, 0, err);
        }
    }
    ptwm_queue_rest(d.q);   /* nothing more is submitted */
    while (d.npending) {
        r2 = ptwm_drive_retire(&d, &j, rc ? NULL : err);
        if (!r2 && !rc) r2 = hash_retired(r, j, &h, dsts, sizes, err);
        if (r2 && !rc) rc = r2;
    }
    ptwm_xxh128_free(&h);
    ptwm_drive_free(&d);
    /* Tensors without chunks (empty): the hash of no bytes. */
    for (i = 0; i < n && !rc; i++) {
        const rtensor *t = &r->t[indices[i]];
        if (t->nchunks == 0 && (t->flags & PTWM_TF_PAYLOAD_HASH)) {
            uint8_t got[16];
            ptwm_xxh128_oneshot(dsts[i], sizes[i], got);
            rc = ptwm_reader_check_hash(r, t, got, err);
        }
    }
    return rc;
}

ptwm_error ptwm_reader_decode(ptwm_reader *r, size_t index, void *dst, size_t dst_size, ptwm_err *err) {
    return ptwm_reader_decode_many(r, &index, &dst, &dst_size, 1, err);
}
