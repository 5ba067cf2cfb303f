/* SSSE3 kernels of the joint exponent planes (see planes.h): the 16-entry
 * exponent map looked up by one byte shuffle, 16 elements a step. */
#include "planes_kernels.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

/* Symbols j[i..i+16) and their nibbles: the ranks, and the sign:mantissa
 * bytes (the nibbles unpack into element order). */
__attribute__((target("ssse3"))) static inline __m128i joint_unpack(const uint8_t *j,
                                                                    const uint8_t *nib, size_t i,
                                                                    __m128i *rank) {
    const __m128i lo4 = _mm_set1_epi8(15);
    __m128i v = JOINT_LD128(j + i);
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(nib + i / 2));
    __m128i nb =
        _mm_unpacklo_epi8(_mm_and_si128(b, lo4), _mm_and_si128(_mm_srli_epi16(b, 4), lo4));
    *rank = _mm_and_si128(_mm_srli_epi16(v, 4), lo4);
    return _mm_or_si128(_mm_andnot_si128(lo4, _mm_slli_epi16(v, 4)), nb);
}

/* 16 elements a step: the map lookup is one byte shuffle (the map has 16
 * entries with the escape slot). */
__attribute__((target("ssse3"))) size_t ptwm_joint_merge_ssse3(
    const uint8_t *restrict j, const uint8_t *restrict nib, const uint8_t *map, size_t n,
    uint8_t *restrict ex, uint8_t *restrict sm) {
    const __m128i m = JOINT_LD128(map);
    size_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        __m128i r, y = joint_unpack(j, nib, i, &r);
        JOINT_ST128(ex + i, _mm_shuffle_epi8(m, r));
        JOINT_ST128(sm + i, y);
    }
    return i;
}

/* BF16 straight to the elements: low byte = exponent bit 0 : mantissa[6..0],
 * high byte = sign : exponent[7..1], the exponent parts from two shuffles;
 * the escapes (rank PTWM_JOINT_MAP: symbols from its top nibble up) as
 * 16-bit masks gathered into esc's words. */
__attribute__((target("ssse3"))) size_t ptwm_joint_bf16_ssse3(
    const uint8_t *restrict j, const uint8_t *restrict nib, const uint8_t *mlo,
    const uint8_t *mhi, size_t n, uint8_t *restrict dst, uint64_t *esc) {
    const __m128i lo = JOINT_LD128(mlo), hi = JOINT_LD128(mhi), m7 = _mm_set1_epi8(0x7f);
    const __m128i top = _mm_set1_epi8((char)(PTWM_JOINT_MAP << 4));
    uint64_t word = 0;
    size_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        __m128i r, sm = joint_unpack(j, nib, i, &r), v = JOINT_LD128(j + i);
        __m128i l = _mm_or_si128(_mm_shuffle_epi8(lo, r), _mm_and_si128(sm, m7));
        __m128i h = _mm_or_si128(_mm_shuffle_epi8(hi, r), _mm_andnot_si128(m7, sm));
        word |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, top), v))
                << (i & 63);
        if ((i & 63) == 48) {
            esc[i / 64] = word;
            word = 0;
        }
        JOINT_ST128(dst + 2 * i, _mm_unpacklo_epi8(l, h));
        JOINT_ST128(dst + 2 * i + 16, _mm_unpackhi_epi8(l, h));
    }
    if (i & 63) esc[i / 64] = word;
    return i;
}
#endif
