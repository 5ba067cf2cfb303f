/* Float field splits and byte planes (see planes.h). */
#include "cpu.h"
#include "entropy.h"
#include "planes.h"
#include "kernels/planes_kernels.h"
#include "kernels/planes_loops.h"

/* The split and merge loops vectorise, and are compiled once per level
 * (kernels/planes_loops.h); the hand-written vector kernels are in
 * kernels/planes_*.c. Both are called through the kernel table. */

#ifdef PTWM_CPU_X86
#include <emmintrin.h> /* SSE2: baseline x86-64 */
#endif

/* Elements of any geometry (ptwm_load_elem, planes.h) take the generic
 * path (F64, FP8 splits, custom chains); the hot geometries have their own
 * loops below. */

static uint64_t low_mask(unsigned bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

static void split_generic(const uint8_t *src, size_t n, unsigned width, unsigned e, unsigned m,
                          uint8_t *const *planes) {
    unsigned ep = (e + 7) / 8, sp = (m + 8) / 8, j;
    uint64_t emask = low_mask(e), mmask = low_mask(m);
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t v = ptwm_load_elem(src + i * width, width);
        uint64_t ex = (v >> m) & emask;
        uint64_t sm = ((v >> (e + m)) << m) | (v & mmask);
        for (j = 0; j < ep; j++) planes[j][i] = (uint8_t)(ex >> (8 * (ep - 1 - j)));
        for (j = 0; j < sp; j++) planes[ep + j][i] = (uint8_t)(sm >> (8 * (sp - 1 - j)));
    }
}

static void merge_generic(const uint8_t *const *planes, size_t n, unsigned width, unsigned e,
                          unsigned m, uint8_t *dst) {
    unsigned ep = (e + 7) / 8, sp = (m + 8) / 8, j;
    uint64_t emask = low_mask(e), mmask = low_mask(m);
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t ex = 0, sm = 0, v;
        for (j = 0; j < ep; j++) ex = (ex << 8) | planes[j][i];
        for (j = 0; j < sp; j++) sm = (sm << 8) | planes[ep + j][i];
        v = ((sm >> m) & 1) << (e + m);
        v |= (ex & emask) << m;
        v |= sm & mmask;
        ptwm_store_elem(dst + i * width, width, v);
    }
}

/* The plain forms of the loops of kernels/planes_loops.h. */
PLANES_LOOPS(scalar, )

void ptwm_split_float(const uint8_t *src, size_t n, unsigned width, unsigned e, unsigned m,
                      uint8_t *const *planes) {
    const ptwm_plane_loops *pl = ptwm_codec_kern()->plane_loops;
    if (width == 2 && e == 8 && m == 7)
        pl->split_bf16(src, n, planes[0], planes[1]);
    else if (width == 2 && e == 5 && m == 10)
        pl->split_f16(src, n, planes[0], planes[1], planes[2]);
    else if (width == 4 && e == 8 && m == 23)
        pl->split_f32(src, n, planes[0], planes[1], planes[2], planes[3]);
    else
        split_generic(src, n, width, e, m, planes);
}

void ptwm_merge_float(const uint8_t *const *planes, size_t n, unsigned width, unsigned e,
                      unsigned m, uint8_t *dst) {
    const ptwm_plane_loops *pl = ptwm_codec_kern()->plane_loops;
    if (width == 2 && e == 8 && m == 7)
        pl->merge_bf16(planes[0], planes[1], n, dst);
    else if (width == 2 && e == 5 && m == 10)
        pl->merge_f16(planes[0], planes[1], planes[2], n, dst);
    else if (width == 4 && e == 8 && m == 23)
        pl->merge_f32(planes[0], planes[1], planes[2], planes[3], n, dst);
    else
        merge_generic(planes, n, width, e, m, dst);
}

void ptwm_split_bytes(const uint8_t *src, size_t n, unsigned width, uint8_t *const *planes) {
    ptwm_codec_kern()->plane_loops->split_bytes(src, n, width, planes);
}

void ptwm_merge_bytes(const uint8_t *const *planes, size_t n, unsigned width, uint8_t *dst) {
    ptwm_codec_kern()->plane_loops->merge_bytes(planes, n, width, dst);
}

