/* RANS stage (wire id 4): static rANS, order 0 or order 1, for byte planes.
 *
 * ENCODING (all multi-byte integers little-endian). n, the plane length, is
 * not stored; the decoder is told it (dst_size).
 *
 *   byte 0      mode
 *                 0 RAW     the n bytes follow verbatim (coded size n + 1)
 *                 1 SINGLE  one byte follows: the symbol repeated n times
 *                           (n >= 1; coded size 2)
 *                 2 O0      order-0 rANS
 *                 3 O1      order-1 rANS (context = previous symbol)
 *                 4 O0X2    order-0 rANS in two streams (container format
 *                           version 7 on; the chunk decoder refuses it in
 *                           older files)
 *   O0, O1 and O0X2 continue with:
 *   byte 1      prec: log2 of the frequency total M. O0, O0X2: 8..15; O1: 8..12.
 *   tables      O0, O0X2: one frequency table.
 *               O1: a symbol set naming the contexts that have a table, then
 *                   one frequency table per such context, ascending.
 *   O0 and O1 then hold one stream:
 *   states      S = 32 x u32: the final encoder states =
 *               the initial decoder states, each in [L, 2^32) with L = 2^16.
 *   words       u16 renormalisation words, in the order the decoder reads them.
 *   Nothing follows: the decoder must consume exactly every word and end with
 *   all S states equal to L (the encoder's initial value).
 *   O0X2 holds two order-0 streams with the one table: symbols [0, h) and
 *   [h, n), h = floor(n / 64) * 32 (half the whole rounds of 32):
 *     +----------+---------------------------+---------------------------+
 *     | u32 lenA | stream A: states, words   | stream B: states, words   |
 *     +----------+---------------------------+---------------------------+
 *                 <-------- lenA bytes ------> <--- the rest of the plane ->
 *   each stream as an O0 stream of its symbols, ending as above.
 *
 *   symbol set: byte R.
 *     R == 0:     32 bytes of bitmap follow; symbol s is present if bit (s & 7)
 *                 of byte s >> 3 is set (at least one must be).
 *     R in 1..128: R runs of present symbols follow, 2 bytes each: gap, len-1.
 *                 The first run starts at symbol `gap`; each later run starts
 *                 `gap` (>= 1) symbols after the end of the previous one; a run
 *                 must end at or before symbol 255.
 *   frequency table: a symbol set, then for each present symbol ascending its
 *     frequency f (1 <= f <= M) as v = f - 1: one byte v if v < 128, else two
 *     bytes 0x80 | (v >> 8), v & 0xff (and then v >= 128). The frequencies
 *     must sum to exactly M = 2^prec.
 *
 *   Coding. S states x[0..S-1], L = 2^16, 16-bit renormalisation. A symbol s
 *   with frequency f and cumulative frequency c (sum of the frequencies of the
 *   symbols below s in the same table) is decoded from state x as
 *       slot = x mod M  (c <= slot < c + f),  x = f * (x >> prec) + slot - c,
 *       then if x < L: x = (x << 16) | next u16 word.
 *   O0: symbol i (0 <= i < n) is decoded with state i mod 32 and the one table.
 *   O1: the plane is cut into 32 segments: segment k < 31 is [k*q, (k+1)*q)
 *     with q = floor(n / 32), segment 31 is [31q, n). Segment k is decoded by
 *     state k; the context of its first symbol is 0, of every other symbol the
 *     previous symbol of the same segment. The decoder steps j = 0..q-1, and
 *     for each j the states k = 0..31 in order (symbol k*q + j); then state 31
 *     finishes symbols 32q..n-1 of segment 31 alone. Each context met must
 *     have a table.
 *
 * Why this shape: 16-bit renormalisation with L = 2^16 needs at most one read
 * per symbol, so the decoder renormalises without a branch (a mask; whether a
 * state needs a word is close to a coin toss on weight planes). Order 0 has
 * 32 states so that an AVX2 decoder keeps four vectors of 8 in flight (one
 * vector alone waits on its gathers); the scalar decoder runs them 8 at a time
 * in registers. A large order-0 plane is two streams because a state's
 * next symbol waits on its last (gather, multiply, renormalise: about 59
 * cycles at AVX-512), and 32 states alone leave the core idle most of that:
 * two streams in one loop decode 1.7x as fast, for about 100 bytes more.
 * Order 1 runs its 32 segments the same way, with one more
 * gather for the context's table. The encoder picks prec (and with order -1 the order;
 * with -2 order 1 only where it saves 3% on a plane of 64 KiB or more) from
 * an exact table cost plus an entropy estimate; tables are normalised
 * exactly (largest remainder, every present symbol at least 1). Its order-0
 * loop runs 8 states a vector under AVX2 (same bytes as the scalar loop),
 * branch-free: whether a state emits a word is close to a coin toss. It writes
 * SINGLE for a one-symbol plane and RAW unless rANS saves at least 1/256 of
 * the plane (near-uniform sign+mantissa planes: RAW costs < 0.4% there and
 * decodes at memcpy speed). Decoders accept any valid encoding, whatever the
 * encoder would have chosen. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include "rans.h"
#include "kernels/rans_kernels.h"

#define RANS_PREC_MIN 8
#define RANS_PREC_MAX0 15
#define RANS_PREC_MAX1 12
/* Order -2 (pick, favouring decode speed): order 1 only on planes of at
 * least O1_MIN_AUTO bytes and only if estimated at most O1_WORTH of order
 * 0's size. */
