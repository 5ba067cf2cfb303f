/* Huffman entropy stage (wire id 1): canonical, length-limited, 4 streams.
 *
 * Encoding of n symbols (all integers little-endian):
 *
 *   byte 0: mode
 *     0 RAW      n bytes follow verbatim; total size 1 + n.
 *     1 RLE      1 byte follows: the symbol repeated n times (n >= 1); size 2.
 *     2 HUFFMAN  the layout below.
 *     other      invalid.
 *
 *   HUFFMAN:
 *     byte 1      lo: smallest symbol with a code
 *     byte 2      hi: largest symbol with a code; lo < hi
 *     nibbles     ceil((hi - lo + 1) / 2) bytes: the code length of symbol
 *                 lo + 2k is the low nibble of byte k, of lo + 2k + 1 the high
 *                 nibble. 0 = no code, 1..13 = length, 14..15 invalid. lo and hi
 *                 must have codes; an unused last high nibble must be 0. The
 *                 lengths must form a complete prefix code: with L the longest
 *                 length, sum 2^(L - len) == 2^L (so at least 2 symbols).
 *     jump table  4 x u32: byte sizes of streams 0..3, each at least 1; their
 *                 sum must equal the bytes that follow, exactly.
 *     streams     4 bit streams back to back.
 *
 *   Stream s codes segment s of the output: with q = n / 4, segments 0..2
 *   hold q symbols each and segment 3 the remaining n - 3q.
 *
 *   Codes are canonical: sorted by (length, symbol), each code is the previous
 *   plus one, shifted left when the length grows (the first code is all zeros),
 *   as in DEFLATE.
 *
 *   Bit stream: bits are numbered from bit 0 of byte 0 upward (LSB first). The
 *   encoder writes the segment's symbols LAST FIRST, each code as an integer
 *   whose least significant bit lands on the lowest free bit position; after
 *   the first symbol it writes one 1 bit (the sentinel) and pads the last byte
 *   with zeros. The decoder therefore reads from the top: the last byte must be
 *   non-zero, its highest set bit is the sentinel, and codes are read most
 *   significant bit first going down. After the segment's last symbol exactly
 *   bit 0 of byte 0 must have been consumed: a stream with bits left over, or
 *   one that runs out before its segment is full, is corrupt.
 *
 * Why these choices:
 *  - 13-bit limit, 11 preferred: the decoder resolves every code with one
 *    lookup in a table of 2^L two-byte entries, L = 11 (4 KiB, in L1) when
 *    no code is longer, else 13. At L = 11, 5 codes fit in a 64-bit container
 *    per refill (7 + 5 * 11 <= 63), at 13 four (7 + 4 * 13 <= 63). Exponent
 *    planes hold ~100 distinct rare exponents (tiny weights); at an 11-bit
 *    limit each still takes 1/2048 of the code space and pushes the common
 *    codes longer, so such a plane codes measurably larger at 11 bits than
 *    at 13 (docs/ARCHITECTURE.md, "Measurements behind the code"). The
 *    encoder keeps 11 unless 13 saves more than 0.4%.
 *  - 4 streams give the CPU 4 independent dependency chains (zstd HUF 4X).
 *    Segments code to different bit counts (layers differ), so when the first
 *    stream nears its start the others finish in single-stream fast loops;
 *    only the last few symbols of each stream go through the checked tail.
 *  - Decoder only, not part of the format: planes of >= 16 KiB whose code
 *    lengths imply <= 5.5 bits a symbol decode through an 11-bit table whose
 *    entries hold up to 4 whole codes (zstd's X2 idea taken further): ~3
 *    exponent symbols per lookup instead of one.
 *  - Reading backward with a sentinel makes "ends exactly on its last bit" a
 *    single comparison per stream.
 *  - A lo..hi nibble range is 128 bytes at worst and ~20 bytes for exponent
 *    planes, under 0.3% of a 64 KiB plane; u32 stream sizes allow planes of
 *    any size the container uses. Storing all four sizes (4 bytes more than
 *    zstd's 3 x u16) makes every truncation or extension of a HUFFMAN encoding
 *    a certain error instead of a likely one.
 *  - Encode chooses the smallest of the modes, except that HUFFMAN must save
 *    at least n/128 bytes over RAW (RAW decodes at copy speed) and planes of
 *    64 KiB or more whose sample shows >= 7.9 bits a symbol are stored RAW
 *    without a full histogram. The worst case is RAW: ptwm_huf_bound(n) = n + 1.
 */
#include "huffman.h"
#include "kernels/huffman_kernels.h"

#include <math.h>
#include <stdlib.h>