/* Every bit of the element but its top (sign) bit is 0. */
static int elem_is_zero(const uint8_t *p, unsigned width) {
    unsigned k;
    uint8_t acc = (uint8_t)(p[width - 1] & 0x7f);
    for (k = 0; k + 1 < width; k++) acc |= p[k];
    return acc == 0;
}

size_t ptwm_count_zero_elems(const uint8_t *src, size_t n, unsigned width, size_t step) {
    size_t i = 0, z = 0;
    if (step == 8) i = ptwm_codec_kern()->zero_sample(src, n, width, &z);
    switch (width) {
    case 2:
        for (; i < n; i += step) z += (ptwm_load_le16(src + 2 * i) & 0x7fffu) == 0;
        break;
    case 4:
        for (; i < n; i += step) z += (ptwm_load_le32(src + 4 * i) & 0x7fffffffu) == 0;
        break;
    case 8:
        for (i = 0; i < n; i += step) z += (ptwm_load_le64(src + 8 * i) << 1) == 0;
        break;
    default:
        for (i = 0; i < n; i += step) z += elem_is_zero(src + i * width, width);
        break;
    }
    return z;
}

static void signs_end(sign_writer *w) {
    for (; w->n; w->n = w->n > 8 ? w->n - 8 : 0, w->acc >>= 8) *w->p++ = (uint8_t)w->acc;
}

/* Branchless compaction of elements of W bytes (loaded as one integer by
 * LOAD): every element is stored at dst + j * W and j advances only past
 * nonzero ones; bitmap bytes are built in a register, and a zero's top bit
 * goes to the signs. Zeros are scattered, so a branch would mispredict. */
#define SPARSE_COMPACT(W, LOAD, STORE)                                                          \
    do {                                                                                        \
        const uint64_t top_ = 8 * (W) - 1, mag_ = ~0ull >> (64 - top_);                        \
        for (i = 0; i < n; i += 8) {                                                            \
            size_t k, stop = n - i < 8 ? n - i : 8;                                              \
            unsigned acc = 0;                                                                   \
            for (k = 0; k < stop; k++) {                                                        \
                uint64_t v_ = LOAD(src + (i + k) * (W));                                        \
                unsigned nz_ = (v_ & mag_) != 0;                                                \
                STORE(dst + j * (W), v_);                                                       \
                acc |= nz_ << k;                                                                \
                j += nz_;                                                                       \
                signs_put(sw, (v_ >> top_) & (nz_ ^ 1u), nz_ ^ 1u);                              \
            }                                                                                   \
            bitmap[i >> 3] = (uint8_t)acc;                                                      \
        }                                                                                       \
    } while (0)

#define ST16(p, v) ptwm_store_le16(p, (uint16_t)(v))
#define ST32(p, v) ptwm_store_le32(p, (uint32_t)(v))

static size_t sparse_compact_plain(const uint8_t *src, size_t n, unsigned width,
                                   uint8_t *bitmap, uint8_t *dst, sign_writer *sw) {
    size_t i, j = 0;
    if (width == 2) {
        SPARSE_COMPACT(2, ptwm_load_le16, ST16);
        return j;
    }
    if (width == 4) {
        SPARSE_COMPACT(4, ptwm_load_le32, ST32);
        return j;
    }
    if (width == 8) {
        SPARSE_COMPACT(8, ptwm_load_le64, ptwm_store_le64);
        return j;
    }
    memset(bitmap, 0, n / 8 + (n % 8 != 0));
    for (i = 0; i < n; i++) {
        const uint8_t *p = src + i * width;
        if (!elem_is_zero(p, width)) {
            bitmap[i >> 3] |= (uint8_t)(1u << (i & 7));
            memcpy(dst + j * width, p, width);
            j++;
        } else {
            signs_put(sw, (uint64_t)(p[width - 1] >> 7), 1);
        }
    }
    return j;
}

