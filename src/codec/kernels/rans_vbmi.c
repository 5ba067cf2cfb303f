/* rANS kernels of level AVX512VBMI (see rans.c): the order-0 encoder and
 * the two-stream order-0 decoder without gathers, and the scan for symbols a
 * sample missed. */
#include "rans_kernels.h"
#include "cpu.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

/* AVX-512 VBMI: the table lookups without gathers (gathers bound the AVX2
 * loop; docs/ARCHITECTURE.md, "Instruction sets"). The two tables are kept as
 * eight byte planes of 256 entries; a byte permute over two registers looks
 * up 128 entries for 64 symbols at once, so a plane costs two permutes and a
 * blend per 64 symbols, and byte unpacks turn the planes back into 32-bit
 * lanes. The symbols are permuted first so that the unpacks (which work
 * within 128-bit lanes) leave group g (symbols 16g..16g+15) in lane order.
 * Each group then codes as in the AVX2 loop, 16 states a vector; the words
 * of the lanes that renormalise are compressed and stored below p with a
 * mask, lower lanes at lower addresses, as the scalar encoder writes them. */
typedef struct enc_planes {
    uint8_t b[8][256]; /* rcp bytes 0..3, then fc bytes 0..3 */
} enc_planes;

/* Precisions up to this take the narrow form of the fc entries (below). */
#define ENC_NARROW_PREC 12

/* The quotient is q = (t + ((x - t) >> 1)) >> (s - 1), t = mulhi(x, rcp)
 * (Granlund and Montgomery's form for 33-bit reciprocals), all in 32-bit
 * lanes: the 64-bit lanes of rcp's form (see enc_sym) took twice the
 * shifts. It needs s >= 1, so f = 1 takes rcp = 2^32 - 1 (q = x - 1, as
 * RANS_RCP64 does) and cum + M - 1 (the same state).
 *
 * The wide fc entry is f << 16 | cum, as enc_vsym's; the loop then derives
 * s - 1 from f. The narrow one (prec <= ENC_NARROW_PREC, every f < M) holds
 * s - 1 too: cum (up to 2M - 2) in bits 0..12, f in 16..27 and s - 1 in
 * 28..31, each taken out in one or two operations (the float conversion
 * that derived s - 1, and the test for f = M, were a fifth of the loop's
 * operations on the shared ports). Returns whether the table is narrow. */
static int build_planes(const enc_vsym *vt, unsigned prec, enc_planes *pl) {
    uint32_t m = 1u << prec;
    int s, k, narrow = prec <= ENC_NARROW_PREC;
    for (s = 0; s < 256; s++) narrow &= vt->fc[s] >> 16 < m;
    for (s = 0; s < 256; s++) {
        uint32_t rcp = vt->rcp[s], fc = vt->fc[s], f = fc >> 16, sh = 0;
        if (f == 1) {
            rcp = 0xffffffffu;
            fc += m - 1;
        }
        if (narrow) {
            while (f >= 2 && (2u << sh) <= f - 1) sh++; /* floor(log2(f - 1)) */
            fc = sh << 28 | f << 16 | (fc - (f << 16));
        }
        for (k = 0; k < 4; k++) {
            pl->b[k][s] = (uint8_t)(rcp >> (8 * k));
            pl->b[4 + k][s] = (uint8_t)(fc >> (8 * k));
        }
    }
    return narrow;
}

/* 64 lookups in one byte plane. */
#define ENC_LOOKUP(K)                                                                           \
    _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(pl_[K][0], idx, pl_[K][1]),            \
                           _mm512_permutex2var_epi8(pl_[K][2], idx, pl_[K][3]))

/* One group of 16 symbols on the vector X of 16 states: RC and FC hold the
 * group's table entries; NARROW says which form FC has. */
