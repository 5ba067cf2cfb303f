/* The RANS decoder (format in rans.c): the tables and states read and
 * checked, the vector kernels (kernels/rans_*.c) run where the CPU has them
 * and the checked scalar loops finish every stream, which must end exactly. */
#include "rans_impl.h"

/* One decode step of state X with table T/S; the renormalisation word is read
 * unconditionally (the caller guarantees 2 readable bytes) and used only if
 * the state fell below L, through a mask rather than a branch: on weight
 * planes whether a state needs a word is close to a coin toss. */
#define RANS_DEC_FAST(X, T, S, OUT)                                                             \
    do {                                                                                        \
        uint32_t slot_ = (X)&mask, e_ = (T)[slot_], w_, m_;                                     \
        (OUT) = (S)[slot_];                                                                     \
        (X) = (e_ >> 16) * ((X) >> prec) + (e_ & 0xffff);                                       \
        w_ = ptwm_load_le16(p);                                                                 \
        m_ = (uint32_t)0 - (uint32_t)((X) < RANS_L);                                            \
        (X) = ((X) << (m_ & 16)) | (w_ & m_);                                                   \
        p += m_ & 2;                                                                            \
    } while (0)

/* The checked form for the tail: a missing word is corruption. */
#define RANS_DEC_SAFE(X, T, S, OUT)                                                             \
    do {                                                                                        \
        uint32_t slot_ = (X)&mask, e_ = (T)[slot_];                                             \
        (OUT) = (S)[slot_];                                                                     \
        (X) = (e_ >> 16) * ((X) >> prec) + (e_ & 0xffff);                                       \
        if ((X) < RANS_L) {                                                                     \
            PTWM_CHECK(end - p >= 2);                                                           \
            (X) = ((X) << 16) | ptwm_load_le16(p);                                              \
            p += 2;                                                                             \
        }                                                                                       \
    } while (0)

static ptwm_error read_states(rcur *c, uint32_t *x, int states) {
    int k;
    PTWM_CHECK(c->end - c->p >= 4 * states);
    for (k = 0; k < states; k++) {
        x[k] = ptwm_load_le32(c->p + 4 * k);
        /* Below L the one-read renormalisation would not restore the range. */
        PTWM_CHECK(x[k] >= RANS_L);
    }
    c->p += 4 * states;
    return PTWM_OK;
}

static ptwm_error check_end(const uint8_t *p, const uint8_t *end, const uint32_t *x, int states) {
    int k;
    PTWM_CHECK(p == end);
    for (k = 0; k < states; k++) PTWM_CHECK(x[k] == RANS_L);
    return PTWM_OK;
}

/* The checked scalar loop over a packed table (what the AVX-512 loop leaves). */
static ptwm_error decode_o0_packed_tail(const uint32_t *tab, unsigned prec, const uint8_t *p,
                                        const uint8_t *end, uint32_t x[RANS_O0_STATES],
                                        uint8_t *dst, size_t n) {
    uint32_t mask = (1u << prec) - 1;
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t *xs = &x[i % RANS_O0_STATES], e = tab[*xs & mask];
        dst[i] = (uint8_t)(e >> 24);
        *xs = (e >> 12 & 0xfff) * (*xs >> prec) + (e & 0xfff);
        if (*xs < RANS_L) {
            PTWM_CHECK(end - p >= 2);
            *xs = *xs << 16 | ptwm_load_le16(p);
            p += 2;
        }
    }
    return check_end(p, end, x, RANS_O0_STATES);
}

