/* The RANS encoder (format in rans.c): the plan (order and precision from
 * an exact table cost plus an entropy estimate), the scalar stream loops
 * around the vector kernels (kernels/rans_*.c), and the entry points of
 * rans.h that code a plane, with RAW and SINGLE where rANS does not pay. */
#include "rans_impl.h"

/* Order -2 (pick, favouring decode speed): order 1 only on planes of at
 * least O1_MIN_AUTO bytes and only if estimated at most O1_WORTH of order
 * 0's size. */
#define O1_MIN_AUTO PTWM_RANS_O1_MIN_AUTO
#define O1_WORTH 0.97

/* The bytes an order-0 coding adds to its table and words: mode, prec and
 * each stream's states (and each length but the last's). */
static double o0_fixed(size_t n) {
    unsigned k = o0_streams(n);
    return 2 + (4 + 4 * RANS_O0_STATES) * k - 4;
}

/* Encoding x by a symbol: x' = (x / f) * M + x % f + cum = x + q * (M - f) + cum
 * with q = x / f. The division is a multiply by a reciprocal.
 *
 * With 128-bit products: m = ceil(2^64 / f), q = floor(x * m / 2^64) exactly
 * for every x < 2^32 (the rounding of m adds less than x / 2^64 < 2^-32 < 1/f
 * to x / f, whose fraction is at most 1 - 1/f): one multiply. For f = 1, m
 * would be 2^64; m = 2^64 - 1 gives q = x - 1 for every x >= 1 (x >= L here),
 * and cum carries the missing M - 1.
 *
 * Otherwise: with s = ceil(log2 f) and r = ceil(2^(32+s) / f) (so 2^32 <= r <
 * 2^33), q = floor(x * r / 2^(32+s)) exactly for every x < 2^32 (the same
 * argument with error 2^-s <= 1/f), computed as ((x * (r - 2^32) >> 32) + x)
 * >> s to stay within 64 bits. */
#if defined(__SIZEOF_INT128__)
#define RANS_RCP64 1
#endif

typedef struct enc_sym {
    uint64_t x_max; /* renormalise while x >= x_max (2^32 when f = M) */
#ifdef RANS_RCP64
    uint64_t m;     /* ceil(2^64 / f); 2^64 - 1 for f = 1 */
#else
    uint32_t rcp;   /* r - 2^32 */
    uint32_t shift; /* s */
#endif
    uint32_t cmpl;  /* M - f */
    uint32_t cum;   /* cumulative frequency (+ M - 1 for f = 1 with RANS_RCP64) */
} enc_sym;

/* The entry of a symbol of frequency f > 0 whose range starts at cum. */
static void etab_entry(uint32_t f, uint32_t cum, unsigned prec, enc_sym *e) {
    memset(e, 0, sizeof(*e));
    e->x_max = ((uint64_t)(RANS_L >> prec) << 16) * f;
#ifdef RANS_RCP64
    if (f == 1) {
        e->m = UINT64_MAX;
        e->cum = cum + (1u << prec) - 1;
    } else {
        /* ceil(2^64 / f) = floor((2^64 - 1) / f) + 1 when f is no power
         * of two; 2^64 / f exactly when it is. */
        e->m = (f & (f - 1)) ? UINT64_MAX / f + 1 : ((uint64_t)1 << 63) / (f >> 1);
        e->cum = cum;
    }
#else
    {
        uint32_t sh = 0;
        while ((1u << sh) < f) sh++;
        e->rcp = (uint32_t)((((uint64_t)1 << (32 + sh)) + f - 1) / f - ((uint64_t)1 << 32));
        e->shift = sh;
    }
    e->cum = cum;
#endif
    e->cmpl = (1u << prec) - f;
}

static void build_etab(const uint32_t freq[256], unsigned prec, enc_sym *t) {
    uint32_t cum = 0;
    int s;
    for (s = 0; s < 256; s++) {
        if (freq[s]) etab_entry(freq[s], cum, prec, &t[s]);
        else memset(&t[s], 0, sizeof(t[s]));
        cum += freq[s];
    }
}