#define O1_MIN_AUTO PTWM_RANS_O1_MIN_AUTO
#define O1_WORTH 0.97

enum { MODE_RAW = 0, MODE_SINGLE = 1, MODE_O0 = 2, MODE_O1 = 3, MODE_O0X2 = 4 };

/* Order-0 planes of at least this many symbols are coded as two streams
 * (MODE_O0X2): a decoder runs both in one loop, twice the independent
 * states, where one stream's 32 leave the AVX-512 loop waiting on its
 * gathers' latency. The second stream's 32 states and its length cost
 * about 100 bytes: 0.25% of the smallest such plane, 0.03% of a 1 MiB BF16
 * chunk's (docs/CHAINS.md). */
#define RANS_X2_MIN ((size_t)1 << 16)

/* Symbols of the first stream of a MODE_O0X2 plane: half its whole rounds. */
static size_t x2_first(size_t n) {
    return n / (2 * RANS_O0_STATES) * RANS_O0_STATES;
}

/* The bytes an order-0 coding adds to its table and words: mode, prec and
 * the states (with the second stream's length and states). */
static double o0_fixed(size_t n) {
    return 2 + 4 * RANS_O0_STATES + (n >= RANS_X2_MIN ? 4 + 4 * RANS_O0_STATES : 0);
}

size_t ptwm_rans_bound(size_t n) {
    /* The encoder falls back to RAW whenever rANS would not be smaller. */
    return n + 1 < n ? 0 : n + 1;
}

/* ------------------------------------------------------------------------- */
/* Work memory                                                               */

/* Order-1 counts and encoder tables, and the decoders' slot tables, are
 * hundreds of KB to MB: they live in the caller's workspace, kept from plane
 * to plane (allocating them per plane cost page faults on every small
 * tensor). Only the order-1 decoder's tables rely on zeroed memory (see
 * decode_o1); the others are written before they are read, and zeroing
 * them would touch pages a small plane never uses. */
static void *rans_buf(ptwm_ws *ws, ptwm_ws_region which, size_t size) {
    return ptwm_ws_get(ws, which, size, which == PTWM_WS_RANS_DTAB1);
}

/* ------------------------------------------------------------------------- */
/* Frequency tables                                                          */

