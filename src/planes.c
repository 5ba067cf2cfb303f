/* Float field splits and byte planes (see planes.h). */
#include "planes.h"

/* One element of any geometry: the generic path (F64, FP8 splits, custom
 * chains). The hot geometries have their own loops below. */
PTWM_INLINE uint64_t load_elem(const uint8_t *p, unsigned width) {
    uint64_t v = 0;
    unsigned k;
    for (k = 0; k < width; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

PTWM_INLINE void store_elem(uint8_t *p, unsigned width, uint64_t v) {
    unsigned k;
    for (k = 0; k < width; k++) p[k] = (uint8_t)(v >> (8 * k));
}

static uint64_t low_mask(unsigned bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

static void split_generic(const uint8_t *src, size_t n, unsigned width, unsigned e, unsigned m,
                          uint8_t *const *planes) {
    unsigned ep = (e + 7) / 8, sp = (m + 8) / 8, j;
    uint64_t emask = low_mask(e), mmask = low_mask(m);
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t v = load_elem(src + i * width, width);
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
        store_elem(dst + i * width, width, v);
    }
}

static void split_bf16(const uint8_t *restrict src, size_t n, uint8_t *restrict ex,
                       uint8_t *restrict sm) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint16_t v = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
        ex[i] = (uint8_t)(v >> 7);
        sm[i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
    }
}

static void merge_bf16(const uint8_t *restrict ex, const uint8_t *restrict sm, size_t n,
                       uint8_t *restrict dst) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned v = ((unsigned)(sm[i] & 0x80) << 8) | ((unsigned)ex[i] << 7) | (sm[i] & 0x7fu);
        dst[2 * i] = (uint8_t)v;
        dst[2 * i + 1] = (uint8_t)(v >> 8);
    }
}

static void split_f16(const uint8_t *restrict src, size_t n, uint8_t *restrict ex,
                      uint8_t *restrict hi, uint8_t *restrict lo) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned v = (unsigned)(src[2 * i] | (src[2 * i + 1] << 8));
        ex[i] = (uint8_t)((v >> 10) & 31);
        hi[i] = (uint8_t)(((v >> 13) & 4) | ((v >> 8) & 3));
        lo[i] = (uint8_t)v;
    }
}

static void merge_f16(const uint8_t *restrict ex, const uint8_t *restrict hi,
                      const uint8_t *restrict lo, size_t n, uint8_t *restrict dst) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned v = ((unsigned)(hi[i] & 4) << 13) | ((unsigned)(ex[i] & 31) << 10) |
                     ((unsigned)(hi[i] & 3) << 8) | lo[i];
        dst[2 * i] = (uint8_t)v;
        dst[2 * i + 1] = (uint8_t)(v >> 8);
    }
}

static void split_f32(const uint8_t *restrict src, size_t n, uint8_t *restrict ex,
                      uint8_t *restrict p1, uint8_t *restrict p2, uint8_t *restrict p3) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t v = ptwm_load_le32(src + 4 * i);
        ex[i] = (uint8_t)(v >> 23);
        p1[i] = (uint8_t)(((v >> 24) & 0x80) | ((v >> 16) & 0x7f));
        p2[i] = (uint8_t)(v >> 8);
        p3[i] = (uint8_t)v;
    }
}

static void merge_f32(const uint8_t *restrict ex, const uint8_t *restrict p1,
                      const uint8_t *restrict p2, const uint8_t *restrict p3, size_t n,
                      uint8_t *restrict dst) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t v = ((uint32_t)(p1[i] & 0x80) << 24) | ((uint32_t)ex[i] << 23) |
                     ((uint32_t)(p1[i] & 0x7f) << 16) | ((uint32_t)p2[i] << 8) | p3[i];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* one 32-bit store: the loop then vectorises (bytewise stores did not) */
        memcpy(dst + 4 * i, &v, 4);
#else
        ptwm_store_le32(dst + 4 * i, v);
#endif
    }
}

void ptwm_split_float(const uint8_t *src, size_t n, unsigned width, unsigned e, unsigned m,
                      uint8_t *const *planes) {
    if (width == 2 && e == 8 && m == 7)
        split_bf16(src, n, planes[0], planes[1]);
    else if (width == 2 && e == 5 && m == 10)
        split_f16(src, n, planes[0], planes[1], planes[2]);
    else if (width == 4 && e == 8 && m == 23)
        split_f32(src, n, planes[0], planes[1], planes[2], planes[3]);
    else
        split_generic(src, n, width, e, m, planes);
}

void ptwm_merge_float(const uint8_t *const *planes, size_t n, unsigned width, unsigned e,
                      unsigned m, uint8_t *dst) {
    if (width == 2 && e == 8 && m == 7)
        merge_bf16(planes[0], planes[1], n, dst);
    else if (width == 2 && e == 5 && m == 10)
        merge_f16(planes[0], planes[1], planes[2], n, dst);
    else if (width == 4 && e == 8 && m == 23)
        merge_f32(planes[0], planes[1], planes[2], planes[3], n, dst);
    else
        merge_generic(planes, n, width, e, m, dst);
}

