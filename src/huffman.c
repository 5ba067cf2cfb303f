/* Huffman entropy stage (wire id 1). Interim version: RAW and RLE modes only;
 * the canonical Huffman mode follows. */
#include "entropy.h"

#define HUF_MODE_RAW 0
#define HUF_MODE_RLE 1

size_t ptwm_huf_bound(size_t n) { return n + 1; }

ptwm_error ptwm_huf_encode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                           size_t *out_len) {
    size_t i;
    if ((!src && n) || !dst || !out_len) return PTWM_ERR_INVALID_ARG;
    for (i = 1; i < n && src[i] == src[0]; i++) {
    }
    if (n > 2 && i == n) {
        if (cap < 2) return PTWM_ERR_DST_SIZE;
        dst[0] = HUF_MODE_RLE;
        dst[1] = src[0];
        *out_len = 2;
        return PTWM_OK;
    }
    if (cap < n + 1) return PTWM_ERR_DST_SIZE;
    dst[0] = HUF_MODE_RAW;
    if (n) memcpy(dst + 1, src, n);
    *out_len = n + 1;
    return PTWM_OK;
}

ptwm_error ptwm_huf_decode(const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size) {
    PTWM_CHECK(src && src_size >= 1);
    if (!dst && dst_size) return PTWM_ERR_INVALID_ARG;
    if (src[0] == HUF_MODE_RAW) {
        PTWM_CHECK(src_size - 1 == dst_size);
        if (dst_size) memcpy(dst, src + 1, dst_size);
        return PTWM_OK;
    }
    if (src[0] == HUF_MODE_RLE) {
        PTWM_CHECK(src_size == 2);
        if (dst_size) memset(dst, src[1], dst_size);
        return PTWM_OK;
    }
    return PTWM_ERR_CORRUPT;
}