/* Scale counts (total > 0) to frequencies summing to exactly 2^prec, every
 * present symbol at least 1. Symbols whose share is below one slot get 1; the
 * rest share what is left by largest remainder. */
typedef struct rem_item {
    uint64_t frac;
    int sym;
} rem_item;

/* The k-th largest of a[0..n) (1 <= k <= n; a is reordered): quickselect,
 * far cheaper than sorting 256 remainders for every table. */
static uint64_t kth_largest(uint64_t *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        uint64_t piv = a[lo + (hi - lo) / 2], t;
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > piv) i++;
            while (a[j] < piv) j--;
            if (i <= j) {
                t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[lo];
}

/* The symbols present in a table's counts, in symbol order: found once for
 * all the precisions a plan tries (each was a walk over 256 counts). */
typedef struct symlist {
    uint8_t sym[256];
    int n;
} symlist;

static void symlist_make(const uint64_t cnt[256], symlist *sl) {
    int s;
    sl->n = 0;
    for (s = 0; s < 256; s++) { /* no branch: present symbols are scattered */
        sl->sym[sl->n] = (uint8_t)s;
        sl->n += cnt[s] != 0;
    }
}

static void normalize_freqs(const uint64_t cnt[256], uint64_t total, unsigned prec,
                            const symlist *sl, uint32_t freq[256]) {
    uint32_t M = 1u << prec, B = M, sum = 0, rem;
    uint64_t T = total;
    uint8_t live[256]; /* present symbols not yet fixed at 1, in symbol order */
    rem_item items[256];
    int s, i, nlive = sl->n, changed = 1;
    double inv;
    memset(freq, 0, 256 * sizeof(freq[0]));
    memcpy(live, sl->sym, (size_t)nlive);
    /* Symbols whose share is under one slot get 1, judged against the
     * slots and count the others leave; each pass tests every live symbol
     * against the pass's starting B and T, until none moves. Only present
     * symbols are visited (exponent planes use 30-100 of 256). */
    while (changed) {
        uint32_t nb = B;
        uint64_t nt = T;
        int k = 0;
        changed = 0;
        for (i = 0; i < nlive; i++) {
            s = live[i];
            if (cnt[s] * B < T) {
                freq[s] = 1;
                nb--;
                nt -= cnt[s];
                changed = 1;
            } else {
                live[k++] = (uint8_t)s;
            }
        }
        nlive = k;
        B = nb;
        T = nt;
    }
    /* floor(q / T) from a double estimate, corrected to the exact quotient
     * (q / T <= 2^15, so the estimate is off by at most one): no 64-bit
     * division per symbol. */
    inv = 1.0 / (double)T;
    for (i = 0; i < nlive; i++) {
        /* cnt*B <= 2^40 * 2^15 for any plane below 1 TiB: no overflow. */
        uint64_t q = cnt[live[i]] * B, f = (uint64_t)((double)q * inv);
        while (f * T > q) f--;
        while ((f + 1) * T <= q) f++;
        freq[live[i]] = (uint32_t)f;
        sum += (uint32_t)f;
        items[i].frac = q - f * T;
        items[i].sym = live[i];
    }
    rem = B - sum; /* < nlive: each floor lost less than one */
    if (rem) {
        /* The rem largest remainders (ties: lower symbol first) get one
         * more: everything above the rem-th largest remainder, then the
         * lowest symbols equal to it (items are in symbol order). */
        uint64_t fr[256], thr;
        uint32_t more = 0;
        for (i = 0; i < nlive; i++) fr[i] = items[i].frac;
        thr = kth_largest(fr, nlive, (int)rem);
        for (i = 0; i < nlive; i++) { /* no branch: remainders are random */
            uint32_t up = items[i].frac > thr;
            freq[items[i].sym] += up;
            more += up;
        }
        for (i = 0; i < nlive && more < rem; i++)
            if (items[i].frac == thr) {
                freq[items[i].sym]++;
                more++;
            }
    }
}