#define RANS_ENC_AVX512(X, RC, FC, NARROW)                                                      \
    do {                                                                                        \
        __m512i f_, xm_, sh_, t_, q_, w16_;                                                     \
        __mmask16 k_;                                                                           \
        unsigned c_;                                                                            \
        if (NARROW) {                                                                           \
            f_ = _mm512_and_si512(_mm512_srli_epi32(FC, 16), f12);                              \
            xm_ = _mm512_sllv_epi32(f_, xshift);                                                \
            k_ = _mm512_cmpge_epu32_mask(X, xm_);                                               \
            sh_ = _mm512_srli_epi32(FC, 28);                                                    \
        } else {                                                                                \
            f_ = _mm512_srli_epi32(FC, 16);                                                     \
            xm_ = _mm512_sllv_epi32(f_, xshift);                                                \
            k_ = _mm512_cmpge_epu32_mask(X, xm_) & ~_mm512_cmpeq_epi32_mask(xm_, zero);         \
            /* s - 1 = floor(log2(f - 1)) from the float's exponent (0 for f <= 2) */           \
            sh_ = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(_mm512_castps_si512(       \
                                       _mm512_cvtepi32_ps(_mm512_sub_epi32(f_, one))), 23),     \
                                                    c127),                                      \
                                   zero);                                                       \
        }                                                                                       \
        c_ = (unsigned)__builtin_popcount((unsigned)k_);                                        \
        w16_ = _mm512_castsi256_si512(                                                          \
            _mm256_maskz_compress_epi16((__mmask16)k_, _mm512_cvtepi32_epi16(X)));              \
        p -= 2 * (size_t)c_;                                                                    \
        _mm256_mask_storeu_epi16((void *)p, (__mmask16)((1u << c_) - 1),                        \
                                 _mm512_castsi512_si256(w16_));                                 \
        X = _mm512_mask_srli_epi32(X, k_, X, 16);                                               \
        /* t = mulhi(x, rcp): the odd products leave it in the odd lanes */                   \
        t_ = _mm512_mask_blend_epi32(                                                           \
            (__mmask16)0xAAAA, _mm512_srli_epi64(_mm512_mul_epu32(X, RC), 32),                  \
            _mm512_mul_epu32(_mm512_srli_epi64(X, 32), _mm512_srli_epi64(RC, 32)));             \
        q_ = _mm512_srlv_epi32(                                                                 \
            _mm512_add_epi32(t_, _mm512_srli_epi32(_mm512_sub_epi32(X, t_), 1)), sh_);          \
        X = _mm512_add_epi32(_mm512_add_epi32(X, _mm512_mullo_epi32(q_, _mm512_sub_epi32(mm, f_))), \
                             _mm512_and_si512(FC, NARROW ? cum13 : lo16));                     \
    } while (0)

/* Four 32-bit vectors (groups 0..3) from four byte planes B0..B3 of the
 * permuted lookups. */
#define ENC_ASSEMBLE(B0, B1, B2, B3, OUT)                                                       \
    do {                                                                                        \
        __m512i l01_ = _mm512_unpacklo_epi8(B0, B1), h01_ = _mm512_unpackhi_epi8(B0, B1);       \
        __m512i l23_ = _mm512_unpacklo_epi8(B2, B3), h23_ = _mm512_unpackhi_epi8(B2, B3);       \
        OUT[0] = _mm512_unpacklo_epi16(l01_, l23_);                                             \
        OUT[1] = _mm512_unpackhi_epi16(l01_, l23_);                                             \
        OUT[2] = _mm512_unpacklo_epi16(h01_, h23_);                                             \
        OUT[3] = _mm512_unpackhi_epi16(h01_, h23_);                                             \
    } while (0)

#define ENC_TARGET                                                                              \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,popcnt")))

/* One step of 64 symbols, src[i - 64, i), on the states X0, X1, writing
 * below P (the later round first, and in a round the higher states first,
 * as the scalar loop). The constants and tables are the loop's. */
#define ENC_STEP(SRC, I, X0, X1, P)                                                             \
    do {                                                                                        \
        uint8_t *p = (P);                                                                       \
        __m512i idx = _mm512_permutexvar_epi8(perm, _mm512_loadu_si512((SRC) + (I) - 64));      \
        __mmask64 top = _mm512_movepi8_mask(idx);                                               \
        __m512i rc[4], fc[4];                                                                   \
        {                                                                                       \
            __m512i b0 = ENC_LOOKUP(0), b1 = ENC_LOOKUP(1), b2 = ENC_LOOKUP(2), b3 = ENC_LOOKUP(3); \
            ENC_ASSEMBLE(b0, b1, b2, b3, rc);                                                   \
        }                                                                                       \
        {                                                                                       \
            __m512i b0 = ENC_LOOKUP(4), b1 = ENC_LOOKUP(5), b2 = ENC_LOOKUP(6), b3 = ENC_LOOKUP(7); \
            ENC_ASSEMBLE(b0, b1, b2, b3, fc);                                                   \
        }                                                                                       \
        RANS_ENC_AVX512(X1, rc[3], fc[3], narrow);                                              \
        RANS_ENC_AVX512(X0, rc[2], fc[2], narrow);                                              \
        RANS_ENC_AVX512(X1, rc[1], fc[1], narrow);                                              \
        RANS_ENC_AVX512(X0, rc[0], fc[0], narrow);                                              \
        (P) = p;                                                                                \
    } while (0)

