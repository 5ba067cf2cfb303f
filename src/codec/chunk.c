/* Chunk encoding: choose the stages for one chunk (the modelling policy),
 * code each plane they make (plane_coder.c), frame them (chunk_frame.c).
 *
 * The chain fixes the transform (SPLIT, PLANES or none) and the coders each
 * plane may use; the data decides the rest, from estimates of the planes
 * each choice makes: sparse elements, column or block scales on the
 * exponent, joint exponent symbols (docs/CHAINS.md). The payload names the
 * stages it used, so the decoder (chunk_decode.c) needs none of these
 * rules. Work memory comes from the caller's workspace (workspace.h). */
#include "chunk.h"
#include "chunk_frame.h"
#include "coder.h"
#include "planes.h"
#include "plane_coder.h"

/* Joint planes need an exponent of one byte and a whole sign:mantissa byte
 * above the rest of the mantissa (BF16, F32); shorter runs of elements stay
 * plain (the joint table would not pay). */
#define JOINT_MIN 256
static int joint_ok(const ptwm_chain_info *c) {
    return c->xform == PTWM_XFORM_SPLIT && c->exp_bits <= 8 && (c->man_bits + 1) % 8 == 0;
}

/* What the encoder chose for one chunk: the stages, their planes, and an
 * estimate of each plane. */
typedef struct chunk_model {
    const ptwm_chain_info *c;
    ptwm_chunk_layout L;
    ptwm_pipe P;
    ptwm_plane_est main[PTWM_MAX_BASE_PLANES];
    ptwm_plane_est side[PTWM_CSTAGES_MAX][PTWM_STAGE_SIDES];
    /* In payload order (after ptwm_chunk_layout_finish). */
    const uint8_t *plane[PTWM_CHUNK_PLANES];
    const ptwm_plane_est *est[PTWM_CHUNK_PLANES];
    ptwm_plane_est tail_est;
} chunk_model;

/* Run stage u forward on the planes P (at the end of L's list) and add it. */
static ptwm_error apply(ptwm_chunk_layout *L, ptwm_pipe *P, ptwm_stage_use *u, ptwm_ws *ws) {
    const ptwm_stage *st = ptwm_stage_find(u->id);
    ptwm_error e = st->forward(u, L->nstages, L, P, ws);
    return e ? e : ptwm_chunk_layout_add(u, L, NULL);
}

/* Sparse elements, then the chain's transform; estimates of its planes.
 * Sparse: with at least 1/16 zero elements (+0 or -0), code a bitmap, the
 * zeros' signs and only the nonzero elements (pruned or padded weights),
 * decided from every 8th element: the choice only affects size. */
static ptwm_error model_base(chunk_model *M, const uint8_t *raw, ptwm_ws *ws) {
    const ptwm_chain_info *c = M->c;
    size_t total = M->L.raw_len / c->width;
    ptwm_stage_use u;
    unsigned k, s;
    ptwm_error e;
    M->P.src = raw;
    memset(&u, 0, sizeof(u));
    if (c->xform != PTWM_XFORM_BYTES && c->width >= 2 && total >= 64 &&
        ptwm_count_zero_elems(raw, total, c->width, 8) * 16 >= (total + 7) / 8) {
        u.id = PTWM_CSTAGE_SPARSE;
        u.p[0] = c->width;
        if ((e = apply(&M->L, &M->P, &u, ws))) return e;
        s = M->L.nstages - 1;
        for (k = 0; k < M->L.nside[s]; k++)
            M->side[s][k] = ptwm_plane_estimate(M->P.side[s][k], M->L.side_len[s][k]);
    }
    if (c->xform == PTWM_XFORM_BYTES) {
        M->P.main[0] = raw; /* the raw bytes are the plane */
    } else {
        u.id = c->xform == PTWM_XFORM_SPLIT ? PTWM_CSTAGE_SPLIT : PTWM_CSTAGE_PLANES;
        u.p[0] = c->width;
        u.p[1] = c->exp_bits;
        u.p[2] = c->man_bits;
        if ((e = apply(&M->L, &M->P, &u, ws))) return e;
    }
    for (k = 0; k < M->L.nmain; k++) M->main[k] = ptwm_plane_estimate(M->P.main[k], M->L.main_len[k]);
    return PTWM_OK;
}