#define HUF_MODE_RAW 0
#define HUF_MODE_RLE 1
#define HUF_MODE_HUFFMAN 2

#define HUF_TABLE_SIZE (1u << HUF_MAX_LEN)
#define HUF_JUMP_BYTES 16

/* ------------------------------------------------------------------------ */
/* Shared: segment layout and canonical codes                                */
/* ------------------------------------------------------------------------ */

static void huf_segments(size_t n, size_t begin[HUF_STREAMS + 1]) {
    size_t q = n / 4;
    begin[0] = 0;
    begin[1] = q;
    begin[2] = 2 * q;
    begin[3] = 3 * q;
    begin[4] = n;
}

/* Canonical code of every symbol from its length (0 = none; only symbols
 * lo..hi have one). Both sides walk (length, symbol) in the same order;
 * `pos` is the code left-aligned to HUF_MAX_LEN bits, as the decoder's table
 * fill advances through its entries. */
static void huf_canonical(const uint8_t len[256], size_t lo, size_t hi, uint16_t code[256]) {
    unsigned l, pos = 0, start[HUF_MAX_LEN + 2] = {0}, count[HUF_MAX_LEN + 2] = {0};
    size_t s;
    /* Where each length's run starts, then the symbols in order: one pass
     * each instead of one pass over the symbols per length; over lo..hi
     * only (counting the absent symbols' zeros was most of coding a plane
     * of a few hundred bytes: one counter incremented 200 times in a row). */
    for (s = lo; s <= hi; s++) count[len[s]]++;
    for (l = 1; l <= HUF_MAX_LEN; l++) {
        start[l] = pos;
        pos += count[l] << (HUF_MAX_LEN - l);
    }
    for (s = lo; s <= hi; s++) {
        l = len[s];
        if (l) {
            code[s] = (uint16_t)(start[l] >> (HUF_MAX_LEN - l));
            start[l] += 1u << (HUF_MAX_LEN - l);
        }
    }
}

/* The used range of v (a byte a symbol: code lengths): *lo and *hi, the
 * first and last symbol whose byte is nonzero; returns how many are (none:
 * *lo = 256, *hi = 0). Whole zero words are skipped at both ends. */
static size_t huf_used_range(const uint8_t v[256], size_t *lo, size_t *hi) {
    size_t a = 0, b = 256, used = 0, i;
    uint64_t w;
    while (a < 256 && !ptwm_load_le64(v + a)) a += 8;
    if (a == 256) {
        *lo = 256;
        *hi = 0;
        return 0;
    }
    while (!ptwm_load_le64(v + b - 8)) b -= 8;
    w = ptwm_load_le64(v + a);
    *lo = a + (size_t)__builtin_ctzll(w) / 8;
    w = ptwm_load_le64(v + b - 8);
    *hi = b - 8 + (size_t)(63 - __builtin_clzll(w)) / 8;
    for (i = *lo; i <= *hi; i++) used += v[i] != 0;
    return used;
}

/* ------------------------------------------------------------------------ */
/* Encoder                                                                   */
/* ------------------------------------------------------------------------ */

#define HUF_INSERTION_MAX 32
/* The m used symbols (all within lo..hi) as keys count << 8 | symbol,
 * ascending (keys are distinct, so the order is total): an LSD radix sort on
 * the 40-bit keys (counts < 2^32), one pass per count byte that is nonzero
 * in some count (the symbol byte is in order already), which costs a
 * fraction of qsort's comparator calls; up to HUF_INSERTION_MAX keys are
 * sorted by insertion. The keys are gathered without a branch (present
 * symbols are scattered). Returns m. */
static size_t huf_sorted_keys(const uint64_t freq[256], size_t lo, size_t hi, uint64_t keys[256]) {
    uint64_t tmp[256], *a = keys, *b = tmp, top = 0;
    size_t m = 0, i;
    unsigned pass, passes = 1;
    for (i = lo; i <= hi; i++) {
        keys[m] = freq[i] << 8 | i;
        m += freq[i] != 0;
        top |= freq[i];
    }
    /* A few keys (the exponent planes of small tensors): insertion sort,
     * cheaper than clearing 257 buckets a pass. */
    if (m <= HUF_INSERTION_MAX) {
        for (i = 1; i < m; i++) {
            uint64_t k = keys[i];
            size_t j = i;
            for (; j > 0 && keys[j - 1] > k; j--) keys[j] = keys[j - 1];
            keys[j] = k;
        }
        return m;
    }
    /* Only the count bytes that are nonzero somewhere need a pass. */
    while (passes < 4 && top >> (8 * passes)) passes++;
    for (pass = 1; pass <= passes; pass++) { /* byte 0 is the symbol: already in order */
        size_t cnt[257] = {0};
        unsigned sh = 8 * pass;
        for (i = 0; i < m; i++) cnt[((a[i] >> sh) & 0xff) + 1]++;
        for (i = 1; i < 257; i++) cnt[i] += cnt[i - 1];
        for (i = 0; i < m; i++) b[cnt[(a[i] >> sh) & 0xff]++] = a[i];
        {
            uint64_t *t = a;
            a = b;
            b = t;
        }
    }
    if (a != keys) memcpy(keys, a, m * sizeof(keys[0]));
    return m;
}

