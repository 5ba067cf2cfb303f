/* MICROSCALE: exponents coded relative to a shared scale per block.
 *
 * For block b of `block` consecutive exponents x[i], the scale is
 * s_b = max x[i] in the block (as OCP MX formats share one E8M0 scale per 32
 * values). The residual plane holds r[i] = s_b - x[i] (small, non-negative),
 * the scale plane holds d_b = s_b - s_(b-1) mod 256 (s_(-1) = 0). */
#ifndef PTWM_MICROSCALE_H
#define PTWM_MICROSCALE_H

#include "common.h"

/* Number of blocks (scale plane length) for n exponents. */
PTWM_INLINE size_t ptwm_micro_blocks(size_t n, unsigned block) {
    return n / block + (n % block != 0);
}

/* Forward: exponents x[0..n) into residuals r[0..n) and scales d[0..blocks). */
void ptwm_micro_forward(const uint8_t *restrict x, size_t n, unsigned block,
                        uint8_t *restrict r, uint8_t *restrict d);
/* Inverse: x[i] = s_b - r[i] mod 256. Total for any input bytes. */
void ptwm_micro_inverse(const uint8_t *restrict r, const uint8_t *restrict d, size_t n,
                        unsigned block, uint8_t *restrict x);

#endif
