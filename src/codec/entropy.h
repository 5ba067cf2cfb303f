/* Entropy stages: code one plane of byte symbols.
 *
 * Every stage has the same shape: encode with a worst-case bound, decode to an
 * exact, known size. Decoders take (src, src_size, dst, dst_size) and return
 * PTWM_ERR_CORRUPT for anything that is not a valid encoding of exactly
 * dst_size bytes: truncated or extended input, bad tables, streams that do not
 * end exactly. They never read or write outside their buffers.
 *
 * Stage ids are the wire ids of ptwm_method (1 HUFFMAN, 2 ZSTD, 4 RANS,
 * 5 IDENTITY); 3 MICROSCALE is a modelling transform, not an entropy stage. */
#ifndef PTWM_ENTROPY_H
#define PTWM_ENTROPY_H

#include "common.h"
#include "workspace.h"

/* Worst-case coded size of n bytes for a stage (0 for an unknown id). */
size_t ptwm_entropy_bound(int stage, size_t n);

/* Encode n bytes. `level` matters for ZSTD only (0 = default 3); for RANS it
 * selects the order: 0 = order 0, 1 = order 1, -1 = whichever is smaller,
 * -2 = order 1 only on planes of at least PTWM_RANS_O1_MIN_AUTO bytes and
 * where it saves at least 3% (it decodes several times slower; the AUTO
 * stage choice uses this). */
#define PTWM_RANS_O1_MIN_AUTO 65536
ptwm_error ptwm_entropy_encode(ptwm_ws *ws, int stage, int level, const uint8_t *src, size_t n,
                               uint8_t *dst, size_t cap, size_t *out_len);
/* Decode exactly dst_size bytes; src must be consumed exactly. ws: the
 * caller's work memory (NULL: a temporary one). */
ptwm_error ptwm_entropy_decode(ptwm_ws *ws, int stage, const uint8_t *src, size_t src_size,
                               uint8_t *dst, size_t dst_size);

/* Per-stage entry points (same contracts). */
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

size_t ptwm_rans_bound(size_t n);
/* The same with the plane's symbol counts given (hist: exact counts of src,
 * or NULL to count them). */
ptwm_error ptwm_rans_encode_counts(ptwm_ws *ws, const uint8_t *src, size_t n, int order,
                                   const uint32_t *hist, uint8_t *dst, size_t cap,
                                   size_t *out_len);
/* Order-0 rANS with a table from sampled counts: `sample` holds the counts
 * of some of src's bytes (at most n in all; the chunk coder's sampled
 * estimate). Symbols the sample missed are found by a scan for them, about
 * twice the speed of counting (several times with AVX-512 VBMI), and get the
 * smallest frequency. The bytes depend on src and sample only, not on the
 * CPU. Costs 0.01-0.03% against exact counts from 16-32K samples. */
ptwm_error ptwm_rans_encode_sampled(const uint8_t *src, size_t n, const uint32_t sample[256],
                                    uint8_t *dst, size_t cap, size_t *out_len);
/* Estimated order-0 coded size (within ~0.1%) from exact counts, as the
 * encoder would code it (n + 1 if it would store the plane raw), and the
 * table it planned: ptwm_rans_encode_plan codes src with it, giving the
 * bytes ptwm_rans_encode(src, n, 0, ...) gives. */
typedef struct ptwm_rans_plan {
    unsigned prec;      /* 0: no table (one symbol, or stored raw) */
    uint32_t freq[256];
} ptwm_rans_plan;
double ptwm_rans_o0_size(const uint32_t hist[256], size_t n, ptwm_rans_plan *plan);
ptwm_error ptwm_rans_encode_plan(const uint8_t *src, size_t n, const ptwm_rans_plan *plan,
                                 uint8_t *dst, size_t cap, size_t *out_len);
ptwm_error ptwm_rans_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int order, uint8_t *dst,
                            size_t cap, size_t *out_len);
ptwm_error ptwm_rans_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                            size_t dst_size);

size_t ptwm_zstd_bound(size_t n);
ptwm_error ptwm_zstd_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level, uint8_t *dst,
                            size_t cap, size_t *out_len);
ptwm_error ptwm_zstd_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                            size_t dst_size);

/* Zero-order entropy of a byte plane in bits per symbol (for benchmarks and
 * for choosing stages cheaply). */
double ptwm_entropy_order0(const uint8_t *src, size_t n);
/* k log2 k (0 for 0), exact to double rounding; fast for small k. */
double ptwm_xlogx(uint64_t k);
/* The table behind it for k < PTWM_XLOGX_SMALL, for loops over histograms
 * (one lookup a count, no call). */
#define PTWM_XLOGX_SMALL 4096
const double *ptwm_xlogx_table(void);

/* Byte histogram of src[0..n) into count[256] (overwritten). */
void ptwm_histogram(const uint8_t *src, size_t n, uint64_t count[256]);

#endif
