/* The widening loops compiled for AVX2, and F16 widened by F16C (see
 * widen.c); level AVX2 of the load layer's kernel table (widen.c) has both. */
#include "widen_loops.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

PTWM_WIDEN_LOOPS(avx2, __attribute__((target("avx2"))))

/* F16C converts 8 values per instruction, about three times the integer
 * loop's rate, but quiets a signalling NaN; NaN lanes are therefore replaced
 * by the payload-preserving integer result (sign | all-ones exponent |
 * mantissa << 13). */
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint16_t *restrict src,
                                                                   float *restrict dst, size_t n) {
    const __m256i m7fff = _mm256_set1_epi32(0x7fff), m7c00 = _mm256_set1_epi32(0x7c00);
    const __m256i m8000 = _mm256_set1_epi32(0x8000), exp_ones = _mm256_set1_epi32(0x7f800000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        __m256 f = _mm256_cvtph_ps(h);
        __m256i h32 = _mm256_cvtepu16_epi32(h);
        __m256i em = _mm256_and_si256(h32, m7fff);
        __m256i is_nan = _mm256_cmpgt_epi32(em, m7c00);
        __m256i nan = _mm256_or_si256(
            _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h32, m8000), 16), exp_ones),
            _mm256_slli_epi32(em, 13));
        __m256i r = _mm256_blendv_epi8(_mm256_castps_si256(f), nan, is_nan);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), r);
    }
    f16_to_f32_avx2(src + i, dst + i, n - i);
}

const ptwm_widen_impl ptwm_widen_avx2 = {"avx2", bf16_to_f32_avx2, f16_to_f32_avx2,
                                         f32_to_bf16_avx2};
const ptwm_widen_impl ptwm_widen_f16c = {"avx2+f16c", bf16_to_f32_avx2, f16_to_f32_f16c,
                                         f32_to_bf16_avx2};
#endif