/* Try an exponent-scale stage (COLS or BLOCKS) on plane 0: kept, and 1
 * returned, when residuals and scales estimate smaller than the plane. */
static int try_scales(chunk_model *M, unsigned id, uint64_t param, ptwm_ws *ws) {
    ptwm_chunk_layout L = M->L;
    ptwm_pipe P = M->P;
    ptwm_stage_use u;
    unsigned s = M->L.nstages;
    ptwm_plane_est r, d;
    memset(&u, 0, sizeof(u));
    u.id = (uint8_t)id;
    u.p[0] = param;
    if (apply(&L, &P, &u, ws)) return 0;
    r = ptwm_plane_estimate(P.main[0], L.n);
    d = ptwm_plane_estimate(P.side[s][0], L.side_len[s][0]);
    if (r.bytes + d.bytes >= M->main[0].bytes) return 0;
    M->L = L;
    M->P = P;
    M->main[0] = r;
    M->side[s][0] = d;
    return 1;
}

/* Joint exponent + top sign:mantissa bits, over the plain exponents or
 * their column residuals (the stages of bL/bP): kept when it estimates
 * smaller than the exponent (plain or relative to scales, in M) beside the
 * sign:mantissa plane (raw where coding it would not pay). */
static void try_joint(chunk_model *M, const ptwm_chunk_layout *bL, const ptwm_pipe *bP,
                      const uint32_t *ex_hist, ptwm_ws *ws) {
    ptwm_chunk_layout L = *bL;
    ptwm_pipe P = *bP;
    ptwm_stage_use u;
    unsigned s = bL->nstages, sc;
    size_t n = M->L.n, nib = n / 2 + (n & 1);
    int cols = ptwm_chunk_layout_has(&M->L, PTWM_CSTAGE_COLS, &sc);
    double scales = cols || ptwm_chunk_layout_has(&M->L, PTWM_CSTAGE_BLOCKS, &sc) ? M->side[sc][0].bytes
                                                                            : 0.0;
    double plain = M->main[0].bytes + scales +
                   (M->main[1].bytes < (double)n * PTWM_WORTH_CODING ? M->main[1].bytes
                                                                     : (double)n);
    ptwm_plane_est ej;
    memset(&u, 0, sizeof(u));
    u.id = PTWM_CSTAGE_JOINT;
    P.ex_hist = ex_hist;
    if (apply(&L, &P, &u, ws)) return;
    ej = ptwm_plane_estimate(P.main[0], n);
    if (ej.bytes + (double)nib + (double)(PTWM_JOINT_MAP + u.p[0]) + (cols ? scales : 0.0) >= plain)
        return;
    M->L = L;
    M->P = P;
    M->main[0] = ej;
    M->main[1] = ptwm_plane_estimate(P.main[1], nib);
    M->side[s][0] = ptwm_plane_estimate(P.side[s][0], L.side_len[s][0]);
}

/* The modelling choices on the exponent plane. Column scales (tensors with
 * a last dimension) go first; block scales are tried only where those lost
 * (beside winning columns they changed little and cost compress time; in
 * PyTorch's [out, in] layout blocks within a row follow the output
 * channel's scale: docs/CHAINS.md section 4). Joint symbols then replace
 * block scales, or go over column residuals. */
static void model_exponent(chunk_model *M, size_t want_cols, ptwm_ws *ws) {
    const ptwm_chain_info *c = M->c;
    size_t n = M->L.n;
    uint32_t ex_hist[256];
    ptwm_chunk_layout pL;
    ptwm_pipe pP;
    int cols = 0, blocks = 0;
    if (M->main[0].constant || !(M->L.seen & (1u << PTWM_CSTAGE_SPLIT))) return;
    /* The exponents' (sampled) counts pick the joint map. */
    memcpy(ex_hist, M->main[0].hist, sizeof(ex_hist));
    /* Column scales need a whole row twice over to pay; sparse chunks have
     * lost the columns. */
    if (c->micro_block && want_cols >= 2 && want_cols <= n / 2 && n / want_cols < (1u << 24) &&
        !(M->L.seen & (1u << PTWM_CSTAGE_SPARSE)))
        cols = try_scales(M, PTWM_CSTAGE_COLS, want_cols, ws);
    if (cols) memcpy(ex_hist, M->main[0].hist, sizeof(ex_hist));
    pL = M->L;
    pP = M->P;
    if (c->micro_block && !cols && n >= 2 * (size_t)c->micro_block)
        blocks = try_scales(M, PTWM_CSTAGE_BLOCKS, c->micro_block, ws);
    /* (joint replaces block scales: over the plain exponents then) */
    if (joint_ok(c) && n >= JOINT_MIN && !M->main[0].constant)
        try_joint(M, blocks ? &pL : &M->L, blocks ? &pP : &M->P, ex_hist, ws);
}

