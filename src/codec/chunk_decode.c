/* Chunk decoding: parse the header (chunk_frame.c), decode each plane with
 * the coder its entry names, then run the inverses of the stages the chunk
 * names, last stage first (stage.h). */
#include "chunk.h"
#include "chunk_frame.h"
#include "coder.h"
#include "hash.h"
#include "plane_coder.h"
#include "rans.h"

/* Decode every plane: into the raw bytes when the chunk has no stages (the
 * plane is the chunk), else into the workspace; IDENTITY planes are used
 * where they lie. Each CRC is checked before its plane is decoded. */
static ptwm_error decode_planes(ptwm_ws *ws, unsigned version, const ptwm_chunk_head *h,
                                int plane_crcs, uint8_t *raw, const uint8_t **plane,
                                ptwm_err *err) {
    const ptwm_chunk_layout *L = &h->L;
    size_t need = 16, poff = 0, boff = 0, k;
    uint8_t *pb;
    for (k = 0; k < L->count; k++) need += L->len[k];
    pb = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_PLANES, need, 0);
    if (!pb) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu work bytes", need);
    for (k = 0; k < L->count; k++) {
        const uint8_t *cp = h->body + boff;
        uint8_t *out = k == 0 && L->nstages == 0 ? raw : pb + poff;
        ptwm_error e;
        boff += h->coded[k];
        if ((h->flags & PTWM_CHUNK_FLAG_CRC) && plane_crcs) {
            uint32_t got = ptwm_crc32(0, cp, h->coded[k]);
            if (got != h->crc[k])
                return ptwm_fail(err, PTWM_ERR_CRC,
                                 "chunk payload: plane %zu (%s, %zu coded bytes): stored CRC32 "
                                 "%08x, computed %08x",
                                 k, ptwm_coder_label(h->coder[k]), h->coded[k],
                                 (unsigned)h->crc[k], (unsigned)got);
        }
        if (h->coder[k] == PTWM_METHOD_IDENTITY) {
            plane[k] = cp;
            continue;
        }
        if (h->coder[k] == PTWM_METHOD_RANS && version < PTWM_CHUNK_X4_VERSION) {
            unsigned ns = ptwm_rans_streams(cp, h->coded[k]);
            unsigned from = ns == 4 ? PTWM_CHUNK_X4_VERSION : ns == 2 ? PTWM_CHUNK_X2_VERSION : 0;
            if (version < from)
                return ptwm_fail(err, PTWM_ERR_CORRUPT,
                                 "chunk payload: plane %zu: rANS in %u streams in a version %u "
                                 "file (from version %u on)",
                                 k, ns, version, from);
        }
        if (h->coder[k] == PTWM_CODER_CONST) {
            memset(out, cp[0], L->len[k]);
        } else if ((e = ptwm_coder_find(h->coder[k])->decode(ws, cp, h->coded[k], out, L->len[k]))) {
            return ptwm_fail(err, e == PTWM_ERR_UNKNOWN_ID || e == PTWM_ERR_NOMEM ? e
                                                                                 : PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu (%s, %zu coded bytes, %zu raw): %s", k,
                             ptwm_coder_label(h->coder[k]), h->coded[k], L->len[k],
                             ptwm_error_string(e));
        }
        plane[k] = out;
        poff += L->len[k];
    }
    return PTWM_OK;
}

/* The stages' inverses, last first, from the decoded planes to the chunk, as
 * the decode plan lays them out (stage.h): each inverse is told the forms it
 * takes and gives, and runs the inverses the plan put inside it strip by
 * strip. */
