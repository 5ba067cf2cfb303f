/* RANS stage (wire id 4). Interim: stored-raw mode only. */
#include "entropy.h"

size_t ptwm_rans_bound(size_t n) { return n + 1; }

ptwm_error ptwm_rans_encode(const uint8_t *src, size_t n, int order, uint8_t *dst, size_t cap,
                            size_t *out_len) {
    (void)order;
    if (!out_len || (!src && n) || !dst) return PTWM_ERR_INVALID_ARG;
    if (cap < n + 1) return PTWM_ERR_DST_SIZE;
    dst[0] = 0;
    if (n) memcpy(dst + 1, src, n);
    *out_len = n + 1;
    return PTWM_OK;
}

ptwm_error ptwm_rans_decode(const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size) {
    if ((!src && src_size) || (!dst && dst_size)) return PTWM_ERR_INVALID_ARG;
    PTWM_CHECK(src_size >= 1 && src[0] == 0 && src_size - 1 == dst_size);
    if (dst_size) memcpy(dst, src + 1, dst_size);
    return PTWM_OK;
}