size_t ptwm_sparse_compact(const uint8_t *src, size_t n, unsigned width, uint8_t *bitmap,
                           uint8_t *dst, uint8_t *signs) {
    sign_writer sw;
    size_t j;
    sw.p = signs;
    sw.acc = 0;
    sw.n = 0;
    if (width == 2 || width == 4) {
        /* The vector loop covers whole bitmap bytes; the plain one ends. */
        size_t done = ptwm_codec_kern()->sparse_compact(src, n, width, bitmap, dst, &j, &sw);
        j += sparse_compact_plain(src + done * width, n - done, width, bitmap + done / 8,
                                  dst + j * width, &sw);
        signs_end(&sw);
        return j;
    }
    j = sparse_compact_plain(src, n, width, bitmap, dst, &sw);
    signs_end(&sw);
    return j;
}

/* Set bits of a 64-bit word, without a popcount instruction (the baseline
 * build has none, and a library call per byte slowed F16 decoding). */
static unsigned popcount64(uint64_t v) {
    v -= (v >> 1) & 0x5555555555555555ull;
    v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
    v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((v * 0x0101010101010101ull) >> 56);
}

size_t ptwm_bitmap_count(const uint8_t *bitmap, size_t n) {
    size_t i = 0, full = n / 8, c = 0;
    for (; i + 8 <= full; i += 8) c += popcount64(ptwm_load_le64(bitmap + i));
    for (; i < full; i++) c += popcount64(bitmap[i]);
    if (n % 8) {
        unsigned last = bitmap[full];
        if (last >> (n % 8)) return SIZE_MAX;
        c += popcount64(last);
    }
    return c;
}

void ptwm_sparse_expand(const uint8_t *src, const uint8_t *bitmap, size_t n, unsigned width,
                        const uint8_t *signs, size_t signs_len, uint8_t *dst) {
    size_t i, j = 0;
    sign_reader sr;
    sr.p = signs;
    sr.end = signs ? signs + signs_len : NULL;
    sr.acc = 0;
    sr.n = 0;
    if (width == 2 || width == 4) {
        size_t done = ptwm_codec_kern()->sparse_expand(src, bitmap, n, width, dst, &j, &sr);
        src += j * width;
        bitmap += done / 8;
        dst += done * width;
        n -= done;
        j = 0;
    }
    /* Branchless for the common widths: load the next nonzero element
     * whatever the bit says (src has `width` bytes of slack), mask it, and
     * advance by the bit; a zero takes the next sign. Zeros are scattered,
     * so branches would mispredict. */
#define SPARSE_EXPAND(W, LOAD, STORE)                                                           \
    do {                                                                                        \
        for (i = 0; i < n; i++) {                                                               \
            uint64_t b_ = (bitmap[i >> 3] >> (i & 7)) & 1u;                                     \
            uint64_t s_ = signs_get(&sr, (unsigned)(b_ ^ 1u));                                  \
            STORE(dst + i * (W),                                                                \
                  ((uint64_t)LOAD(src + j * (W)) & (0ull - b_)) | s_ << (8 * (W) - 1));         \
            j += (size_t)b_;                                                                    \
        }                                                                                       \
    } while (0)
    switch (width) {
    case 2: SPARSE_EXPAND(2, ptwm_load_le16, ST16); return;
    case 4: SPARSE_EXPAND(4, ptwm_load_le32, ST32); return;
    case 8: SPARSE_EXPAND(8, ptwm_load_le64, ptwm_store_le64); return;
    default:
        for (i = 0; i < n; i++) {
            uint8_t *p = dst + i * width;
            if (bitmap[i >> 3] >> (i & 7) & 1) {
                memcpy(p, src + j * width, width);
                j++;
            } else {
                memset(p, 0, width);
                p[width - 1] = (uint8_t)(signs_get(&sr, 1) << 7);
            }
        }
    }
}

/* ---- joint exponent + top sign:mantissa bits ------------------------------ */

/* Index of the first escape symbol in j[i..n), or n; `scan` is the kernel
 * table's vector prefix of this search. */
static size_t next_escape(ptwm_joint_scan_fn scan, const uint8_t *j, size_t i, size_t n) {
    i = scan(j, i, n);
#ifdef PTWM_CPU_X86
    {
        const __m128i top = _mm_set1_epi8((char)(PTWM_JOINT_MAP << 4));
        for (; i + 16 <= n; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(j + i));
            unsigned mk = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, top), v));
            if (mk) return i + (size_t)__builtin_ctz(mk);
        }
    }