/* Coding against a base chunk (docs/DELTA.md): BASE then byte planes of
 * the element width, whatever the chain's transform; each plane takes the
 * entropy settings of the chain's first plane. Floats are differenced in
 * their order (ordered), everything else as integers; sub-byte dtypes as
 * bytes. */
static int base_ordered(ptwm_dtype dtype) {
    switch (dtype) {
    case PTWM_DTYPE_F16: case PTWM_DTYPE_BF16: case PTWM_DTYPE_F32: case PTWM_DTYPE_F64:
    case PTWM_DTYPE_F8_E5M2: case PTWM_DTYPE_F8_E4M3: case PTWM_DTYPE_F8_E4M3FNUZ:
    case PTWM_DTYPE_F8_E5M2FNUZ:
        return 1;
    default: return 0;
    }
}

static void base_chain(ptwm_chain_info *c, ptwm_dtype dtype) {
    unsigned bits = ptwm_dtype_bits(dtype), w = bits % 8 ? 1 : bits / 8, k;
    if (w > PTWM_MAX_BASE_PLANES - 1) w = 1;
    c->xform = PTWM_XFORM_PLANES;
    c->width = c->nplanes = w;
    c->exp_bits = c->man_bits = c->exp_planes = c->sm_planes = c->micro_block = 0;
    for (k = 1; k < PTWM_MAX_BASE_PLANES; k++) {
        c->mask[k] = c->mask[0];
        c->zstd_level[k] = c->zstd_level[0];
        c->rans_order[k] = c->rans_order[0];
    }
}

/* BASE, then the differences as model_base codes a chunk: the weights a
 * fine-tune did not move are zero differences, so a sparse bitmap usually
 * leaves the planes only the ones that moved (decoding then runs the
 * coders over those alone). */
static ptwm_error model_delta(chunk_model *M, ptwm_dtype dtype, const uint8_t *raw,
                              const uint8_t *base, ptwm_ws *ws) {
    ptwm_stage_use u;
    ptwm_error e;
    M->P.src = raw;
    M->P.base = base;
    M->P.base_len = M->L.raw_len;
    memset(&u, 0, sizeof(u));
    u.id = PTWM_CSTAGE_BASE;
    u.p[0] = M->c->width;
    u.p[1] = (uint64_t)base_ordered(dtype);
    if ((e = apply(&M->L, &M->P, &u, ws))) return e;
    return model_base(M, M->P.src, ws);
}

/* Every plane in payload order, with its estimate; the tail is stored. */
static void model_finish(chunk_model *M, const uint8_t *raw) {
    ptwm_chunk_layout *L = &M->L;
    unsigned k, s;
    ptwm_chunk_layout_finish(L);
    for (k = 0; k < L->nmain; k++) {
        M->plane[k] = M->P.main[k];
        M->est[k] = &M->main[k];
    }
    for (s = 0; s < L->nstages; s++)
        for (k = 0; k < L->nside[s]; k++) {
            M->plane[L->side_at[s] + k] = M->P.side[s][k];
            M->est[L->side_at[s] + k] = &M->side[s][k];
        }
    if (L->tail) {
        M->plane[L->tail_at] = raw + L->raw_len - L->tail;
        M->tail_est = ptwm_plane_estimate(M->plane[L->tail_at], L->tail);
        M->est[L->tail_at] = &M->tail_est;
    }
}

/* The chain's entropy settings of payload plane k: the transform's planes
 * have their own, the stages' planes plane 0's, the tail is stored. zstd's
 * matches pay on integer planes and on the sparse bitmap (runs of zeros
 * where whole channels are pruned). */
