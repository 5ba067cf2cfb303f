/* The coder policy: which entropy coder codes a plane, in one place.
 *
 * Every plane of a chunk gets an order-0 estimate from a sample of its bytes
 * (ptwm_plane_estimate); the chunk encoder compares the estimates of the
 * forms its stages offer, and then ptwm_plane_encode codes each plane with
 * the coder the estimate, the chain's candidates and a few trial encodes
 * pick (docs/CHAINS.md, "Choosing stages per plane"). */
#ifndef PTWM_PLANE_CODER_H
#define PTWM_PLANE_CODER_H

#include "chain.h"
#include "workspace.h"

/* Coder id of a constant plane (coded length 1: the byte); the others are
 * the entropy coders' ids (entropy.h). */
#define PTWM_CODER_CONST 0

/* A plane whose estimate saves less than this fraction is stored raw: coding
 * it would cost time for nothing. */
#define PTWM_WORTH_CODING 0.995

typedef struct ptwm_plane_est {
    double bytes;      /* estimated coded size with an order-0 coder */
    double entropy;    /* ideal order-0 bytes, no table */
    unsigned distinct; /* symbols seen */
    int constant;      /* every byte equal (checked exactly) */
    size_t step;       /* one 64-byte block in every `step` was counted (1: every
                        * byte, the counts are exact) */
    uint32_t hist[256];
} ptwm_plane_est;

/* The estimate of src[0..n), from a sample of it on large planes. */
ptwm_plane_est ptwm_plane_estimate(const uint8_t *src, size_t n);

/* The coding settings of chain plane `set` (set >= c->nplanes: stored as
 * is): candidate mask, zstd level and rANS order; an open mask takes the
 * method's. */
void ptwm_plane_settings(const ptwm_chain_info *c, unsigned set, int method, int zdefault,
                         unsigned *mask, int *zlevel, int *order);

/* Code src[0..len) into out (room for the HUFFMAN, RANS and ZSTD bounds
 * together); *coder and *coded receive the choice. `lz` marks planes of
 * integer or quantized data, where zstd's matches can beat order-0/1
 * statistics. */
ptwm_error ptwm_plane_encode(ptwm_ws *ws, const uint8_t *src, size_t len,
                             const ptwm_plane_est *est, unsigned mask, int zlevel, int order,
                             int lz, uint8_t *out, size_t cap, int *coder, size_t *coded);

#endif
