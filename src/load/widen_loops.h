/* The widening loops, written once (inline helpers and a macro) and
 * compiled for the baseline in widen.c and for AVX2 in widen_avx2.c. */
#ifndef PTWM_WIDEN_LOOPS_H
#define PTWM_WIDEN_LOOPS_H

#include "widen.h"

/* F16 bits -> F32 bits. The cases are combined with masks rather than
 * branches or ternaries, which GCC would keep as control flow and not
 * vectorise. em << 13 puts the exponent and mantissa in place; rebiasing adds
 * (127 - 15) << 23, and an all-ones F16 exponent (infinity, NaN) needs the
 * same again to reach 255. Subnormals are em * 2^-24, exact in F32. */
PTWM_INLINE uint32_t f16_bits_to_f32_bits(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t is_infnan = 0u - (uint32_t)(em >= 0x7c00u);
    uint32_t is_sub = 0u - (uint32_t)(em < 0x400u);
    uint32_t rebias = (uint32_t)(127 - 15) << 23;
    uint32_t r = (em << 13) + rebias + (is_infnan & rebias);
    float sub_f = (float)(int32_t)em * 0x1p-24f;
    uint32_t sub;
    memcpy(&sub, &sub_f, 4);
    r = (r & ~is_sub) | (sub & is_sub);
    return r | sign;
}

/* F32 bits -> BF16 bits, round to nearest even. A NaN keeps its sign and top
 * payload bits and gets the quiet bit, so it cannot round into infinity. */
PTWM_INLINE uint16_t f32_bits_to_bf16_bits(uint32_t x) {
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x40u;
    uint32_t is_nan = 0u - (uint32_t)((x & 0x7fffffffu) > 0x7f800000u);
    return (uint16_t)((nan & is_nan) | (rounded & ~is_nan));
}

/* The loops, written once and compiled for the baseline and for AVX2. Source
 * and destination are read and written through memcpy so no alignment is
 * assumed; the compiler turns these into vector loads and stores. */
#define PTWM_WIDEN_LOOPS(SUFFIX, ATTR)                                                     \
    ATTR static void bf16_to_f32_##SUFFIX(const uint16_t *restrict src, float *restrict dst, \
                                          size_t n) {                                       \
        size_t i;                                                                           \
        for (i = 0; i < n; i++) {                                                           \
            uint32_t b = (uint32_t)src[i] << 16;                                            \
            memcpy(&dst[i], &b, 4);                                                         \
        }                                                                                   \
    }                                                                                       \
    ATTR static void f16_to_f32_##SUFFIX(const uint16_t *restrict src, float *restrict dst,  \
                                         size_t n) {                                        \
        size_t i;                                                                           \
        for (i = 0; i < n; i++) {                                                           \
            uint32_t b = f16_bits_to_f32_bits(src[i]);                                      \
            memcpy(&dst[i], &b, 4);                                                         \
        }                                                                                   \
    }                                                                                       \
    ATTR static void f32_to_bf16_##SUFFIX(const float *restrict src, uint16_t *restrict dst, \
                                          size_t n) {                                       \
        size_t i;                                                                           \
        for (i = 0; i < n; i++) {                                                           \
            uint32_t b;                                                                     \
            memcpy(&b, &src[i], 4);                                                         \
            dst[i] = f32_bits_to_bf16_bits(b);                                              \
        }                                                                                   \
    }

#endif