/* Optimal code lengths limited to `limit` bits by package-merge (Larmore and
 * Hirschberg). With m used symbols, list j holds the m leaves merged with the
 * packages (pairs) of list j-1; the first 2m-2 items of the last list select
 * the lengths: a leaf's length is the number of lists whose selected prefix
 * contains it. Lists are sorted, so each selected part is a prefix and the
 * leaves in it are the lightest ones. Requires 2 <= m <= 2^limit. */
static void huf_limited_lengths(const uint64_t *keys, size_t m, unsigned limit, uint8_t len[256]) {
    uint8_t sym[256];
    uint64_t wa[512], wb[512];
    uint8_t leaf[HUF_MAX_LEN][512];
    size_t size[HUF_MAX_LEN];
    uint64_t *prev = wa, *cur = wb;
    size_t i, j, take;

    memset(len, 0, 256);
    for (i = 0; i < m; i++) {
        sym[i] = (uint8_t)keys[i];
        prev[i] = keys[i] >> 8;
        leaf[0][i] = 1;
    }
    size[0] = m;
    for (j = 1; j < limit; j++) {
        size_t np = size[j - 1] / 2, a = 0, b = 0, k = 0;
        while (a < m || b < np) {
            uint64_t pw = b < np ? prev[2 * b] + prev[2 * b + 1] : 0;
            if (b >= np || (a < m && (keys[a] >> 8) <= pw)) {
                cur[k] = keys[a++] >> 8;
                leaf[j][k++] = 1;
            } else {
                cur[k] = pw;
                leaf[j][k++] = 0;
                b++;
            }
        }
        size[j] = k;
        {
            uint64_t *t = prev;
            prev = cur;
            cur = t;
        }
    }
    take = 2 * m - 2;
    for (j = limit; j-- > 0;) {
        size_t leaves = 0;
        for (i = 0; i < take; i++) leaves += leaf[j][i];
        for (i = 0; i < leaves; i++) len[sym[i]]++;
        take = 2 * (take - leaves);
    }
}

/* Optimal code lengths with no limit, for sorted keys (m >= 2), in place
 * over the weights in three linear passes (Moffat and Katajainen, "In-place
 * calculation of minimum-redundancy codes", 1995): parent links, then
 * internal depths, then leaf depths. Returns the longest length. */
static unsigned huf_optimal_lengths(const uint64_t *keys, size_t m, uint8_t len[256]) {
    uint64_t a[256];
    size_t root = 0, leaf = 2, next, avail = 1, used = 0, depth = 0, r, i;
    memset(len, 0, 256);
    if (m < 2) return 0; /* callers have two symbols or more */
    a[0] = keys[0] >> 8;
    a[1] = keys[1] >> 8;
    for (i = 2; i < m; i++) a[i] = keys[i] >> 8;
    /* pass 1: a[next] becomes the weight of internal node next, and each
     * merged internal node's slot the index of its parent */
    a[0] += a[1];
    for (next = 1; next < m - 1; next++) {
        if (leaf >= m || a[root] < a[leaf]) {
            a[next] = a[root];
            a[root++] = next;
        } else {
            a[next] = a[leaf++];
        }
        if (leaf >= m || (root < next && a[root] < a[leaf])) {
            a[next] += a[root];
            a[root++] = next;
        } else {
            a[next] += a[leaf++];
        }
    }
    /* pass 2: internal node depths, from the root (node m - 2) down */
    a[m - 2] = 0;
    for (r = m - 2; r-- > 0;) a[r] = a[a[r]] + 1;
    /* pass 3: leaf depths; the deepest leaves are the lightest */
    next = m;
    r = m - 1; /* internal nodes m - 2 .. 0, as r - 1 */
    while (avail > 0) {
        while (r > 0 && a[r - 1] == depth) {
            used++;
            r--;
        }
        while (avail > used) {
            a[--next] = depth;
            avail--;
        }
        avail = 2 * used;
        depth++;
        used = 0;
    }
    for (i = 0; i < m; i++) len[(uint8_t)keys[i]] = (uint8_t)a[i];
    return (unsigned)a[0];
}