/* x / f (see enc_sym). */
PTWM_INLINE uint32_t enc_div(uint32_t x, const enc_sym *e) {
#ifdef RANS_RCP64
    return (uint32_t)(((unsigned __int128)x * e->m) >> 64);
#else
    return (uint32_t)((((uint64_t)x * e->rcp >> 32) + x) >> e->shift);
#endif
}

/* A 16-bit little-endian store the compiler turns into one instruction. */
PTWM_INLINE void enc_store16(uint8_t *p, uint32_t x) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint16_t v = (uint16_t)x;
    memcpy(p, &v, 2);
#else
    ptwm_store_le16(p, (uint16_t)x);
#endif
}

PTWM_INLINE uint32_t enc_put(uint32_t x, const enc_sym *e, ewriter *w) {
    uint32_t q;
    if (x >= e->x_max) {
        if (unlikely(w->p - w->lim < 2)) {
            w->full = 1;
        } else {
            w->p -= 2;
            ptwm_store_le16(w->p, (uint16_t)x);
        }
        x >>= 16;
    }
    q = enc_div(x, e);
    return x + q * e->cmpl + e->cum;
}

/* Start a stream whose words go down from `end` and whose states will go in
 * front of them, no lower than `at`; 0 if there is no room even for those. */
static int enc_start(ewriter *w, uint32_t *x, int states, uint8_t *at, uint8_t *end) {
    int k;
    for (k = 0; k < states; k++) x[k] = RANS_L;
    if (end - at < 4 * states) return 0;
    w->p = end;
    w->lim = at + 4 * states;
    w->full = 0;
    return 1;
}

/* Finish a stream: states go in front of the words; move the whole stream to
 * `at` and return its length, or 0 if it did not fit. */
static size_t enc_finish(ewriter *w, const uint32_t *x, int states, uint8_t *at, uint8_t *end) {
    int k;
    size_t len;
    if (w->full || w->p - at < 4 * states) return 0;
    w->p -= 4 * states;
    for (k = 0; k < states; k++) ptwm_store_le32(w->p + 4 * k, x[k]);
    len = (size_t)(end - w->p);
    memmove(at, w->p, len);
    return len;
}

/* The unchecked form of enc_put, inside a margin the caller has checked (at
 * least 2 bytes per call plus 2 above `lim`). The word is stored whether or
 * not it is needed (below p, in free space) and p moves only if it was:
 * whether a state overflows is close to a coin toss on weight planes, so a
 * branch would mispredict half the time. */
PTWM_INLINE uint32_t enc_put_fast(uint32_t x, const enc_sym *e, uint8_t **pp) {
    /* Masks, not a conditional: compilers turn `need ? a : b` back into a
     * branch. */
    uint32_t need = (uint64_t)x >= e->x_max, m = 0u - need;
    uint8_t *p = *pp;
    enc_store16(p - 2, x);
    *pp = p - 2 * (size_t)need;
    x = ((x >> 16) & m) | (x & ~m);
    return x + enc_div(x, e) * e->cmpl + e->cum;
}

static void build_vtab(const uint32_t freq[256], enc_vsym *v) {
    uint32_t cum = 0;
    int s;
    for (s = 0; s < 256; s++) {
        uint32_t f = freq[s], sh = 0;
        v->rcp[s] = v->fc[s] = 0;
        if (!f) continue;
        while ((1u << sh) < f) sh++;
        v->rcp[s] = (uint32_t)((((uint64_t)1 << (32 + sh)) + f - 1) / f - ((uint64_t)1 << 32));
        v->fc[s] = f << 16 | cum;
        cum += f;
    }
}

/* An order-0 stream of src[0, n) being coded: its states, its writer and
 * the symbols left, src[0, i). */
typedef struct o0_stream {
    const uint8_t *src;
    size_t i;
    uint32_t x[RANS_O0_STATES];
    ewriter w;
} o0_stream;

/* Start the stream (words down from `end`, states no lower than `at`) with
 * the partial last round (the encoder runs backwards); 0 if it did not fit. */
static int o0_begin(o0_stream *s, const uint8_t *src, size_t n, const uint32_t freq[256],
                    const enc_vsym *vt, unsigned prec, uint8_t *at, uint8_t *end) {
    size_t i, full = n - n % RANS_O0_STATES;
    s->src = src;
    if (!enc_start(&s->w, s->x, RANS_O0_STATES, at, end)) return 0;
    for (i = n; i-- > full;) {
        enc_sym e;
        etab_entry(freq[src[i]], vt->fc[src[i]] & 0xffff, prec, &e);
        s->x[i % RANS_O0_STATES] = enc_put(s->x[i % RANS_O0_STATES], &e, &s->w);
    }
    s->i = full;
    return !s->w.full;
}