static ptwm_error decode_o0_run(const uint32_t *restrict tab, const uint8_t *restrict sym,
                                unsigned prec, const uint8_t *p, const uint8_t *end,
                                uint32_t x[RANS_O0_STATES], uint8_t *restrict dst, size_t n) {
    uint32_t mask = (1u << prec) - 1;
    size_t i = 0;
    int g;
    /* One round reads at most 32 words; eight states at a time in registers. */
    while (n - i >= RANS_O0_STATES && end - p >= 2 * RANS_O0_STATES) {
        for (g = 0; g < RANS_O0_STATES; g += 8) {
            uint32_t x0 = x[g], x1 = x[g + 1], x2 = x[g + 2], x3 = x[g + 3], x4 = x[g + 4],
                     x5 = x[g + 5], x6 = x[g + 6], x7 = x[g + 7];
            uint8_t *o = dst + i + g;
            RANS_DEC_FAST(x0, tab, sym, o[0]);
            RANS_DEC_FAST(x1, tab, sym, o[1]);
            RANS_DEC_FAST(x2, tab, sym, o[2]);
            RANS_DEC_FAST(x3, tab, sym, o[3]);
            RANS_DEC_FAST(x4, tab, sym, o[4]);
            RANS_DEC_FAST(x5, tab, sym, o[5]);
            RANS_DEC_FAST(x6, tab, sym, o[6]);
            RANS_DEC_FAST(x7, tab, sym, o[7]);
            x[g] = x0, x[g + 1] = x1, x[g + 2] = x2, x[g + 3] = x3, x[g + 4] = x4,
            x[g + 5] = x5, x[g + 6] = x6, x[g + 7] = x7;
        }
        i += RANS_O0_STATES;
    }
    for (; i < n; i++) RANS_DEC_SAFE(x[i % RANS_O0_STATES], tab, sym, dst[i]);
    return check_end(p, end, x, RANS_O0_STATES);
}

/* The vector loop `fn`, then its last rounds: it stops where fewer than 64
 * bytes of words are left, which it may not read in place; copied into a
 * zero-padded block, they decode in the vector loop too (the scalar loop
 * took 1-2% of a plane set's decoding). A round that reads past the words
 * reads zeros, and the stream is corrupt. Returns the symbols decoded, or
 * SIZE_MAX for such a stream. */
static size_t decode_o0_vec(ptwm_rans_dec_o0_fn fn, const uint32_t *tab, const uint8_t *sym,
                            unsigned prec, rcur *c, uint32_t *x, uint8_t *dst, size_t n) {
    uint8_t last[4 * RANS_O0_STATES] = {0};
    const uint8_t *q = last;
    size_t done = fn(tab, sym, prec, &c->p, c->end, x, dst, n), left = (size_t)(c->end - c->p);
    if (n - done < RANS_O0_STATES || left >= 2 * RANS_O0_STATES) return done;
    /* The loop runs while q <= last + left: a round then reads at most 64
     * bytes, within the block. */
    memcpy(last, c->p, left);
    done += fn(tab, sym, prec, &q, last + left + 2 * RANS_O0_STATES, x, dst + done, n - done);
    if ((size_t)(q - last) > left) return SIZE_MAX;
    c->p += q - last;
    return done;
}

/* An order-0 decode table: packed (symbol, frequency and bias in one entry,
 * for the AVX-512 loop at precisions up to RANS_PACK_PREC) or split. */
typedef struct o0tab {
    uint32_t *tab;
    uint8_t *sym; /* NULL when packed */
} o0tab;

static ptwm_error o0tab_build(ptwm_ws *ws, const uint32_t freq[256], unsigned prec, o0tab *t) {
    const ptwm_codec_kernels *k = ptwm_codec_kern();
    /* 3 bytes of slack after the symbols for the vector loop's gather */
    t->tab = (uint32_t *)rans_buf(ws, PTWM_WS_RANS_DTAB0, ((sizeof(uint32_t) + 1) << RANS_PREC_MAX0) + 4);
    if (!t->tab) return PTWM_ERR_NOMEM;
    /* Precision 12 or less fits the packed table: one gather, not two (its
     * build's slack fits the buffer's split-table room). */
    if (k->rans_dec_o0_packed && ptwm_rans_dtab_packs(freq, prec)) {
        k->rans_dtab_packed(freq, t->tab);
        t->sym = NULL;
        return PTWM_OK;
    }
    t->sym = (uint8_t *)(t->tab + ((size_t)1 << prec));
    memset(t->sym + ((size_t)1 << prec), 0, 4);
    ptwm_rans_build_dtab(freq, prec, t->tab, t->sym);
    return PTWM_OK;
}

/* The rest of one stream from states x: n symbols, its words from c->p to
 * exactly c->end. */