/* The constants of the loops below. */
#define ENC_CONSTS                                                                              \
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);                    \
    const __m512i c127 = _mm512_set1_epi32(127), lo16 = _mm512_set1_epi32(0xffff);              \
    const __m512i f12 = _mm512_set1_epi32(0xfff), cum13 = _mm512_set1_epi32(0x1fff);            \
    const __m512i mm = _mm512_set1_epi32((int)(1u << prec));                                    \
    const __m512i xshift = _mm512_set1_epi32((int)(32 - prec));                                 \
    uint8_t order[64];                                                                          \
    __m512i pl_[8][4], perm;                                                                    \
    int k, q;                                                                                   \
    (void)zero, (void)one, (void)c127, (void)lo16, (void)f12, (void)cum13;                      \
    /* Position 16L + 4j + t takes symbol 16j + 4L + t: after the unpacks,                   \
     * vector j holds symbols 16j..16j+15 in order. */                                         \
    for (k = 0; k < 64; k++) order[k] = (uint8_t)(16 * ((k >> 2) & 3) + 4 * (k >> 4) + (k & 3)); \
    perm = _mm512_loadu_si512(order);                                                           \
    for (k = 0; k < 8; k++)                                                                     \
        for (q = 0; q < 4; q++) pl_[k][q] = _mm512_loadu_si512(pl->b[k] + 64 * q)

/* The loop, for a narrow or a wide table (a constant where inlined). Two
 * rounds a step (64 symbols); a round writes at most 64 bytes. */
ENC_TARGET static inline __attribute__((always_inline)) size_t
encode_o0_loop(const uint8_t *src, size_t i, const enc_planes *pl, unsigned prec,
               uint32_t x[RANS_O0_STATES], ewriter *w, const int narrow) {
    uint8_t *pw = w->p;
    __m512i X0, X1;
    ENC_CONSTS;
    X0 = _mm512_loadu_si512(x);
    X1 = _mm512_loadu_si512(x + 16);
    for (; i >= 2 * RANS_O0_STATES && pw - w->lim >= 2 * ENC_ROUND_MARGIN; i -= 2 * RANS_O0_STATES)
        ENC_STEP(src, i, X0, X1, pw);
    _mm512_storeu_si512(x, X0);
    _mm512_storeu_si512(x + 16, X1);
    w->p = pw;
    return i;
}

/* Two streams of one table in one loop, a step of each in turn: a step's
 * chains (the states' arithmetic, the writer's pointer) wait on the step
 * before, so the second stream's fill the gaps. Runs while both have a
 * step and room; *ia, *ib: where each stopped. */
ENC_TARGET static inline __attribute__((always_inline)) void
encode_o0x2_loop(const uint8_t *sa, size_t *ia, uint32_t *xa, ewriter *wa, const uint8_t *sb,
                 size_t *ib, uint32_t *xb, ewriter *wb, const enc_planes *pl, unsigned prec,
                 const int narrow) {
    __m512i A0 = _mm512_loadu_si512(xa), A1 = _mm512_loadu_si512(xa + 16);
    __m512i B0 = _mm512_loadu_si512(xb), B1 = _mm512_loadu_si512(xb + 16);
    uint8_t *pa = wa->p, *pb = wb->p;
    size_t i = *ia, j = *ib;
    ENC_CONSTS;
    for (; i >= 2 * RANS_O0_STATES && j >= 2 * RANS_O0_STATES &&
           pa - wa->lim >= 2 * ENC_ROUND_MARGIN && pb - wb->lim >= 2 * ENC_ROUND_MARGIN;
         i -= 2 * RANS_O0_STATES, j -= 2 * RANS_O0_STATES) {
        ENC_STEP(sa, i, A0, A1, pa);
        ENC_STEP(sb, j, B0, B1, pb);
    }
    _mm512_storeu_si512(xa, A0);
    _mm512_storeu_si512(xa + 16, A1);
    _mm512_storeu_si512(xb, B0);
    _mm512_storeu_si512(xb + 16, B1);
    wa->p = pa, wb->p = pb;
    *ia = i, *ib = j;
}