/* Lengths limited to 11 bits decode fastest (5 symbols per refill from a 4 KiB
 * table); planes with many rare symbols (exponent planes hold ~100 of them)
 * lose size at 11 bits, so 13 is used when it saves more than 0.4%. From
 * the optimal lengths `opt` of the sorted keys (`longest` the longest): used
 * as they are when they fit 11 bits (package-merge would find a code of the
 * same cost), package-merge past that. */
static void huf_limit_choice(const uint64_t freq[256], const uint64_t *keys, size_t m,
                             const uint8_t opt[256], unsigned longest, uint8_t len[256]) {
    uint8_t len13[256];
    uint64_t bits11 = 0, bits13 = 0, bitsopt = 0;
    unsigned i;
    if (longest <= HUF_FAST_LEN) {
        memcpy(len, opt, 256);
        return;
    }
    huf_limited_lengths(keys, m, HUF_FAST_LEN, len);
    for (i = 0; i < 256; i++) {
        bits11 += freq[i] * len[i];
        bitsopt += freq[i] * opt[i];
    }
    /* 13 bits cost at least the optimal code: within 0.4% of that, 11 bits
     * stay without sizing 13 (a second package-merge). */
    if (bits11 <= bitsopt + bitsopt / 250) return;
    if (longest > HUF_MAX_LEN)
        huf_limited_lengths(keys, m, HUF_MAX_LEN, len13);
    else
        memcpy(len13, opt, sizeof(len13));
    for (i = 0; i < 256; i++) bits13 += freq[i] * len13[i];
    if (bits11 > bits13 + bits13 / 250) memcpy(len, len13, sizeof(len13));
}

static void huf_choose_lengths(const uint64_t freq[256], size_t lo, size_t hi, uint8_t len[256]) {
    uint8_t opt[256];
    uint64_t keys[256];
    size_t m = huf_sorted_keys(freq, lo, hi, keys);
    unsigned longest = huf_optimal_lengths(keys, m, opt);
    huf_limit_choice(freq, keys, m, opt, longest, len);
}

/* Per-segment histograms in one pass: four independent counters also avoid
 * the store-to-load stall of incrementing one counter for runs of a symbol. */
static void huf_histograms(const uint8_t *src, const size_t begin[HUF_STREAMS + 1],
                           uint32_t hist[HUF_STREAMS][256]) {
    const uint8_t *p0 = src, *p1 = src + begin[1], *p2 = src + begin[2], *p3 = src + begin[3];
    size_t q = begin[1], i;
    memset(hist, 0, sizeof(uint32_t) * HUF_STREAMS * 256);
    for (i = 0; i < q; i++) {
        hist[0][p0[i]]++;
        hist[1][p1[i]]++;
        hist[2][p2[i]]++;
        hist[3][p3[i]]++;
    }
    for (i = begin[3] + q; i < begin[4]; i++) hist[3][src[i]]++;
}

/* Planes that will not shrink (sign+mantissa planes carry ~7.97 bits) are
 * recognised from a sample of 32 windows of 256 bytes, as zstd does for
 * incompressible blocks, so storing them costs little more than a copy. The
 * sample's entropy underestimates the plane's by ~0.02 bits (finite sample);
 * at 7.9 bits Huffman could save well under the 1/128 it has to. */
#define HUF_SAMPLE_WINDOWS 32
#define HUF_SAMPLE_WINDOW 256
#define HUF_SAMPLE_MIN 65536
static int huf_looks_incompressible(const uint8_t *src, size_t n) {
    uint32_t h[256];
    size_t w, k, step = n / HUF_SAMPLE_WINDOWS;
    const double total = HUF_SAMPLE_WINDOWS * HUF_SAMPLE_WINDOW;
    double bits = 0;
    if (n < HUF_SAMPLE_MIN) return 0;
    memset(h, 0, sizeof(h));
    for (w = 0; w < HUF_SAMPLE_WINDOWS; w++)
        for (k = 0; k < HUF_SAMPLE_WINDOW; k++) h[src[w * step + k]]++;
    for (k = 0; k < 256; k++)
        if (h[k]) bits -= h[k] * log2(h[k] / total);
    return bits >= 7.9 * total;
}

size_t ptwm_huf_bound(size_t n) { return n < SIZE_MAX ? n + 1 : 0; }

static ptwm_error huf_store(const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                            size_t *out_len) {
    if (cap < n + 1) return PTWM_ERR_DST_SIZE;
    dst[0] = HUF_MODE_RAW;
    if (n) memcpy(dst + 1, src, n);
    *out_len = n + 1;
    return PTWM_OK;
}