static ptwm_error decode_o0_rest(const o0tab *t, unsigned prec, rcur *c, uint32_t *x, uint8_t *dst,
                                 size_t n) {
    const ptwm_codec_kernels *k = ptwm_codec_kern();
    size_t done = decode_o0_vec(t->sym ? k->rans_dec_o0 : k->rans_dec_o0_packed, t->tab, t->sym,
                                prec, c, x, dst, n);
    PTWM_CHECK(done != SIZE_MAX);
    if (!t->sym) return decode_o0_packed_tail(t->tab, prec, c->p, c->end, x, dst + done, n - done);
    return decode_o0_run(t->tab, t->sym, prec, c->p, c->end, x, dst + done, n - done);
}

static ptwm_error decode_o0(ptwm_ws *ws, rcur *c, unsigned prec, uint8_t *dst, size_t n) {
    uint32_t freq[256], x[RANS_O0_STATES];
    o0tab t;
    ptwm_error e;
    if ((e = ptwm_rans_freqtab_read(c, prec, freq)) || (e = read_states(c, x, RANS_O0_STATES)) ||
        (e = o0tab_build(ws, freq, prec, &t)))
        return e;
    return decode_o0_rest(&t, prec, c, x, dst, n);
}

/* ns (2 or 4) streams, the length of each but the last in front: where the
 * kernel table has the four-stream loop, all four run in it while each has
 * whole rounds; else, where it has the two-stream loop, each pair does;
 * then each stream finishes alone. */
static ptwm_error decode_o0xk(ptwm_ws *ws, rcur *c, unsigned prec, uint8_t *dst, size_t n,
                              unsigned ns) {
    uint32_t freq[256], x[4 * RANS_O0_STATES];
    size_t a = xk_first(n, ns), done[4] = {0}, len;
    const uint8_t *p[4], *end[4];
    uint8_t *d[4];
    rcur s[4];
    o0tab t;
    ptwm_error e;
    unsigned i;
    const ptwm_codec_kernels *k = ptwm_codec_kern();
    if ((e = ptwm_rans_freqtab_read(c, prec, freq))) return e;
    PTWM_CHECK((size_t)(c->end - c->p) >= 4 * (ns - 1));
    s[0].p = c->p + 4 * (ns - 1);
    for (i = 0; i + 1 < ns; i++) {
        len = ptwm_load_le32(c->p + 4 * i);
        PTWM_CHECK(len <= (size_t)(c->end - s[i].p));
        s[i].end = s[i + 1].p = s[i].p + len;
    }
    s[ns - 1].end = c->end;
    for (i = 0; i < ns; i++) {
        if ((e = read_states(&s[i], x + RANS_O0_STATES * i, RANS_O0_STATES))) return e;
        d[i] = dst + a * i;
    }
    if ((e = o0tab_build(ws, freq, prec, &t))) return e;
    if (ns == 4 && !t.sym && k->rans_dec_o0x4_packed) {
        for (i = 0; i < 4; i++) p[i] = s[i].p, end[i] = s[i].end;
        done[0] = done[1] = done[2] = done[3] =
            k->rans_dec_o0x4_packed(t.tab, prec, p, end, x, d, a);
        for (i = 0; i < 4; i++) s[i].p = p[i];
    } else {
        ptwm_rans_dec_o0x2_fn both = t.sym ? k->rans_dec_o0x2 : k->rans_dec_o0x2_packed;
        for (i = 0; both && i < ns; i += 2)
            done[i] = done[i + 1] =
                both(t.tab, t.sym, prec, &s[i].p, s[i].end, x + RANS_O0_STATES * i, d[i],
                     &s[i + 1].p, s[i + 1].end, x + RANS_O0_STATES * (i + 1), d[i + 1], a);
    }
    for (i = 0; i < ns; i++) {
        size_t m = i + 1 < ns ? a : n - a * (ns - 1);
        if ((e = decode_o0_rest(&t, prec, &s[i], x + RANS_O0_STATES * i, d[i] + done[i],
                                m - done[i])))
            return e;
    }
    return PTWM_OK;
}

/* Order 1: context ctx's table starts at slot ctx << prec of tab/sym (all
 * zero if ctx has none: a state then collapses, and check_contexts rejects
 * the plane after decoding). Segment k's symbol j goes to dst[k * q + j]. */