/* Code the rest of the stream, then put its states in front of its words
 * at `at`; its length, or 0 if it did not fit. The scalar loop's table is
 * built only if it codes more than the partial round (no vector loop, or an
 * output near its end): where a vector loop codes the plane, its divisions
 * for every symbol were most of a small plane's table work. */
static size_t o0_finish(o0_stream *s, const uint32_t freq[256], const enc_vsym *vt,
                        unsigned prec, uint8_t *at, uint8_t *end) {
    enc_sym t[256];
    size_t i = ptwm_codec_kern()->rans_enc_o0(s->src, s->i, vt, prec, s->x, &s->w);
    if (i > 0) build_etab(freq, prec, t);
    for (; i > 0; i -= RANS_O0_STATES) {
        const uint8_t *q = s->src + i - RANS_O0_STATES;
        int k;
        if (likely(s->w.p - s->w.lim >= ENC_ROUND_MARGIN)) {
            for (k = RANS_O0_STATES - 1; k >= 0; k--) s->x[k] = enc_put_fast(s->x[k], &t[q[k]], &s->w.p);
        } else {
            for (k = RANS_O0_STATES - 1; k >= 0; k--) s->x[k] = enc_put(s->x[k], &t[q[k]], &s->w);
            if (unlikely(s->w.full)) return 0;
        }
    }
    return enc_finish(&s->w, s->x, RANS_O0_STATES, at, end);
}

static size_t encode_o0_stream(const uint8_t *src, size_t n, const uint32_t freq[256],
                               const enc_vsym *vt, unsigned prec, uint8_t *at, uint8_t *end) {
    o0_stream s;
    if (!o0_begin(&s, src, n, freq, vt, prec, at, end)) return 0;
    return o0_finish(&s, freq, vt, prec, at, end);
}

/* Two streams, A of src[0, na) and B of src[na, na + nb), coded in one loop
 * where the kernel table has it (a step's chains wait on the step before;
 * the other stream's fill the gaps), A's words down from a point of [at,
 * end) in proportion to its symbols and B's from `end`, then each moved to
 * its place: A at `at`, B right after it. Their lengths into *la, *lb;
 * 0 if either did not fit in its part (then coded one after the other). */
static int encode_o0_pair(const uint8_t *src, size_t na, size_t nb, const uint32_t freq[256],
                          const enc_vsym *vt, unsigned prec, uint8_t *at, uint8_t *end,
                          size_t *la, size_t *lb) {
    ptwm_rans_enc_o0x2_fn both = ptwm_codec_kern()->rans_enc_o0x2;
    o0_stream a, b;
    uint8_t *mid;
    /* (end - at) * na must not wrap; na > 0 for any plane of two streams or more */
    if (both && na && (size_t)(end - at) <= SIZE_MAX / na) {
        mid = at + (size_t)(end - at) * na / (na + nb);
        if (o0_begin(&a, src, na, freq, vt, prec, at, mid) &&
            o0_begin(&b, src + na, nb, freq, vt, prec, mid, end)) {
            both(a.src, &a.i, a.x, &a.w, b.src, &b.i, b.x, &b.w, vt, prec);
            if ((*la = o0_finish(&a, freq, vt, prec, at, mid)) != 0 &&
                (*lb = o0_finish(&b, freq, vt, prec, at + *la, end)) != 0)
                return 1;
        }
    }
    if (!(*la = encode_o0_stream(src, na, freq, vt, prec, at, end))) return 0;
    *lb = encode_o0_stream(src + na, nb, freq, vt, prec, at + *la, end);
    return *lb != 0;
}

