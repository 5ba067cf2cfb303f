/* JOINT: the exponent and the top 4 sign:mantissa bits as one symbol, the
 * low 4 bits as nibbles, and a side plane with the exponent map and the
 * escaped exponents (docs/CHAINS.md, "Joint exponent planes"). Parameter:
 * the count of escapes (the side plane holds the map and one exponent each). */
#include "planes.h"
#include "stage.h"

static ptwm_error joint_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L,
                             ptwm_err *err) {
    if (!(L->seen & (1u << PTWM_CSTAGE_SPLIT)) || L->exp_bits > 8 || (L->man_bits + 1) % 8)
        return ptwm_stage_fail(err, s, u, "needs a split with a one-byte exponent and whole "
                                          "sign:mantissa bytes before it");
    if (L->seen & (1u << PTWM_CSTAGE_BLOCKS))
        return ptwm_stage_fail(err, s, u, "over block-relative exponents");
    if (u->p[0] > L->n)
        return ptwm_stage_fail(err, s, u, "%llu escapes for %zu elements",
                               (unsigned long long)u->p[0], L->n);
    L->main_len[1] = L->n / 2 + (L->n & 1);
    L->nside[s] = 1;
    L->side_len[s][0] = PTWM_JOINT_MAP + (size_t)u->p[0];
    return PTWM_OK;
}

static ptwm_error joint_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                ptwm_pipe *P, ptwm_ws *ws) {
    size_t n = L->n;
    uint8_t *j = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_JOINT, 3 * n + PTWM_JOINT_MAP + 16, 0);
    uint8_t *nib, *side;
    if (!j) return PTWM_ERR_NOMEM;
    nib = j + n;
    side = nib + n / 2 + 1;
    u->p[0] = ptwm_joint_split(P->main[0], P->main[1], n, P->ex_hist, j, nib, side) -
              PTWM_JOINT_MAP;
    P->main[0] = j;
    P->main[1] = nib;
    P->side[s][0] = side;
    return PTWM_OK;
}

/* Its planes go back to the exponent and sign:mantissa planes, or, when
 * the plan asks for elements (BF16 fields), straight into whole elements
 * (the split then has nothing left to do), handing each strip to the
 * inverses the plan runs inside this one (column scales: a pass of their
 * own over the chunk, out of cache by then, was 2-3% of a restore). */
static unsigned joint_gives(const ptwm_chunk_layout *L, unsigned s, unsigned in) {
    (void)s;
    if (in != PTWM_FORM_PLANES) return 0;
    return PTWM_FORM_PLANES | (ptwm_chunk_layout_bf16(L) ? PTWM_FORM_ELEMENTS : 0);
}

static ptwm_error joint_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    size_t esc, sl = L->side_len[s][0];
    if (P->out == PTWM_FORM_ELEMENTS) {
        esc = ptwm_joint_merge_bf16_strips(P->main[0], P->main[1], P->side[s][0], sl, L->n, P->el,
                                           P->nstrips ? ptwm_pipe_strips : NULL, P);
    } else {
        uint8_t *x = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_JOINT, 2 * L->n, 0);
        if (!x)
            return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu joint elements", L->n);
        esc = ptwm_joint_merge(P->main[0], P->main[1], P->side[s][0], sl, L->n, x, x + L->n);
        P->main[0] = x;
        P->main[1] = x + L->n;
    }
    if (esc != u->p[0])
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: joint plane 0 has %zu escape symbols, side plane %u "
                         "holds %llu exponents",
                         esc, L->side_at[s], (unsigned long long)u->p[0]);
    return PTWM_OK;
}

const ptwm_stage ptwm_stage_joint = {
    .id = PTWM_CSTAGE_JOINT,
    .name = "joint",
    .nparams = 1,
    .plan = joint_plan,
    .forward = joint_forward,
    .inverse = joint_inverse,
    .gives = joint_gives,
    .strips_out = 1,
};
