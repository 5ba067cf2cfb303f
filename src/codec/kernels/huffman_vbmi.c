/* AVX-512 VBMI kernel of the Huffman encoder: a stream's size in bits from
 * the code lengths (see huffman.c). */
#include "huffman_kernels.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

/* 64 lengths a step from the 256-entry table by two two-register byte
 * permutes, summed by vpsadbw (13 x 64 fits the 16-bit partial sums). */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) uint64_t ptwm_huf_bits_vbmi(
    const uint8_t *src, size_t n, const uint8_t len[256]) {
    const __m512i t0 = _mm512_loadu_si512(len), t1 = _mm512_loadu_si512(len + 64);
    const __m512i t2 = _mm512_loadu_si512(len + 128), t3 = _mm512_loadu_si512(len + 192);
    __m512i acc = _mm512_setzero_si512();
    size_t i;
    for (i = 0; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512(src + i);
        __m512i l = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), _mm512_permutex2var_epi8(t0, v, t1),
                                           _mm512_permutex2var_epi8(t2, v, t3));
        acc = _mm512_add_epi64(acc, _mm512_sad_epu8(l, _mm512_setzero_si512()));
    }
    return (uint64_t)_mm512_reduce_add_epi64(acc) + ptwm_huf_bits_scalar(src + i, n - i, len);
}
#endif