/* log2 of the frequencies of tables up to 12 bits, from a table filled by
 * log2() itself (a libm call per symbol per precision tried was a large part
 * of planning a table; the values, and so the choices, are the same). */
#define LOG2_TAB 4097
static double log2_tab[LOG2_TAB];
static pthread_once_t log2_once = PTHREAD_ONCE_INIT;

static void log2_init(void) {
    int f;
    for (f = 1; f < LOG2_TAB; f++) log2_tab[f] = log2((double)f);
}

/* Coded bits of the counts of the symbols sl under the frequencies, and
 * in *vbytes the bytes their frequencies take in the table (freqtab_write). */
static double table_cost_bits(const uint64_t cnt[256], const uint32_t freq[256], unsigned prec,
                              const symlist *sl, size_t *vbytes) {
    double bits = 0.0;
    size_t vb = 0;
    int i;
    pthread_once(&log2_once, log2_init);
    for (i = 0; i < sl->n; i++) {
        uint32_t f = freq[sl->sym[i]];
        bits += (double)cnt[sl->sym[i]] *
                ((double)prec - (f < LOG2_TAB ? log2_tab[f] : log2((double)f)));
        vb += 1 + (f - 1 >= 128);
    }
    *vbytes = vb;
    return bits;
}

/* Write the symbol set of the non-zero entries of v to out (NULL: just count). */
static size_t symset_write(const uint32_t v[256], uint8_t *out) {
    uint8_t runs[256];
    size_t nruns = 0, i;
    int s = 0, prev_end = 0;
    while (s < 256) {
        int start, len;
        while (s < 256 && !v[s]) s++;
        if (s == 256) break;
        start = s;
        while (s < 256 && v[s]) s++;
        len = s - start;
        runs[nruns++] = (uint8_t)(start - prev_end);
        runs[nruns++] = (uint8_t)(len - 1);
        prev_end = s;
    }
    if (1 + nruns <= 33) {
        if (out) {
            out[0] = (uint8_t)(nruns / 2);
            for (i = 0; i < nruns; i++) out[1 + i] = runs[i];
        }
        return 1 + nruns;
    }
    if (out) {
        out[0] = 0;
        memset(out + 1, 0, 32);
        for (s = 0; s < 256; s++)
            if (v[s]) out[1 + (s >> 3)] |= (uint8_t)(1u << (s & 7));
    }
    return 33;
}

/* symset_write's length for the symbols sl (no table needed: every present
 * symbol has a frequency, whatever the precision). */
static size_t symset_size(const symlist *sl) {
    size_t runs = 0;
    int i;
    for (i = 0; i < sl->n; i++) runs += i == 0 || sl->sym[i] != sl->sym[i - 1] + 1;
    return 1 + 2 * runs <= 33 ? 1 + 2 * runs : 33;
}

/* Write a frequency table (symbol set + frequencies); NULL out counts. */
static size_t freqtab_write(const uint32_t freq[256], uint8_t *out) {
    size_t k = symset_write(freq, out);
    int s;
    for (s = 0; s < 256; s++) {
        uint32_t v;
        if (!freq[s]) continue;
        v = freq[s] - 1;
        if (v < 128) {
            if (out) out[k] = (uint8_t)v;
            k++;
        } else {
            if (out) {
                out[k] = (uint8_t)(0x80 | (v >> 8));
                out[k + 1] = (uint8_t)v;
            }
            k += 2;
        }
    }
    return k;
}

/* Bounded reader over the coded bytes. */
typedef struct rcur {
    const uint8_t *p, *end;
} rcur;