ENC_TARGET static void encode_o0x2_narrow(const uint8_t *sa, size_t *ia, uint32_t *xa, ewriter *wa,
                                          const uint8_t *sb, size_t *ib, uint32_t *xb, ewriter *wb,
                                          const enc_planes *pl, unsigned prec) {
    encode_o0x2_loop(sa, ia, xa, wa, sb, ib, xb, wb, pl, prec, 1);
}

ENC_TARGET static void encode_o0x2_wide(const uint8_t *sa, size_t *ia, uint32_t *xa, ewriter *wa,
                                        const uint8_t *sb, size_t *ib, uint32_t *xb, ewriter *wb,
                                        const enc_planes *pl, unsigned prec) {
    encode_o0x2_loop(sa, ia, xa, wa, sb, ib, xb, wb, pl, prec, 0);
}

/* Two streams in one loop while both have whole steps; each then finishes
 * alone through ptwm_rans_enc_o0_vbmi's loops (the same bytes). */
void ptwm_rans_enc_o0x2_vbmi(const uint8_t *sa, size_t *ia, uint32_t *xa, ewriter *wa,
                             const uint8_t *sb, size_t *ib, uint32_t *xb, ewriter *wb,
                             const enc_vsym *vt, unsigned prec) {
    enc_planes pl;
    if (build_planes(vt, prec, &pl))
        encode_o0x2_narrow(sa, ia, xa, wa, sb, ib, xb, wb, &pl, prec);
    else
        encode_o0x2_wide(sa, ia, xa, wa, sb, ib, xb, wb, &pl, prec);
}

ENC_TARGET static size_t encode_o0_narrow(const uint8_t *src, size_t i, const enc_planes *pl,
                                          unsigned prec, uint32_t *x, ewriter *w) {
    return encode_o0_loop(src, i, pl, prec, x, w, 1);
}

ENC_TARGET static size_t encode_o0_wide(const uint8_t *src, size_t i, const enc_planes *pl,
                                        unsigned prec, uint32_t *x, ewriter *w) {
    return encode_o0_loop(src, i, pl, prec, x, w, 0);
}

/* What the 64-symbol steps leave goes through the AVX2 loop (same bytes). */
size_t ptwm_rans_enc_o0_vbmi(const uint8_t *src, size_t i, const enc_vsym *vt, unsigned prec,
                             uint32_t *x, ewriter *w) {
    enc_planes pl;
    i = build_planes(vt, prec, &pl) ? encode_o0_narrow(src, i, &pl, prec, x, w)
                                    : encode_o0_wide(src, i, &pl, prec, x, w);
    return ptwm_rans_enc_o0_avx2(src, i, vt, prec, x, w);
}

/* rans_encode.c's skip_seen (the next 64-byte block holding a symbol marked
 * in `absent`), 64 bytes a step: the flag table is four vectors, looked up by
 * two byte permutes and the symbol's top bit. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) size_t
ptwm_skip_seen_vbmi(const uint8_t *src, size_t i, size_t n, const uint8_t absent[256]) {
    const __m512i t0 = _mm512_loadu_si512(absent), t1 = _mm512_loadu_si512(absent + 64);
    const __m512i t2 = _mm512_loadu_si512(absent + 128), t3 = _mm512_loadu_si512(absent + 192);
    for (; n - i >= 64; i += 64) {
        __m512i v = _mm512_loadu_si512(src + i);
        __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        __m512i r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
        if (_mm512_test_epi8_mask(r, r)) break;
    }
    return i;
}

/* The two-stream order-0 decoder over a packed table (precision up to 12),
 * without gathers: on some CPUs a 16-lane gather takes ~28 cycles, most of
 * the gather loop's time (docs/SCALING.md, "Decoding BF16 without gathers"). A
 * slot's symbol is found in two steps of byte permutes, 64 states at a time:
 * the slot's bucket (its top 8 bits) gives the rank of the symbol at the
 * bucket's first slot and a bitmap of the slots in it where a later symbol
 * starts, whose bits up to the slot count the symbols to add; the rank
 * (symbols in cum order) then gives the entry cum << 12 | f, symbol on top,
 * as four byte planes. */
