/* The RANS coder's frequency tables (format in rans.c): counts normalised
 * to 2^prec, the cost estimate the encoder plans with, the symbol sets and
 * frequency tables written and read (every byte checked), and the decode
 * tables built from them. */
#include <math.h>
#include <pthread.h>
#include "rans_impl.h"

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

void ptwm_rans_symlist_make(const uint64_t cnt[256], symlist *sl) {
    int s;
    sl->n = 0;
    for (s = 0; s < 256; s++) { /* no branch: present symbols are scattered */
        sl->sym[sl->n] = (uint8_t)s;
        sl->n += cnt[s] != 0;
    }
}

void ptwm_rans_normalize_freqs(const uint64_t cnt[256], uint64_t total, unsigned prec,
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
 * in *vbytes the bytes their frequencies take in the table (ptwm_rans_freqtab_write). */
double ptwm_rans_table_cost_bits(const uint64_t cnt[256], const uint32_t freq[256],
                                 unsigned prec, const symlist *sl, size_t *vbytes) {
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
size_t ptwm_rans_symset_write(const uint32_t v[256], uint8_t *out) {
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

/* ptwm_rans_symset_write's length for the symbols sl (no table needed: every present
 * symbol has a frequency, whatever the precision). */
size_t ptwm_rans_symset_size(const symlist *sl) {
    size_t runs = 0;
    int i;
    for (i = 0; i < sl->n; i++) runs += i == 0 || sl->sym[i] != sl->sym[i - 1] + 1;
    return 1 + 2 * runs <= 33 ? 1 + 2 * runs : 33;
}

/* Write a frequency table (symbol set + frequencies); NULL out counts. */
size_t ptwm_rans_freqtab_write(const uint32_t freq[256], uint8_t *out) {
    size_t k = ptwm_rans_symset_write(freq, out);
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

ptwm_error ptwm_rans_symset_read(rcur *c, uint8_t present[256]) {
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

ptwm_error ptwm_rans_freqtab_read(rcur *c, unsigned prec, uint32_t freq[256]) {
    uint8_t present[256];
    uint32_t sum = 0;
    int s;
    ptwm_error e = ptwm_rans_symset_read(c, present);
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
void ptwm_rans_build_dtab(const uint32_t freq[256], unsigned prec, uint32_t *tab, uint8_t *sym) {
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
 * 2^12, does not fit: ptwm_rans_dtab_packs). Built by the kernel that reads it
 * (kernels/rans_avx512.c). */
typedef char rans_packed_fits[((1 << RANS_PACK_PREC) + RANS_PACK_SLACK) <= (1 << RANS_PREC_MAX0)
                                  ? 1
                                  : -1]; /* the build's slack fits o0tab_build's buffer */

int ptwm_rans_dtab_packs(const uint32_t freq[256], unsigned prec) {
    int s;
    if (prec > RANS_PACK_PREC) return 0;
    for (s = 0; s < 256; s++)
        if (freq[s] >> RANS_PACK_PREC) return 0;
    return 1;
}
