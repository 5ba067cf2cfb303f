/* The order-0 rANS decoding loop (rans_decode.c), written once for every
 * vector width: rans_avx2.c and rans_avx512.c include this file once per loop,
 * after defining
 *   RD_NAME, RD_TARGET    the function and its target attribute
 *   RD_PACKED             1: the packed table (symbol, frequency and bias in
 *                         one entry; sym unused), 0: the split table
 *   RD_V, RD_W            the vector type and its 32-bit lanes
 *   RD_EACH(M)            M(0) M(1) ... for the 32 / RD_W state vectors
 *   RD_LOAD(p), RD_STORE(p, v), RD_SET1(c), RD_AND(a, b), RD_ADD(a, b),
 *   RD_MULLO(a, b), RD_SRLI(v, n), RD_SRL(v, count128), RD_GATHER(base, idx,
 *   scale)                the operations at that width
 *   RD_CONSTS             declarations the two below use
 *   RD_RENORM_AT(X, P)    the lanes of X below L take the next words at P,
 *                         in lane order, and P moves past them
 *   RD_PUT_SYMS(S, OUT)   the low bytes of S's lanes to OUT
 * The loop runs rounds of 32 symbols while a round's 64 bytes of words are
 * there (a step loads at most 32 bytes at p, and p moves at most 32 in a
 * round); it returns how many symbols it decoded and advances *pp. The
 * symbol gather reads 4 bytes at sym + slot, so sym has 3 bytes of slack.
 * All the state vectors are independent, which keeps the gathers' latency
 * hidden. With RD_X2_NAME defined, a second function decodes the two
 * streams of a two-stream plane (rans.c, mode 4) in one loop, each stream
 * reading its own words: twice the independent chains (a state's next
 * symbol waits on its last: gather, multiply, renormalisation). */

#if RD_PACKED
#define RD_STEP(X, P, OUT)                                                                 \
    do {                                                                                   \
        RD_V e_ = RD_GATHER(tab, RD_AND(X, slot_mask), 4);                                 \
        X = RD_ADD(RD_MULLO(RD_AND(RD_SRLI(e_, 12), low), RD_SRL(X, shift)), RD_AND(e_, low)); \
        RD_RENORM_AT(X, P);                                                                \
        RD_PUT_SYMS(RD_SRLI(e_, 24), OUT);                                                 \
    } while (0)
#else
#define RD_STEP(X, P, OUT)                                                                 \
    do {                                                                                   \
        RD_V slot_ = RD_AND(X, slot_mask);                                                 \
        RD_V e_ = RD_GATHER(tab, slot_, 4);                                                \
        RD_V s_ = RD_GATHER(sym, slot_, 1);                                                \
        X = RD_ADD(RD_MULLO(RD_SRLI(e_, 16), RD_SRL(X, shift)), RD_AND(e_, low));          \
        RD_RENORM_AT(X, P);                                                                \
        RD_PUT_SYMS(s_, OUT);                                                              \
    } while (0)
#endif
#define RD_SETUP                                                                           \
    const RD_V slot_mask = RD_SET1((int)((1u << prec) - 1));                               \
    const RD_V low = RD_SET1(RD_PACKED ? (1 << RANS_PACK_PREC) - 1 : 0xffff);              \
    const __m128i shift = _mm_cvtsi32_si128((int)prec);                                    \
    RD_CONSTS
#define RD_DECL(v) RD_V X##v = RD_LOAD(x + (v) * RD_W);
#define RD_STEP_V(v) RD_STEP(X##v, p, dst + i + (v) * RD_W);
#define RD_SAVE(v) RD_STORE(x + (v) * RD_W, X##v);

RD_TARGET size_t RD_NAME(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                         const uint8_t **pp, const uint8_t *end, uint32_t *x, uint8_t *dst,
                         size_t n) {
    const uint8_t *p = *pp;
    RD_SETUP
    RD_EACH(RD_DECL)
    size_t i = 0;
    (void)sym;
    while (n - i >= RANS_O0_STATES && end - p >= 2 * RANS_O0_STATES) {
        RANS_READ_AHEAD(p);
        RD_EACH(RD_STEP_V)
        i += RANS_O0_STATES;
    }
    RD_EACH(RD_SAVE)
    *pp = p;
    return i;
}

#ifdef RD_X2_NAME
#define RD_DECL2(v) RD_V A##v = RD_LOAD(xa + (v) * RD_W), B##v = RD_LOAD(xb + (v) * RD_W);
#define RD_STEP2(v) RD_STEP(A##v, p, da + i + (v) * RD_W); RD_STEP(B##v, q, db + i + (v) * RD_W);
#define RD_SAVE2(v) RD_STORE(xa + (v) * RD_W, A##v); RD_STORE(xb + (v) * RD_W, B##v);

RD_TARGET size_t RD_X2_NAME(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                            const uint8_t **pa, const uint8_t *ea, uint32_t *xa, uint8_t *da,
                            const uint8_t **pb, const uint8_t *eb, uint32_t *xb, uint8_t *db,
                            size_t n) {
    const uint8_t *p = *pa, *q = *pb;
    RD_SETUP
    RD_EACH(RD_DECL2)
    size_t i = 0;
    (void)sym;
    while (n - i >= RANS_O0_STATES && ea - p >= 2 * RANS_O0_STATES && eb - q >= 2 * RANS_O0_STATES) {
        RANS_READ_AHEAD(p);
        RANS_READ_AHEAD(q);
        RD_EACH(RD_STEP2)
        i += RANS_O0_STATES;
    }
    RD_EACH(RD_SAVE2)
    *pa = p;
    *pb = q;
    return i;
}

#undef RD_SAVE2
#undef RD_STEP2
#undef RD_DECL2
#undef RD_X2_NAME
#endif

#undef RD_SAVE
#undef RD_STEP_V
#undef RD_DECL
#undef RD_SETUP
#undef RD_STEP
#undef RD_NAME
#undef RD_PACKED