typedef struct dec_planes {
    uint8_t rank0[256], lo[256], hi[256]; /* per bucket: rank, start bitmap */
    uint8_t e[4][256];                    /* per rank: bytes of sym << 24 | cum << 12 | f */
} dec_planes;

/* The planes from the packed table (rans_avx512.c: s << 24 | f << 12 | k at
 * slot cum + k). Returns 0 if the table does not walk to 2^prec exactly. */
static int build_dec_planes(const uint32_t *tab, unsigned prec, dec_planes *d) {
    uint32_t m = 1u << prec, sh = prec - 8, w = 1u << sh, cum = 0, r, b, j;
    memset(d, 0, sizeof(*d));
    for (r = 0; r < 256 && cum < m; r++) {
        uint32_t e = tab[cum], f = e >> 12 & 0xfff, v = (e >> 24) << 24 | cum << 12 | f;
        if (!f || (e & 0xfff) || f > m - cum) return 0;
        if ((j = cum & (w - 1)) != 0) { /* a start inside a bucket */
            if (j < 8) d->lo[cum >> sh] |= (uint8_t)(1u << j);
            else d->hi[cum >> sh] |= (uint8_t)(1u << (j - 8));
        }
        for (b = (cum + w - 1) >> sh; b << sh < cum + f; b++) d->rank0[b] = (uint8_t)r;
        d->e[0][r] = (uint8_t)v, d->e[1][r] = (uint8_t)(v >> 8);
        d->e[2][r] = (uint8_t)(v >> 16), d->e[3][r] = (uint8_t)(v >> 24);
        cum += f;
    }
    return cum == m;
}

/* 64 lookups of 256-entry table T (four vectors) at the bytes of IDX. */
#define DEC_LOOKUP(T, IDX, TOP)                                                                 \
    _mm512_mask_blend_epi8(TOP, _mm512_permutex2var_epi8(T[0], IDX, T[1]),                      \
                           _mm512_permutex2var_epi8(T[2], IDX, T[3]))

/* Renormalise the two state vectors XA, XB of one stream from the words at
 * P: one expand of 32 words for both, so the second vector's words do not
 * wait for the first's count. */
#define DEC_RENORM2(XA, XB, P)                                                                  \
    do {                                                                                        \
        __mmask16 ka_ = _mm512_cmplt_epu32_mask(XA, lim), kb_ = _mm512_cmplt_epu32_mask(XB, lim); \
        __mmask32 k_ = _mm512_kunpackw(kb_, ka_);                                               \
        __m512i w_ = _mm512_maskz_expand_epi16(k_, _mm512_loadu_si512((const void *)(P)));                     \
        XA = _mm512_mask_or_epi32(XA, ka_, _mm512_slli_epi32(XA, 16),                           \
                                  _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w_)));           \
        XB = _mm512_mask_or_epi32(XB, kb_, _mm512_slli_epi32(XB, 16),                           \
                                  _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w_, 1)));     \
        (P) += 2 * (unsigned)__builtin_popcount((unsigned)k_);                                  \
    } while (0)

/* State vector X's next state from its lanes of the entries R (f low, cum
 * above) and its slots S. */
#define DEC_NEXT(X, R, S)                                                                       \
    X = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(R, m12), _mm512_srli_epi32(X, prec)), \
                         _mm512_sub_epi32(S, _mm512_and_si512(_mm512_srli_epi32(R, 12), m12)))

#define DEC_TARGET                                                                              \
    __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,avx512bitalg,popcnt")))

/* The tables in registers, and the constants of the loop. */
typedef struct dec_regs {
    __m512i r0[4], lo[4], hi[4], e[4][4], perm, tlo, thi;
} dec_regs;

/* Symbol v * 16 + 4L + m of a round is packed byte 16L + 4v + m (below). */
static const uint8_t dec_order[64] = {
    0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51, 4, 5, 6, 7, 20, 21, 22, 23, 36,
    37, 38, 39, 52, 53, 54, 55, 8, 9, 10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59, 12,
    13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63};
