/* SPARSE: only the nonzero elements go on to the transform; a bitmap marks
 * them and a signs plane gives the top bit of each zero (+0 and -0 of
 * pruned weights; docs/CHAINS.md, "Sparse"; after BASE, the weights a
 * fine-tune did not move). Parameters: the element width,
 * the count of nonzero elements, and whether the signs plane is present
 * (format versions 1 and 2 have none: every zero was +0). */
#include "planes.h"
#include "stage.h"

static size_t bytes_for_bits(size_t bits) { return bits / 8 + (bits % 8 != 0); }

static ptwm_error sparse_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L,
                              ptwm_err *err) {
    uint64_t w = u->p[0], nz = u->p[1];
    if (L->seen & ~(1u << PTWM_CSTAGE_BASE))
        return ptwm_stage_fail(err, s, u, "must be the first stage (or right after base)");
    if (w < 1 || w > 8 || u->p[2] > 1)
        return ptwm_stage_fail(err, s, u, "width %llu (1..8), signs %llu (0 or 1)",
                               (unsigned long long)w, (unsigned long long)u->p[2]);
    if (L->seen && w != L->width) /* the base differences' elements */
        return ptwm_stage_fail(err, s, u, "width %llu after base elements of width %u",
                               (unsigned long long)w, L->width);
    L->width = (unsigned)w;
    L->total = L->raw_len / w;
    L->tail = L->raw_len % w;
    if (nz > L->total)
        return ptwm_stage_fail(err, s, u, "%llu nonzero elements in a chunk of %zu",
                               (unsigned long long)nz, L->total);
    L->n = (size_t)nz;
    L->nside[s] = 1 + (unsigned)u->p[2];
    L->side_len[s][0] = bytes_for_bits(L->total);
    L->side_len[s][1] = bytes_for_bits(L->total - L->n);
    return PTWM_OK;
}

static ptwm_error sparse_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws) {
    unsigned w = (unsigned)u->p[0];
    size_t total = L->raw_len / w;
    /* The nonzero elements, the bitmap, the signs (each with slack). */
    uint8_t *compact = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_SPARSE, L->raw_len + total / 4 + 32, 0);
    uint8_t *bitmap, *signs;
    if (!compact) return PTWM_ERR_NOMEM;
    bitmap = compact + L->raw_len + 8;
    signs = bitmap + total / 8 + 8;
    u->p[1] = ptwm_sparse_compact(P->src, total, w, bitmap, compact, signs);
    u->p[2] = 1;
    P->src = compact;
    P->side[s][0] = bitmap;
    P->side[s][1] = signs;
    return PTWM_OK;
}

/* The transform's elements, the nonzero ones, go to a region of their own. */
static ptwm_error sparse_prepare(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    (void)u, (void)s;
    if (!(P->el = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_SPARSE, L->n * L->width, 0)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu nonzero elements", L->n);
    return PTWM_OK;
}

/* The zeros go back between the nonzero elements, into the chunk. */
static ptwm_error sparse_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    const uint8_t *bitmap = P->side[s][0], *signs = u->p[2] ? P->side[s][1] : NULL;
    size_t marked = ptwm_bitmap_count(bitmap, L->total);
    unsigned plane = L->side_at[s];
    (void)ws;
    if (marked == SIZE_MAX)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: bitmap plane %u marks elements past %zu", plane,
                         L->total);
    if (marked != L->n)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: bitmap plane %u marks %zu nonzero elements, the planes "
                         "hold %zu",
                         plane, marked, L->n);
    /* Its length is the zeros' (from the layout); no bits past. */
    if (signs && ptwm_bitmap_count(signs, L->total - L->n) == SIZE_MAX)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: signs plane %u has bits past its %zu zero elements",
                         plane + 1, L->total - L->n);
    ptwm_sparse_expand(P->el, bitmap, L->total, L->width, signs, signs ? L->side_len[s][1] : 0,
                       P->raw);
    P->el = P->raw;
    return PTWM_OK;
}

const ptwm_stage ptwm_stage_sparse = {
    .id = PTWM_CSTAGE_SPARSE,
    .name = "sparse",
    .nparams = 3,
    .plan = sparse_plan,
    .forward = sparse_forward,
    .inverse = sparse_inverse,
    .gives = ptwm_stage_gives_elements,
    .prepare = sparse_prepare,
};