void ptwm_split_bytes(const uint8_t *src, size_t n, unsigned width, uint8_t *const *planes) {
    unsigned k;
    size_t i;
    if (width == 2) {
        uint8_t *restrict p0 = planes[0], *restrict p1 = planes[1];
        for (i = 0; i < n; i++) {
            p0[i] = src[2 * i];
            p1[i] = src[2 * i + 1];
        }
        return;
    }
    /* One plane per pass: each pass is a strided gather the compiler handles. */
    for (k = 0; k < width; k++) {
        uint8_t *restrict p = planes[k];
        const uint8_t *restrict s = src + k;
        for (i = 0; i < n; i++) p[i] = s[i * width];
    }
}

void ptwm_merge_bytes(const uint8_t *const *planes, size_t n, unsigned width, uint8_t *dst) {
    unsigned k;
    size_t i;
    if (width == 2) {
        const uint8_t *restrict p0 = planes[0], *restrict p1 = planes[1];
        uint8_t *restrict d = dst;
        for (i = 0; i < n; i++) {
            d[2 * i] = p0[i];
            d[2 * i + 1] = p1[i];
        }
        return;
    }
    for (k = 0; k < width; k++) {
        const uint8_t *restrict p = planes[k];
        uint8_t *restrict d = dst + k;
        for (i = 0; i < n; i++) d[i * width] = p[i];
    }
}

static int elem_is_zero(const uint8_t *p, unsigned width) {
    unsigned k;
    uint8_t acc = 0;
    for (k = 0; k < width; k++) acc |= p[k];
    return acc == 0;
}

size_t ptwm_count_zero_elems(const uint8_t *src, size_t n, unsigned width, size_t step) {
    size_t i, z = 0;
    switch (width) {
    case 2:
        for (i = 0; i < n; i += step) z += ptwm_load_le16(src + 2 * i) == 0;
        break;
    case 4:
        for (i = 0; i < n; i += step) z += ptwm_load_le32(src + 4 * i) == 0;
        break;
    case 8:
        for (i = 0; i < n; i += step) z += ptwm_load_le64(src + 8 * i) == 0;
        break;
    default:
        for (i = 0; i < n; i += step) z += elem_is_zero(src + i * width, width);
        break;
    }
    return z;
}

/* Branchless compaction of elements of W bytes (loaded as one integer by
 * LOAD): every element is stored at dst + j * W and j advances only past
 * nonzero ones; bitmap bytes are built in a register. Zeros are scattered,
 * so a branch would mispredict. */
#define SPARSE_COMPACT(W, LOAD, STORE)                                                          \
    do {                                                                                        \
        for (i = 0; i < n; i += 8) {                                                            \
            size_t k, stop = n - i < 8 ? n - i : 8;                                              \
            unsigned acc = 0;                                                                   \
            for (k = 0; k < stop; k++) {                                                        \
                uint64_t v_ = LOAD(src + (i + k) * (W));                                        \
                unsigned nz_ = v_ != 0;                                                         \
                STORE(dst + j * (W), v_);                                                       \
                acc |= nz_ << k;                                                                \
                j += nz_;                                                                       \
            }                                                                                   \
            bitmap[i >> 3] = (uint8_t)acc;                                                      \
        }                                                                                       \
    } while (0)

#define ST16(p, v) ptwm_store_le16(p, (uint16_t)(v))
#define ST32(p, v) ptwm_store_le32(p, (uint32_t)(v))

size_t ptwm_sparse_compact(const uint8_t *src, size_t n, unsigned width, uint8_t *bitmap,
                           uint8_t *dst) {
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
        }
    }
    return j;
}

size_t ptwm_bitmap_count(const uint8_t *bitmap, size_t n) {
    size_t i, full = n / 8, c = 0;
    for (i = 0; i < full; i++) c += (size_t)__builtin_popcount(bitmap[i]);
    if (n % 8) {
        unsigned last = bitmap[full];
        if (last >> (n % 8)) return SIZE_MAX;
        c += (size_t)__builtin_popcount(last);
    }
    return c;
}

void ptwm_sparse_expand(const uint8_t *src, const uint8_t *bitmap, size_t n, unsigned width,
                        uint8_t *dst) {
    size_t i, j = 0;
    /* Branchless for the common widths: load the next nonzero element
     * whatever the bit says (src has `width` bytes of slack), mask it, and
     * advance by the bit. Zeros are scattered, so branches would mispredict. */
    switch (width) {
    case 2:
        for (i = 0; i < n; i++) {
            unsigned b = (bitmap[i >> 3] >> (i & 7)) & 1u;
            ptwm_store_le16(dst + 2 * i, (uint16_t)(ptwm_load_le16(src + 2 * j) & (0u - b)));
            j += b;
        }
        return;
    case 4:
        for (i = 0; i < n; i++) {
            uint32_t b = (bitmap[i >> 3] >> (i & 7)) & 1u;
            ptwm_store_le32(dst + 4 * i, ptwm_load_le32(src + 4 * j) & (0u - b));
            j += b;
        }
        return;
    case 8:
        for (i = 0; i < n; i++) {
            uint64_t b = (bitmap[i >> 3] >> (i & 7)) & 1u;
            ptwm_store_le64(dst + 8 * i, ptwm_load_le64(src + 8 * j) & (0ull - b));
            j += (size_t)b;
        }
        return;
    default:
        for (i = 0; i < n; i++) {
            uint8_t *p = dst + i * width;
            if (bitmap[i >> 3] >> (i & 7) & 1) {
                memcpy(p, src + j * width, width);
                j++;
            } else {
                memset(p, 0, width);
            }
        }
    }
}
