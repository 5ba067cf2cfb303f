/* The base of a .ptwm reader's tensors coded against one (docs/DELTA.md).
 *
 * Setting a base looks up, once, each such tensor's base tensor (name, then
 * dtype and shape, then the payload hash the base records) and keeps, per
 * tensor, its index in the base or why it has none. Decoding a based chunk
 * (on any worker) reads the base's bytes of the same range, checks them
 * against the CRC32 the chunk entry records, and only then decodes. The base
 * is read through the table container_base.h defines, never through its
 * format's calls. A base whose reads must come one at a time (base.serial)
 * is read under base_mu, which guards nothing else and is taken with no
 * other lock held. */
#include "reader_impl.h"
#include "chunk.h"
#include "container_format.h"
#include "reader.h"

/* Why tensor t cannot have its base, into err: no base given, the base
 * lacks it (or its dtype or shape differ), or the base's tensor hashes
 * differently; the messages name the tensor and the hashes. */
static ptwm_error base_fail(const ptwm_reader *r, const rtensor *t, ptwm_error rc, ptwm_err *err) {
    char want[33], got[33];
    uint8_t h[16];
    size_t bi = r->base_idx ? r->base_idx[t - r->t] : SIZE_MAX;
    ptwm_hex128(t->base_hash, want);
    if (rc == PTWM_ERR_BASE_MISSING)
        return ptwm_fail(err, rc,
                         "coded against a base tensor of XXH3-128 %s, and no base was given "
                         "(--base)",
                         want);
    if (rc == PTWM_ERR_BASE_HASH && bi != SIZE_MAX && r->base.ops->tensor_hash(r->base.h, bi, h))
        return ptwm_fail(err, rc,
                         "coded against a base tensor of XXH3-128 %s, the base '%s' holds one of "
                         "XXH3-128 %s (a different base)",
                         want, r->base.ops->label(r->base.h), ptwm_hex128(h, got));
    return ptwm_fail(err, PTWM_ERR_BASE_MISMATCH,
                     "coded against a base tensor of XXH3-128 %s, and the base '%s' %s", want,
                     r->base.ops->label(r->base.h),
                     bi == SIZE_MAX ? "has no tensor of this name"
                                    : "holds one of another dtype or shape");
}

/* A chunk coded against its base chunk (its payload's CRC32 checked): the
 * base's bytes of the same range, checked against the CRC32 the chunk entry
 * records, then the payload. */
ptwm_error ptwm_reader_decode_based(ptwm_reader *r, ptwm_ws *ws, const rtensor *t, const rchunk *c,
                                    const uint8_t *src, uint8_t *out, ptwm_err *err) {
    size_t ti = (size_t)(t - r->t);
    uint8_t *b;
    uint32_t got;
    ptwm_error rc;
    if (!r->base.ops) return base_fail(r, t, PTWM_ERR_BASE_MISSING, err);
    if (r->base_rc[ti]) return base_fail(r, t, r->base_rc[ti], err);
    if (!(b = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_BASE, c->raw, 0)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a base chunk of %u bytes", c->raw);
    if (r->base.serial) pthread_mutex_lock(&r->base_mu);
    rc = r->base.ops->read(r->base.h, r->base_idx[ti], c->start, b, c->raw, err);
    if (r->base.serial) pthread_mutex_unlock(&r->base_mu);
    if (rc) {
        ptwm_err_prefix(err, "its base '%s'", r->base.ops->label(r->base.h));
        return rc;
    }
    got = ptwm_crc32(0, b, c->raw);
    if (got != c->base_crc) {
        char want[33];
        return ptwm_fail(err, PTWM_ERR_BASE_CRC,
                         "the base '%s' has bytes %llu..%llu of CRC32 %08x, this chunk was coded "
                         "against CRC32 %08x (a damaged or different base; base tensor XXH3-128 "
                         "%s)",
                         r->base.ops->label(r->base.h), (unsigned long long)c->start,
                         (unsigned long long)(c->start + c->raw), (unsigned)got,
                         (unsigned)c->base_crc, ptwm_hex128(t->base_hash, want));
    }
    return ptwm_chunk_decode_base(ws, r->version, t->chain_ptr[c->chain], t->chain_len[c->chain],
                                  t->dtype, src, c->coded, b, out, c->raw, 1, err);
}

ptwm_error ptwm_reader_use_base(ptwm_reader *r, const ptwm_base *base, ptwm_err *err) {
    static const ptwm_base none = {NULL, NULL, 0};
    const ptwm_base_ops *ops;
    size_t i;
    ptwm_tensor_info bi;
    uint8_t h[16];
    if (!r) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_reader_use_base: NULL reader");
    ptwm_free(r->base_idx);
    ptwm_free(r->base_rc);
    r->base_idx = NULL;
    r->base_rc = NULL;
    r->base = base && base->ops ? *base : none;
    if (!(ops = r->base.ops)) return PTWM_OK;
    r->base_idx = (size_t *)ptwm_calloc(r->nt ? r->nt : 1, sizeof(size_t));
    r->base_rc = (ptwm_error *)ptwm_calloc(r->nt ? r->nt : 1, sizeof(ptwm_error));
    if (!r->base_idx || !r->base_rc) {
        r->base = none;
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu base entries", r->nt);
    }
    if (!r->base_mu_ready) pthread_mutex_init(&r->base_mu, NULL);
    r->base_mu_ready = 1;
    for (i = 0; i < r->nt; i++) {
        const rtensor *t = &r->t[i];
        r->base_idx[i] = SIZE_MAX;
        if (!(t->flags & PTWM_TF_BASE)) continue;
        if (ops->find(r->base.h, t->name, &r->base_idx[i])) {
            r->base_idx[i] = SIZE_MAX;
            r->base_rc[i] = PTWM_ERR_BASE_MISMATCH;
        } else if (ops->tensor(r->base.h, r->base_idx[i], &bi) || bi.dtype != t->dtype ||
                   bi.ndim != t->ndim || (t->ndim && memcmp(bi.shape, t->shape, t->ndim * 8))) {
            r->base_rc[i] = PTWM_ERR_BASE_MISMATCH;
        } else if (ops->tensor_hash(r->base.h, r->base_idx[i], h) &&
                   memcmp(h, t->base_hash, 16) != 0) {
            r->base_rc[i] = PTWM_ERR_BASE_HASH;
        }
    }
    return PTWM_OK;
}

int ptwm_reader_tensor_base(const ptwm_reader *r, size_t index, uint8_t hash[16],
                            uint64_t *chunks) {
    const rtensor *t;
    uint64_t k, n = 0;
    if (!r || index >= r->nt || !(r->t[index].flags & PTWM_TF_BASE)) return 0;
    t = &r->t[index];
    for (k = 0; k < t->nchunks; k++) n += t->chunks[k].based;
    if (hash) memcpy(hash, t->base_hash, 16);
    if (chunks) *chunks = n;
    return 1;
}
