/* rANS kernels of level AVX2 (see rans.c for the format and why it has 32
 * states): the order-0 decoder (kernels/rans_dec_simd.h at 8 lanes), the
 * order-1 decoder and the order-0 encoder, 8 states a vector, and the scan
 * for symbols a sample missed. */
#include <pthread.h>
#include "rans_kernels.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

/* rans_lanes[m][k]: for a set m of lanes that need a word, which of the next
 * words lane k takes (the words go to the needing lanes in lane order, as the
 * scalar decoder reads them). */
static uint32_t rans_lanes[256][RANS_STATES];
static pthread_once_t rans_lanes_once = PTHREAD_ONCE_INIT;

static void rans_lanes_init(void) {
    int m, k;
    for (m = 0; m < 256; m++) {
        uint32_t next = 0;
        for (k = 0; k < RANS_STATES; k++) rans_lanes[m][k] = (m >> k) & 1 ? next++ : 0;
    }
}

/* The lanes of X below L take the next words in lane order (a lane
 * permutation of the next 8 words). */
#define RANS_AVX2_RENORM_AT(X, P)                                                               \
    do {                                                                                        \
        __m256i need_ = _mm256_cmpeq_epi32(_mm256_srli_epi32(X, 16), zero), w_;                 \
        unsigned m_ = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need_));                 \
        w_ = _mm256_cvtepu16_epi32(RANS_LD128(P));                                              \
        w_ = _mm256_permutevar8x32_epi32(w_, RANS_LD256(rans_lanes[m_]));                       \
        X = _mm256_blendv_epi8(X, _mm256_or_si256(_mm256_slli_epi32(X, 16), w_), need_);        \
        (P) += 2 * (unsigned)__builtin_popcount(m_);                                            \
    } while (0)
#define RANS_AVX2_RENORM(X) RANS_AVX2_RENORM_AT(X, p)

/* x = f * (x >> prec) + bias for 8 states from their entries E, then the
 * renormalisation. */
#define RANS_AVX2_ADVANCE(X, E)                                                                 \
    do {                                                                                        \
        X = _mm256_add_epi32(                                                                   \
            _mm256_mullo_epi32(_mm256_srli_epi32(E, 16), _mm256_srl_epi32(X, shift)),           \
            _mm256_and_si256(E, low16));                                                        \
        RANS_AVX2_RENORM(X);                                                                    \
    } while (0)

/* The symbols of 8 lanes out through a register: a vector store read back
 * bytewise would stall store forwarding. */
#define RANS_AVX2_PUT_SYMS(S, OUT)                                                              \
    do {                                                                                        \
        __m256i b_ = _mm256_shuffle_epi8(S, pick);                                              \
        uint32_t lo_ = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(b_));                 \
        uint32_t hi_ = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(b_, 1));            \
        memcpy((OUT), &lo_, 4);                                                                 \
        memcpy((OUT) + 4, &hi_, 4);                                                             \
    } while (0)

/* The order-0 loop: 32 states in four vectors of 8. */
#define RD_V __m256i
#define RD_W 8
#define RD_EACH(M) M(0) M(1) M(2) M(3)
#define RD_LOAD(p) RANS_LD256(p)
#define RD_STORE(p, v) RANS_ST256(p, v)
#define RD_SET1(c) _mm256_set1_epi32(c)
#define RD_AND(a, b) _mm256_and_si256(a, b)
#define RD_ADD(a, b) _mm256_add_epi32(a, b)
#define RD_MULLO(a, b) _mm256_mullo_epi32(a, b)
#define RD_SRLI(v, n) _mm256_srli_epi32(v, n)
#define RD_SRL(v, c) _mm256_srl_epi32(v, c)
#define RD_GATHER(base, idx, scale) _mm256_i32gather_epi32((const void *)(base), idx, scale)
#define RD_CONSTS                                                                               \
    const __m256i zero = _mm256_setzero_si256();                                                \
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  \
                                          -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,  \
                                          -1, -1, -1, -1);