static ptwm_error run_inverses(ptwm_ws *ws, const ptwm_chunk_layout *L, const uint8_t **plane,
                               const uint8_t *base, uint8_t *raw, ptwm_err *err) {
    ptwm_pipe P;
    ptwm_decode_plan D;
    unsigned s, t, k;
    ptwm_error e;
    if (L->nstages == 0) { /* one plane: the chunk */
        if (L->raw_len && plane[0] != raw) memcpy(raw, plane[0], L->raw_len);
        return PTWM_OK;
    }
    if ((e = ptwm_decode_plan_make(L, &D, err))) return e;
    memset(&P, 0, sizeof(P));
    for (k = 0; k < L->nmain; k++) P.main[k] = plane[k];
    for (s = 0; s < L->nstages; s++)
        for (k = 0; k < L->nside[s]; k++) P.side[s][k] = plane[L->side_at[s] + k];
    P.raw = raw;
    P.el = raw;
    P.base = base;
    P.base_len = base ? L->raw_len : 0;
    for (s = 0; s < L->nstages; s++) {
        const ptwm_stage *st = ptwm_stage_find(L->use[s].id);
        if (st->prepare && (e = st->prepare(&L->use[s], s, L, &P, ws, err))) return e;
    }
    for (s = L->nstages; s-- > 0;) {
        if (D.host[s] != s) continue; /* run inside its host's inverse */
        P.in = D.in[s];
        P.out = D.out[s];
        P.nstrips = 0;
        for (t = s; t-- > 0 && D.host[t] == s;) {
            const ptwm_stage *ts = ptwm_stage_find(L->use[t].id);
            if ((e = ts->strip_begin(&L->use[t], t, L, &P, ws, err))) return e;
            P.strips[P.nstrips].fn = ts->strip;
            P.strips[P.nstrips++].s = t;
        }
        if ((e = ptwm_stage_find(L->use[s].id)->inverse(&L->use[s], s, L, &P, ws, err)))
            return e;
    }
    if (L->tail) memcpy(raw + L->raw_len - L->tail, plane[L->tail_at], L->tail);
    return PTWM_OK;
}

static ptwm_error decode_payload(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                 size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                 size_t src_len, const uint8_t *base, uint8_t *raw, size_t raw_len,
                                 int plane_crcs, ptwm_err *err) {
    ptwm_chain_info c;
    ptwm_chunk_head h;
    const uint8_t *plane[PTWM_CHUNK_PLANES];
    ptwm_error e;
    if ((!src && src_len) || (!raw && raw_len))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_decode: NULL argument");
    if ((e = ptwm_chain_info_parse_cached(&ws->chain, chain, chain_len, (int)dtype, &c, err)) ||
        (e = ptwm_chunk_head_parse(version, &c, src, src_len, raw_len, &h, err)) ||
        (e = decode_planes(ws, version, &h, plane_crcs, raw, plane, err)))
        return e;
    return run_inverses(ws, &h.L, plane, base, raw, err);
}

static ptwm_error decode_with(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                              size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                              size_t src_len, const uint8_t *base, uint8_t *raw, size_t raw_len,
                              int plane_crcs, ptwm_err *err) {
    ptwm_ws *own;
    ptwm_error e;
    if (!(ws = ptwm_ws_or_temp(ws, &own)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: no workspace memory");
    e = decode_payload(ws, version, chain, chain_len, dtype, src, src_len, base, raw, raw_len,
                       plane_crcs, err);
    ptwm_ws_trim(ws, PTWM_WS_KEEP);
    ptwm_ws_free(own);
    return e;
}

unsigned ptwm_chunk_min_version(const uint8_t *src, size_t src_len, size_t raw_len) {
    ptwm_chunk_head h;
    size_t k, off = 0;
    unsigned v = 0;
    if (ptwm_chunk_head_parse(PTWM_CHUNK_VERSION, NULL, src, src_len, raw_len, &h, NULL)) return 0;
    for (k = 0; k < h.L.count; off += h.coded[k++]) {
        unsigned ns = h.coder[k] == PTWM_METHOD_RANS ? ptwm_rans_streams(h.body + off, h.coded[k]) : 1;
        if (ns == 4) return PTWM_CHUNK_X4_VERSION;
        if (ns == 2) v = PTWM_CHUNK_X2_VERSION;
    }
    return v;
}

ptwm_error ptwm_chunk_decode_version(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                     size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                     size_t src_len, uint8_t *raw, size_t raw_len, ptwm_err *err) {
    return decode_with(ws, version, chain, chain_len, dtype, src, src_len, NULL, raw, raw_len, 1,
                       err);
}

ptwm_error ptwm_chunk_decode_checked(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                     size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                     size_t src_len, uint8_t *raw, size_t raw_len, ptwm_err *err) {
    return decode_with(ws, version, chain, chain_len, dtype, src, src_len, NULL, raw, raw_len, 0,
                       err);
}

ptwm_error ptwm_chunk_decode_base(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                  size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                  size_t src_len, const uint8_t *base, uint8_t *raw,
                                  size_t raw_len, int checked, ptwm_err *err) {
    return decode_with(ws, version, chain, chain_len, dtype, src, src_len, base, raw, raw_len,
                       !checked, err);
}

ptwm_error ptwm_chunk_decode(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                             ptwm_dtype dtype, const uint8_t *src, size_t src_len, uint8_t *raw,
                             size_t raw_len, ptwm_err *err) {
    return ptwm_chunk_decode_version(ws, PTWM_CHUNK_VERSION, chain, chain_len, dtype, src, src_len,
                                     raw, raw_len, err);
}
