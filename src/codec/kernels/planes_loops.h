/* The float-split and byte-plane loops of planes.c: plain C written once
 * and compiled for each level (planes.c, kernels/planes_avx2.c,
 * kernels/planes_avx512.c) by PLANES_LOOPS, each copy vectorising as wide
 * as its target allows (zstd's HUF_DGEN idea); the codec's kernel table
 * picks the copy. */
#ifndef PTWM_PLANES_LOOPS_H
#define PTWM_PLANES_LOOPS_H

#include "codec_kernels.h"
#include "common.h"
#include "cpu.h"

/* 16-bit elements read and written whole on little-endian hosts: composed
 * from byte loads, or split into byte stores, the compiler moved the bytes
 * into planes and zipped them back (three times the byte moves of the
 * loop). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PLANES_LD16(p, v) memcpy(&(v), (p), 2)
#define PLANES_ST16(p, v) memcpy((p), &(v), 2)
#else
#define PLANES_LD16(p, v) ((v) = (uint16_t)((p)[0] | ((p)[1] << 8)))
#define PLANES_ST16(p, v) ((p)[0] = (uint8_t)(v), (p)[1] = (uint8_t)((v) >> 8))
#endif

PTWM_INLINE void split_bf16_body(const uint8_t *restrict src, size_t n, uint8_t *restrict ex,
                                 uint8_t *restrict sm) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint16_t v;
        PLANES_LD16(src + 2 * i, v);
        ex[i] = (uint8_t)(v >> 7);
        sm[i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
    }
}

PTWM_INLINE void merge_bf16_body(const uint8_t *restrict ex, const uint8_t *restrict sm, size_t n,
                                 uint8_t *restrict dst) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint16_t v = (uint16_t)(((unsigned)(sm[i] & 0x80) << 8) | ((unsigned)ex[i] << 7) |
                                (sm[i] & 0x7fu));
        PLANES_ST16(dst + 2 * i, v);
    }
}

PTWM_INLINE void split_f16_body(const uint8_t *restrict src, size_t n, uint8_t *restrict ex,
                                uint8_t *restrict hi, uint8_t *restrict lo) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint16_t v;
        PLANES_LD16(src + 2 * i, v);
        ex[i] = (uint8_t)((v >> 10) & 31);
        hi[i] = (uint8_t)(((v >> 13) & 4) | ((v >> 8) & 3));
        lo[i] = (uint8_t)v;
    }
}

PTWM_INLINE void merge_f16_body(const uint8_t *restrict ex, const uint8_t *restrict hi,
                                const uint8_t *restrict lo, size_t n, uint8_t *restrict dst) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint16_t v = (uint16_t)(((unsigned)(hi[i] & 4) << 13) | ((unsigned)(ex[i] & 31) << 10) |
                                ((unsigned)(hi[i] & 3) << 8) | lo[i]);
        PLANES_ST16(dst + 2 * i, v);
    }
}

PTWM_INLINE void split_f32_body(const uint8_t *restrict src, size_t n, uint8_t *restrict ex,
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

PTWM_INLINE void merge_f32_body(const uint8_t *restrict ex, const uint8_t *restrict p1,
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

PTWM_INLINE void split_bytes_body(const uint8_t *src, size_t n, unsigned width,
                                       uint8_t *const *planes) {
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

PTWM_INLINE void merge_bytes_body(const uint8_t *const *planes, size_t n, unsigned width,
                                       uint8_t *dst) {
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
    if (width == 4) { /* one interleaving pass (four strided stores a pass were 4x slower) */
        const uint8_t *restrict p0 = planes[0], *restrict p1 = planes[1];
        const uint8_t *restrict p2 = planes[2], *restrict p3 = planes[3];
        uint8_t *restrict d = dst;
        for (i = 0; i < n; i++) {
            d[4 * i] = p0[i];
            d[4 * i + 1] = p1[i];
            d[4 * i + 2] = p2[i];
            d[4 * i + 3] = p3[i];
        }
        return;
    }
    for (k = 0; k < width; k++) {
        const uint8_t *restrict p = planes[k];
        uint8_t *restrict d = dst + k;
        for (i = 0; i < n; i++) d[i * width] = p[i];
    }
}

/* Every loop under ATTR, and their table ptwm_plane_loops_SUFFIX (codec_kernels.h). */
#define PLANES_LOOPS(SUFFIX, ATTR)                                                           \
    PTWM_LOOP_COPY(ATTR, split_bf16, SUFFIX, (const uint8_t *restrict src, size_t n,         \
                   uint8_t *restrict ex, uint8_t *restrict sm), (src, n, ex, sm))            \
    PTWM_LOOP_COPY(ATTR, merge_bf16, SUFFIX, (const uint8_t *restrict ex,                    \
                   const uint8_t *restrict sm, size_t n, uint8_t *restrict dst),             \
                   (ex, sm, n, dst))                                                         \
    PTWM_LOOP_COPY(ATTR, split_f16, SUFFIX, (const uint8_t *restrict src, size_t n,          \
                   uint8_t *restrict ex, uint8_t *restrict hi, uint8_t *restrict lo),        \
                   (src, n, ex, hi, lo))                                                     \
    PTWM_LOOP_COPY(ATTR, merge_f16, SUFFIX, (const uint8_t *restrict ex,                     \
                   const uint8_t *restrict hi, const uint8_t *restrict lo, size_t n,         \
                   uint8_t *restrict dst), (ex, hi, lo, n, dst))                             \
    PTWM_LOOP_COPY(ATTR, split_f32, SUFFIX, (const uint8_t *restrict src, size_t n,          \
                   uint8_t *restrict ex, uint8_t *restrict p1, uint8_t *restrict p2,         \
                   uint8_t *restrict p3), (src, n, ex, p1, p2, p3))                          \
    PTWM_LOOP_COPY(ATTR, merge_f32, SUFFIX, (const uint8_t *restrict ex,                     \
                   const uint8_t *restrict p1, const uint8_t *restrict p2,                   \
                   const uint8_t *restrict p3, size_t n, uint8_t *restrict dst),             \
                   (ex, p1, p2, p3, n, dst))                                                 \
    PTWM_LOOP_COPY(ATTR, split_bytes, SUFFIX, (const uint8_t *src, size_t n, unsigned width, \
                   uint8_t *const *planes), (src, n, width, planes))                         \
    PTWM_LOOP_COPY(ATTR, merge_bytes, SUFFIX, (const uint8_t *const *planes, size_t n,       \
                   unsigned width, uint8_t *dst), (planes, n, width, dst))                   \
    const ptwm_plane_loops ptwm_plane_loops_##SUFFIX = {                                     \
        split_bf16_##SUFFIX, merge_bf16_##SUFFIX, split_f16_##SUFFIX, merge_f16_##SUFFIX,    \
        split_f32_##SUFFIX,  merge_f32_##SUFFIX,  split_bytes_##SUFFIX, merge_bytes_##SUFFIX};

#endif
