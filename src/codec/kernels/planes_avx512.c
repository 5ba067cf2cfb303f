/* Kernels of level AVX512 (x86-64-v4): the float-split and byte-plane loops
 * (kernels/planes_loops.h), the joint BF16 merge, the joint planes' escape
 * scan and the sparse test's count of zeros (see planes.h). */
#include "cpu.h"
#include "planes_kernels.h"
#include "planes_loops.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

PLANES_LOOPS(avx512, PTWM_TARGET_V4)

/* 64 elements a step: the same fields as joint_bf16_ssse3, the map lookups
 * byte shuffles within each 128-bit lane (the maps repeated in every lane),
 * and each half widened to 16-bit elements: low byte | high byte << 8; a
 * step's escapes are one compare's mask. */
__attribute__((target("avx512f,avx512bw"))) static size_t joint_bf16_avx512(
    const uint8_t *restrict j, const uint8_t *restrict nib, const uint8_t *mlo,
    const uint8_t *mhi, size_t n, uint8_t *restrict dst, uint64_t *esc) {
    const __m512i lo = _mm512_broadcast_i32x4(JOINT_LD128(mlo));
    const __m512i hi = _mm512_broadcast_i32x4(JOINT_LD128(mhi));
    const __m512i m7 = _mm512_set1_epi8(0x7f), lo4 = _mm512_set1_epi8(15);
    const __m512i w_lo = _mm512_set1_epi16(0x000f), w_hi = _mm512_set1_epi16(0x0f00);
    const __m512i top = _mm512_set1_epi8((char)(PTWM_JOINT_MAP << 4));
    size_t i;
    for (i = 0; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512(j + i);
        __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(nib + i / 2)));
        /* byte 2k: the low nibble of nib[k], byte 2k + 1: its high nibble */
        __m512i nb = _mm512_or_si512(_mm512_and_si512(b, w_lo), _mm512_and_si512(_mm512_slli_epi16(b, 4), w_hi));
        __m512i r = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        __m512i sm = _mm512_or_si512(_mm512_andnot_si512(lo4, _mm512_slli_epi16(v, 4)), nb);
        __m512i l = _mm512_or_si512(_mm512_shuffle_epi8(lo, r), _mm512_and_si512(sm, m7));
        __m512i h = _mm512_or_si512(_mm512_shuffle_epi8(hi, r), _mm512_andnot_si512(m7, sm));
        esc[i / 64] = _mm512_cmpge_epu8_mask(v, top);
        _mm512_storeu_si512(dst + 2 * i,
                            _mm512_or_si512(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(l)),
                                            _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(h)), 8)));
        _mm512_storeu_si512(dst + 2 * i + 64,
                            _mm512_or_si512(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(l, 1)),
                                            _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(h, 1)), 8)));
    }
    return i;
}

/* What the 64-element steps leave, 16 at a time. */
size_t ptwm_joint_bf16_avx512(const uint8_t *j, const uint8_t *nib, const uint8_t *mlo,
                              const uint8_t *mhi, size_t n, uint8_t *dst, uint64_t *esc) {
    size_t i = joint_bf16_avx512(j, nib, mlo, mhi, n, dst, esc);
    return i + ptwm_joint_bf16_ssse3(j + i, nib + i / 2, mlo, mhi, n - i, dst + 2 * i, esc + i / 64);
}

/* planes.c's next_escape, 64 symbols a step: the first escape (rank
 * PTWM_JOINT_MAP) at or after i, or where fewer than 64 symbols are left. */
__attribute__((target("avx512f,avx512bw"))) size_t ptwm_joint_scan_avx512(const uint8_t *j,
                                                                          size_t i, size_t n) {
    const __m512i top = _mm512_set1_epi8((char)(PTWM_JOINT_MAP << 4));
    for (; n - i >= 64; i += 64) {
        uint64_t m = _mm512_cmpge_epu8_mask(_mm512_loadu_si512(j + i), top);
        if (m) return i + (size_t)__builtin_ctzll(m);
    }
    return i;
}

/* ptwm_count_zero_elems at step 8, 64 bytes a step: the sampled elements
 * are the low halves of dwords 0, 4, 8 and 12 (width 2) or dwords 0 and 8
 * (width 4), counted in the lanes of a vector (the scalar loop's stride
 * load was about 5% of BF16 compress time). */
__attribute__((target("avx512f,avx512bw"))) size_t
ptwm_zero_sample_avx512(const uint8_t *src, size_t n, unsigned width, size_t *zeros) {
    const __mmask16 pick = width == 2 ? 0x1111 : 0x0101;
    const __m512i mag = _mm512_set1_epi32(width == 2 ? 0x7fff : 0x7fffffff);
    const __m512i one = _mm512_set1_epi32(1);
    const size_t per = 64 / width;
    __m512i acc = _mm512_setzero_si512();
    size_t i = 0;
    if (width != 2 && width != 4) return 0;
    for (; n - i >= per; i += per) {
        __mmask16 z = _mm512_mask_testn_epi32_mask(pick, _mm512_loadu_si512(src + i * width), mag);
        acc = _mm512_mask_add_epi32(acc, z, acc, one);
    }
    *zeros += (size_t)(uint32_t)_mm512_reduce_add_epi32(acc);
    return i;
}
#endif