/* Bits 0..j of the 16-bit start bitmap, its low and high byte, by j. */
static const uint8_t dec_mlo[16] = {1,   3,   7,   15,  31,  63,  127, 255,
                                     255, 255, 255, 255, 255, 255, 255, 255};
static const uint8_t dec_mhi[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 7, 15, 31, 63, 127, 255};

DEC_TARGET static void dec_regs_load(const dec_planes *d, dec_regs *g) {
    int k, t;
    g->perm = _mm512_loadu_si512(dec_order);
    g->tlo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)dec_mlo));
    g->thi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)dec_mhi));
    for (k = 0; k < 4; k++) {
        g->r0[k] = _mm512_loadu_si512(d->rank0 + 64 * k);
        g->lo[k] = _mm512_loadu_si512(d->lo + 64 * k);
        g->hi[k] = _mm512_loadu_si512(d->hi + 64 * k);
        for (t = 0; t < 4; t++) g->e[t][k] = _mm512_loadu_si512(d->e[t] + 64 * k);
    }
}

/* One round of streams A and B (X[0], X[1] the first's states, X[2], X[3]
 * the second's; two = 0: A alone), 32 symbols each, to da and db. Vector
 * v's lane 4L + m goes to byte 16L + 4v + m of the packed bytes (packus
 * keeps 128-bit lanes), and the unpacks bring byte planes back the same
 * way, so lanes stay with their states; the symbols are reordered once for
 * the stores. */
DEC_TARGET static inline __attribute__((always_inline)) void
dec_round(const dec_regs *g, const unsigned prec, __m512i *X, const uint8_t **pa,
          const uint8_t **pb, uint8_t *da, uint8_t *db, const int two) {
    const __m512i lim = _mm512_set1_epi32((int)RANS_L), m12 = _mm512_set1_epi32(0xfff);
    const __m512i smask = _mm512_set1_epi32((int)((1u << prec) - 1));
    const __m512i wmask = _mm512_set1_epi16((short)((1u << (prec - 8)) - 1));
    __m512i X0 = X[0], X1 = X[1], X2 = X[2], X3 = X[3];
    __m512i S0 = _mm512_and_si512(X0, smask), S1 = _mm512_and_si512(X1, smask);
    __m512i S2 = _mm512_and_si512(X2, smask), S3 = _mm512_and_si512(X3, smask);
    __m512i w01 = _mm512_packus_epi32(S0, S1), w23 = _mm512_packus_epi32(S2, S3);
    __m512i idx =
        _mm512_packus_epi16(_mm512_srli_epi16(w01, prec - 8), _mm512_srli_epi16(w23, prec - 8));
    __m512i jj = _mm512_packus_epi16(_mm512_and_si512(w01, wmask), _mm512_and_si512(w23, wmask));
    __mmask64 top = _mm512_movepi8_mask(idx);
    __m512i rank = _mm512_add_epi8(
        DEC_LOOKUP(g->r0, idx, top),
        _mm512_add_epi8(_mm512_popcnt_epi8(_mm512_and_si512(DEC_LOOKUP(g->lo, idx, top),
                                                            _mm512_shuffle_epi8(g->tlo, jj))),
                        _mm512_popcnt_epi8(_mm512_and_si512(DEC_LOOKUP(g->hi, idx, top),
                                                            _mm512_shuffle_epi8(g->thi, jj)))));
    __mmask64 rtop = _mm512_movepi8_mask(rank);
    __m512i b0 = DEC_LOOKUP(g->e[0], rank, rtop), b1 = DEC_LOOKUP(g->e[1], rank, rtop);
    __m512i b2 = DEC_LOOKUP(g->e[2], rank, rtop), b3 = DEC_LOOKUP(g->e[3], rank, rtop);
    __m512i l01 = _mm512_unpacklo_epi8(b0, b1), l23 = _mm512_unpacklo_epi8(b2, b3);
    __m512i h01 = _mm512_unpackhi_epi8(b0, b1), h23 = _mm512_unpackhi_epi8(b2, b3);
    __m512i syms = _mm512_permutexvar_epi8(g->perm, b3);
    _mm256_storeu_si256((__m256i *)(void *)da, _mm512_castsi512_si256(syms));
    if (two) _mm256_storeu_si256((__m256i *)(void *)db, _mm512_extracti64x4_epi64(syms, 1));
    DEC_NEXT(X0, _mm512_unpacklo_epi16(l01, l23), S0);
    DEC_NEXT(X1, _mm512_unpackhi_epi16(l01, l23), S1);
    if (two) {
        DEC_NEXT(X2, _mm512_unpacklo_epi16(h01, h23), S2);
        DEC_NEXT(X3, _mm512_unpackhi_epi16(h01, h23), S3);
    }
    DEC_RENORM2(X0, X1, *pa);
    if (two) DEC_RENORM2(X2, X3, *pb);
    X[0] = X0, X[1] = X1, X[2] = X2, X[3] = X3;
}