static ptwm_error symset_read(rcur *c, uint8_t present[256]) {
    unsigned r, i;
    int any = 0;
    memset(present, 0, 256);
    PTWM_CHECK(c->end - c->p >= 1);
    r = *c->p++;
    if (r == 0) {
        PTWM_CHECK(c->end - c->p >= 32);
        for (i = 0; i < 256; i++) {
            present[i] = (uint8_t)((c->p[i >> 3] >> (i & 7)) & 1);
            any |= present[i];
        }
        c->p += 32;
        PTWM_CHECK(any);
        return PTWM_OK;
    }
    PTWM_CHECK(r <= 128 && (size_t)(c->end - c->p) >= 2 * (size_t)r);
    {
        unsigned pos = 0;
        for (i = 0; i < r; i++) {
            unsigned gap = c->p[2 * i], len = (unsigned)c->p[2 * i + 1] + 1, k;
            PTWM_CHECK(i == 0 || gap >= 1);
            pos += gap;
            PTWM_CHECK(pos + len <= 256);
            for (k = 0; k < len; k++) present[pos + k] = 1;
            pos += len;
        }
        c->p += 2 * r;
    }
    return PTWM_OK;
}

static ptwm_error freqtab_read(rcur *c, unsigned prec, uint32_t freq[256]) {
    uint8_t present[256];
    uint32_t sum = 0;
    int s;
    ptwm_error e = symset_read(c, present);
    if (e) return e;
    for (s = 0; s < 256; s++) {
        uint32_t v;
        freq[s] = 0;
        if (!present[s]) continue;
        PTWM_CHECK(c->p < c->end);
        v = *c->p++;
        if (v & 0x80) {
            PTWM_CHECK(c->p < c->end);
            v = ((v & 0x7f) << 8) | *c->p++;
            PTWM_CHECK(v >= 128);
        }
        freq[s] = v + 1;
        sum += v + 1; /* <= 256 * 2^15: no overflow */
    }
    PTWM_CHECK(sum == (1u << prec));
    return PTWM_OK;
}

/* Decode table: one u32 per slot, frequency in the high half and slot - cum
 * in the low half (both < 2^16 since prec <= 15), and the symbol beside it.
 * Four entries a step and a memset for the symbols: most planes are small,
 * and a table of 4096 slots or more built a slot at a time was 7% of the
 * AVX2 decoder's time on a BF16 file's planes. Exact: order 1's tables lie
 * back to back, with absent contexts' tables left zero. */
static void build_dtab(const uint32_t freq[256], unsigned prec, uint32_t *tab, uint8_t *sym) {
    uint32_t cum = 0;
    int s;
    (void)prec;
    for (s = 0; s < 256; s++) {
        uint32_t f = freq[s], k, v = f << 16;
        uint32_t *t = tab + cum;
        if (!f) continue;
        memset(sym + cum, s, f);
        for (k = 0; k + 4 <= f; k += 4) {
            t[k] = v + k;
            t[k + 1] = v + k + 1;
            t[k + 2] = v + k + 2;
            t[k + 3] = v + k + 3;
        }
        for (; k < f; k++) t[k] = v + k;
        cum += f;
    }
}

/* Packed decode table for prec <= RANS_PACK_PREC: the symbol in the top
 * byte, frequency and slot - cum in 12 bits each (a one-symbol table, f =
 * 2^12, does not fit: dtab_packs). Built by the kernel that reads it
 * (kernels/rans_avx512.c). */
typedef char rans_packed_fits[((1 << RANS_PACK_PREC) + RANS_PACK_SLACK) <= (1 << RANS_PREC_MAX0)
                                  ? 1
                                  : -1]; /* the build's slack fits decode_o0's buffer */

static int dtab_packs(const uint32_t freq[256], unsigned prec) {
    int s;
    if (prec > RANS_PACK_PREC) return 0;
    for (s = 0; s < 256; s++)
        if (freq[s] >> RANS_PACK_PREC) return 0;
    return 1;
}

/* ------------------------------------------------------------------------- */
/* Encoder                                                                    */

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

/* The scalar loop's table is built only if it codes more than the partial
 * round (no vector loop, or an output near its end): where a vector loop
 * codes the plane, its divisions for every symbol were most of a small
 * plane's table work. The partial round's entries are made one by one. */