static size_t encode_o1_stream(const uint8_t *src, size_t n, const enc_sym *t /* [256][256] */,
                               uint8_t *at, uint8_t *end) {
    uint32_t x[RANS_STATES];
    size_t q = n / RANS_STATES, start_last, len_last, j;
    ewriter w;
    int k;
    if (!enc_start(&w, x, RANS_STATES, at, end)) return 0;
    o1_segment(n, RANS_STATES - 1, &start_last, &len_last);
    /* Reverse of the decoder's order: the last segment's own tail first. */
    for (j = len_last; j-- > q;) {
        size_t i = start_last + j;
        unsigned ctx = j ? src[i - 1] : 0;
        x[RANS_STATES - 1] = enc_put(x[RANS_STATES - 1], &t[ctx * 256 + src[i]], &w);
    }
    if (unlikely(w.full)) return 0;
    for (j = q; j-- > 0;) {
        if (likely(j && w.p - w.lim >= ENC_ROUND_MARGIN)) {
            for (k = RANS_STATES - 1; k >= 0; k--) {
                size_t i = (size_t)k * q + j;
                x[k] = enc_put_fast(x[k], &t[src[i - 1] * 256u + src[i]], &w.p);
            }
            continue;
        }
        for (k = RANS_STATES - 1; k >= 0; k--) {
            size_t i = (size_t)k * q + j;
            unsigned ctx = j ? src[i - 1] : 0;
            x[k] = enc_put(x[k], &t[ctx * 256 + src[i]], &w);
        }
        if (unlikely(w.full)) return 0;
    }
    return enc_finish(&w, x, RANS_STATES, at, end);
}

/* Order-1 model: counts per context, as the decoder meets them. */
static void o1_counts(const uint8_t *src, size_t n, uint64_t *cnt /* [256][256] */,
                      uint64_t ctx_total[256]) {
    int k;
    memset(cnt, 0, sizeof(uint64_t) * 256 * 256);
    memset(ctx_total, 0, sizeof(uint64_t) * 256);
    for (k = 0; k < RANS_STATES; k++) {
        size_t start, len, j;
        unsigned ctx = 0;
        o1_segment(n, k, &start, &len);
        for (j = 0; j < len; j++) {
            unsigned s = src[start + j];
            cnt[ctx * 256 + s]++;
            ctx_total[ctx]++;
            ctx = s;
        }
    }
}

/* A lower bound on the order-1 coded size: the conditional entropy plus one
 * byte per (context, symbol) table entry. */
static double o1_floor(const uint64_t *cnt, const uint64_t ctx_total[256]) {
    double bits = 0.0, entries = 0.0;
    int c, s;
    for (c = 0; c < 256; c++) {
        if (!ctx_total[c]) continue;
        bits += ptwm_xlogx(ctx_total[c]);
        for (s = 0; s < 256; s++) {
            uint64_t k = cnt[256 * c + s];
            if (k) {
                bits -= ptwm_xlogx(k);
                entries += 1.0;
            }
        }
    }
    return bits / 8.0 + entries;
}

typedef struct plan {
    unsigned prec;
    double est;          /* estimated coded bytes */
    uint32_t freq[256];  /* order 0: the table at prec (normalised once) */
} plan;

/* Estimated bytes for one context's table and symbols at a precision: the
 * counts' present symbols sl, and the bytes of their symbol set. */
static double est_table(const uint64_t cnt[256], uint64_t total, unsigned prec,
                        const symlist *sl, size_t set_bytes, uint32_t freq[256]) {
    size_t vbytes;
    double bits;
    ptwm_rans_normalize_freqs(cnt, total, prec, sl, freq);
    bits = ptwm_rans_table_cost_bits(cnt, freq, prec, sl, &vbytes);
    return (double)(set_bytes + vbytes) + bits / 8.0;
}

/* A floor under plan_o0's estimate at every precision: a table's symbol
 * bits are at least the counts' entropy (Gibbs' inequality: the
 * frequencies sum to 2^prec), its frequencies at least a byte each, beside
 * the same fixed bytes (o0_fixed: n symbols, in one, two or four streams). A
 * precision whose floor already fails the walk's test fails it with its
 * table (the floor is lowered by a millionth, far more than the doubles'
 * rounding of either sum can reach), so that table is not normalised (most
 * planes' walks stop at the first step that does not pay). */
