/* HUFFMAN coder (wire id 1): canonical length-limited Huffman, 4 interleaved
 * streams; the byte format is at the top of huffman.c. Contracts as in
 * coder.h: encode within the bound, decode exactly dst_size bytes or
 * PTWM_ERR_CORRUPT. */
#ifndef PTWM_HUFFMAN_H
#define PTWM_HUFFMAN_H

#include "common.h"

size_t ptwm_huf_bound(size_t n);
ptwm_error ptwm_huf_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                           size_t *out_len);
/* A floor under the HUFFMAN-coded size of a plane of n bytes with these
 * symbol counts (an optimal code's bits plus the header; the encoder's
 * length-limited code takes at least that): lets a caller skip an encode
 * that cannot win. */
size_t ptwm_huf_size_floor(const uint32_t hist[256], size_t n);
/* The HUFFMAN-coded size from exact counts, to within 2 bytes (n + 1 where
 * the encoder would store the plane; it may also store a plane whose
 * sampled bytes look incompressible), and the code lengths it chose (len:
 * 256 entries; unset when the size is n + 1 or 2). Where even an optimal
 * code's floor (ptwm_huf_size_floor) exceeds `beat`, that floor is returned
 * and len is unset: the lengths are not limited for a plane that has lost
 * (SIZE_MAX: always the exact size). ptwm_huf_encode_lengths codes src with
 * such lengths (NULL: choose them), giving the bytes ptwm_huf_encode gives. */
size_t ptwm_huf_size(const uint32_t hist[256], size_t n, size_t beat, uint8_t len[256]);
ptwm_error ptwm_huf_encode_lengths(const uint8_t *src, size_t n, const uint8_t *lengths,
                                   uint8_t *dst, size_t cap, size_t *out_len);
ptwm_error ptwm_huf_decode(const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size);

#endif
