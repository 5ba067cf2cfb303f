/* Entropy stage dispatch, the IDENTITY stage, and zero-order entropy.
 *
 * Byte-level encodings of the stages dispatched here (each codes one plane of
 * n bytes; n is not stored: the container records it and passes it to the
 * decoder as dst_size):
 *
 *   stage 1 HUFFMAN   see src/huffman.c.
 *   stage 2 ZSTD      exactly one zstd frame (RFC 8878) whose header records
 *                     the content size; it must equal n, and the frame must
 *                     span the whole coded plane (no trailing bytes, no
 *                     skippable frames, no dictionary id). See src/zstd_stage.c.
 *   stage 4 RANS      see the format block at the top of src/rans.c.
 *   stage 5 IDENTITY  the n raw bytes, nothing else: coded size == n.
 *
 * Any other id (including 3, MICROSCALE, which is a modelling transform and
 * not an entropy stage) is PTWM_ERR_UNKNOWN_ID for encode and decode, and has
 * bound 0. */
#include <math.h>
#include <pthread.h>
#include "entropy.h"

size_t ptwm_entropy_bound(int stage, size_t n) {
    switch (stage) {
    case PTWM_METHOD_HUFFMAN: return ptwm_huf_bound(n);
    case PTWM_METHOD_ZSTD: return ptwm_zstd_bound(n);
    case PTWM_METHOD_RANS: return ptwm_rans_bound(n);
    case PTWM_METHOD_IDENTITY: return n;
    default: return 0;
    }
}

static ptwm_error identity_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                                  size_t *out_len) {
    if (cap < n) return PTWM_ERR_DST_SIZE;
    if (n) memcpy(dst, src, n);
    *out_len = n;
    return PTWM_OK;
}

ptwm_error ptwm_entropy_encode(ptwm_ws *ws, int stage, int level, const uint8_t *src, size_t n,
                               uint8_t *dst, size_t cap, size_t *out_len) {
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    switch (stage) {
    case PTWM_METHOD_HUFFMAN: return ptwm_huf_encode(src, n, dst, cap, out_len);
    case PTWM_METHOD_ZSTD: return ptwm_zstd_encode(ws, src, n, level, dst, cap, out_len);
    case PTWM_METHOD_RANS: return ptwm_rans_encode(ws, src, n, level, dst, cap, out_len);
    case PTWM_METHOD_IDENTITY: return identity_encode(src, n, dst, cap, out_len);
    default: return PTWM_ERR_UNKNOWN_ID;
    }
}

ptwm_error ptwm_entropy_decode(ptwm_ws *ws, int stage, const uint8_t *src, size_t src_size,
                               uint8_t *dst, size_t dst_size) {
    if ((!src && src_size) || (!dst && dst_size)) return PTWM_ERR_INVALID_ARG;
    switch (stage) {
    case PTWM_METHOD_HUFFMAN: return ptwm_huf_decode(src, src_size, dst, dst_size);
    case PTWM_METHOD_ZSTD: return ptwm_zstd_decode(ws, src, src_size, dst, dst_size);
    case PTWM_METHOD_RANS: return ptwm_rans_decode(ws, src, src_size, dst, dst_size);
    case PTWM_METHOD_IDENTITY:
        PTWM_CHECK(src_size == dst_size);
        if (dst_size) memcpy(dst, src, dst_size);
        return PTWM_OK;
    default: return PTWM_ERR_UNKNOWN_ID;
    }
}

void ptwm_histogram(const uint8_t *src, size_t n, uint64_t count[256]) {
    /* Four histograms break the store-to-load dependency on runs of one
     * symbol (exponent planes are full of them). */
    uint32_t h[4][256];
    size_t i = 0;
    int s;
    memset(count, 0, 256 * sizeof(uint64_t));
    while (i < n) {
        /* 32-bit counters, emptied before they can overflow */
        size_t stop = n - i > ((size_t)1 << 30) ? i + ((size_t)1 << 30) : n;
        memset(h, 0, sizeof(h));
        for (; i + 4 <= stop; i += 4) {
            h[0][src[i]]++;
            h[1][src[i + 1]]++;
            h[2][src[i + 2]]++;
            h[3][src[i + 3]]++;
        }
        for (; i < stop; i++) h[0][src[i]]++;
        for (s = 0; s < 256; s++) count[s] += (uint64_t)h[0][s] + h[1][s] + h[2][s] + h[3][s];
    }
}

/* k log2 k for the small counts that dominate histograms, from a table (a
 * log2 call per symbol was a fifth of estimating a small plane). */
#define XLOGX_SMALL PTWM_XLOGX_SMALL
static double xlogx_tab[XLOGX_SMALL];
static pthread_once_t xlogx_once = PTHREAD_ONCE_INIT;

static void xlogx_init(void) {
    int k;
    xlogx_tab[0] = 0.0;
    for (k = 1; k < XLOGX_SMALL; k++) xlogx_tab[k] = (double)k * log2((double)k);
}

const double *ptwm_xlogx_table(void) {
    pthread_once(&xlogx_once, xlogx_init);
    return xlogx_tab;
}

double ptwm_xlogx(uint64_t k) {
    if (k >= XLOGX_SMALL) return (double)k * log2((double)k);
    pthread_once(&xlogx_once, xlogx_init);
    return xlogx_tab[k];
}

double ptwm_entropy_order0(const uint8_t *src, size_t n) {
    uint64_t h[256];
    double bits = 0.0;
    int s;
    if (n == 0 || !src) return 0.0;
    ptwm_histogram(src, n, h);
    for (s = 0; s < 256; s++)
        if (h[s]) bits -= (double)h[s] * log2((double)h[s] / (double)n);
    return bits / (double)n;
}