/* Counts widened, with the used symbol range; returns how many are used
 * (without a branch a symbol: present symbols are scattered). */
static size_t huf_counts(const uint32_t hist[256], uint64_t freq[256], size_t *lo, size_t *hi) {
    size_t used = 0, first = 256, last = 0, i;
    for (i = 0; i < 256; i++) {
        freq[i] = hist[i];
        used += hist[i] != 0;
        last = hist[i] ? i : last;
        first = hist[i] && first == 256 ? i : first;
    }
    *lo = first;
    *hi = last;
    return used;
}

/* Header bytes before the streams: mode, lo, hi, the nibble lengths, the
 * jump table. */
#define HUF_HEAD(lo, hi) (3 + ((hi) - (lo) + 2) / 2 + HUF_JUMP_BYTES)

size_t ptwm_huf_size_floor(const uint32_t hist[256], size_t n) {
    /* The optimal code's bits: the limited code the encoder builds takes at
     * least as many. Each stream rounds up to whole bytes plus a sentinel:
     * the streams together take at least bits / 8 + 1 bytes. That is what
     * ptwm_huf_size returns for a plane that cannot beat 0 bytes. */
    uint8_t unused[256];
    return ptwm_huf_size(hist, n, 0, unused);
}

size_t ptwm_huf_size(const uint32_t hist[256], size_t n, size_t beat, uint8_t len[256]) {
    uint64_t freq[256], keys[256], bits = 0;
    uint8_t opt[256];
    size_t lo, hi, i, m, total;
    unsigned longest;
    if (n < 2 || n > UINT32_MAX) return n + 1;
    if (huf_counts(hist, freq, &lo, &hi) <= 1) return 2;
    m = huf_sorted_keys(freq, lo, hi, keys);
    longest = huf_optimal_lengths(keys, m, opt);
    for (i = lo; i <= hi; i++) bits += freq[i] * opt[i];
    /* The optimal code's floor (see ptwm_huf_size_floor) already loses. */
    total = HUF_HEAD(lo, hi) + (size_t)(bits / 8) + 1;
    if (total > beat) return total;
    huf_limit_choice(freq, keys, m, opt, longest, len);
    for (bits = 0, i = lo; i <= hi; i++) bits += freq[i] * len[i];
    /* The streams take bits / 8 + 1 to + 4 bytes together (see the floor). */
    total = HUF_HEAD(lo, hi) + (size_t)(bits / 8) + 2;
    return total >= n - n / 128 ? n + 1 : total;
}

ptwm_error ptwm_huf_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                           size_t *out_len) {
    return ptwm_huf_encode_lengths(src, n, NULL, dst, cap, out_len);
}

/* Bits of src[0..n) under the code lengths len: the size of one stream
 * when the lengths are known (no histograms needed). */
uint64_t ptwm_huf_bits_scalar(const uint8_t *src, size_t n, const uint8_t len[256]) {
    uint64_t b0 = 0, b1 = 0;
    size_t i;
    for (i = 0; i + 2 <= n; i += 2) {
        b0 += len[src[i]];
        b1 += len[src[i + 1]];
    }
    if (i < n) b0 += len[src[i]];
    return b0 + b1;
}

