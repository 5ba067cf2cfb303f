/* Exact conversions between F32 and the 16-bit float formats.
 *
 * BF16 is the top half of an F32, so widening is a shift and exact for every
 * pattern, NaN payloads included (bf16.to(torch.float32)).
 *
 * F16 is widened with integer bit manipulation only, so no floating-point
 * operation can touch a NaN (hardware conversions such as F16C's vcvtph2ps
 * quiet a signalling NaN; numpy's npy_halfbits_to_floatbits and this code keep
 * the payload bits as they are, shifted into place). Subnormals go through an
 * int-to-float conversion of the 10-bit mantissa, which is exact. Every branch
 * is a select, so the loops vectorise with plain SSE2; an AVX2 copy of the same
 * loops is chosen at run time where the CPU has it and the cap (cpu.h) allows.
 */
#include "widen.h"
#include "cpu.h"

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

PTWM_WIDEN_LOOPS(generic, )

#if defined(PTWM_CPU_X86) && !defined(__AVX2__)
#define PTWM_WIDEN_DISPATCH 1
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
#endif

static const ptwm_widen_impl impl_generic = {"generic", bf16_to_f32_generic, f16_to_f32_generic,
                                             f32_to_bf16_generic};

#ifdef PTWM_WIDEN_DISPATCH
static const ptwm_widen_impl impl_avx2 = {"avx2", bf16_to_f32_avx2, f16_to_f32_avx2,
                                          f32_to_bf16_avx2};
static const ptwm_widen_impl impl_f16c = {"avx2+f16c", bf16_to_f32_avx2, f16_to_f32_f16c,
                                          f32_to_bf16_avx2};
#endif

/* The variants the cap allows, in order: F16C comes with AVX2 in the levels
 * (cpu.h), so they are always a prefix of the list. */
size_t ptwm_widen_variants(const ptwm_widen_impl *const **out) {
#ifdef PTWM_WIDEN_DISPATCH
    static const ptwm_widen_impl *const list[3] = {&impl_generic, &impl_avx2, &impl_f16c};
    *out = list;
    return 1 + (size_t)ptwm_cpu_has(PTWM_CPU_AVX2) +
           (size_t)ptwm_cpu_has(PTWM_CPU_AVX2 | PTWM_CPU_F16C);
#else
    static const ptwm_widen_impl *const list[1] = {&impl_generic};
    *out = list;
    return 1;
#endif
}

/* The fastest variant the cap allows, asked at each call. */
static const ptwm_widen_impl *widen_choose(void) {
    const ptwm_widen_impl *const *list;
    size_t n = ptwm_widen_variants(&list);
    return list[n - 1];
}

void ptwm_bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    widen_choose()->bf16_to_f32(src, dst, n);
}

void ptwm_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    widen_choose()->f16_to_f32(src, dst, n);
}

void ptwm_f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    widen_choose()->f32_to_bf16(src, dst, n);
}
