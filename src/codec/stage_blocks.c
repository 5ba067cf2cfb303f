/* BLOCKS: exponents relative to a scale per block of `block` elements
 * (MICROSCALE, docs/CHAINS.md section 4). Plane 0, a one-byte exponent,
 * becomes the residuals; the scales are its side plane. */
#include "microscale.h"
#include "stage.h"

ptwm_error ptwm_stage_needs_exponent(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                     ptwm_err *err) {
    if (!(L->seen & (1u << PTWM_CSTAGE_SPLIT)) || L->exp_bits > 8)
        return ptwm_stage_fail(err, s, u, "needs a split with an exponent of at most 8 bits "
                                          "before it");
    if (L->seen & ((1u << PTWM_CSTAGE_BLOCKS) | (1u << PTWM_CSTAGE_COLS)))
        return ptwm_stage_fail(err, s, u, "exponents already relative to scales");
    if (L->seen & (1u << PTWM_CSTAGE_JOINT))
        return ptwm_stage_fail(err, s, u, "must come before joint");
    return PTWM_OK;
}

static ptwm_error blocks_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L,
                              ptwm_err *err) {
    ptwm_error e = ptwm_stage_needs_exponent(u, s, L, err);
    if (e) return e;
    if (u->p[0] < 2 || u->p[0] > 65535)
        return ptwm_stage_fail(err, s, u, "block of %llu elements (2..65535)",
                               (unsigned long long)u->p[0]);
    L->nside[s] = 1;
    L->side_len[s][0] = ptwm_micro_blocks(L->n, (unsigned)u->p[0]);
    return PTWM_OK;
}

static ptwm_error blocks_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws) {
    uint8_t *r = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_EXP, 2 * L->n + 16, 0);
    if (!r) return PTWM_ERR_NOMEM;
    ptwm_micro_forward(P->main[0], L->n, (unsigned)u->p[0], r, r + L->n);
    P->main[0] = r;
    P->side[s][0] = r + L->n;
    return PTWM_OK;
}

static ptwm_error blocks_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    uint8_t *x = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_EXP, L->n, 0);
    if (!x)
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu bytes of exponents", L->n);
    ptwm_micro_inverse(P->main[0], P->side[s][0], L->n, (unsigned)u->p[0], x);
    P->main[0] = x;
    return PTWM_OK;
}

const ptwm_stage ptwm_stage_blocks = {
    .id = PTWM_CSTAGE_BLOCKS,
    .name = "blocks",
    .nparams = 1,
    .plan = blocks_plan,
    .forward = blocks_forward,
    .inverse = blocks_inverse,
    .gives = ptwm_stage_gives_planes,
};