static double est_floor(const uint64_t cnt[256], size_t n, const symlist *sl, size_t set_bytes) {
    uint64_t total = 0;
    double bits;
    int i;
    for (i = 0; i < sl->n; i++) total += cnt[sl->sym[i]];
    bits = ptwm_xlogx(total);
    for (i = 0; i < sl->n; i++) bits -= ptwm_xlogx(cnt[sl->sym[i]]);
    if (bits < 0.0) bits = 0.0;
    return (o0_fixed(n) + (double)(set_bytes + (size_t)sl->n) + bits / 8.0) * (1.0 - 1e-6);
}

/* Highest precision worth trying for n symbols: a table much bigger than the
 * plane costs decode time and cannot pay. */
static unsigned prec_limit(size_t n, unsigned lo, unsigned hi, int slack) {
    int bits = 0;
    while (bits < 63 && ((size_t)1 << bits) <= n) bits++;
    bits += slack;
    return bits < (int)lo ? lo : bits > (int)hi ? hi : (unsigned)bits;
}

/* The precision of an order-0 table: starting at RANS_PACK_PREC (or the
 * plane's limit), a lower precision is taken while it costs under 0.1% more
 * (a smaller table decodes faster and codes a small plane no worse), a higher
 * one only if it saves 0.3% (past RANS_PACK_PREC the AVX-512 decoder needs
 * two gathers a step instead of one, and is slower: docs/CHAINS.md,
 * section 3). The estimate changes little from one precision to the next,
 * so the walk stops at the first step that does not pay: two or three
 * tables evaluated, not six. */
static plan plan_o0(const uint64_t cnt[256], size_t n) {
    plan best;
    uint32_t freq[256];
    unsigned prec, hi = prec_limit(n, 10, RANS_PREC_MAX0, 1);
    unsigned start = hi < RANS_PACK_PREC ? hi : RANS_PACK_PREC;
    symlist sl;
    size_t set;
    double floor;
    ptwm_rans_symlist_make(cnt, &sl);
    best.prec = start;
    set = ptwm_rans_symset_size(&sl);
    floor = est_floor(cnt, n, &sl, set);
    best.est = o0_fixed(n) + est_table(cnt, n, start, &sl, set, best.freq);
    for (prec = start - 1; prec >= 10; prec--) {
        double e;
        if (floor * 0.999 > best.est) break; /* (as e * 0.999 would) */
        e = o0_fixed(n) + est_table(cnt, n, prec, &sl, set, freq);
        if (e * 0.999 > best.est) break;
        best.prec = prec;
        best.est = e;
        memcpy(best.freq, freq, sizeof(freq));
    }
    if (best.prec < start) return best;
    for (prec = start + 1; prec <= hi; prec++) {
        double e;
        if (floor >= best.est * 0.997) break; /* (as e would) */
        e = o0_fixed(n) + est_table(cnt, n, prec, &sl, set, freq);
        if (e >= best.est * 0.997) break;
        best.prec = prec;
        best.est = e;
        memcpy(best.freq, freq, sizeof(freq));
    }
    return best;
}

static plan plan_o1(const uint64_t *cnt, const uint64_t ctx_total[256], size_t n) {
    plan best;
    uint32_t freq[256], used[256];
    unsigned prec, hi = prec_limit(n, 9, RANS_PREC_MAX1, -4);
    int c;
    best.prec = 0;
    best.est = 0.0;
    for (c = 0; c < 256; c++) used[c] = ctx_total[c] != 0;
    /* From the highest precision down, while the next lower one is no more
     * than 0.05% larger (smaller tables decode faster); the estimate changes
     * smoothly with the precision, so the walk stops at the first that is. */
    for (prec = hi; prec >= 9; prec--) {
        double e = 2 + 4 * RANS_STATES + (double)ptwm_rans_symset_write(used, NULL);
        for (c = 0; c < 256; c++)
            if (ctx_total[c]) {
                symlist sl;
                ptwm_rans_symlist_make(cnt + 256 * c, &sl);
                e += est_table(cnt + 256 * c, ctx_total[c], prec, &sl,
                               ptwm_rans_symset_size(&sl), freq);
            }
        if (best.prec && e * 0.9995 > best.est) break;
        best.prec = prec;
        best.est = e;
    }
    return best;
}

/* Returns the coded length, or 0 if it did not fit in cap. A large plane
 * becomes two or four streams, the length (u32) of each but the last in
 * front of them. The streams are written down from h + n bytes at most, not
 * from the end of cap: a coding longer than n is not kept (keep_or_raw), and
 * a payload buffer's far pages, fresh memory, cost a fault each to touch
 * (a fifth of a two-thread F32 compress, whose payloads coded apart land in
 * fresh buffers of the chunk's work bound). */
