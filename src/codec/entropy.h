/* Entropy coding by coder id (the registry of coder.h), and every coder's own
 * entry points, for callers that name a coder (tests, benchmarks, the
 * container's table packing). The codec itself goes through coder.h. */
#ifndef PTWM_ENTROPY_H
#define PTWM_ENTROPY_H

#include "coder.h"
#include "histogram.h"
#include "huffman.h"
#include "rans.h"
#include "zstd_stage.h"

/* Worst-case coded size of n bytes for a coder (0 for an unknown id). */
size_t ptwm_entropy_bound(int stage, size_t n);
/* Encode n bytes. `level` matters for ZSTD (0 = default 3) and RANS (the
 * order: 0, 1, -1 or -2, rans.h). ws: the caller's work memory (NULL: a
 * temporary one). */
ptwm_error ptwm_entropy_encode(ptwm_ws *ws, int stage, int level, const uint8_t *src, size_t n,
                               uint8_t *dst, size_t cap, size_t *out_len);
/* Decode exactly dst_size bytes; src must be consumed exactly. */
ptwm_error ptwm_entropy_decode(ptwm_ws *ws, int stage, const uint8_t *src, size_t src_size,
                               uint8_t *dst, size_t dst_size);

#endif
