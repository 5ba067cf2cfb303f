/* RANS coder (wire id 4): static rANS, order 0 or 1, 32 interleaved states;
 * the byte format is at the top of rans.c. Contracts as in coder.h. Order 1
 * and the decoders take their tables from the caller's workspace. */
#ifndef PTWM_RANS_H
#define PTWM_RANS_H

#include "coder.h"
#include "histogram.h"
#include "workspace.h"

/* Orders: 0, 1, -1 = whichever is smaller, -2 = order 1 only on planes of at
 * least PTWM_RANS_O1_MIN_AUTO bytes and where it saves at least 3% (it
 * decodes several times slower; the coder policy uses this). */
#define PTWM_RANS_O1_MIN_AUTO PTWM_CODER_O1_MIN
size_t ptwm_rans_bound(size_t n);
/* The same with the plane's symbol counts given (hist: exact counts of src,
 * or NULL to count them), and at most max_streams order-0 streams (1 or 2;
 * any other value: as many as the plane's size calls for, up to 4; the container
 * version a file is held to decides it). */
ptwm_error ptwm_rans_encode_counts(ptwm_ws *ws, const uint8_t *src, size_t n, int order,
                                   const uint32_t *hist, unsigned max_streams, uint8_t *dst,
                                   size_t cap, size_t *out_len);
/* Order-0 rANS with a table from sampled counts: `sample` holds the counts
 * of some of src's bytes (at most n in all; the chunk coder's sampled
 * estimate). Symbols the sample missed are found by a scan for them, about
 * twice the speed of counting (several times with AVX-512 VBMI), and get the
 * smallest frequency. The bytes depend on src and sample only, not on the
 * CPU. It codes slightly larger than exact counts would (docs/CHAINS.md,
 * section 3, has the figures). */
ptwm_error ptwm_rans_encode_sampled(const uint8_t *src, size_t n, const uint32_t sample[256],
                                    unsigned max_streams, uint8_t *dst, size_t cap,
                                    size_t *out_len);
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
                                 unsigned max_streams, uint8_t *dst, size_t cap,
                                 size_t *out_len);
ptwm_error ptwm_rans_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int order, uint8_t *dst,
                            size_t cap, size_t *out_len);
ptwm_error ptwm_rans_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                            size_t dst_size);
/* The streams of a coded plane: 2 for order-0 rANS in two streams (mode 4:
 * from container format version 7 on), 4 in four (mode 5: from version 8
 * on), else 1. */
unsigned ptwm_rans_streams(const uint8_t *src, size_t src_size);

#endif