ptwm_error ptwm_huf_encode_lengths(const uint8_t *src, size_t n, const uint8_t *lengths,
                                   uint8_t *dst, size_t cap, size_t *out_len) {
    uint32_t hist[HUF_STREAMS][256], all[256];
    uint64_t freq[256];
    uint8_t len[256];
    uint16_t code[256];
    uint32_t ce[256];
    size_t begin[HUF_STREAMS + 1], ssize[HUF_STREAMS];
    size_t used = 0, lo = 256, hi = 0, nib, total, s, i;
    int big = 0;
    uint8_t *p;
    const ptwm_codec_kernels *k = ptwm_codec_kern();

    if ((!src && n) || !dst || !out_len || n == SIZE_MAX) return PTWM_ERR_INVALID_ARG;
    *out_len = 0;
    /* (histograms count in u32: planes past 4 GiB, far beyond any chunk, are
     * stored) */
    if (n < 2 || n > UINT32_MAX) return huf_store(src, n, dst, cap, out_len);

    if (huf_looks_incompressible(src, n)) return huf_store(src, n, dst, cap, out_len);
    huf_segments(n, begin);
    if (lengths) {
        /* Lengths from the plane's exact counts (ptwm_huf_size): every
         * symbol present has one, so the used range is where they are, and
         * each stream's bits are summed directly. */
        memcpy(len, lengths, sizeof(len));
        used = huf_used_range(len, &lo, &hi);
        if (used < 2) return ptwm_huf_encode_lengths(src, n, NULL, dst, cap, out_len);
    } else {
        huf_histograms(src, begin, hist);
        /* (the streams' counts sum to n, which fits in 32 bits) */
        for (i = 0; i < 256; i++) all[i] = hist[0][i] + hist[1][i] + hist[2][i] + hist[3][i];
        used = huf_counts(all, freq, &lo, &hi);
        if (used == 1) {
            if (cap < 2) return PTWM_ERR_DST_SIZE;
            dst[0] = HUF_MODE_RLE;
            dst[1] = (uint8_t)lo;
            *out_len = 2;
            return PTWM_OK;
        }
        huf_choose_lengths(freq, lo, hi, len);
    }
    nib = (hi - lo + 2) / 2;
    total = 3 + nib + HUF_JUMP_BYTES;
    for (s = 0; s < HUF_STREAMS; s++) {
        uint64_t bits = 0;
        if (lengths)
            bits = k->huf_bits(src + begin[s], begin[s + 1] - begin[s], len);
        else
            for (i = lo; i <= hi; i++) bits += (uint64_t)hist[s][i] * len[i];
        ssize[s] = (size_t)(bits / 8 + 1);
        total += ssize[s];
        big |= ssize[s] > UINT32_MAX;
    }
    /* Stream sizes must fit the u32 jump table. A gain under 1/128 is not
     * worth a Huffman decode (RAW decodes at copy speed); RAW then stays
     * within ~0.8% plus the code's own excess of the order-0 floor. */
    if (total >= n - n / 128 || big) return huf_store(src, n, dst, cap, out_len);
    if (cap < total) return PTWM_ERR_DST_SIZE;

    huf_canonical(len, lo, hi, code);
    /* (only present symbols, all within lo..hi, are looked up) */
    memset(ce, 0, sizeof(ce));
    for (i = lo; i <= hi; i++) ce[i] = len[i] ? (uint32_t)code[i] | ((uint32_t)len[i] << 16) : 0;
    dst[0] = HUF_MODE_HUFFMAN;
    dst[1] = (uint8_t)lo;
    dst[2] = (uint8_t)hi;
    p = dst + 3;
    memset(p, 0, nib);
    for (i = lo; i <= hi; i++) p[(i - lo) / 2] |= (uint8_t)(len[i] << (4 * ((i - lo) & 1)));
    p += nib;
    for (s = 0; s < HUF_STREAMS; s++) ptwm_store_le32(p + 4 * s, (uint32_t)ssize[s]);
    p += HUF_JUMP_BYTES;
    {
        uint8_t *out[HUF_STREAMS], *end[HUF_STREAMS];
        for (s = 0; s < HUF_STREAMS; s++) {
            out[s] = p;
            p += ssize[s];
            end[s] = p;
        }
        k->huf_encode(src, begin, ce, out, end);
    }
    *out_len = total;
    return PTWM_OK;
}

/* ------------------------------------------------------------------------ */
/* Decoder                                                                   */
/* ------------------------------------------------------------------------ */

/* Parse and check the length description and build the table of 2^*tlog
 * entries (*tlog = 11 or 13). *used = bytes consumed; *mean_len = the mean
 * code length the lengths imply (symbol i has probability 2^-len[i]), in
 * units of 2^-13 bits. */
