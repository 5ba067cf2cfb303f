/* Plane transforms: float field splits and byte planes, and their inverses.
 *
 * These loops run at memory speed: one pass, restrict pointers, the common
 * geometries (BF16, F16, F32) written out so the compiler vectorises them.
 * Elements are little-endian; plane p receives one byte per element. */
#ifndef PTWM_PLANES_H
#define PTWM_PLANES_H

#include "common.h"

/* Float fields of an element of `width` bytes with `e` exponent and `m`
 * mantissa bits (1 + e + m == 8 * width). Planes, in order: the exponent in
 * ceil(e/8) planes (most significant byte first), then sign:mantissa (sign
 * above the mantissa, m + 1 bits) in ceil((m+1)/8) planes, most significant
 * byte first. planes[p] has room for n bytes. */
void ptwm_split_float(const uint8_t *src, size_t n, unsigned width, unsigned e, unsigned m,
                      uint8_t *const *planes);
/* Inverse of ptwm_split_float (any plane bytes give some output; excess
 * high bits of a plane byte are ignored). */
void ptwm_merge_float(const uint8_t *const *planes, size_t n, unsigned width, unsigned e,
                      unsigned m, uint8_t *dst);

/* Joint exponent coding (docs/CHAINS.md, "Joint planes"): the exponent byte
 * ex[i] and the top 4 bits of the sign:mantissa byte sm[i] become one symbol
 * j[i] = rank << 4 | sm[i] >> 4, rank = the exponent's index in a map of the
 * chunk's PTWM_JOINT_MAP most frequent exponents, or PTWM_JOINT_MAP (escape)
 * with the exponent in esc; the low 4 bits of sm go to a nibble plane (element
 * 2k in the low half of byte k). side = map[PTWM_JOINT_MAP] then the escaped
 * exponents in element order; ptwm_joint_split returns the side length and
 * needs room for PTWM_JOINT_MAP + n side bytes and (n + 1) / 2 nibbles.
 * The map comes from ex_hist (counts of the exponents, or of a sample of
 * them: any counts give a valid split) or, if NULL, from counting ex. */
#define PTWM_JOINT_MAP 15
size_t ptwm_joint_split(const uint8_t *ex, const uint8_t *sm, size_t n, const uint32_t *ex_hist,
                        uint8_t *j, uint8_t *nib, uint8_t *side);
/* Inverse into ex[n] and sm[n] (any bytes give some output). side_len >=
 * PTWM_JOINT_MAP; escapes past the side plane's exponents are left at 0.
 * Returns the number of escape symbols in j: the caller checks it against
 * side_len - PTWM_JOINT_MAP. */
size_t ptwm_joint_merge(const uint8_t *j, const uint8_t *nib, const uint8_t *side,
                        size_t side_len, size_t n, uint8_t *ex, uint8_t *sm);
/* The same straight into n BF16 elements (SPLIT(2, 8, 7) merged). */
size_t ptwm_joint_merge_bf16(const uint8_t *j, const uint8_t *nib, const uint8_t *side,
                             size_t side_len, size_t n, uint8_t *dst);
/* The same, handing each strip of elements to `fn` once merged (NULL:
 * none), while it is in cache: fn(ctx, el, len, at) for elements
 * at..at+len of dst. */
size_t ptwm_joint_merge_bf16_strips(const uint8_t *j, const uint8_t *nib, const uint8_t *side,
                                    size_t side_len, size_t n, uint8_t *dst,
                                    void (*fn)(void *ctx, uint8_t *el, size_t len, size_t at),
                                    void *ctx);

/* Byte k of each element into plane k (k = 0 is the least significant). */
void ptwm_split_bytes(const uint8_t *src, size_t n, unsigned width, uint8_t *const *planes);
void ptwm_merge_bytes(const uint8_t *const *planes, size_t n, unsigned width, uint8_t *dst);

/* Sparse elements (pruned weights, zero padding): an element is zero when
 * every bit but its top one is 0 (+0 and -0: pruning by a mask keeps each
 * weight's sign, so about half the zeros of a pruned float tensor are -0).
 * The bitmap has bit i (LSB first in byte i / 8) set when element i is
 * nonzero; it takes ceil(n / 8) bytes. The signs plane holds the top bit of
 * each zero element, in order, packed the same way: ceil(zeros / 8) bytes,
 * padding bits 0. (Format versions 1 and 2 have no signs plane: an element
 * was zero only when all its bytes were, and expands to +0.) */
/* Zero elements among elements 0, step, 2 step, ... below n. */
size_t ptwm_count_zero_elems(const uint8_t *src, size_t n, unsigned width, size_t step);
/* Nonzero elements to dst in order, bitmap and signs filled (signs: room
 * for ceil(n / 8) + 8 bytes); returns the count of nonzero elements. */
size_t ptwm_sparse_compact(const uint8_t *src, size_t n, unsigned width, uint8_t *bitmap,
                           uint8_t *dst, uint8_t *signs);
/* Set bits of an n-bit bitmap; SIZE_MAX if a padding bit (>= n) is set. */
size_t ptwm_bitmap_count(const uint8_t *bitmap, size_t n);
/* Inverse of compact; the caller has checked ptwm_bitmap_count(bitmap, n)
 * equals the number of elements in src, that signs holds ceil(zeros / 8)
 * bytes (signs_len) with no padding bit set, or is NULL (the version 1 and 2
 * form: every zero is +0), and src has `width` readable bytes of slack after
 * its last element. */
void ptwm_sparse_expand(const uint8_t *src, const uint8_t *bitmap, size_t n, unsigned width,
                        const uint8_t *signs, size_t signs_len, uint8_t *dst);

/* One little-endian element of `width` bytes (at most 8) as an integer. */
PTWM_INLINE uint64_t ptwm_load_elem(const uint8_t *p, unsigned width) {
    uint64_t v = 0;
    unsigned k;
    for (k = 0; k < width; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

PTWM_INLINE void ptwm_store_elem(uint8_t *p, unsigned width, uint64_t v) {
    unsigned k;
    for (k = 0; k < width; k++) p[k] = (uint8_t)(v >> (8 * k));
}

#endif