#define RD_RENORM_AT(X, P) RANS_AVX2_RENORM_AT(X, P)
#define RD_PUT_SYMS(S, OUT) RANS_AVX2_PUT_SYMS(S, OUT)
#define RD_TARGET __attribute__((target("avx2,popcnt"))) static
#define RD_NAME dec_o0_avx2
#define RD_PACKED 0
#include "rans_dec_simd.h"

size_t ptwm_rans_dec_o0_avx2(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                             const uint8_t **pp, const uint8_t *end, uint32_t *x, uint8_t *dst,
                             size_t n) {
    pthread_once(&rans_lanes_once, rans_lanes_init); /* before any loop reads it */
    return dec_o0_avx2(tab, sym, prec, pp, end, x, dst, n);
}

/* One vector step of order 1: 8 states X with contexts C (previous symbols
 * of their segments, lanes = segments 8v..8v+7) decode symbol j of each. */
#define RANS_AVX2_STEP1(X, C, V)                                                                \
    do {                                                                                        \
        __m256i idx_ = _mm256_or_si256(_mm256_sll_epi32(C, shift),                             \
                                       _mm256_and_si256(X, slot_mask));                        \
        __m256i e_ = _mm256_i32gather_epi32((const void *)tab, idx_, 4);                        \
        unsigned k_;                                                                            \
        uint64_t lo_;                                                                           \
        __m256i out_;                                                                           \
        C = _mm256_and_si256(_mm256_i32gather_epi32((const void *)sym, idx_, 1), low8);         \
        RANS_AVX2_ADVANCE(X, e_);                                                               \
        /* bytes out through a register: a vector store read back bytewise                      \
         * would stall store forwarding */                                                      \
        out_ = _mm256_shuffle_epi8(C, pick);                                                    \
        lo_ = (uint64_t)(uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(out_)) |             \
              (uint64_t)(uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(out_, 1)) << 32;   \
        for (k_ = 0; k_ < 8; k_++) dst[(size_t)(8 * (V) + k_) * q + j] = (uint8_t)(lo_ >> 8 * k_); \
    } while (0)

/* The order-1 fast loop, 32 segments in four vectors; two gathers per 8
 * symbols (entry, symbol) at (context << prec) + slot. Returns the steps
 * done. */
__attribute__((target("avx2,popcnt"))) static size_t
dec_o1_avx2(const uint32_t *tab, const uint8_t *sym, unsigned prec, const uint8_t **pp,
            const uint8_t *end, uint32_t x[RANS_STATES], uint32_t ctx[RANS_STATES], uint8_t *dst,
            size_t q) {
    const uint8_t *p = *pp;
    const __m256i slot_mask = _mm256_set1_epi32((int)((1u << prec) - 1));
    const __m256i low16 = _mm256_set1_epi32(0xffff), low8 = _mm256_set1_epi32(0xff);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, -1, -1);
    const __m128i shift = _mm_cvtsi32_si128((int)prec);
    __m256i X0 = RANS_LD256(x);
    __m256i X1 = RANS_LD256((x + 8));
    __m256i X2 = RANS_LD256((x + 16));
    __m256i X3 = RANS_LD256((x + 24));
    __m256i C0 = RANS_LD256(ctx);
    __m256i C1 = RANS_LD256((ctx + 8));
    __m256i C2 = RANS_LD256((ctx + 16));
    __m256i C3 = RANS_LD256((ctx + 24));
    size_t j = 0;
    while (j < q && end - p >= 2 * RANS_STATES) {
        RANS_AVX2_STEP1(X0, C0, 0);
        RANS_AVX2_STEP1(X1, C1, 1);
        RANS_AVX2_STEP1(X2, C2, 2);
        RANS_AVX2_STEP1(X3, C3, 3);
        j++;
    }
    RANS_ST256(x, X0);
    RANS_ST256((x + 8), X1);
    RANS_ST256((x + 16), X2);
    RANS_ST256((x + 24), X3);
    RANS_ST256(ctx, C0);
    RANS_ST256((ctx + 8), C1);
    RANS_ST256((ctx + 16), C2);
    RANS_ST256((ctx + 24), C3);
    *pp = p;
    return j;
}