static size_t encode_o0_stream(const uint8_t *src, size_t n, const uint32_t freq[256],
                               const enc_vsym *vt, unsigned prec, uint8_t *at, uint8_t *end) {
    uint32_t x[RANS_O0_STATES];
    enc_sym t[256];
    ewriter w;
    size_t i, full = n - n % RANS_O0_STATES;
    if (!enc_start(&w, x, RANS_O0_STATES, at, end)) return 0;
    /* The partial last round first (the encoder runs backwards). */
    for (i = n; i-- > full;) {
        enc_sym e;
        etab_entry(freq[src[i]], vt->fc[src[i]] & 0xffff, prec, &e);
        x[i % RANS_O0_STATES] = enc_put(x[i % RANS_O0_STATES], &e, &w);
    }
    i = full;
    if (unlikely(w.full)) return 0;
    i = ptwm_codec_kern()->rans_enc_o0(src, i, vt, prec, x, &w);
    if (i > 0) build_etab(freq, prec, t);
    for (; i > 0; i -= RANS_O0_STATES) {
        const uint8_t *s = src + i - RANS_O0_STATES;
        int k;
        if (likely(w.p - w.lim >= ENC_ROUND_MARGIN)) {
            for (k = RANS_O0_STATES - 1; k >= 0; k--) x[k] = enc_put_fast(x[k], &t[s[k]], &w.p);
        } else {
            for (k = RANS_O0_STATES - 1; k >= 0; k--) x[k] = enc_put(x[k], &t[s[k]], &w);
            if (unlikely(w.full)) return 0;
        }
    }
    return enc_finish(&w, x, RANS_O0_STATES, at, end);
}

/* Segment k of the order-1 layout: start and length. */
static void o1_segment(size_t n, int k, size_t *start, size_t *len) {
    size_t q = n / RANS_STATES;
    *start = (size_t)k * q;
    *len = k == RANS_STATES - 1 ? n - (size_t)k * q : q;
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
    normalize_freqs(cnt, total, prec, sl, freq);
    bits = table_cost_bits(cnt, freq, prec, sl, &vbytes);
    return (double)(set_bytes + vbytes) + bits / 8.0;
}

/* A floor under plan_o0's estimate at every precision: a table's symbol
 * bits are at least the counts' entropy (Gibbs' inequality: the
 * frequencies sum to 2^prec), its frequencies at least a byte each, beside
 * the same fixed bytes (o0_fixed: n symbols, one stream or two). A
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
    symlist_make(cnt, &sl);
    best.prec = start;
    set = symset_size(&sl);
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
        double e = 2 + 4 * RANS_STATES + (double)symset_write(used, NULL);
        for (c = 0; c < 256; c++)
            if (ctx_total[c]) {
                symlist sl;
                symlist_make(cnt + 256 * c, &sl);
                e += est_table(cnt + 256 * c, ctx_total[c], prec, &sl, symset_size(&sl), freq);
            }
        if (best.prec && e * 0.9995 > best.est) break;
        best.prec = prec;
        best.est = e;
    }
    return best;
}

/* Returns the coded length, or 0 if it did not fit in cap. A large plane
 * becomes two streams, the first's length (u32) in front of them. */
