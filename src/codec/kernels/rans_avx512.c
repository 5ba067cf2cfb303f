/* rANS kernels of level AVX512 (see rans.c): the order-0 decoder of
 * kernels/rans_dec_simd.h at 16 lanes, over the split table and over the
 * packed one (one gather a step instead of two), and the packed table's
 * build. */
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
#define RANS_AVX512_RENORM(X) RANS_AVX512_RENORM_AT(X, p)

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
#define RD_RENORM(X) RANS_AVX512_RENORM(X)
#define RD_PUT_SYMS(S, OUT) _mm_storeu_si128((__m128i *)(void *)(OUT), _mm512_cvtepi32_epi8(S))
#define RD_TARGET __attribute__((target("avx512f,avx512bw,popcnt")))

#define RD_NAME ptwm_rans_dec_o0_avx512
#define RD_PACKED 0
#include "rans_dec_simd.h"

#define RD_NAME ptwm_rans_dec_o0_packed_avx512
#define RD_PACKED 1
#include "rans_dec_simd.h"

/* The packed table (rans.c, dtab_packs), 16 entries a store: a symbol's
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

/* Two streams in one loop (rans.c, MODE_O0X2): four vectors of 16 states,
 * each a chain of gather, multiply and renormalisation about 59 cycles
 * long, where the two of one stream left the core waiting on those chains
 * (docs/ARCHITECTURE.md, "The order-0 rANS decoder"). Each stream reads its
 * own words, so the two renormalisations do not wait on each other. Over
 * the packed table (sym unused) or the split one (a second gather for the
 * symbols). */
#define X2_STEP_PACKED(X, P, OUT)                                                               \
    do {                                                                                        \
        __m512i e_ = _mm512_i32gather_epi32(_mm512_and_si512(X, slot_mask), (const void *)tab, 4); \
        X = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(e_, 12), low),  \
                                                _mm512_srl_epi32(X, shift)),                    \
                             _mm512_and_si512(e_, low));                                        \
        RANS_AVX512_RENORM_AT(X, P);                                                            \
        _mm_storeu_si128((__m128i *)(void *)(OUT), _mm512_cvtepi32_epi8(_mm512_srli_epi32(e_, 24))); \
    } while (0)
#define X2_STEP_SPLIT(X, P, OUT)                                                                \
    do {                                                                                        \
        __m512i s_ = _mm512_and_si512(X, slot_mask);                                            \
        __m512i e_ = _mm512_i32gather_epi32(s_, (const void *)tab, 4);                          \
        __m512i y_ = _mm512_i32gather_epi32(s_, (const void *)sym, 1);                          \
        X = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(e_, 16), _mm512_srl_epi32(X, shift)), \
                             _mm512_and_si512(e_, low));                                        \
        RANS_AVX512_RENORM_AT(X, P);                                                            \
        _mm_storeu_si128((__m128i *)(void *)(OUT), _mm512_cvtepi32_epi8(y_));                   \
    } while (0)

#define X2_LOOP(NAME, STEP, LOW)                                                                \
    __attribute__((target("avx512f,avx512bw,popcnt"))) size_t NAME(                             \
        const uint32_t *tab, const uint8_t *sym, unsigned prec, const uint8_t **pa,             \
        const uint8_t *ea, uint32_t *xa, uint8_t *da, const uint8_t **pb, const uint8_t *eb,    \
        uint32_t *xb, uint8_t *db, size_t n) {                                                  \
        const __m512i slot_mask = _mm512_set1_epi32((int)((1u << prec) - 1));                   \
        const __m512i low = _mm512_set1_epi32(LOW);                                             \
        const __m512i lim = _mm512_set1_epi32((int)RANS_L);                                     \
        const __m128i shift = _mm_cvtsi32_si128((int)prec);                                     \
        const uint8_t *p = *pa, *q = *pb;                                                       \
        __m512i a0 = _mm512_loadu_si512(xa), a1 = _mm512_loadu_si512(xa + 16);                  \
        __m512i b0 = _mm512_loadu_si512(xb), b1 = _mm512_loadu_si512(xb + 16);                  \
        size_t i = 0;                                                                           \
        (void)sym;                                                                              \
        /* A round reads at most 64 bytes of each stream's words. */                            \
        while (n - i >= RANS_O0_STATES && ea - p >= 2 * RANS_O0_STATES &&                       \
               eb - q >= 2 * RANS_O0_STATES) {                                                  \
            STEP(a0, p, da + i);                                                                \
            STEP(b0, q, db + i);                                                                \
            STEP(a1, p, da + i + 16);                                                           \
            STEP(b1, q, db + i + 16);                                                           \
            i += RANS_O0_STATES;                                                                \
        }                                                                                       \
        _mm512_storeu_si512(xa, a0);                                                            \
        _mm512_storeu_si512(xa + 16, a1);                                                       \
        _mm512_storeu_si512(xb, b0);                                                            \
        _mm512_storeu_si512(xb + 16, b1);                                                       \
        *pa = p;                                                                                \
        *pb = q;                                                                                \
        return i;                                                                               \
    }

X2_LOOP(ptwm_rans_dec_o0x2_packed_avx512, X2_STEP_PACKED, (1 << RANS_PACK_PREC) - 1)
X2_LOOP(ptwm_rans_dec_o0x2_avx512, X2_STEP_SPLIT, 0xffff)
#endif