size_t ptwm_rans_dec_o1_avx2(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                             const uint8_t **pp, const uint8_t *end, uint32_t *x, uint32_t *ctx,
                             uint8_t *dst, size_t q) {
    pthread_once(&rans_lanes_once, rans_lanes_init); /* before the loop reads it */
    return dec_o1_avx2(tab, sym, prec, pp, end, x, ctx, dst, q);
}

/* enc_pack[m]: shuffle that moves the 16-bit words of the lanes set in m to
 * the top of a 16-byte register, in lane order (the scalar encoder's order
 * in memory: lower lanes at lower addresses). */
static uint8_t enc_pack[256][16];
static pthread_once_t enc_pack_once = PTHREAD_ONCE_INIT;

static void enc_pack_init(void) {
    int m, l, c, t;
    for (m = 0; m < 256; m++) {
        for (c = 0, l = 0; l < 8; l++) c += (m >> l) & 1;
        memset(enc_pack[m], 0x80, 16);
        for (t = 0, l = 0; l < 8; l++)
            if ((m >> l) & 1) {
                enc_pack[m][16 - 2 * c + 2 * t] = (uint8_t)(2 * l);
                enc_pack[m][16 - 2 * c + 2 * t + 1] = (uint8_t)(2 * l + 1);
                t++;
            }
    }
}

/* One vector of 8 states (lanes = states 8V..8V+7) codes symbols S. */
#define RANS_ENC_AVX2(X, V)                                                                     \
    do {                                                                                        \
        __m256i sy_ = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(s + 8 * (V)))); \
        __m256i rc_ = _mm256_i32gather_epi32((const int *)(const void *)vt->rcp, sy_, 4);      \
        __m256i fc_ = _mm256_i32gather_epi32((const int *)(const void *)vt->fc, sy_, 4);       \
        __m256i f_ = _mm256_srli_epi32(fc_, 16);                                                \
        __m256i xm_ = _mm256_sll_epi32(f_, xshift);                                             \
        /* x >= x_max, unsigned; x_max = 0 stands for 2^32 (f = M) */                          \
        __m256i nd_ = _mm256_andnot_si256(_mm256_cmpeq_epi32(xm_, zero),                        \
                                          _mm256_cmpeq_epi32(_mm256_max_epu32(X, xm_), X));     \
        unsigned m_ = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nd_));                   \
        __m256i w_ = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(X, packw), 0x08);             \
        __m128i o_ = _mm_shuffle_epi8(_mm256_castsi256_si128(w_),                               \
                                      _mm_loadu_si128((const __m128i *)(const void *)enc_pack[m_])); \
        __m256i sh_, ev_, od_, q_;                                                              \
        _mm_storeu_si128((__m128i *)(void *)(p - 16), o_);                                      \
        p -= 2 * (size_t)__builtin_popcount(m_);                                                \
        X = _mm256_blendv_epi8(X, _mm256_srli_epi32(X, 16), nd_);                               \
        /* s = ceil(log2 f): the exponent of float(f - 1), 0 for f = 1 */                      \
        sh_ = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(           \
                                   _mm256_cvtepi32_ps(_mm256_sub_epi32(f_, one))), 23), c126),  \
                               zero);                                                           \
        ev_ = _mm256_add_epi64(_mm256_srli_epi64(_mm256_mul_epu32(X, rc_), 32),                 \
                               _mm256_and_si256(X, lo32));                                      \
        ev_ = _mm256_srlv_epi64(ev_, _mm256_and_si256(sh_, lo32));                              \
        od_ = _mm256_add_epi64(_mm256_srli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(X, 32),     \
                                                                  _mm256_srli_epi64(rc_, 32)), 32), \
                               _mm256_srli_epi64(X, 32));                                       \
        od_ = _mm256_srlv_epi64(od_, _mm256_srli_epi64(sh_, 32));                               \
        q_ = _mm256_blend_epi32(ev_, _mm256_slli_epi64(od_, 32), 0xAA);                         \
        X = _mm256_add_epi32(_mm256_add_epi32(X, _mm256_mullo_epi32(q_, _mm256_sub_epi32(mm, f_))), \
                             _mm256_and_si256(fc_, lo16));                                      \
    } while (0)

