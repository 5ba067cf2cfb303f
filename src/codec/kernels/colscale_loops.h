/* The column-scale loops of microscale.c: plain C written once and compiled
 * for each level (microscale.c, kernels/colscale_avx2.c,
 * kernels/colscale_avx512.c) by COLSCALE_LOOPS, each copy vectorising as
 * wide as its target allows; the codec's kernel table picks the copy (see
 * microscale.h for what they compute). */
#ifndef PTWM_COLSCALE_LOOPS_H
#define PTWM_COLSCALE_LOOPS_H

#include "codec_kernels.h"
#include "common.h"
#include "cpu.h"

/* Row by row: each inner loop runs over contiguous columns and vectorises.
 * Rows narrower than COL_SPAN (PyTorch's [out, in, kh, kw] gives rows of
 * kw = 3) would leave the loops a few elements long, at a twentieth of the
 * speed: they are walked in spans of whole rows at least COL_SPAN long, with
 * sums per span position folded into columns afterwards and the scales
 * repeated across the span. The sums and residuals are the same. */
#define COL_SPAN 256
PTWM_INLINE void colscale_forward_body(const uint8_t *restrict x, size_t n, size_t cols,
                                       uint8_t *restrict r, uint8_t *restrict d,
                                       uint32_t *restrict sum) {
    uint32_t acc[2 * COL_SPAN];
    uint8_t rep[2 * COL_SPAN];
    size_t i, k, m = PTWM_MIN(cols, n), rows = cols ? n / cols : 0, extra = cols ? n % cols : 0;
    size_t span = cols;
    uint8_t prev = 0;
    if (!cols) return;
    if (cols < COL_SPAN && n > cols) {
        span = cols * ((COL_SPAN + cols - 1) / cols); /* under 2 * COL_SPAN */
        memset(acc, 0, span * sizeof(*acc));
        for (i = 0; i < n; i += span) {
            size_t w = PTWM_MIN(span, n - i);
            for (k = 0; k < w; k++) acc[k] += x[i + k];
        }
        memcpy(sum, acc, m * sizeof(*sum));
        for (k = m; k < span; k++) sum[k % cols] += acc[k];
    } else {
        span = cols;
        memset(sum, 0, m * sizeof(*sum));
        for (i = 0; i < n; i += cols) {
            size_t w = PTWM_MIN(cols, n - i);
            for (k = 0; k < w; k++) sum[k] += x[i + k];
        }
    }
    /* Rounded means: columns below n % cols hold one element more. */
    for (k = 0; k < m; k++) {
        size_t cnt = rows + (k < extra);
        d[k] = (uint8_t)((sum[k] + cnt / 2) / cnt);
    }
    if (span != cols) {
        for (k = 0; k < span; k++) rep[k] = d[k % cols];
        for (i = 0; i < n; i += span) {
            size_t w = PTWM_MIN(span, n - i);
            for (k = 0; k < w; k++) r[i + k] = (uint8_t)(rep[k] - x[i + k]);
        }
    } else {
        for (i = 0; i < n; i += cols) {
            size_t w = PTWM_MIN(cols, n - i);
            for (k = 0; k < w; k++) r[i + k] = (uint8_t)(d[k] - x[i + k]);
        }
    }
    for (k = 0; k < m; k++) {
        uint8_t s = d[k];
        d[k] = (uint8_t)(s - prev);
        prev = s;
    }
}

/* One block of ptwm_micro_forward: its scale (the largest exponent) and
 * the residuals. Separate max and subtract loops: both vectorise. */
PTWM_INLINE uint8_t micro_block(const uint8_t *restrict x, size_t w, uint8_t *restrict r) {
    uint8_t s = 0;
    size_t k;
    for (k = 0; k < w; k++) s = x[k] > s ? x[k] : s;
    for (k = 0; k < w; k++) r[k] = (uint8_t)(s - x[k]);
    return s;
}

/* Block scales. Whole blocks of 32, the standard size, run in a loop of
 * their own with the length a constant, which the compiler turns into
 * whole-vector max and subtract (with the length a variable it ran about 11
 * cycles a block; one loop testing each block's length ran at 41-78 us
 * against 32-54 for 512K exponents). */
PTWM_INLINE void micro_forward_body(const uint8_t *restrict x, size_t n, unsigned block,
                                    uint8_t *restrict r, uint8_t *restrict d) {
    size_t b = 0, i = 0, w;
    uint8_t prev = 0, s;
    if (block == 32)
        for (; n - i >= 32; i += 32) {
            s = micro_block(x + i, 32, r + i);
            d[b++] = (uint8_t)(s - prev);
            prev = s;
        }
    for (; i < n; i += w) {
        w = PTWM_MIN(block, n - i);
        s = micro_block(x + i, w, r + i);
        d[b++] = (uint8_t)(s - prev);
        prev = s;
    }
}