#define RANS_DEC1_FAST(X, C, K)                                                                 \
    do {                                                                                        \
        uint32_t b_ = (C) << prec;                                                              \
        uint8_t s_;                                                                             \
        RANS_DEC_FAST(X, tab + b_, sym + b_, s_);                                               \
        dst[(size_t)(K) * q + j] = s_;                                                          \
        (C) = s_;                                                                               \
    } while (0)

static ptwm_error decode_o1_run(const uint32_t *restrict tab, const uint8_t *restrict sym,
                                unsigned prec, const uint8_t *p,
                                const uint8_t *end, uint32_t x[RANS_STATES],
                                uint8_t *restrict dst, size_t n) {
    uint32_t mask = (1u << prec) - 1, ctx[RANS_STATES];
    size_t q = n / RANS_STATES, j = 0;
    int k, g;
    memset(ctx, 0, sizeof(ctx));
    j = ptwm_codec_kern()->rans_dec_o1(tab, sym, prec, &p, end, x, ctx, dst, q);
    /* One step reads at most 32 words; eight states at a time in registers. */
    while (j < q && end - p >= 2 * RANS_STATES) {
        for (g = 0; g < RANS_STATES; g += 8) {
            uint32_t x0 = x[g], x1 = x[g + 1], x2 = x[g + 2], x3 = x[g + 3], x4 = x[g + 4],
                     x5 = x[g + 5], x6 = x[g + 6], x7 = x[g + 7];
            uint32_t c0 = ctx[g], c1 = ctx[g + 1], c2 = ctx[g + 2], c3 = ctx[g + 3],
                     c4 = ctx[g + 4], c5 = ctx[g + 5], c6 = ctx[g + 6], c7 = ctx[g + 7];
            RANS_DEC1_FAST(x0, c0, g + 0);
            RANS_DEC1_FAST(x1, c1, g + 1);
            RANS_DEC1_FAST(x2, c2, g + 2);
            RANS_DEC1_FAST(x3, c3, g + 3);
            RANS_DEC1_FAST(x4, c4, g + 4);
            RANS_DEC1_FAST(x5, c5, g + 5);
            RANS_DEC1_FAST(x6, c6, g + 6);
            RANS_DEC1_FAST(x7, c7, g + 7);
            x[g] = x0, x[g + 1] = x1, x[g + 2] = x2, x[g + 3] = x3, x[g + 4] = x4,
            x[g + 5] = x5, x[g + 6] = x6, x[g + 7] = x7;
            ctx[g] = c0, ctx[g + 1] = c1, ctx[g + 2] = c2, ctx[g + 3] = c3, ctx[g + 4] = c4,
            ctx[g + 5] = c5, ctx[g + 6] = c6, ctx[g + 7] = c7;
        }
        j++;
    }
    for (; j < q; j++) {
        for (k = 0; k < RANS_STATES; k++) {
            uint32_t b = ctx[k] << prec;
            uint8_t s;
            RANS_DEC_SAFE(x[k], tab + b, sym + b, s);
            dst[(size_t)k * q + j] = s;
            ctx[k] = s;
        }
    }
    /* The last segment runs on alone. */
    for (j = (size_t)RANS_STATES * q; j < n; j++) {
        uint32_t b = ctx[RANS_STATES - 1] << prec;
        uint8_t s;
        RANS_DEC_SAFE(x[RANS_STATES - 1], tab + b, sym + b, s);
        dst[j] = s;
        ctx[RANS_STATES - 1] = s;
    }
    return check_end(p, end, x, RANS_STATES);
}

/* Every context the plane used must have had a table. */
static ptwm_error check_contexts(const uint8_t *dst, size_t n, const uint8_t has[256]) {
    int k;
    for (k = 0; k < RANS_STATES; k++) {
        size_t start, len, j;
        o1_segment(n, k, &start, &len);
        if (!len) continue;
        PTWM_CHECK(has[0]);
        for (j = 0; j + 1 < len; j++) PTWM_CHECK(has[dst[start + j]]);
    }
    return PTWM_OK;
}

