/* Entropy coders: one plane of byte symbols each, behind one interface.
 *
 * Every coder has the same shape: encode within a worst-case bound, decode to
 * an exact, known size. Decoders take (src, src_size, dst, dst_size) and
 * return PTWM_ERR_CORRUPT for anything that is not a valid encoding of
 * exactly dst_size bytes: truncated or extended input, bad tables, streams
 * that do not end exactly. They never read or write outside their buffers.
 *
 * Coder ids are the wire ids of ptwm_method (1 HUFFMAN, 2 ZSTD, 4 RANS,
 * 5 IDENTITY); 3 MICROSCALE is a modelling choice, not a coder. The registry
 * (entropy.c) holds one entry a coder: a new coder is a file and a line. */
#ifndef PTWM_CODER_H
#define PTWM_CODER_H

#include "common.h"
#include "workspace.h"

/* Order-1 coding (rANS level -2) only on planes of at least this many
 * bytes: below, its tables cost more than it saves, and it decodes several
 * times slower than order 0. */
#define PTWM_CODER_O1_MIN 65536

/* What a coder planned from a plane's exact counts (its own layout: code
 * lengths, a frequency table), handed back to its encode. */
typedef union ptwm_coder_plan {
    uint32_t align;
    uint8_t bytes[4 + 4 * 256];
} ptwm_coder_plan;

/* What the caller knows of the plane being coded; a coder uses what it can
 * (each may be NULL). */
typedef struct ptwm_coder_hint {
    const ptwm_coder_plan *plan; /* from this coder's size() on the plane's counts */
    const uint32_t *counts;      /* exact counts of the plane's bytes */
    const uint32_t *sample;      /* counts of a sample of them (order-0 tables) */
} ptwm_coder_hint;

typedef struct ptwm_coder {
    int id;
    /* Worst-case coded size of n bytes. */
    size_t (*bound)(size_t n);
    /* Encode n bytes at `level` (zstd: its level, 0 = 3; rANS: its order). */
    ptwm_error (*encode)(ptwm_ws *ws, const uint8_t *src, size_t n, int level,
                         const ptwm_coder_hint *hint, uint8_t *dst, size_t cap, size_t *out_len);
    /* Decode exactly dst_size bytes; src must be consumed exactly. */
    ptwm_error (*decode)(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                         size_t dst_size);
    /* The coded size from exact counts as encode would code the plane at
     * order 0 (within a few bytes or ~0.1%), and its plan; where a floor
     * under it exceeds `beat` (SIZE_MAX: never), that floor, with no plan.
     * NULL: the coder cannot size a plane from counts. */
    double (*size)(const uint32_t hist[256], size_t n, size_t beat, ptwm_coder_plan *plan);
    /* A floor under the coded size from exact counts (NULL: none). */
    size_t (*floor)(const uint32_t hist[256], size_t n);
    /* Whether encode takes its table from hint->sample (then worth
     * gathering for it). */
    int uses_sample;
} ptwm_coder;

/* The registry: the coder of an id, or NULL. */
const ptwm_coder *ptwm_coder_find(int id);

#endif
