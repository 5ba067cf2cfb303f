/* SPLIT and PLANES: the transforms that cut elements into planes of one byte
 * per element (float fields, or the bytes of integers). They come first, or
 * right after SPARSE, whose elements they take. */
#include "planes.h"
#include "stage.h"

#define TRANSFORMS ((1u << PTWM_CSTAGE_SPLIT) | (1u << PTWM_CSTAGE_PLANES))

/* The stages that hand a transform its elements (one of them, first). */
#define ELEMENTS ((1u << PTWM_CSTAGE_SPARSE) | (1u << PTWM_CSTAGE_BASE))

/* Shared by both: the order and the element width. */
static ptwm_error plan_elements(const ptwm_stage_use *u, unsigned s, unsigned width,
                                ptwm_chunk_layout *L, ptwm_err *err) {
    if (L->seen & TRANSFORMS) return ptwm_stage_fail(err, s, u, "a second transform");
    if (L->seen & ~ELEMENTS)
        return ptwm_stage_fail(err, s, u,
                               "a transform must come first (or right after sparse or base)");
    if (L->seen & ELEMENTS) {
        if (L->width != width)
            return ptwm_stage_fail(err, s, u, "width %u after %s elements of width %u", width,
                                   (L->seen & (1u << PTWM_CSTAGE_SPARSE)) ? "sparse" : "base",
                                   L->width);
    } else {
        L->width = width;
        L->total = L->n = L->raw_len / width;
        L->tail = L->raw_len % width;
    }
    return PTWM_OK;
}

static ptwm_error split_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L, ptwm_err *err) {
    uint64_t w = u->p[0], e = u->p[1], m = u->p[2];
    unsigned k;
    ptwm_error rc;
    if (w < 1 || w > 8 || e < 1 || e > 16 || 1 + e + m != 8 * w)
        return ptwm_stage_fail(err, s, u,
                               "width %llu bytes, exponent %llu bits, mantissa %llu bits: 1 + "
                               "exponent + mantissa must equal 8 x width (width 1..8)",
                               (unsigned long long)w, (unsigned long long)e,
                               (unsigned long long)m);
    if ((rc = plan_elements(u, s, (unsigned)w, L, err))) return rc;
    L->exp_bits = (unsigned)e;
    L->man_bits = (unsigned)m;
    L->nmain = (unsigned)((e + 7) / 8 + (m + 8) / 8);
    for (k = 0; k < L->nmain; k++) L->main_len[k] = L->n;
    return PTWM_OK;
}

static ptwm_error planes_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L,
                              ptwm_err *err) {
    unsigned k;
    ptwm_error rc;
    if (u->p[0] < 1 || u->p[0] > 8)
        return ptwm_stage_fail(err, s, u, "width %llu (1..8)", (unsigned long long)u->p[0]);
    if ((rc = plan_elements(u, s, (unsigned)u->p[0], L, err))) return rc;
    L->nmain = (unsigned)u->p[0];
    for (k = 0; k < L->nmain; k++) L->main_len[k] = L->n;
    return PTWM_OK;
}

/* Elements the transform of width w codes, before it is added to L: the
 * sparse stage's nonzero ones, or every whole element. */
static size_t elements(const ptwm_chunk_layout *L, unsigned w) {
    return (L->seen & (1u << PTWM_CSTAGE_SPARSE)) ? L->n : L->raw_len / w;
}

/* The planes in one region, n bytes each. */
static uint8_t *planes_region(size_t n, unsigned nplanes, ptwm_pipe *P, uint8_t **out,
                              ptwm_ws *ws) {
    uint8_t *pb = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_PLANES, n * nplanes + 16, 0);
    unsigned k;
    if (!pb) return NULL;
    for (k = 0; k < nplanes; k++) P->main[k] = out[k] = pb + k * n;
    return pb;
}

static ptwm_error split_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                ptwm_pipe *P, ptwm_ws *ws) {
    unsigned w = (unsigned)u->p[0], e = (unsigned)u->p[1], m = (unsigned)u->p[2];
    size_t n = elements(L, w);
    uint8_t *out[PTWM_MAX_BASE_PLANES];
    (void)s;
    if (!planes_region(n, (e + 7) / 8 + (m + 8) / 8, P, out, ws)) return PTWM_ERR_NOMEM;
    ptwm_split_float(P->src, n, w, e, m, out);
    return PTWM_OK;
}

static ptwm_error planes_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws) {
    unsigned w = (unsigned)u->p[0];
    size_t n = elements(L, w);
    uint8_t *out[PTWM_MAX_BASE_PLANES];
    (void)s;
    if (!planes_region(n, w, P, out, ws)) return PTWM_ERR_NOMEM;
    ptwm_split_bytes(P->src, n, w, out);
    return PTWM_OK;
}

/* The transforms merge the planes into elements; a SPLIT whose elements a
 * stage above it gave already (its merge fused with theirs) has nothing
 * left to do. */
static unsigned split_gives(const ptwm_chunk_layout *L, unsigned s, unsigned in) {
    (void)L, (void)s, (void)in;
    return PTWM_FORM_ELEMENTS;
}

static unsigned planes_gives(const ptwm_chunk_layout *L, unsigned s, unsigned in) {
    (void)L, (void)s;
    return in == PTWM_FORM_PLANES ? PTWM_FORM_ELEMENTS : 0;
}

static ptwm_error split_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    (void)s, (void)ws, (void)err;
    if (P->in == PTWM_FORM_PLANES)
        ptwm_merge_float(P->main, L->n, (unsigned)u->p[0], (unsigned)u->p[1],
                         (unsigned)u->p[2], P->el);
    return PTWM_OK;
}

static ptwm_error planes_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                 ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    (void)s, (void)ws, (void)err;
    ptwm_merge_bytes(P->main, L->n, (unsigned)u->p[0], P->el);
    return PTWM_OK;
}

const ptwm_stage ptwm_stage_split = {
    .id = PTWM_CSTAGE_SPLIT,
    .name = "split",
    .nparams = 3,
    .plan = split_plan,
    .forward = split_forward,
    .inverse = split_inverse,
    .gives = split_gives,
};
const ptwm_stage ptwm_stage_planes = {
    .id = PTWM_CSTAGE_PLANES,
    .name = "planes",
    .nparams = 1,
    .plan = planes_plan,
    .forward = planes_forward,
    .inverse = planes_inverse,
    .gives = planes_gives,
};
