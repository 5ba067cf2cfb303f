/* Huffman stage harness. First byte even: decode the rest as an encoding to a
 * size taken from the next two bytes (must not crash or overrun; an accepted
 * input must decode again to the same bytes). Odd: encode the rest, which must
 * fit the bound and decode back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if ((data[0] & 1) == 0) {
        size_t n, len;
        uint8_t *out, *again;
        ptwm_error rc;
        if (size < 3) return 0;
        n = (size_t)data[1] | ((size_t)data[2] << 8);
        data += 3;
        size -= 3;
        out = malloc(n ? n : 1);
        rc = ptwm_huf_decode(data, size, out, n);
        if (rc != PTWM_OK && rc != PTWM_ERR_CORRUPT) __builtin_trap();
        if (rc == PTWM_OK) {
            /* decoding is a function of the input: re-encode and decode */
            uint8_t *enc = malloc(ptwm_huf_bound(n));
            if (ptwm_huf_encode(out, n, enc, ptwm_huf_bound(n), &len) != PTWM_OK) __builtin_trap();
            again = malloc(n ? n : 1);
            if (ptwm_huf_decode(enc, len, again, n) != PTWM_OK) __builtin_trap();
            if (n && memcmp(out, again, n) != 0) __builtin_trap();
            free(again);
            free(enc);
        }
        free(out);
    } else {
        size_t n = size - 1, cap = ptwm_huf_bound(n), len = 0;
        uint8_t *enc = malloc(cap), *out = malloc(n ? n : 1);
        if (ptwm_huf_encode(data + 1, n, enc, cap, &len) != PTWM_OK) __builtin_trap();
        if (len == 0 || len > cap) __builtin_trap();
        if (ptwm_huf_decode(enc, len, out, n) != PTWM_OK) __builtin_trap();
        if (n && memcmp(out, data + 1, n) != 0) __builtin_trap();
        free(enc);
        free(out);
    }
    return 0;
}