static size_t encode_o0(const uint8_t *src, size_t n, const uint32_t freq[256], unsigned prec,
                        unsigned kmax, uint8_t *dst, size_t cap) {
    enc_vsym vt;
    unsigned k = o0_streams_cap(n, kmax), s;
    size_t h, len, at, a = k > 1 ? xk_first(n, k) : n;
    h = 2 + ptwm_rans_freqtab_write(freq, NULL) + 4 * (k - 1);
    if (h > cap) return 0;
    if (cap - h > n) cap = h + n;
    dst[0] = k == 4 ? MODE_O0X4 : k == 2 ? MODE_O0X2 : MODE_O0;
    dst[1] = (uint8_t)prec;
    ptwm_rans_freqtab_write(freq, dst + 2);
    build_vtab(freq, &vt);
    if (k == 1) {
        len = encode_o0_stream(src, n, freq, &vt, prec, dst + h, dst + cap);
        return len ? h + len : 0;
    }
    for (s = 0, at = h; s < k; s += 2) {
        size_t lb, m = s + 2 < k ? a : n - (k - 1) * a;
        if (!encode_o0_pair(src + s * a, a, m, freq, &vt, prec, dst + at, dst + cap, &len, &lb) ||
            len > UINT32_MAX || (s + 2 < k && lb > UINT32_MAX))
            return 0;
        ptwm_store_le32(dst + h - 4 * (k - 1 - s), (uint32_t)len);
        if (s + 2 < k) ptwm_store_le32(dst + h - 4 * (k - 2 - s), (uint32_t)lb);
        at += len + lb;
    }
    return at;
}

static size_t encode_o1(ptwm_ws *ws, const uint8_t *src, size_t n, const uint64_t *cnt,
                        const uint64_t ctx_total[256], unsigned prec, uint8_t *dst, size_t cap) {
    uint32_t freq[256], used[256];
    enc_sym *t;
    size_t h, len;
    int c;
    /* Only the tables of contexts that occur are built and read. */
    t = (enc_sym *)rans_buf(ws, PTWM_WS_RANS_ETAB1, sizeof(enc_sym) * 256 * 256);
    if (!t) return 0;
    for (c = 0; c < 256; c++) used[c] = ctx_total[c] != 0;
    h = 2 + ptwm_rans_symset_write(used, NULL);
    if (h > cap) return 0;
    dst[0] = MODE_O1;
    dst[1] = (uint8_t)prec;
    ptwm_rans_symset_write(used, dst + 2);
    for (c = 0; c < 256; c++) {
        size_t th;
        symlist sl;
        if (!ctx_total[c]) continue;
        ptwm_rans_symlist_make(cnt + 256 * c, &sl);
        ptwm_rans_normalize_freqs(cnt + 256 * c, ctx_total[c], prec, &sl, freq);
        th = ptwm_rans_freqtab_write(freq, NULL);
        if (th > cap - h) return 0;
        ptwm_rans_freqtab_write(freq, dst + h);
        h += th;
        build_etab(freq, prec, t + 256 * c);
    }
    len = encode_o1_stream(src, n, t, dst + h, dst + cap);
    return len ? h + len : 0;
}

/* Keep a rANS coding of `len` bytes (0: none) only if it saves at least
 * 1/256 of the plane: below that (near-uniform planes such as sign+mantissa)
 * RAW costs under 0.4% and decodes at memcpy speed. */
static ptwm_error keep_or_raw(const uint8_t *src, size_t n, size_t len, uint8_t *dst, size_t cap,
                              size_t *out_len) {
    if (len && len + n / 256 <= n) {
        *out_len = len;
        return PTWM_OK;
    }
    if (cap < n + 1) return PTWM_ERR_DST_SIZE;
    dst[0] = MODE_RAW;
    if (n) memcpy(dst + 1, src, n);
    *out_len = n + 1;
    return PTWM_OK;
}

