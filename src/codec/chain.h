/* Parsed form of a chain blob (docs/CHAINS.md has the wire format).
 *
 * A chain is at most one plane transform (a float field split or byte
 * planes), optionally MICROSCALE on the split's exponent plane, and entropy
 * settings per plane. Parsing validates everything the chunk codec relies on,
 * so the codec never sees an inconsistent chain. */
#ifndef PTWM_CHAIN_H
#define PTWM_CHAIN_H

#include "common.h"

/* Stage ids of the chain wire format (never renumbered). */
#define PTWM_STAGE_SPLIT 1       /* params: width, exp_bits, man_bits */
#define PTWM_STAGE_PLANES 2      /* params: width */
#define PTWM_STAGE_MICROSCALE 3  /* params: block (u16 LE) */
#define PTWM_STAGE_ENTROPY 4     /* params: plane (0xFF = all), mask, zstd level, rANS order */

#define PTWM_CHAIN_VERSION 1
#define PTWM_CHAIN_MAX_STAGES 16
#define PTWM_ENTROPY_ALL_PLANES 0xFF

/* Entropy candidate masks: bit (1 << wire id). 0 = open (method_hint). */
#define PTWM_EMASK(id) (1u << (id))
#define PTWM_EMASK_VALID \
    (PTWM_EMASK(PTWM_METHOD_HUFFMAN) | PTWM_EMASK(PTWM_METHOD_ZSTD) | \
     PTWM_EMASK(PTWM_METHOD_RANS) | PTWM_EMASK(PTWM_METHOD_IDENTITY))

/* Largest number of planes a transform makes (F64 split: 2 exponent + 7). */
#define PTWM_MAX_BASE_PLANES 9

typedef enum ptwm_transform {
    PTWM_XFORM_BYTES = 0,   /* one plane: the raw bytes */
    PTWM_XFORM_SPLIT = 1,
    PTWM_XFORM_PLANES = 2
} ptwm_transform;

typedef struct ptwm_chain_info {
    ptwm_transform xform;
    unsigned width;        /* bytes per element (1 for BYTES) */
    unsigned exp_bits;     /* SPLIT only */
    unsigned man_bits;     /* SPLIT only */
    unsigned exp_planes;   /* SPLIT: ceil(exp_bits / 8) */
    unsigned sm_planes;    /* SPLIT: ceil((man_bits + 1) / 8) */
    unsigned nplanes;      /* planes the transform makes */
    unsigned micro_block;  /* MICROSCALE block size, 0 = none */
    /* Entropy per transform plane: candidate mask (0 = open: method_hint),
     * zstd level (0 = default) and rANS order (0, 1, or -1 = either). */
    uint8_t mask[PTWM_MAX_BASE_PLANES];
    uint8_t zstd_level[PTWM_MAX_BASE_PLANES];
    int8_t rans_order[PTWM_MAX_BASE_PLANES];
} ptwm_chain_info;

/* Parse and validate a blob; dtype is checked when >= 0 (pass -1 to check the
 * blob alone). Errors: PTWM_ERR_VERSION, PTWM_ERR_UNKNOWN_ID, PTWM_ERR_CORRUPT
 * (malformed), PTWM_ERR_DTYPE (does not fit the dtype). */
ptwm_error ptwm_chain_info_parse(const uint8_t *chain, size_t len, int dtype,
                                 ptwm_chain_info *out, ptwm_err *err);

/* The last chain a worker parsed, with its dtype: the chunks of a tensor
 * share their chain, and parsing it again for every chunk was about 1% of a
 * restore of small tensors. Only a parse that succeeded is kept. */
#define PTWM_CHAIN_CACHE_BYTES 48
typedef struct ptwm_chain_cache {
    uint8_t bytes[PTWM_CHAIN_CACHE_BYTES];
    size_t len; /* 0: nothing kept */
    int dtype;
    ptwm_chain_info info;
} ptwm_chain_cache;

/* ptwm_chain_info_parse, answered from the cache when the chain's bytes and
 * dtype are the ones kept there (chains longer than the cache are parsed). */
ptwm_error ptwm_chain_info_parse_cached(ptwm_chain_cache *cache, const uint8_t *chain,
                                        size_t len, int dtype, ptwm_chain_info *out,
                                        ptwm_err *err);

#endif
