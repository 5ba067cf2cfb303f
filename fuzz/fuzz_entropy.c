/* Entropy dispatch over every stage id: decoding arbitrary bytes stays in
 * bounds and fails cleanly or fills exactly dst_size bytes; encoding
 * arbitrary bytes decodes back to them within the stage's bound; unknown ids
 * are refused. Input: byte 0 = stage id (bit 7: scalar rANS), byte 1 =
 * level/order, bytes 2..3 = dst_size for the decode arm, the rest = payload. */
#include <stdlib.h>
#include <string.h>

#include "entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int known(int stage) {
    return stage == PTWM_METHOD_HUFFMAN || stage == PTWM_METHOD_ZSTD ||
           stage == PTWM_METHOD_RANS || stage == PTWM_METHOD_IDENTITY;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *payload;
    size_t n, want, len = 0, cap;
    uint8_t *out, *enc, *back;
    int stage, level;
    ptwm_error rc;
    if (size < 4) return 0;
    stage = (data[0] & 0x7f) % 7;
    /* every rANS decoder: scalar, AVX2, AVX-512, AVX-512 VBMI */
    ptwm_set_isa_limit((ptwm_isa[]){PTWM_ISA_SCALAR, PTWM_ISA_AVX2, PTWM_ISA_AVX512, PTWM_ISA_BEST}[data[0] >> 6]);
    want = (size_t)data[2] | ((size_t)data[3] << 8);
    payload = data + 4;
    n = size - 4;
    /* zstd: a few fast levels (high ones are too slow to fuzz); rANS: order. */
    level = stage == PTWM_METHOD_ZSTD ? (int)(data[1] % 6) - 1
            : stage == PTWM_METHOD_RANS ? (int)(data[1] % 3) - 1
                                        : 0;

    out = (uint8_t *)malloc(want ? want : 1);
    if (!out) return 0;
    rc = ptwm_entropy_decode(NULL, stage, payload, n, out, want);
    if (known(stage) ? (rc != PTWM_OK && rc != PTWM_ERR_CORRUPT && rc != PTWM_ERR_NOMEM)
                     : rc != PTWM_ERR_UNKNOWN_ID)
        __builtin_trap();
    free(out);

    cap = ptwm_entropy_bound(stage, n);
    if (!known(stage)) {
        if (cap != 0) __builtin_trap();
        return 0;
    }
    enc = (uint8_t *)malloc(cap ? cap : 1);
    back = (uint8_t *)malloc(n ? n : 1);
    if (!enc || !back) {
        free(enc);
        free(back);
        return 0;
    }
    rc = ptwm_entropy_encode(NULL, stage, level, payload, n, enc, cap, &len);
    if (rc != PTWM_OK || len > cap) __builtin_trap();
    rc = ptwm_entropy_decode(NULL, stage, enc, len, back, n);
    if (rc != PTWM_OK || (n && memcmp(back, payload, n) != 0)) __builtin_trap();
    free(enc);
    free(back);
    return 0;
}