/* Rounds of 32 symbols, from symbol i down, while the writer has the margin
 * of a round; returns where the scalar loop goes on. */
__attribute__((target("avx2,popcnt"))) size_t
ptwm_rans_enc_o0_avx2(const uint8_t *src, size_t i, const enc_vsym *vt, unsigned prec,
                      uint32_t *x, ewriter *w) {
    const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
    const __m256i c126 = _mm256_set1_epi32(126), lo16 = _mm256_set1_epi32(0xffff);
    const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
    const __m256i mm = _mm256_set1_epi32((int)(1u << prec));
    const __m256i packw = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1,
                                           -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1,
                                           -1, -1);
    const __m128i xshift = _mm_cvtsi32_si128((int)(32 - prec));
    __m256i X0 = RANS_LD256(x), X1 = RANS_LD256((x + 8));
    __m256i X2 = RANS_LD256((x + 16)), X3 = RANS_LD256((x + 24));
    uint8_t *p = w->p;
    pthread_once(&enc_pack_once, enc_pack_init);
    for (; i > 0 && p - w->lim >= ENC_ROUND_MARGIN; i -= RANS_O0_STATES) {
        const uint8_t *s = src + i - RANS_O0_STATES;
        RANS_ENC_AVX2(X3, 3);
        RANS_ENC_AVX2(X2, 2);
        RANS_ENC_AVX2(X1, 1);
        RANS_ENC_AVX2(X0, 0);
    }
    RANS_ST256(x, X0);
    RANS_ST256((x + 8), X1);
    RANS_ST256((x + 16), X2);
    RANS_ST256((x + 24), X3);
    w->p = p;
    return i;
}

/* rans_encode.c's skip_seen, 64 bytes a step: a byte's flag is a bit of a
 * 16-byte row picked by its low nibble (one table for bytes below 128, one above),
 * the bit its high nibble's low three bits select. A lookup and an OR a
 * byte took 8% of compress time at this level. */
__attribute__((target("avx2"))) size_t ptwm_skip_seen_avx2(const uint8_t *src, size_t i, size_t n,
                                                            const uint8_t absent[256]) {
    uint8_t lo[16] = {0}, hi[16] = {0};
    __m256i tlo, thi, bits, m0f, m07;
    int s;
    for (s = 0; s < 256; s++)
        if (absent[s]) (s < 128 ? lo : hi)[s & 15] |= (uint8_t)(1u << ((s >> 4) & 7));
    tlo = _mm256_broadcastsi128_si256(RANS_LD128(lo));
    thi = _mm256_broadcastsi128_si256(RANS_LD128(hi));
    bits = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16,
                            32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0);
    m0f = _mm256_set1_epi8(15);
    m07 = _mm256_set1_epi8(7);
    for (; n - i >= 64; i += 64) {
        __m256i a = RANS_LD256(src + i), b = RANS_LD256(src + i + 32);
        __m256i la = _mm256_and_si256(a, m0f), lb = _mm256_and_si256(b, m0f);
        __m256i ra = _mm256_blendv_epi8(_mm256_shuffle_epi8(tlo, la), _mm256_shuffle_epi8(thi, la), a);
        __m256i rb = _mm256_blendv_epi8(_mm256_shuffle_epi8(tlo, lb), _mm256_shuffle_epi8(thi, lb), b);
        __m256i ba = _mm256_shuffle_epi8(bits, _mm256_and_si256(_mm256_srli_epi16(a, 4), m07));
        __m256i bb = _mm256_shuffle_epi8(bits, _mm256_and_si256(_mm256_srli_epi16(b, 4), m07));
        __m256i hit = _mm256_or_si256(_mm256_and_si256(ra, ba), _mm256_and_si256(rb, bb));
        if (!_mm256_testz_si256(hit, hit)) break;
    }
    return i;
}
#endif
