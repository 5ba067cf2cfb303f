/* rANS stage: decoding arbitrary bytes stays in bounds and either fails
 * cleanly or fills exactly dst_size bytes; encoding arbitrary bytes at every
 * order decodes back to them within the bound.
 * Input: byte 0 = order selector (bit 7: scalar decoder), bytes 1..2 =
 * dst_size for the decode arm, the rest = payload. */
#include <stdlib.h>
#include <string.h>

#include "entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *payload;
    size_t n, want, len = 0, cap;
    uint8_t *out, *enc, *back;
    int order;
    ptwm_error rc;
    if (size < 3) return 0;
    order = (int)((data[0] & 0x7f) % 3) - 1;
    /* every rANS decoder: scalar, AVX2, AVX-512, AVX-512 VBMI */
    ptwm_set_isa_limit((ptwm_isa[]){PTWM_ISA_SCALAR, PTWM_ISA_AVX2, PTWM_ISA_AVX512, PTWM_ISA_BEST}[data[0] >> 6]);
    want = (size_t)data[1] | ((size_t)data[2] << 8);
    payload = data + 3;
    n = size - 3;

    /* Decode arm: exact-size buffer so ASan sees any overrun. */
    out = (uint8_t *)malloc(want ? want : 1);
    if (!out) return 0;
    rc = ptwm_rans_decode(NULL, payload, n, out, want);
    if (rc != PTWM_OK && rc != PTWM_ERR_CORRUPT && rc != PTWM_ERR_NOMEM) __builtin_trap();
    free(out);

    /* Round-trip arm. */
    cap = ptwm_rans_bound(n);
    enc = (uint8_t *)malloc(cap ? cap : 1);
    back = (uint8_t *)malloc(n ? n : 1);
    if (!enc || !back) {
        free(enc);
        free(back);
        return 0;
    }
    rc = ptwm_rans_encode(NULL, payload, n, order, enc, cap, &len);
    if (rc != PTWM_OK || len > cap) __builtin_trap();
    rc = ptwm_rans_decode(NULL, enc, len, back, n);
    if (rc != PTWM_OK || (n && memcmp(back, payload, n) != 0)) __builtin_trap();
    /* One byte short of the coded length must be refused, never overrun. */
    if (len > 0) {
        size_t len2 = 0;
        rc = ptwm_rans_encode(NULL, payload, n, order, enc, len - 1, &len2);
        if (rc != PTWM_ERR_DST_SIZE) __builtin_trap();
    }
    free(enc);
    free(back);
    return 0;
}
