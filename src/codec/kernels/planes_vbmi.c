/* AVX-512 VBMI and VBMI2 kernels of the sparse and joint planes (see
 * planes.h). */
#include "planes_kernels.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

/* AVX-512 compact and expand of 16-bit (VBMI2) and 32-bit elements: 64
 * bytes of elements a step, the bitmap bits of the step as the lane mask,
 * the zeros' signs gathered (pext) or placed (pdep) as one word. Compact
 * stores whole vectors at dst + j <= src offset, so it stays inside a
 * destination as long as the source; expand loads only the elements it
 * uses (masked loads do not touch the rest). Return the elements done. */
#define SPARSE_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt,bmi2")))
SPARSE_TARGET size_t ptwm_sparse_compact_vbmi(const uint8_t *src, size_t n, unsigned width,
                                              uint8_t *bitmap, uint8_t *dst, size_t *jp,
                                              sign_writer *sw) {
    size_t i = 0, j = 0;
    if (width == 2) {
        const __m512i mag = _mm512_set1_epi16(0x7fff);
        for (; i + 32 <= n; i += 32) {
            __m512i v = _mm512_loadu_si512(src + 2 * i);
            __mmask32 k = _mm512_test_epi16_mask(v, mag);
            unsigned z = ~(unsigned)k;
            _mm512_storeu_si512(dst + 2 * j, _mm512_maskz_compress_epi16(k, v));
            ptwm_store_le32(bitmap + i / 8, (uint32_t)k);
            j += (size_t)__builtin_popcount((unsigned)k);
            signs_put(sw, _pext_u32((unsigned)_mm512_movepi16_mask(v), z),
                      (unsigned)__builtin_popcount(z));
        }
    } else {
        const __m512i mag = _mm512_set1_epi32(0x7fffffff);
        for (; i + 16 <= n; i += 16) {
            __m512i v = _mm512_loadu_si512(src + 4 * i);
            __mmask16 k = _mm512_test_epi32_mask(v, mag);
            unsigned z = ~(unsigned)k & 0xffffu;
            _mm512_storeu_si512(dst + 4 * j, _mm512_maskz_compress_epi32(k, v));
            ptwm_store_le16(bitmap + i / 8, (uint16_t)k);
            j += (size_t)__builtin_popcount((unsigned)k);
            signs_put(sw, _pext_u32((unsigned)_mm512_cmplt_epi32_mask(v, _mm512_setzero_si512()), z),
                      (unsigned)__builtin_popcount(z));
        }
    }
    *jp = j;
    return i;
}

SPARSE_TARGET size_t ptwm_sparse_expand_vbmi(const uint8_t *src, const uint8_t *bitmap, size_t n,
                                             unsigned width, uint8_t *dst, size_t *jp,
                                             sign_reader *sr) {
    size_t i = 0, j = 0;
    if (width == 2) {
        const __m512i top = _mm512_set1_epi16((short)0x8000);
        for (; i + 32 <= n; i += 32) {
            __mmask32 k = (__mmask32)ptwm_load_le32(bitmap + i / 8);
            unsigned c = (unsigned)__builtin_popcount((unsigned)k), z = ~(unsigned)k;
            __m512i v = _mm512_maskz_loadu_epi16((__mmask32)(c == 32 ? ~0u : (1u << c) - 1),
                                                 src + 2 * j);
            __mmask32 neg = (__mmask32)_pdep_u32(signs_get(sr, 32 - c), z);
            v = _mm512_maskz_expand_epi16(k, v);
            _mm512_storeu_si512(dst + 2 * i, _mm512_mask_mov_epi16(v, neg, top));
            j += c;
        }
    } else {
        const __m512i top = _mm512_set1_epi32((int)0x80000000u);
        for (; i + 16 <= n; i += 16) {
            __mmask16 k = (__mmask16)ptwm_load_le16(bitmap + i / 8);
            unsigned c = (unsigned)__builtin_popcount((unsigned)k), z = ~(unsigned)k & 0xffffu;
            __m512i v = _mm512_maskz_loadu_epi32((__mmask16)((1u << c) - 1), src + 4 * j);
            __mmask16 neg = (__mmask16)_pdep_u32(signs_get(sr, 16 - c), z);
            v = _mm512_maskz_expand_epi32(k, v);
            _mm512_storeu_si512(dst + 4 * i, _mm512_mask_mov_epi32(v, neg, top));
            j += c;
        }
    }
    *jp = j;
    return i;
}

/* 64 elements a step: the 256-entry rank lookup is two two-table byte
 * permutes (128 entries each) blended on the index's top bit; the nibbles
 * pack as 16-bit lanes narrowed to bytes. The escapes' exponents are
 * compressed out of the same vector (no second pass over j to find them). */
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,popcnt"))) size_t
ptwm_joint_split_vbmi(const uint8_t *restrict ex, const uint8_t *restrict sm, size_t n,
                      const uint8_t rank[256], uint8_t *restrict j, uint8_t *restrict nib,
                      uint8_t *restrict esc, size_t *nesc) {
    const __m512i r0 = _mm512_loadu_si512(rank), r1 = _mm512_loadu_si512(rank + 64);
    const __m512i r2 = _mm512_loadu_si512(rank + 128), r3 = _mm512_loadu_si512(rank + 192);
    const __m512i lo4 = _mm512_set1_epi8(15), hi4 = _mm512_set1_epi8((char)0xf0);
    const __m512i w_lo = _mm512_set1_epi16(0x000f), w_hi = _mm512_set1_epi16(0x00f0);
    const __m512i escape = _mm512_set1_epi8(PTWM_JOINT_MAP);
    size_t i, ne = 0;
    for (i = 0; i + 64 <= n; i += 64) {
        __m512i e = _mm512_loadu_si512(ex + i), s = _mm512_loadu_si512(sm + i);
        __m512i rk = _mm512_mask_blend_epi8(_mm512_movepi8_mask(e),
                                            _mm512_permutex2var_epi8(r0, e, r1),
                                            _mm512_permutex2var_epi8(r2, e, r3));
        __m512i w = _mm512_or_si512(_mm512_and_si512(s, w_lo),
                                    _mm512_and_si512(_mm512_srli_epi16(s, 4), w_hi));
        __mmask64 m = _mm512_cmpeq_epi8_mask(rk, escape);
        _mm512_storeu_si512(j + i, _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi16(rk, 4), hi4),
                                                   _mm512_and_si512(_mm512_srli_epi16(s, 4), lo4)));
        _mm256_storeu_si256((__m256i *)(void *)(nib + i / 2), _mm512_cvtepi16_epi8(w));
        if (m) { /* rare: the map holds the most frequent exponents */
            _mm512_mask_compressstoreu_epi8(esc + ne, m, e);
            ne += (size_t)__builtin_popcountll(m);
        }
    }
    *nesc = ne;
    return i;
}
#endif
