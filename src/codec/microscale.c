/* MICROSCALE block-relative exponents (see microscale.h). */
#include "microscale.h"
#include "kernels/colscale_loops.h"

void ptwm_micro_forward(const uint8_t *restrict x, size_t n, unsigned block,
                        uint8_t *restrict r, uint8_t *restrict d) {
    ptwm_codec_kern()->colscale_loops->micro_forward(x, n, block, r, d);
}

void ptwm_micro_inverse(const uint8_t *restrict r, const uint8_t *restrict d, size_t n,
                        unsigned block, uint8_t *restrict x) {
    size_t b = 0, i = 0;
    uint8_t s = 0;
    while (i < n) {
        size_t end = PTWM_MIN(n, i + block), k;
        s = (uint8_t)(s + d[b++]);
        for (k = i; k < end; k++) x[k] = (uint8_t)(s - r[k]);
        i = end;
    }
}

/* The plain forms of the loops of kernels/colscale_loops.h. */
COLSCALE_LOOPS(scalar, )

void ptwm_colscale_forward(const uint8_t *restrict x, size_t n, size_t cols,
                           uint8_t *restrict r, uint8_t *restrict d, uint32_t *restrict sum) {
    ptwm_codec_kern()->colscale_loops->forward(x, n, cols, r, d, sum);
}

void ptwm_colscale_inverse(const uint8_t *restrict r, const uint8_t *restrict d, size_t n,
                           size_t cols, uint8_t *restrict x) {
    ptwm_codec_kern()->colscale_loops->inverse(r, d, n, cols, x);
}

size_t ptwm_colscale_s7(const uint8_t *restrict d, size_t n, size_t cols, uint16_t *restrict s7) {
    return cols ? colscale_s7(d, n, cols, s7) : 0;
}

void ptwm_colscale_fix_bf16(uint8_t *el, size_t n, const uint16_t *restrict s7, size_t span,
                            size_t k0) {
    if (span) ptwm_codec_kern()->colscale_loops->fix_bf16(el, n, s7, span, k0);
}

void ptwm_colscale_inverse_bf16(uint8_t *el, size_t n, const uint8_t *restrict d, size_t cols,
                                uint16_t *restrict s7) {
    ptwm_colscale_fix_bf16(el, n, s7, ptwm_colscale_s7(d, n, cols, s7), 0);
}
