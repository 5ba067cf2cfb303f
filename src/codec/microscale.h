/* MICROSCALE: exponents coded relative to a shared scale per block.
 *
 * For block b of `block` consecutive exponents x[i], the scale is
 * s_b = max x[i] in the block (as OCP MX formats share one E8M0 scale per 32
 * values). The residual plane holds r[i] = s_b - x[i] (small, non-negative),
 * the scale plane holds d_b = s_b - s_(b-1) mod 256 (s_(-1) = 0). */
#ifndef PTWM_MICROSCALE_H
#define PTWM_MICROSCALE_H

#include "common.h"

/* Column-relative form, for tensors whose last dimension holds `cols`
 * columns: the scale of column c is the rounded mean of its exponents,
 * s_c = round(mean of x[i] over i % cols == c) (per-output-channel scales: in
 * a weight matrix stored [in, out] each output's weights share a magnitude
 * the exponents of one row do not show; the mean codes smaller than the
 * maximum, docs/CHAINS.md section 4). r[i] = s_(i % cols) - x[i]
 * mod 256, and d_c = s_c - s_(c-1) mod 256 (s_(-1) = 0). Columns count from
 * the chunk's first element: a chunk starting mid-row sees the same columns
 * rotated. `sum` is scratch for min(cols, n) counters, and the sums fit
 * 32 bits: n / cols must be under 2^24. */
void ptwm_colscale_forward(const uint8_t *restrict x, size_t n, size_t cols,
                           uint8_t *restrict r, uint8_t *restrict d, uint32_t *restrict sum);
/* Inverse: x[i] = s_(i % cols) - r[i] mod 256. Total for any input bytes. */
void ptwm_colscale_inverse(const uint8_t *restrict r, const uint8_t *restrict d, size_t n,
                           size_t cols, uint8_t *restrict x);

/* The same inverse on merged BF16 elements el[0..n) (2n bytes, little-endian)
 * whose exponent fields hold the residuals: each field becomes
 * s_(i % cols) - r[i] mod 256 in place, sign and mantissa kept (joint BF16
 * planes merge straight into elements; this finishes them in one pass).
 * s7: scratch for cols + 256 values. */
void ptwm_colscale_inverse_bf16(uint8_t *el, size_t n, const uint8_t *restrict d, size_t cols,
                                uint16_t *restrict s7);
/* The same in pieces, for a merge that finishes each strip of elements
 * while it is in cache: the scales into s7 (cols + 256 values) and the
 * span they repeat over, then el[0..n) fixed from span position k0. */
size_t ptwm_colscale_s7(const uint8_t *restrict d, size_t n, size_t cols, uint16_t *restrict s7);
void ptwm_colscale_fix_bf16(uint8_t *el, size_t n, const uint16_t *restrict s7, size_t span,
                            size_t k0);

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