static unsigned plane_setting(const chunk_model *M, unsigned k, int *lz) {
    const ptwm_chunk_layout *L = &M->L;
    unsigned sp;
    *lz = 0;
    if (k < L->nmain) {
        *lz = M->c->xform != PTWM_XFORM_SPLIT;
        return k;
    }
    if (L->tail && k == L->tail_at) return M->c->nplanes;
    *lz = ptwm_chunk_layout_has(L, PTWM_CSTAGE_SPARSE, &sp) && k == L->side_at[sp];
    return 0;
}

/* The bypassed form: no stages, one plane, the raw bytes. */
static size_t raw_form_size(size_t raw_len, int crc) {
    size_t rl = raw_len;
    return ptwm_chunk_head_size(NULL, 0, 1, &rl, crc) + raw_len;
}

size_t ptwm_chunk_bound(size_t raw_len) {
    /* The encoder falls back to the bypassed form whenever the planes are
     * larger; the bound keeps the 14 bytes of version 4's form. */
    return raw_len > SIZE_MAX - 14 ? SIZE_MAX : raw_len + 14;
}

size_t ptwm_chunk_work_bound(size_t raw_len) {
    /* The planes of any chain total at most 1.25x raw_len and a few
     * side bytes per element run (scales of half a row, bitmap and signs
     * an eighth each), and each needs three coders' bounds (about
     * len + len/128 + 64 each); 4x + 64 KiB covers that with room. */
    if (raw_len > (SIZE_MAX - 65536) / 4) return SIZE_MAX;
    return 4 * raw_len + 65536;
}

/* Where the coded planes go: straight into dst behind room for the header
 * when dst has room for the coders' bounds (ptwm_chunk_work_bound), else the
 * workspace. The header's varints fix where the body starts, so each
 * plane's coded length is guessed from its estimate; the body moves only
 * where a guess changed a varint's length (copying every body cost
 * compress time: docs/ARCHITECTURE.md, "Measurements behind the code"). */
static uint8_t *coded_room(const chunk_model *M, int crc, uint8_t *dst, size_t cap, size_t need,
                           ptwm_ws *ws) {
    size_t guess[PTWM_CHUNK_PLANES], h;
    unsigned k;
    for (k = 0; k < M->L.count; k++) {
        const ptwm_plane_est *e = M->est[k];
        guess[k] = e->constant ? 1 : e->bytes < (double)M->L.len[k] ? (size_t)e->bytes : M->L.len[k];
    }
    h = ptwm_chunk_head_size(M->L.use, M->L.nstages, M->L.count, guess, crc);
    if (dst && cap >= h && cap - h >= need) return dst + h;
    return (uint8_t *)ptwm_ws_get(ws, PTWM_WS_CODED, need, 0);
}

/* Code every plane of M into cb (room `need`); *body_len: the bytes. */
static ptwm_error code_planes(const chunk_model *M, const ptwm_chunk_params *prm, uint8_t *cb,
                              size_t need, int *coder, size_t *coded, size_t *body_len,
                              ptwm_ws *ws, ptwm_err *err) {
    int method = prm ? prm->method : PTWM_METHOD_MICROSCALE;
    size_t off = 0;
    unsigned k;
    for (k = 0; k < M->L.count; k++) {
        unsigned mask;
        int zl, order, lz, set = (int)plane_setting(M, k, &lz);
        ptwm_error e;
        ptwm_plane_settings(M->c, (unsigned)set, method, prm ? prm->zstd_level : 0, &mask, &zl,
                            &order);
        e = ptwm_plane_encode(ws, M->plane[k], M->L.len[k], M->est[k], mask, zl, order, lz,
                              cb + off, need - off, &coder[k], &coded[k]);
        if (e)
            return ptwm_fail(err, e, "chunk_encode: plane %u of %u (%zu bytes): %s", k,
                             M->L.count, M->L.len[k], ptwm_error_string(e));
        off += coded[k];
    }
    *body_len = off;
    return PTWM_OK;
}

