/* The order-0 rANS decoding loop (rans.c), written once for every vector
 * width: rans_avx2.c and rans_avx512.c include this file once per loop,
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
 *   RD_RENORM(X)          the lanes of X below L take the next words at p,
 *                         in lane order, and p moves past them
 *   RD_PUT_SYMS(S, OUT)   the low bytes of S's lanes to OUT
 * The loop runs rounds of 32 symbols while a round's 64 bytes of words are
 * there (a step loads at most 32 bytes at p, and p moves at most 32 in a
 * round); it returns how many symbols it decoded and advances *pp. The
 * symbol gather reads 4 bytes at sym + slot, so sym has 3 bytes of slack.
 * All the state vectors are independent, which keeps the gathers' latency
 * hidden. */

#if RD_PACKED
#define RD_STEP(X, OUT)                                                                    \
    do {                                                                                   \
        RD_V e_ = RD_GATHER(tab, RD_AND(X, slot_mask), 4);                                 \
        X = RD_ADD(RD_MULLO(RD_AND(RD_SRLI(e_, 12), low), RD_SRL(X, shift)), RD_AND(e_, low)); \
        RD_RENORM(X);                                                                      \
        RD_PUT_SYMS(RD_SRLI(e_, 24), OUT);                                                 \
    } while (0)
#else
#define RD_STEP(X, OUT)                                                                    \
    do {                                                                                   \
        RD_V slot_ = RD_AND(X, slot_mask);                                                 \
        RD_V e_ = RD_GATHER(tab, slot_, 4);                                                \
        RD_V s_ = RD_GATHER(sym, slot_, 1);                                                \
        X = RD_ADD(RD_MULLO(RD_SRLI(e_, 16), RD_SRL(X, shift)), RD_AND(e_, low));          \
        RD_RENORM(X);                                                                      \
        RD_PUT_SYMS(s_, OUT);                                                              \
    } while (0)
#endif
#define RD_DECL(v) RD_V X##v = RD_LOAD(x + (v) * RD_W);
#define RD_STEP_V(v) RD_STEP(X##v, dst + i + (v) * RD_W);
#define RD_SAVE(v) RD_STORE(x + (v) * RD_W, X##v);

RD_TARGET size_t RD_NAME(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                         const uint8_t **pp, const uint8_t *end, uint32_t *x, uint8_t *dst,
                         size_t n) {
    const uint8_t *p = *pp;
    const RD_V slot_mask = RD_SET1((int)((1u << prec) - 1));
    const RD_V low = RD_SET1(RD_PACKED ? (1 << RANS_PACK_PREC) - 1 : 0xffff);
    const __m128i shift = _mm_cvtsi32_si128((int)prec);
    RD_CONSTS
    RD_EACH(RD_DECL)
    size_t i = 0;
    (void)sym;
    while (n - i >= RANS_O0_STATES && end - p >= 2 * RANS_O0_STATES) {
        RD_EACH(RD_STEP_V)
        i += RANS_O0_STATES;
    }
    RD_EACH(RD_SAVE)
    *pp = p;
    return i;
}

#undef RD_SAVE
#undef RD_STEP_V
#undef RD_DECL
#undef RD_STEP
#undef RD_NAME
#undef RD_PACKED
