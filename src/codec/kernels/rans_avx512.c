/* rANS kernels of level AVX512 (see rans.c): the order-0 decoders of
 * kernels/rans_dec_simd.h at 16 lanes (one stream, and the two of a
 * two-stream plane in one loop), over the split table and over the packed
 * one (one gather a step instead of two), and the packed table's build. */
#include "rans_kernels.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

/* The renormalisation words go to the lanes below L in lane order by an
 * expand, so no lane table. */
#define RANS_AVX512_RENORM_AT(X, P)                                                             \
    do {                                                                                        \
        __mmask16 k_ = _mm512_cmplt_epu32_mask(X, lim);                                         \
        __m512i w_ = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(P))); \
        X = _mm512_mask_or_epi32(X, k_, _mm512_slli_epi32(X, 16), _mm512_maskz_expand_epi32(k_, w_)); \
        (P) += 2 * (unsigned)__builtin_popcount(k_);                                            \
    } while (0)

/* 32 states in two vectors of 16. */
#define RD_V __m512i
#define RD_W 16
#define RD_EACH(M) M(0) M(1)
#define RD_LOAD(p) _mm512_loadu_si512(p)
#define RD_STORE(p, v) _mm512_storeu_si512(p, v)
#define RD_SET1(c) _mm512_set1_epi32(c)
#define RD_AND(a, b) _mm512_and_si512(a, b)
#define RD_ADD(a, b) _mm512_add_epi32(a, b)
#define RD_MULLO(a, b) _mm512_mullo_epi32(a, b)
#define RD_SRLI(v, n) _mm512_srli_epi32(v, n)
#define RD_SRL(v, c) _mm512_srl_epi32(v, c)
#define RD_GATHER(base, idx, scale) _mm512_i32gather_epi32(idx, (const void *)(base), scale)
#define RD_CONSTS const __m512i lim = _mm512_set1_epi32((int)RANS_L);
#define RD_RENORM_AT(X, P) RANS_AVX512_RENORM_AT(X, P)
#define RD_PUT_SYMS(S, OUT) _mm_storeu_si128((__m128i *)(void *)(OUT), _mm512_cvtepi32_epi8(S))
#define RD_TARGET __attribute__((target("avx512f,avx512bw,popcnt")))

#define RD_NAME ptwm_rans_dec_o0_avx512
#define RD_X2_NAME ptwm_rans_dec_o0x2_avx512
#define RD_PACKED 0
#include "rans_dec_simd.h"

#define RD_NAME ptwm_rans_dec_o0_packed_avx512
#define RD_X2_NAME ptwm_rans_dec_o0x2_packed_avx512
#define RD_PACKED 1
#include "rans_dec_simd.h"

/* The packed table (rans_table.c, ptwm_rans_dtab_packs), 16 entries a store: a symbol's
 * last store may run past its slots into the next symbol's, whose own
 * stores come later and overwrite them, and past the last slot by up to
 * RANS_PACK_SLACK entries. A plane's table costs a store per symbol instead
 * of one per slot, and planes of a few KiB still build 4096 slots. */
__attribute__((target("avx512f"))) void ptwm_rans_dtab_packed_avx512(const uint32_t freq[256],
                                                                     uint32_t *tab) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    uint32_t cum = 0, s, k;
    for (s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        __m512i v = _mm512_add_epi32(_mm512_set1_epi32((int)(s << 24 | f << 12)), iota);
        for (k = 0; k < f; k += 16) {
            _mm512_storeu_si512(tab + cum + k, v);
            v = _mm512_add_epi32(v, step);
        }
        cum += f;
    }
}

#endif