/* Streams A and B (two = 0: A alone) while each has a whole round. */
DEC_TARGET static inline __attribute__((always_inline)) size_t
dec_o0x2_loop(const dec_regs *g, const unsigned prec, const uint8_t **pa, const uint8_t *ea,
              uint32_t *xa, uint8_t *da, const uint8_t **pb, const uint8_t *eb, uint32_t *xb,
              uint8_t *db, size_t n, const int two) {
    const uint8_t *p = *pa, *q = two ? *pb : NULL;
    __m512i X[4];
    size_t i = 0;
    X[0] = _mm512_loadu_si512(xa), X[1] = _mm512_loadu_si512(xa + 16);
    X[2] = two ? _mm512_loadu_si512(xb) : _mm512_setzero_si512();
    X[3] = two ? _mm512_loadu_si512(xb + 16) : _mm512_setzero_si512();
    while (n - i >= RANS_O0_STATES && ea - p >= 2 * RANS_O0_STATES &&
           (!two || eb - q >= 2 * RANS_O0_STATES)) {
        RANS_READ_AHEAD(p);
        if (two) RANS_READ_AHEAD(q);
        dec_round(g, prec, X, &p, &q, da + i, two ? db + i : NULL, two);
        i += RANS_O0_STATES;
    }
    _mm512_storeu_si512(xa, X[0]);
    _mm512_storeu_si512(xa + 16, X[1]);
    *pa = p;
    if (two) {
        _mm512_storeu_si512(xb, X[2]);
        _mm512_storeu_si512(xb + 16, X[3]);
        *pb = q;
    }
    return i;
}

/* Four streams, two rounds of two in one step: their chains are
 * independent, so the core runs one pair's while the other's wait. */
DEC_TARGET static inline __attribute__((always_inline)) size_t
dec_o0x4_loop(const dec_regs *g, const unsigned prec, const uint8_t **p, const uint8_t *const *e,
              uint32_t *x, uint8_t *const *d, size_t n) {
    const uint8_t *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    __m512i X[4], Y[4];
    size_t i = 0;
    int k;
    for (k = 0; k < 4; k++) {
        X[k] = _mm512_loadu_si512(x + 16 * k);
        Y[k] = _mm512_loadu_si512(x + 64 + 16 * k);
    }
    while (n - i >= RANS_O0_STATES && e[0] - p0 >= 2 * RANS_O0_STATES &&
           e[1] - p1 >= 2 * RANS_O0_STATES && e[2] - p2 >= 2 * RANS_O0_STATES &&
           e[3] - p3 >= 2 * RANS_O0_STATES) {
        RANS_READ_AHEAD(p0);
        RANS_READ_AHEAD(p1);
        RANS_READ_AHEAD(p2);
        RANS_READ_AHEAD(p3);
        dec_round(g, prec, X, &p0, &p1, d[0] + i, d[1] + i, 1);
        dec_round(g, prec, Y, &p2, &p3, d[2] + i, d[3] + i, 1);
        i += RANS_O0_STATES;
    }
    for (k = 0; k < 4; k++) {
        _mm512_storeu_si512(x + 16 * k, X[k]);
        _mm512_storeu_si512(x + 64 + 16 * k, Y[k]);
    }
    p[0] = p0, p[1] = p1, p[2] = p2, p[3] = p3;
    return i;
}