static ptwm_error huf_read_table(const uint8_t *src, size_t size, huf_entry table[HUF_TABLE_SIZE],
                                 unsigned *tlog, size_t *used, uint32_t *mean_len) {
    uint8_t len[256];
    uint32_t kraft = 0, mean = 0, pos[HUF_MAX_LEN + 1] = {0};
    unsigned lo, hi, count, nib, i, l, maxlen = 0;
    PTWM_CHECK(size >= 2);
    lo = src[0];
    hi = src[1];
    PTWM_CHECK(lo < hi);
    count = hi - lo + 1;
    nib = (count + 1) / 2;
    PTWM_CHECK(size - 2 >= nib);
    memset(len, 0, sizeof(len));
    for (i = 0; i < count; i++) {
        unsigned v = (src[2 + i / 2] >> (4 * (i & 1))) & 15;
        PTWM_CHECK(v <= HUF_MAX_LEN);
        len[lo + i] = (uint8_t)v;
        if (v) kraft += 1u << (HUF_MAX_LEN - v);
        if (v) mean += v << (HUF_MAX_LEN - v);
        maxlen = PTWM_MAX(maxlen, v);
    }
    PTWM_CHECK(len[lo] && len[hi]);
    PTWM_CHECK((count & 1) == 0 || (src[2 + nib - 1] >> 4) == 0);
    /* Complete prefix code: the Kraft sum is exactly 1. */
    PTWM_CHECK(kraft == HUF_TABLE_SIZE);
    /* Two table sizes only, so the fast loops shift by constants. */
    *tlog = maxlen <= HUF_FAST_LEN ? HUF_FAST_LEN : HUF_MAX_LEN;
    /* Canonical order: by length, then by symbol. pos[l] starts the entries
     * of length l (the spans of the shorter codes before it), and one pass
     * over the symbols fills them, four entries a store where a span allows:
     * small planes are many (exponent planes of small tensors), and a
     * table of 2^11 or 2^13 entries filled one entry at a time, with a pass
     * over the symbols per length, cost more than decoding them. */
    for (i = lo; i <= hi; i++)
        if (len[i] && len[i] < HUF_MAX_LEN) pos[len[i] + 1] += 1u << (*tlog - len[i]);
    for (l = 2; l <= HUF_MAX_LEN; l++) pos[l] += pos[l - 1];
    for (i = lo; i <= hi; i++) {
        unsigned k, span;
        huf_entry e;
        if (!(l = len[i])) continue;
        span = 1u << (*tlog - l);
        e = (huf_entry)(l | (i << 8));
        if (span >= 4) {
            uint64_t four = e * 0x0001000100010001ull;
            for (k = 0; k < span; k += 4) memcpy(table + pos[l] + k, &four, sizeof(four));
        } else {
            for (k = 0; k < span; k++) table[pos[l] + k] = e;
        }
        pos[l] += span;
    }
    *used = 2 + nib;
    *mean_len = mean;
    return PTWM_OK;
}

/* Checked decoder for one stream from absolute bit position `bitpos` (bits
 * below bit 0 of the stream read as zero). Finishes the segment and requires
 * the stream to end exactly on its first bit. */
static ptwm_error huf_decode_tail(const uint8_t *start, uint64_t bitpos,
                                  const huf_entry *restrict table, unsigned tlog, uint8_t *op,
                                  const uint8_t *oend) {
    while (op < oend) {
        uint64_t byte_end = (bitpos + 7) >> 3, word;
        unsigned skip = (unsigned)(8 * byte_end - bitpos), used = 0;
        if (byte_end >= 8) {
            word = ptwm_load_le64(start + byte_end - 8);
        } else {
            unsigned k;
            word = 0;
            for (k = 0; k < byte_end; k++) word |= (uint64_t)start[k] << (8 * (k + 8 - byte_end));
        }
        word <<= skip;
        /* Every code whose lookup lies within the 64 - skip bits loaded: a
         * load per symbol was a third of decoding the small exponent
         * planes, whose streams are a few hundred bytes. */
        do {
            huf_entry e = table[word >> (64 - tlog)];
            unsigned len = e & 63;
            PTWM_CHECK(len <= bitpos);
            bitpos -= len;
            word <<= len;
            used += len;
            *op++ = (uint8_t)(e >> 8);
        } while (op < oend && used + tlog <= 64 - skip);
    }
    PTWM_CHECK(bitpos == 0);
    return PTWM_OK;
}

#define HUF_MULTI_MIN_SIZE 16384
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HUF_LITTLE_ENDIAN 1
#else
#define HUF_LITTLE_ENDIAN 0
#endif
#define HUF_MULTI_MAX_MEAN (11u << (HUF_MAX_LEN - 1)) /* 5.5 bits */

static void huf_build_multi(const huf_entry *table, unsigned tlog, huf_mentry *mt) {
    const unsigned up = tlog - HUF_FAST_LEN, mask = HUF_M_SIZE - 1;
    unsigned i;
    for (i = 0; i < HUF_M_SIZE; i++) {
        huf_entry e = table[i << up];
        unsigned used = 0, count = 0;
        uint64_t syms = 0;
        if ((e & 63) > HUF_FAST_LEN) {
            mt[i] = HUF_M_LONG;
            continue;
        }
        do {
            syms |= (uint64_t)(e >> 8) << (8 * count);
            count++;
            used += e & 63;
            if (count == 4 || used == HUF_FAST_LEN) break;
            /* the next code, if all of its bits are among the 11 */
            e = table[((i << used) & mask) << up];
        } while ((e & 63) <= HUF_FAST_LEN - used);
        mt[i] = used | (syms << 8) | ((uint64_t)count << 40);
    }
}

/* The plain forms of the loops (kernels/huffman_kernels.h). */
HUF_KERNELS(scalar, )