#endif
    for (; i < n; i++)
        if (j[i] >= PTWM_JOINT_MAP << 4) return i;
    return n;
}

size_t ptwm_joint_split(const uint8_t *restrict ex, const uint8_t *restrict sm, size_t n,
                        const uint32_t *ex_hist, uint8_t *restrict j, uint8_t *restrict nib,
                        uint8_t *restrict side) {
    uint64_t cnt[256];
    size_t i, i0 = 0, ne = PTWM_JOINT_MAP, kesc;
    uint8_t rank[256], present[256];
    unsigned r, s, k, npresent = 0;
    ptwm_joint_scan_fn scan = ptwm_codec_kern()->joint_scan;
    if (ex_hist) {
        for (s = 0; s < 256; s++) cnt[s] = ex_hist[s];
    } else {
        ptwm_histogram(ex, n, cnt);
    }
    memset(rank, PTWM_JOINT_MAP, sizeof(rank));
    for (s = 0; s < 256; s++)
        if (cnt[s]) present[npresent++] = (uint8_t)s;
    /* The most frequent exponents, ties to the smaller value; unused map
     * entries repeat the last pick (never produced: decoders accept them).
     * Only present values are scanned (a few dozen exponents). */
    for (r = 0; r < PTWM_JOINT_MAP; r++) {
        unsigned best = 256;
        for (k = 0; k < npresent; k++) {
            s = present[k];
            if (rank[s] == PTWM_JOINT_MAP && (best == 256 || cnt[s] > cnt[best])) best = s;
        }
        if (best == 256) {
            side[r] = r ? side[r - 1] : 0;
            continue;
        }
        rank[best] = (uint8_t)r;
        side[r] = (uint8_t)best;
    }
    /* The kernel writes the escapes of the elements it does (a multiple of
     * 32: even), the rest are found here. */
    i0 = ptwm_codec_kern()->joint_split(ex, sm, n, rank, j, nib, side + ne, &kesc);
    ne += kesc;
    for (i = i0; i < n; i++) j[i] = (uint8_t)(rank[ex[i]] << 4 | sm[i] >> 4);
    for (i = next_escape(scan, j, i0, n); i < n; i = next_escape(scan, j, i + 1, n))
        side[ne++] = ex[i];
    for (i = i0 / 2; i < n / 2; i++) nib[i] = (uint8_t)((sm[2 * i] & 15) | (sm[2 * i + 1] & 15) << 4);
    if (n & 1) nib[n / 2] = (uint8_t)(sm[n - 1] & 15);
    return ne;
}

/* Exponent e into BF16 element i of dst (its sign and mantissa kept). */
PTWM_INLINE void put_bf16_exponent(uint8_t *dst, size_t i, unsigned e) {
    dst[2 * i] = (uint8_t)((dst[2 * i] & 0x7f) | (e & 1) << 7);
    dst[2 * i + 1] = (uint8_t)((dst[2 * i + 1] & 0x80) | e >> 1);
}

/* Writes the escaped exponents of j[0..n) through put (at most `avail`), and
 * returns how many escapes there are. */
static size_t joint_escapes(const uint8_t *j, size_t n, const uint8_t *esc, size_t avail,
                            uint8_t *dst, unsigned stride, int bf16) {
    size_t i, c = 0;
    ptwm_joint_scan_fn scan = ptwm_codec_kern()->joint_scan;
    for (i = next_escape(scan, j, 0, n); i < n; i = next_escape(scan, j, i + 1, n), c++) {
        if (c >= avail) continue;
        if (bf16) put_bf16_exponent(dst, i, esc[c]);
        else dst[i * stride] = esc[c];
    }
    return c;
}

/* Elements of a strip: after a whole chunk was merged, its escapes and
 * column scales (a stage's strip inverse, through fn) were each a pass over
 * elements no longer in cache. Even, so that strips start on a whole nibble
 * byte. */
#define JOINT_STRIP 8192

/* joint_escapes for BF16 elements of a strip whose first `done` have their
 * escapes in masks (the merge kernel's, codec_kernels.h), the rest found
 * by a scan: a second pass over the symbols, a scan from each escape to
 * the next, was 2-4% of a BF16 decode. */
