/* COLS: exponents relative to a scale per column of the tensor's last
 * dimension (docs/CHAINS.md section 4). Plane 0, a one-byte exponent,
 * becomes the residuals; the scales (one a column) are its side plane, whose
 * length gives the column count. */
#include "microscale.h"
#include "stage.h"

static ptwm_error cols_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L, ptwm_err *err) {
    ptwm_error e = ptwm_stage_needs_exponent(u, s, L, err);
    if (e) return e;
    /* A sparse chunk has lost its columns. */
    if (L->seen & (1u << PTWM_CSTAGE_SPARSE))
        return ptwm_stage_fail(err, s, u, "column scales of sparse elements");
    if (u->p[0] < 2 || u->p[0] > L->n / 2)
        return ptwm_stage_fail(err, s, u, "%llu columns for %zu elements (2 to %zu)",
                               (unsigned long long)u->p[0], L->n, L->n / 2);
    L->nside[s] = 1;
    L->side_len[s][0] = (size_t)u->p[0];
    return PTWM_OK;
}

static ptwm_error cols_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L, ptwm_pipe *P,
                               ptwm_ws *ws) {
    size_t cols = (size_t)u->p[0], sums_at = (L->n + 15) & ~(size_t)15;
    /* Residuals, then the sums (16-aligned), then the scales. */
    uint8_t *r = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_COLS, sums_at + 5 * cols + 16, 0);
    if (!r) return PTWM_ERR_NOMEM;
    ptwm_colscale_forward(P->main[0], L->n, cols, r, r + sums_at + 4 * cols,
                          (uint32_t *)(void *)(r + sums_at));
    P->main[0] = r;
    P->side[s][0] = r + sums_at + 4 * cols;
    return PTWM_OK;
}

/* Its inverse takes the exponent plane, or whole BF16 elements whose
 * exponent fields hold the residuals (a merge above it was fused with the
 * split's), and gives the same form back. */
static unsigned cols_gives(const ptwm_chunk_layout *L, unsigned s, unsigned in) {
    (void)s;
    if (in == PTWM_FORM_ELEMENTS) return ptwm_chunk_layout_bf16(L) ? PTWM_FORM_ELEMENTS : 0;
    return PTWM_FORM_PLANES;
}

/* The scales at the BF16 exponent field (ptwm_colscale_s7), in the
 * workspace, and the span they repeat over. */
static ptwm_error cols_strip_begin(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                   ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    size_t cols = (size_t)u->p[0];
    /* cols + 256 values: narrow rows are repeated to 256 elements */
    uint16_t *s7 = (uint16_t *)ptwm_ws_get(ws, PTWM_WS_COLS, 2 * cols + 512, 0);
    if (!s7) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu column scales", cols);
    P->strip_tab[s] = s7;
    P->strip_span[s] = ptwm_colscale_s7(P->side[s][0], L->n, cols, s7);
    return PTWM_OK;
}

static void cols_strip(const ptwm_pipe *P, unsigned s, uint8_t *el, size_t len, size_t at) {
    size_t span = P->strip_span[s];
    ptwm_colscale_fix_bf16(el, len, (const uint16_t *)P->strip_tab[s], span, at % span);
}

static ptwm_error cols_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                               ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    size_t cols = (size_t)u->p[0];
    ptwm_error e;
    if (P->in == PTWM_FORM_ELEMENTS) { /* the residuals in the elements, in place */
        if ((e = cols_strip_begin(u, s, L, P, ws, err))) return e;
        cols_strip(P, s, P->el, L->n, 0);
    } else {
        uint8_t *x = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_EXP, L->n, 0);
        if (!x)
            return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu bytes of exponents", L->n);
        ptwm_colscale_inverse(P->main[0], P->side[s][0], L->n, cols, x);
        P->main[0] = x;
    }
    return PTWM_OK;
}

const ptwm_stage ptwm_stage_cols = {
    .id = PTWM_CSTAGE_COLS,
    .name = "cols",
    .nparams = 1,
    .plan = cols_plan,
    .forward = cols_forward,
    .inverse = cols_inverse,
    .gives = cols_gives,
    .strip_begin = cols_strip_begin,
    .strip = cols_strip,
};