static ptwm_error huf_decode_streams(huf_state *st, const size_t ssize[HUF_STREAMS],
                                     const huf_entry *restrict table, unsigned tlog,
                                     int multi) {
    huf_mentry mtable[HUF_M_SIZE];
    uint64_t bitpos[HUF_STREAMS];
    int fast[HUF_STREAMS], nfast = 0;
    unsigned s;

    for (s = 0; s < HUF_STREAMS; s++) {
        uint8_t last = st->start[s][ssize[s] - 1];
        unsigned hibit = 0;
        PTWM_CHECK(last != 0); /* the sentinel lives in the last byte */
        while (last >> (hibit + 1)) hibit++;
        bitpos[s] = 8 * (uint64_t)(ssize[s] - 1) + hibit;
        /* every code has at least one bit */
        PTWM_CHECK((size_t)(st->oend[s] - st->op[s]) <= bitpos[s]);
        /* the first 8-byte load ends at the byte holding the last code bit,
         * ceil(bitpos / 8), and must start inside the stream */
        fast[s] = bitpos[s] >= 64;
        nfast += fast[s];
    }

    if (nfast) {
        const ptwm_huf_loops *lp = ptwm_codec_kern()->huf_loops;
        ptwm_huf_fast_fn fn = lp->fast[multi != 0][tlog == HUF_FAST_LEN];
        ptwm_huf_one_fn one = lp->one[multi != 0][tlog == HUF_FAST_LEN];
        for (s = 0; s < HUF_STREAMS; s++) {
            uint64_t byte_end = (bitpos[s] + 7) >> 3;
            if (!fast[s]) continue;
            st->ip[s] = st->start[s] + byte_end - 8;
            st->bits[s] = (ptwm_load_le64(st->ip[s]) | 1) << (8 * byte_end - bitpos[s]);
        }
        if (multi) huf_build_multi(table, tlog, mtable);
        if (nfast == HUF_STREAMS) fn(st, table, mtable);
        for (s = 0; s < HUF_STREAMS; s++) {
            if (!fast[s]) continue;
            one(st, s, table, mtable);
            bitpos[s] = 8 * (uint64_t)(st->ip[s] - st->start[s]) + 64 -
                        (unsigned)__builtin_ctzll(st->bits[s]);
        }
    }
    for (s = 0; s < HUF_STREAMS; s++) {
        ptwm_error rc = huf_decode_tail(st->start[s], bitpos[s], table, tlog, st->op[s], st->oend[s]);
        if (rc) return rc;
    }
    return PTWM_OK;
}

ptwm_error ptwm_huf_decode(const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size) {
    huf_entry table[HUF_TABLE_SIZE];
    huf_state st;
    size_t begin[HUF_STREAMS + 1], ssize[HUF_STREAMS];
    size_t used, left;
    uint64_t sum;
    unsigned s, tlog;
    uint32_t mean_len;
    ptwm_error rc;

    if ((!src && src_size) || (!dst && dst_size)) return PTWM_ERR_INVALID_ARG;
    PTWM_CHECK(src_size >= 1);
    switch (src[0]) {
    case HUF_MODE_RAW:
        PTWM_CHECK(src_size - 1 == dst_size);
        if (dst_size) memcpy(dst, src + 1, dst_size);
        return PTWM_OK;
    case HUF_MODE_RLE:
        PTWM_CHECK(src_size == 2 && dst_size >= 1);
        memset(dst, src[1], dst_size);
        return PTWM_OK;
    case HUF_MODE_HUFFMAN:
        break;
    default:
        return PTWM_ERR_CORRUPT;
    }
    rc = huf_read_table(src + 1, src_size - 1, table, &tlog, &used, &mean_len);
    if (rc) return rc;
    left = src_size - 1 - used;
    PTWM_CHECK(left >= HUF_JUMP_BYTES);
    src += 1 + used + HUF_JUMP_BYTES;
    left -= HUF_JUMP_BYTES;
    sum = 0;
    for (s = 0; s < HUF_STREAMS; s++) {
        ssize[s] = ptwm_load_le32(src - HUF_JUMP_BYTES + 4 * s);
        PTWM_CHECK(ssize[s] >= 1);
        sum += ssize[s];
    }
    PTWM_CHECK(sum == left);
    huf_segments(dst_size, begin);
    for (s = 0; s < HUF_STREAMS; s++) {
        st.start[s] = s ? st.start[s - 1] + ssize[s - 1] : src;
        st.op[s] = dst + begin[s];
        st.oend[s] = dst + begin[s + 1];
    }
    /* The multi-symbol table pays where several codes fit in 11 bits and the
     * plane is long enough to repay building it (2048 entries). */
    return huf_decode_streams(&st, ssize, table, tlog,
                              HUF_LITTLE_ENDIAN && dst_size >= HUF_MULTI_MIN_SIZE &&
                                  mean_len <= HUF_MULTI_MAX_MEAN);
}