double ptwm_rans_o0_size(const uint32_t hist[256], size_t n, ptwm_rans_plan *out) {
    uint64_t cnt[256];
    int s, present = 0;
    plan p;
    for (s = 0; s < 256; s++) {
        cnt[s] = hist[s];
        present += hist[s] != 0;
    }
    out->prec = 0;
    if (present <= 1) return 2.0;
    p = plan_o0(cnt, n);
    /* What ptwm_rans_encode would keep: rANS only if it saves 1/256. */
    if (p.est + (double)(n / 256) >= (double)n) return (double)n + 1.0;
    out->prec = p.prec;
    memcpy(out->freq, p.freq, sizeof(out->freq));
    /* The plan counts the 32 final states whole beside the symbols' bits,
     * but they hold the last bits of the stream: about a byte each
     * (docs/ARCHITECTURE.md, "Measurements behind the code"). */
    return p.est - (double)RANS_O0_STATES * o0_streams(n);
}

ptwm_error ptwm_rans_encode_plan(const uint8_t *src, size_t n, const ptwm_rans_plan *pl,
                                 unsigned max_streams, uint8_t *dst, size_t cap,
                                 size_t *out_len) {
    if (!pl || !pl->prec)
        return ptwm_rans_encode_counts(NULL, src, n, 0, NULL, max_streams, dst, cap, out_len);
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    return keep_or_raw(src, n, encode_o0(src, n, pl->freq, pl->prec, max_streams, dst, cap), dst,
                       cap, out_len);
}

ptwm_error ptwm_rans_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int order, uint8_t *dst,
                            size_t cap, size_t *out_len) {
    return ptwm_rans_encode_counts(ws, src, n, order, NULL, 0, dst, cap, out_len);
}

/* Code src with its symbol counts cnt (summing to n). */
static ptwm_error encode_counted(ptwm_ws *ws, const uint8_t *src, size_t n, int order,
                                 const uint64_t cnt[256], unsigned kmax, uint8_t *dst,
                                 size_t cap, size_t *out_len) {
    size_t len = 0;
    int s, present = 0, last = 0;
    for (s = 0; s < 256; s++)
        if (cnt[s]) {
            present++;
            last = s;
        }
    if (present == 1) {
        if (cap < 2) return PTWM_ERR_DST_SIZE;
        dst[0] = MODE_SINGLE;
        dst[1] = (uint8_t)last;
        *out_len = 2;
        return PTWM_OK;
    }
    if (present > 1) {
        plan p0, p1;
        uint64_t *cnt1 = NULL, ctx_total[256];
        int pick = order < 0;
        p0.prec = p1.prec = 0;
        p0.est = p1.est = 0.0;
        if (order != 1) p0 = plan_o0(cnt, n);
        /* Order 1 needs ~100 bytes of tables per context: on a small plane
         * it cannot win unless asked for. With order -2 it must also save
         * O1_WORTH over order 0 or RAW: it decodes several times slower
         * (its tables leave L1). */
        if (order == 1 || (order == -1 && n >= 4096) || (order == -2 && n >= O1_MIN_AUTO)) {
            double bar = (p0.prec ? p0.est : (double)n) * (order == -2 ? O1_WORTH : 1.0);
            cnt1 = (uint64_t *)rans_buf(ws, PTWM_WS_RANS_CNT1, sizeof(uint64_t) * 256 * 256);
            if (!cnt1) return PTWM_ERR_NOMEM;
            o1_counts(src, n, cnt1, ctx_total);
            /* Plan order 1 only if its floor (ideal coding, one byte per
             * table entry) clears the bar. */
            if (!pick || o1_floor(cnt1, ctx_total) < bar) {
                p1 = plan_o1(cnt1, ctx_total, n);
                if (pick && p1.est >= bar) p1.prec = 0;
            }
        }
        /* Code only what the estimate (within ~0.1% of the outcome) says
         * saves the 1/256 required below. */
        if (p1.prec && (!p0.prec || p1.est < p0.est)) {
            if (p1.est + (double)(n / 256) < (double)n)
                len = encode_o1(ws, src, n, cnt1, ctx_total, p1.prec, dst, cap);
        } else if (p0.prec && p0.est + (double)(n / 256) < (double)n) {
            len = encode_o0(src, n, p0.freq, p0.prec, kmax, dst, cap);
        }
    }
    return keep_or_raw(src, n, len, dst, cap, out_len);
}