DEC_TARGET static size_t dec_o0_four(const dec_planes *d, unsigned prec, const uint8_t **p,
                                     const uint8_t *const *e, uint32_t *x, uint8_t *const *dst,
                                     size_t n) {
    dec_regs g;
    dec_regs_load(d, &g);
    if (prec == RANS_PACK_PREC) return dec_o0x4_loop(&g, RANS_PACK_PREC, p, e, x, dst, n);
    return dec_o0x4_loop(&g, prec, p, e, x, dst, n);
}

DEC_TARGET static size_t dec_o0_two(const dec_planes *d, unsigned prec, const uint8_t **pa,
                                    const uint8_t *ea, uint32_t *xa, uint8_t *da,
                                    const uint8_t **pb, const uint8_t *eb, uint32_t *xb,
                                    uint8_t *db, size_t n) {
    dec_regs g;
    dec_regs_load(d, &g);
    /* the usual precision with its shifts as immediates (a shift by a
     * register count is two operations) */
    if (prec == RANS_PACK_PREC)
        return dec_o0x2_loop(&g, RANS_PACK_PREC, pa, ea, xa, da, pb, eb, xb, db, n, 1);
    return dec_o0x2_loop(&g, prec, pa, ea, xa, da, pb, eb, xb, db, n, 1);
}

DEC_TARGET static size_t dec_o0_one(const dec_planes *d, unsigned prec, const uint8_t **pp,
                                    const uint8_t *end, uint32_t *x, uint8_t *dst, size_t n) {
    dec_regs g;
    dec_regs_load(d, &g);
    if (prec == RANS_PACK_PREC)
        return dec_o0x2_loop(&g, RANS_PACK_PREC, pp, end, x, dst, NULL, NULL, NULL, NULL, n, 0);
    return dec_o0x2_loop(&g, prec, pp, end, x, dst, NULL, NULL, NULL, NULL, n, 0);
}

/* Fewer symbols, or bytes of words, than this go to the gather loop:
 * building the planes costs about what the permute loop saves on that many. */
#define DEC_MIN_SYMBOLS 512

static int dec_planes_for(const uint32_t *tab, unsigned prec, size_t n, size_t words,
                          dec_planes *d) {
    return n >= DEC_MIN_SYMBOLS && words >= DEC_MIN_SYMBOLS && prec >= 8 &&
           prec <= RANS_PACK_PREC && build_dec_planes(tab, prec, d);
}

/* One stream: its round waits on the one before it, with half of each
 * vector idle; where gathers are fast (cpu.h), the gather loop is the
 * faster. */
size_t ptwm_rans_dec_o0_packed_vbmi(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                                    const uint8_t **pp, const uint8_t *end, uint32_t *x,
                                    uint8_t *dst, size_t n) {
    dec_planes d;
    if (ptwm_cpu_fast_gather() || !dec_planes_for(tab, prec, n, (size_t)(end - *pp), &d))
        return ptwm_rans_dec_o0_packed_avx512(tab, sym, prec, pp, end, x, dst, n);
    return dec_o0_one(&d, prec, pp, end, x, dst, n);
}

size_t ptwm_rans_dec_o0x2_packed_vbmi(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                                      const uint8_t **pa, const uint8_t *ea, uint32_t *xa,
                                      uint8_t *da, const uint8_t **pb, const uint8_t *eb,
                                      uint32_t *xb, uint8_t *db, size_t n) {
    dec_planes d;
    if (!dec_planes_for(tab, prec, n, (size_t)PTWM_MIN(ea - *pa, eb - *pb), &d))
        return ptwm_rans_dec_o0x2_packed_avx512(tab, sym, prec, pa, ea, xa, da, pb, eb, xb, db, n);
    return dec_o0_two(&d, prec, pa, ea, xa, da, pb, eb, xb, db, n);
}
size_t ptwm_rans_dec_o0x4_packed_vbmi(const uint32_t *tab, unsigned prec, const uint8_t **p,
                                      const uint8_t *const *e, uint32_t *x, uint8_t *const *dst,
                                      size_t n) {
    dec_planes d;
    size_t words = (size_t)(e[0] - p[0]);
    int k;
    for (k = 1; k < 4; k++) words = PTWM_MIN(words, (size_t)(e[k] - p[k]));
    /* (0: the caller runs each stream alone) */
    if (!dec_planes_for(tab, prec, n, words, &d)) return 0;
    return dec_o0_four(&d, prec, p, e, x, dst, n);
}
#endif