PTWM_INLINE void colscale_inverse_body(const uint8_t *restrict r, const uint8_t *restrict d,
                                       size_t n, size_t cols, uint8_t *restrict x) {
    size_t i, k, m = PTWM_MIN(cols, n);
    uint8_t s = 0;
    if (!cols) return;
    /* The scales go into the first row of x, then each row subtracts. */
    for (k = 0; k < m; k++) {
        s = (uint8_t)(s + d[k]);
        x[k] = s;
    }
    for (i = m; i < n; i += cols) {
        size_t w = PTWM_MIN(cols, n - i);
        for (k = 0; k < w; k++) x[i + k] = (uint8_t)(x[k] - r[i + k]);
    }
    for (k = 0; k < m; k++) x[k] = (uint8_t)(x[k] - r[k]);
}

/* The column scales at the BF16 exponent field's place (s << 7) into s7,
 * narrow rows repeated to at least 256 elements so the loops run long;
 * returns that span (a whole number of rows), or cols when n < cols. */
PTWM_INLINE size_t colscale_s7(const uint8_t *restrict d, size_t n, size_t cols,
                               uint16_t *restrict s7) {
    size_t k, m = PTWM_MIN(cols, n), span;
    uint8_t s = 0;
    for (k = 0; k < m; k++) {
        s = (uint8_t)(s + d[k]);
        s7[k] = (uint16_t)(s << 7);
    }
    if (m < cols) return cols; /* n < cols: one partial row */
    span = cols * (cols >= 256 ? 1 : (256 + cols - 1) / cols);
    for (k = cols; k < span; k++) s7[k] = s7[k - cols];
    return span;
}

/* With the scale at the field's place, the field of v = r << 7 | rest
 * becomes (s << 7) - (v & 0x7f80) masked to the field: no shifts per
 * element. el[0..n) starts at position k0 of the span. */
PTWM_INLINE void colscale_fix_bf16_body(uint8_t *el, size_t n, const uint16_t *restrict s7,
                                        size_t span, size_t k0) {
    size_t i = 0, k;
    while (i < n) {
        size_t w = PTWM_MIN(span - k0, n - i);
        uint8_t *restrict row = el + 2 * i;
        const uint16_t *restrict s = s7 + k0;
        for (k = 0; k < w; k++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            uint16_t v; /* a plain 16-bit load: the loop vectorises */
            memcpy(&v, row + 2 * k, 2);
            v = (uint16_t)((v & 0x807f) | ((s[k] - (v & 0x7f80)) & 0x7f80));
            memcpy(row + 2 * k, &v, 2);
#else
            uint16_t v = ptwm_load_le16(row + 2 * k);
            ptwm_store_le16(row + 2 * k, (uint16_t)((v & 0x807f) | ((s[k] - (v & 0x7f80)) & 0x7f80)));
#endif
        }
        i += w;
        k0 = 0;
    }
}

/* Every loop under ATTR, and their table ptwm_colscale_loops_SUFFIX (codec_kernels.h). */
#define COLSCALE_LOOPS(SUFFIX, ATTR)                                                       \
    PTWM_LOOP_COPY(ATTR, colscale_forward, SUFFIX, (const uint8_t *restrict x, size_t n,   \
                   size_t cols, uint8_t *restrict r, uint8_t *restrict d,                  \
                   uint32_t *restrict sum), (x, n, cols, r, d, sum))                       \
    PTWM_LOOP_COPY(ATTR, colscale_inverse, SUFFIX, (const uint8_t *restrict r,             \
                   const uint8_t *restrict d, size_t n, size_t cols, uint8_t *restrict x), \
                   (r, d, n, cols, x))                                                     \
    PTWM_LOOP_COPY(ATTR, micro_forward, SUFFIX, (const uint8_t *restrict x, size_t n,      \
                   unsigned block, uint8_t *restrict r, uint8_t *restrict d),              \
                   (x, n, block, r, d))                                                    \
    PTWM_LOOP_COPY(ATTR, colscale_fix_bf16, SUFFIX, (uint8_t *el, size_t n,                \
                   const uint16_t *restrict s7, size_t span, size_t k0),                   \
                   (el, n, s7, span, k0))                                                  \
    const ptwm_colscale_loops ptwm_colscale_loops_##SUFFIX = {                             \
        colscale_forward_##SUFFIX, colscale_inverse_##SUFFIX, micro_forward_##SUFFIX,       \
        colscale_fix_bf16_##SUFFIX};

#endif