static ptwm_error decode_o1(ptwm_ws *ws, rcur *c, unsigned prec, uint8_t *dst, size_t n) {
    uint8_t has[256];
    uint32_t (*freq)[256], x[RANS_STATES];
    size_t slots = (size_t)1 << prec;
    uint32_t *tab;
    uint8_t *sym;
    int ctx;
    ptwm_error e = ptwm_rans_symset_read(c, has);
    if (e) return e;
    freq = (uint32_t(*)[256])rans_buf(ws, PTWM_WS_RANS_FREQ1, sizeof(uint32_t) * 256 * 256);
    if (!freq) return PTWM_ERR_NOMEM;
    for (ctx = 0; ctx < 256; ctx++) {
        if (!has[ctx]) continue;
        e = ptwm_rans_freqtab_read(c, prec, freq[ctx]);
        if (e) return e;
    }
    e = read_states(c, x, RANS_STATES);
    if (e) return e;
    /* A table slot for every context, at ctx << prec, so that finding a
     * context's table is a shift, not a lookup: 256 * 2^12 * 5 bytes at most,
     * kept in the workspace. The tables of absent contexts are zero (they are the
     * dummy that check_contexts catches): the buffer is zero except the
     * tables built last time, which are cleared first unless rebuilt now at
     * the same place. */
    {
        size_t max_slots = (size_t)1 << RANS_PREC_MAX1, old_slots;
        tab = (uint32_t *)rans_buf(ws, PTWM_WS_RANS_DTAB1, 256 * max_slots * (sizeof(uint32_t) + 1) + 4);
        if (!tab) return PTWM_ERR_NOMEM;
        old_slots = (size_t)1 << ws->rans_dtab1_prec;
        for (ctx = 0; ctx < 256; ctx++) {
            if (!ws->rans_dtab1_built[ctx] || (has[ctx] && ws->rans_dtab1_prec == prec)) continue;
            memset(tab + ctx * old_slots, 0, old_slots * sizeof(uint32_t));
            memset((uint8_t *)(tab + 256 * old_slots) + ctx * old_slots, 0, old_slots);
        }
        memcpy(ws->rans_dtab1_built, has, sizeof(has));
        ws->rans_dtab1_prec = prec;
    }
    sym = (uint8_t *)(tab + 256 * slots);
    for (ctx = 0; ctx < 256; ctx++)
        if (has[ctx]) ptwm_rans_build_dtab(freq[ctx], prec, tab + ctx * slots, sym + ctx * slots);
    e = decode_o1_run(tab, sym, prec, c->p, c->end, x, dst, n);
    if (!e) e = check_contexts(dst, n, has);
    return e;
}

ptwm_error ptwm_rans_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                            size_t dst_size) {
    rcur c;
    unsigned mode, prec;
    ptwm_ws *own;
    ptwm_error e;
    if ((!src && src_size) || (!dst && dst_size)) return PTWM_ERR_INVALID_ARG;
    PTWM_CHECK(src_size >= 1);
    mode = src[0];
    switch (mode) {
    case MODE_RAW:
        PTWM_CHECK(src_size - 1 == dst_size);
        if (dst_size) memcpy(dst, src + 1, dst_size);
        return PTWM_OK;
    case MODE_SINGLE:
        PTWM_CHECK(src_size == 2 && dst_size >= 1);
        memset(dst, src[1], dst_size);
        return PTWM_OK;
    case MODE_O0:
    case MODE_O0X2:
    case MODE_O0X4:
    case MODE_O1:
        PTWM_CHECK(src_size >= 2);
        prec = src[1];
        PTWM_CHECK(prec >= RANS_PREC_MIN &&
                   prec <= (mode == MODE_O1 ? RANS_PREC_MAX1 : RANS_PREC_MAX0));
        c.p = src + 2;
        c.end = src + src_size;
        if (!(ws = ptwm_ws_or_temp(ws, &own))) return PTWM_ERR_NOMEM;
        e = mode == MODE_O0 ? decode_o0(ws, &c, prec, dst, dst_size)
            : mode == MODE_O0X2 ? decode_o0xk(ws, &c, prec, dst, dst_size, 2)
            : mode == MODE_O0X4 ? decode_o0xk(ws, &c, prec, dst, dst_size, 4)
                                : decode_o1(ws, &c, prec, dst, dst_size);
        ptwm_ws_free(own);
        return e;
    default:
        return PTWM_ERR_CORRUPT;
    }
}
