/* The coder registry (coder.h): each coder's entry points behind the one
 * interface, the IDENTITY coder, and dispatch by id.
 *
 * Byte-level encodings of the coders (each codes one plane of n bytes; n is
 * not stored: the chunk's stages give it, and the decoder is told it as
 * dst_size):
 *
 *   1 HUFFMAN   see huffman.c.
 *   2 ZSTD      exactly one zstd frame (RFC 8878) whose header records the
 *               content size; it must equal n, and the frame must span the
 *               whole coded plane (no trailing bytes, no skippable frames,
 *               no dictionary id). See zstd_stage.c.
 *   4 RANS      see the format block at the top of rans.c.
 *   5 IDENTITY  the n raw bytes, nothing else: coded size == n.
 *
 * Any other id (including 3, MICROSCALE) has no coder: PTWM_ERR_UNKNOWN_ID
 * for encode and decode, and bound 0. */
#include "entropy.h"

/* ---- HUFFMAN: planned code lengths where the caller sized the plane ---- */

static ptwm_error huf_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level,
                             const ptwm_coder_hint *h, uint8_t *dst, size_t cap, size_t *out_len) {
    (void)ws, (void)level;
    if (h && h->plan) return ptwm_huf_encode_lengths(src, n, h->plan->bytes, dst, cap, out_len);
    return ptwm_huf_encode(src, n, dst, cap, out_len);
}

static ptwm_error huf_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                             size_t dst_size) {
    (void)ws;
    return ptwm_huf_decode(src, src_size, dst, dst_size);
}

static double huf_size(const uint32_t hist[256], size_t n, size_t beat, ptwm_coder_plan *plan) {
    return (double)ptwm_huf_size(hist, n, beat, plan->bytes);
}

/* ---- RANS: a planned table, else exact counts, else a sample (order 0) --- */

typedef char rans_plan_fits[sizeof(ptwm_rans_plan) <= sizeof(ptwm_coder_plan) ? 1 : -1];

/* (the chunk encoder's cap on a plane's streams travels in the workspace) */
static ptwm_error rans_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level,
                              const ptwm_coder_hint *h, uint8_t *dst, size_t cap, size_t *out_len) {
    unsigned k = ws ? ws->rans_max_streams : 0;
    if (h && h->plan)
        return ptwm_rans_encode_plan(src, n, (const ptwm_rans_plan *)(const void *)h->plan, k,
                                     dst, cap, out_len);
    if (h && h->counts)
        return ptwm_rans_encode_counts(ws, src, n, level, h->counts, k, dst, cap, out_len);
    if (h && h->sample && level == 0)
        return ptwm_rans_encode_sampled(src, n, h->sample, k, dst, cap, out_len);
    return ptwm_rans_encode_counts(ws, src, n, level, NULL, k, dst, cap, out_len);
}

static double rans_size(const uint32_t hist[256], size_t n, size_t beat, ptwm_coder_plan *plan) {
    (void)beat;
    return ptwm_rans_o0_size(hist, n, (ptwm_rans_plan *)(void *)plan);
}

/* ---- ZSTD ----------------------------------------------------------------- */

static ptwm_error zstd_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level,
                              const ptwm_coder_hint *h, uint8_t *dst, size_t cap, size_t *out_len) {
    (void)h;
    return ptwm_zstd_encode(ws, src, n, level, dst, cap, out_len);
}

/* ---- IDENTITY ------------------------------------------------------------- */

static size_t identity_bound(size_t n) { return n; }

static ptwm_error identity_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level,
                                  const ptwm_coder_hint *h, uint8_t *dst, size_t cap,
                                  size_t *out_len) {
    (void)ws, (void)level, (void)h;
    if (cap < n) return PTWM_ERR_DST_SIZE;
    if (n) memcpy(dst, src, n);
    *out_len = n;
    return PTWM_OK;
}

static ptwm_error identity_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                                  size_t dst_size) {
    (void)ws;
    PTWM_CHECK(src_size == dst_size);
    if (dst_size) memcpy(dst, src, dst_size);
    return PTWM_OK;
}

/* ---- the registry: a new coder is one line ------------------------------- */

static const ptwm_coder coders[] = {
    {PTWM_METHOD_HUFFMAN, ptwm_huf_bound, huf_encode, huf_decode, huf_size, ptwm_huf_size_floor, 0},
    {PTWM_METHOD_ZSTD, ptwm_zstd_bound, zstd_encode, ptwm_zstd_decode, NULL, NULL, 0},
    {PTWM_METHOD_RANS, ptwm_rans_bound, rans_encode, ptwm_rans_decode, rans_size, NULL, 1},
    {PTWM_METHOD_IDENTITY, identity_bound, identity_encode, identity_decode, NULL, NULL, 0},
};

const ptwm_coder *ptwm_coder_find(int id) {
    size_t k;
    for (k = 0; k < sizeof(coders) / sizeof(coders[0]); k++)
        if (coders[k].id == id) return &coders[k];
    return NULL;
}

size_t ptwm_entropy_bound(int stage, size_t n) {
    const ptwm_coder *c = ptwm_coder_find(stage);
    return c ? c->bound(n) : 0;
}

ptwm_error ptwm_entropy_encode(ptwm_ws *ws, int stage, int level, const uint8_t *src, size_t n,
                               uint8_t *dst, size_t cap, size_t *out_len) {
    const ptwm_coder *c = ptwm_coder_find(stage);
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    return c ? c->encode(ws, src, n, level, NULL, dst, cap, out_len) : PTWM_ERR_UNKNOWN_ID;
}

ptwm_error ptwm_entropy_decode(ptwm_ws *ws, int stage, const uint8_t *src, size_t src_size,
                               uint8_t *dst, size_t dst_size) {
    const ptwm_coder *c = ptwm_coder_find(stage);
    if ((!src && src_size) || (!dst && dst_size)) return PTWM_ERR_INVALID_ARG;
    return c ? c->decode(ws, src, src_size, dst, dst_size) : PTWM_ERR_UNKNOWN_ID;
}