static size_t joint_escapes_bf16(const uint8_t *j, size_t n, const uint64_t *masks, size_t done,
                                 const uint8_t *esc, size_t avail, uint8_t *dst) {
    size_t c = 0, w;
    for (w = 0; 64 * w < done; w++) {
        uint64_t m;
        for (m = masks[w]; m; m &= m - 1, c++)
            if (c < avail) put_bf16_exponent(dst, 64 * w + (size_t)__builtin_ctzll(m), esc[c]);
    }
    return c + joint_escapes(j + done, n - done, esc + PTWM_MIN(c, avail), avail > c ? avail - c : 0,
                             dst + 2 * done, 2, 1);
}

size_t ptwm_joint_merge_bf16_strips(const uint8_t *restrict j, const uint8_t *restrict nib,
                                    const uint8_t *restrict side, size_t side_len, size_t n,
                                    uint8_t *restrict dst,
                                    void (*fn)(void *ctx, uint8_t *el, size_t len, size_t at),
                                    void *ctx) {
    uint8_t mlo[16], mhi[16];
    uint64_t masks[JOINT_STRIP / 64];
    size_t a, c = 0, avail = side_len - PTWM_JOINT_MAP;
    unsigned r;
    ptwm_joint_bf16_fn kernel = ptwm_codec_kern()->joint_bf16;
    for (r = 0; r < 16; r++) {
        unsigned e = r < PTWM_JOINT_MAP ? side[r] : 0;
        mlo[r] = (uint8_t)((e & 1) << 7);
        mhi[r] = (uint8_t)(e >> 1);
    }
    for (a = 0; a < n; a += JOINT_STRIP) {
        size_t len = PTWM_MIN((size_t)JOINT_STRIP, n - a), done, i;
        const uint8_t *js = j + a, *ns = nib + a / 2;
        uint8_t *d = dst + 2 * a;
        done = kernel(js, ns, mlo, mhi, len, d, masks);
        for (i = done; i < len; i++) {
            unsigned sm = (unsigned)(js[i] << 4 & 0xf0) | ((ns[i / 2] >> (4 * (i & 1))) & 15);
            d[2 * i] = (uint8_t)(mlo[js[i] >> 4] | (sm & 0x7f));
            d[2 * i + 1] = (uint8_t)(mhi[js[i] >> 4] | (sm & 0x80));
        }
        c += joint_escapes_bf16(js, len, masks, done, side + PTWM_JOINT_MAP + PTWM_MIN(c, avail),
                                avail > c ? avail - c : 0, d);
        if (fn) fn(ctx, d, len, a);
    }
    return c;
}

size_t ptwm_joint_merge_bf16(const uint8_t *restrict j, const uint8_t *restrict nib,
                             const uint8_t *restrict side, size_t side_len, size_t n,
                             uint8_t *restrict dst) {
    return ptwm_joint_merge_bf16_strips(j, nib, side, side_len, n, dst, NULL, NULL);
}

size_t ptwm_joint_merge(const uint8_t *restrict j, const uint8_t *restrict nib,
                      const uint8_t *restrict side, size_t side_len, size_t n,
                      uint8_t *restrict ex, uint8_t *restrict sm) {
    uint8_t map[16];
    size_t i, i0 = 0; /* even: the vector loop stops at a multiple of 16 */
    memcpy(map, side, PTWM_JOINT_MAP);
    map[PTWM_JOINT_MAP] = 0;
    i0 = ptwm_codec_kern()->joint_merge(j, nib, map, n, ex, sm);
    for (i = i0; i + 1 < n; i += 2) {
        sm[i] = (uint8_t)(j[i] << 4 | (nib[i / 2] & 15));
        sm[i + 1] = (uint8_t)(j[i + 1] << 4 | nib[i / 2] >> 4);
    }
    if (n & 1) sm[n - 1] = (uint8_t)(j[n - 1] << 4 | (nib[n / 2] & 15));
    for (i = i0; i < n; i++) ex[i] = map[j[i] >> 4];
    return joint_escapes(j, n, side + PTWM_JOINT_MAP, side_len - PTWM_JOINT_MAP, ex, 1, 0);
}