static ptwm_error encode_ws(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                            ptwm_dtype dtype, const ptwm_chunk_params *prm, const uint8_t *raw,
                            const uint8_t *base, size_t raw_len, uint8_t *dst, size_t cap,
                            size_t *out_len, ptwm_err *err) {
    ptwm_chain_info c;
    chunk_model model, *M = &model;
    uint8_t *cb;
    size_t coded[PTWM_CHUNK_PLANES], need = 0, body_len = 0, rl = raw_len;
    int coder[PTWM_CHUNK_PLANES], ident = PTWM_METHOD_IDENTITY;
    unsigned crc = !prm || prm->emit_crc ? PTWM_CHUNK_FLAG_CRC : 0, k;
    ptwm_error e;

    if (!out_len || (!raw && raw_len) || (!dst && cap))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_encode: NULL argument");
    if ((e = ptwm_chain_info_parse_cached(&ws->chain, chain, chain_len, (int)dtype, &c, err)))
        return e;
    if (base) base_chain(&c, dtype);
    M->c = &c;
    memset(&M->P, 0, sizeof(M->P));
    ptwm_chunk_layout_start(raw_len, &M->L);
    e = base ? model_delta(M, dtype, raw, base, ws) : model_base(M, raw, ws);
    if (e) return ptwm_fail(err, e, "chunk_encode: %zu bytes: %s", raw_len, ptwm_error_string(e));
    if (!base) model_exponent(M, prm ? prm->columns : 0, ws);
    model_finish(M, raw);

    for (k = 0; k < M->L.count; k++)
        need += ptwm_coder_find(PTWM_METHOD_ZSTD)->bound(M->L.len[k]) +
                ptwm_coder_find(PTWM_METHOD_RANS)->bound(M->L.len[k]) +
                ptwm_coder_find(PTWM_METHOD_HUFFMAN)->bound(M->L.len[k]);
    if (!(cb = coded_room(M, crc != 0, dst, cap, need, ws)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", need);
    if ((e = code_planes(M, prm, cb, need, coder, coded, &body_len, ws, err))) return e;
    /* Planes no smaller than the chunk (noise, or a chain that widens the
     * data): keep the raw bytes. */
    if (ptwm_chunk_head_size(M->L.use, M->L.nstages, M->L.count, coded, crc != 0) + body_len <
        raw_form_size(raw_len, crc != 0))
        return ptwm_chunk_frame(crc, M->L.use, M->L.nstages, M->L.count, coder, coded, cb,
                                body_len, dst, cap, out_len, err);
    return ptwm_chunk_frame(crc, NULL, 0, 1, &ident, &rl, raw, raw_len, dst, cap, out_len, err);
}

static ptwm_error encode_with(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                              ptwm_dtype dtype, const ptwm_chunk_params *prm, const uint8_t *raw,
                              const uint8_t *base, size_t raw_len, uint8_t *dst, size_t cap,
                              size_t *out_len, ptwm_err *err) {
    ptwm_ws *own;
    ptwm_error e;
    if (!(ws = ptwm_ws_or_temp(ws, &own)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: no workspace memory");
    ws->rans_max_streams = prm ? prm->max_streams : 0;
    e = encode_ws(ws, chain, chain_len, dtype, prm, raw, base, raw_len, dst, cap, out_len, err);
    ws->rans_max_streams = 0;
    ptwm_ws_trim(ws, PTWM_WS_KEEP);
    ptwm_ws_free(own);
    return e;
}

ptwm_error ptwm_chunk_encode(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                             ptwm_dtype dtype, const ptwm_chunk_params *prm, const uint8_t *raw,
                             size_t raw_len, uint8_t *dst, size_t cap, size_t *out_len,
                             ptwm_err *err) {
    return encode_with(ws, chain, chain_len, dtype, prm, raw, NULL, raw_len, dst, cap, out_len,
                       err);
}

ptwm_error ptwm_chunk_encode_base(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                                  ptwm_dtype dtype, const ptwm_chunk_params *prm,
                                  const uint8_t *raw, const uint8_t *base, size_t raw_len,
                                  uint8_t *dst, size_t cap, size_t *out_len, ptwm_err *err) {
    if (!base && raw_len)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_encode: NULL base chunk");
    return encode_with(ws, chain, chain_len, dtype, prm, raw, base ? base : raw, raw_len, dst,
                       cap, out_len, err);
}