static size_t encode_o0(const uint8_t *src, size_t n, const uint32_t freq[256], unsigned prec,
                        uint8_t *dst, size_t cap) {
    enc_vsym vt;
    size_t h, len, len2, a;
    int two = n >= RANS_X2_MIN;
    h = 2 + freqtab_write(freq, NULL) + (two ? 4 : 0);
    if (h > cap) return 0;
    dst[0] = two ? MODE_O0X2 : MODE_O0;
    dst[1] = (uint8_t)prec;
    freqtab_write(freq, dst + 2);
    build_vtab(freq, &vt);
    if (!two) {
        len = encode_o0_stream(src, n, freq, &vt, prec, dst + h, dst + cap);
        return len ? h + len : 0;
    }
    a = x2_first(n);
    len = encode_o0_stream(src, a, freq, &vt, prec, dst + h, dst + cap);
    if (!len || len > UINT32_MAX) return 0;
    len2 = encode_o0_stream(src + a, n - a, freq, &vt, prec, dst + h + len, dst + cap);
    if (!len2) return 0;
    ptwm_store_le32(dst + h - 4, (uint32_t)len);
    return h + len + len2;
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
    h = 2 + symset_write(used, NULL);
    if (h > cap) return 0;
    dst[0] = MODE_O1;
    dst[1] = (uint8_t)prec;
    symset_write(used, dst + 2);
    for (c = 0; c < 256; c++) {
        size_t th;
        symlist sl;
        if (!ctx_total[c]) continue;
        symlist_make(cnt + 256 * c, &sl);
        normalize_freqs(cnt + 256 * c, ctx_total[c], prec, &sl, freq);
        th = freqtab_write(freq, NULL);
        if (th > cap - h) return 0;
        freqtab_write(freq, dst + h);
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
    return p.est - (double)RANS_O0_STATES * (n >= RANS_X2_MIN ? 2 : 1);
}

ptwm_error ptwm_rans_encode_plan(const uint8_t *src, size_t n, const ptwm_rans_plan *pl,
                                 uint8_t *dst, size_t cap, size_t *out_len) {
    if (!pl || !pl->prec) return ptwm_rans_encode_counts(NULL, src, n, 0, NULL, dst, cap, out_len);
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    return keep_or_raw(src, n, encode_o0(src, n, pl->freq, pl->prec, dst, cap), dst, cap, out_len);
}

ptwm_error ptwm_rans_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int order, uint8_t *dst,
                            size_t cap, size_t *out_len) {
    return ptwm_rans_encode_counts(ws, src, n, order, NULL, dst, cap, out_len);
}

/* Code src with its symbol counts cnt (summing to n). */
static ptwm_error encode_counted(ptwm_ws *ws, const uint8_t *src, size_t n, int order,
                                 const uint64_t cnt[256], uint8_t *dst, size_t cap,
                                 size_t *out_len) {
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
            len = encode_o0(src, n, p0.freq, p0.prec, dst, cap);
        }
    }
    return keep_or_raw(src, n, len, dst, cap, out_len);
}

ptwm_error ptwm_rans_encode_counts(ptwm_ws *ws, const uint8_t *src, size_t n, int order,
                                   const uint32_t *hist, uint8_t *dst, size_t cap,
                                   size_t *out_len) {
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
    e = encode_counted(ws, src, n, order, cnt, dst, cap, out_len);
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
                                    uint8_t *dst, size_t cap, size_t *out_len) {
    uint64_t cnt[256], seen = 0, sum = 0;
    int s, top = 0;
    double scale;
    if (!out_len || (!src && n) || (!dst && cap) || !sample) return PTWM_ERR_INVALID_ARG;
    for (s = 0; s < 256; s++) seen += sample[s];
    if (seen == 0 || seen > n) return ptwm_rans_encode_counts(NULL, src, n, 0, NULL, dst, cap, out_len);
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
        return ptwm_rans_encode_counts(NULL, src, n, 0, NULL, dst, cap, out_len);
    cnt[top] = cnt[top] + n - sum; /* modulo 2^64: sum - n < cnt[top] */
    return encode_counted(NULL, src, n, 0, cnt, dst, cap, out_len); /* order 0 */
}