ptwm_error ptwm_rans_encode_counts(ptwm_ws *ws, const uint8_t *src, size_t n, int order,
                                   const uint32_t *hist, unsigned max_streams, uint8_t *dst,
                                   size_t cap, size_t *out_len) {
    uint64_t cnt[256];
    ptwm_ws *own = NULL;
    ptwm_error e;
    int s;
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    if (order < -2 || order > 1) return PTWM_ERR_INVALID_ARG;
    if (hist) {
        for (s = 0; s < 256; s++) cnt[s] = hist[s];
    } else {
        ptwm_histogram(src, n, cnt);
    }
    /* Order 0 needs no work memory. */
    if (order != 0 && !(ws = ptwm_ws_or_temp(ws, &own))) return PTWM_ERR_NOMEM;
    e = encode_counted(ws, src, n, order, cnt, max_streams, dst, cap, out_len);
    ptwm_ws_free(own);
    return e;
}

/* The start of the first whole 64-byte block from i on (in steps of 64)
 * holding a symbol marked in `absent`, else of the partial block at the
 * end: a lookup and an OR a byte, no store. */
size_t ptwm_skip_seen_scalar(const uint8_t *src, size_t i, size_t n, const uint8_t absent[256]) {
    for (; n - i >= 64; i += 64) {
        const uint8_t *b = src + i;
        unsigned acc = 0;
        int j;
        for (j = 0; j < 64; j += 8)
            acc |= (unsigned)absent[b[j]] | absent[b[j + 1]] | absent[b[j + 2]] |
                   absent[b[j + 3]] | absent[b[j + 4]] | absent[b[j + 5]] | absent[b[j + 6]] |
                   absent[b[j + 7]];
        if (acc) break;
    }
    return i;
}

/* Give every symbol of src[0..n) that cnt lacks (a sample missed it) a
 * count of 1. */
static void add_unseen(const uint8_t *src, size_t n, uint64_t cnt[256]) {
    uint8_t absent[256];
    size_t i = 0, end;
    int s;
    ptwm_skip_seen_fn skip_seen = ptwm_codec_kern()->skip_seen;
    for (s = 0; s < 256; s++) absent[s] = cnt[s] == 0;
    while (i < n) {
        i = skip_seen(src, i, n, absent);
        /* The block that holds one (or the tail): mark its new symbols. */
        for (end = n - i < 64 ? n : i + 64; i < end; i++)
            if (absent[src[i]]) {
                absent[src[i]] = 0;
                cnt[src[i]] = 1;
            }
    }
}

ptwm_error ptwm_rans_encode_sampled(const uint8_t *src, size_t n, const uint32_t sample[256],
                                    unsigned max_streams, uint8_t *dst, size_t cap,
                                    size_t *out_len) {
    uint64_t cnt[256], seen = 0, sum = 0;
    int s, top = 0;
    double scale;
    if (!out_len || (!src && n) || (!dst && cap) || !sample) return PTWM_ERR_INVALID_ARG;
    for (s = 0; s < 256; s++) seen += sample[s];
    if (seen == 0 || seen > n)
        return ptwm_rans_encode_counts(NULL, src, n, 0, NULL, max_streams, dst, cap, out_len);
    /* The sample's counts scaled to the plane (each kept at least 1), the
     * symbols it missed at 1, and the rounding settled on the most frequent
     * symbol so that the counts sum to n as a plane's do. */
    scale = (double)n / (double)seen;
    for (s = 0; s < 256; s++) {
        cnt[s] = sample[s] ? (uint64_t)((double)sample[s] * scale + 0.5) : 0;
        if (sample[s] && !cnt[s]) cnt[s] = 1;
    }
    add_unseen(src, n, cnt);
    for (s = 0; s < 256; s++) {
        sum += cnt[s];
        if (cnt[s] > cnt[top]) top = s;
    }
    if (sum > n && sum - n >= cnt[top])
        return ptwm_rans_encode_counts(NULL, src, n, 0, NULL, max_streams, dst, cap, out_len);
    cnt[top] = cnt[top] + n - sum; /* modulo 2^64: sum - n < cnt[top] */
    return encode_counted(NULL, src, n, 0, cnt, max_streams, dst, cap, out_len); /* order 0 */
}