/* ------------------------------------------------------------------------- */
/* Decoder                                                                    */

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
    if (k->rans_dec_o0_packed && dtab_packs(freq, prec)) {
        k->rans_dtab_packed(freq, t->tab);
        t->sym = NULL;
        return PTWM_OK;
    }
    t->sym = (uint8_t *)(t->tab + ((size_t)1 << prec));
    memset(t->sym + ((size_t)1 << prec), 0, 4);
    build_dtab(freq, prec, t->tab, t->sym);
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
    if ((e = freqtab_read(c, prec, freq)) || (e = read_states(c, x, RANS_O0_STATES)) ||
        (e = o0tab_build(ws, freq, prec, &t)))
        return e;
    return decode_o0_rest(&t, prec, c, x, dst, n);
}

/* Two streams, the first's length in front: where the kernel table has the
 * two-stream loop, both run in it while both have whole rounds, then each
 * finishes alone. */
static ptwm_error decode_o0x2(ptwm_ws *ws, rcur *c, unsigned prec, uint8_t *dst, size_t n) {
    uint32_t freq[256], xa[RANS_O0_STATES], xb[RANS_O0_STATES];
    size_t na = x2_first(n), len, done = 0;
    rcur a, b;
    o0tab t;
    ptwm_error e;
    const ptwm_codec_kernels *k = ptwm_codec_kern();
    if ((e = freqtab_read(c, prec, freq))) return e;
    PTWM_CHECK(c->end - c->p >= 4);
    len = ptwm_load_le32(c->p);
    c->p += 4;
    PTWM_CHECK(len <= (size_t)(c->end - c->p));
    a.p = c->p;
    a.end = b.p = c->p + len;
    b.end = c->end;
    if ((e = read_states(&a, xa, RANS_O0_STATES)) || (e = read_states(&b, xb, RANS_O0_STATES)) ||
        (e = o0tab_build(ws, freq, prec, &t)))
        return e;
    {
        ptwm_rans_dec_o0x2_fn both = t.sym ? k->rans_dec_o0x2 : k->rans_dec_o0x2_packed;
        if (both) done = both(t.tab, t.sym, prec, &a.p, a.end, xa, dst, &b.p, b.end, xb, dst + na, na);
    }
    if ((e = decode_o0_rest(&t, prec, &a, xa, dst + done, na - done))) return e;
    return decode_o0_rest(&t, prec, &b, xb, dst + na + done, n - na - done);
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
    ptwm_error e = symset_read(c, has);
    if (e) return e;
    freq = (uint32_t(*)[256])rans_buf(ws, PTWM_WS_RANS_FREQ1, sizeof(uint32_t) * 256 * 256);
    if (!freq) return PTWM_ERR_NOMEM;
    for (ctx = 0; ctx < 256; ctx++) {
        if (!has[ctx]) continue;
        e = freqtab_read(c, prec, freq[ctx]);
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
        if (has[ctx]) build_dtab(freq[ctx], prec, tab + ctx * slots, sym + ctx * slots);
    e = decode_o1_run(tab, sym, prec, c->p, c->end, x, dst, n);
    if (!e) e = check_contexts(dst, n, has);
    return e;
}

int ptwm_rans_two_streams(const uint8_t *src, size_t src_size) {
    return src && src_size >= 1 && src[0] == MODE_O0X2;
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
    case MODE_O1:
        PTWM_CHECK(src_size >= 2);
        prec = src[1];
        PTWM_CHECK(prec >= RANS_PREC_MIN &&
                   prec <= (mode == MODE_O1 ? RANS_PREC_MAX1 : RANS_PREC_MAX0));
        c.p = src + 2;
        c.end = src + src_size;
        if (!(ws = ptwm_ws_or_temp(ws, &own))) return PTWM_ERR_NOMEM;
        e = mode == MODE_O0 ? decode_o0(ws, &c, prec, dst, dst_size)
            : mode == MODE_O0X2 ? decode_o0x2(ws, &c, prec, dst, dst_size)
                                : decode_o1(ws, &c, prec, dst, dst_size);
        ptwm_ws_free(own);
        return e;
    default:
        return PTWM_ERR_CORRUPT;
    }
}
