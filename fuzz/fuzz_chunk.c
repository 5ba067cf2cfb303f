/* libFuzzer harness over the chunk codec.
 *
 * Input: byte 0 picks a dtype, byte 1 a method (standard table chain) and a
 * format version, bytes 2..3 a raw size; the rest is (a) decoded as a
 * payload of that raw size, read as that version: it must fail cleanly or
 * fill exactly raw size bytes; and (b) encoded as a
 * chunk (byte 3 doubling as the column count) and decoded back: must equal,
 * and stay within ptwm_chunk_bound. */
#include <stdlib.h>
#include <string.h>
#include "chain.h"
#include "chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t chain[PTWM_CHAIN_MAX_BYTES];
    size_t clen, raw_len, body_len, cap, len = 0;
    ptwm_dtype d;
    int method;
    unsigned version;
    uint8_t *out, *enc, *dec;
    ptwm_chunk_params prm;
    if (size < 4) return 0;
    d = (ptwm_dtype)(data[0] % PTWM_DTYPE_COUNT);
    method = 1 + data[1] % 5;
    version = 1 + (unsigned)(data[1] / 5) % PTWM_CHUNK_VERSION;
    raw_len = ptwm_load_le16(data + 2);
    data += 4;
    body_len = size - 4;
    if (ptwm_chain_standard(d, method, chain, sizeof(chain), &clen, NULL) != PTWM_OK)
        __builtin_trap();

    /* (a) Hostile payload. */
    out = malloc(raw_len + 1);
    if (!out) return 0;
    (void)ptwm_chunk_decode_version(NULL, version, chain, clen, d, data, body_len, out, raw_len, NULL);
    free(out);

    /* (b) Encode then decode. */
    cap = ptwm_chunk_bound(body_len);
    enc = malloc(cap);
    dec = malloc(body_len + 1);
    if (!enc || !dec) __builtin_trap();
    prm.method = method;
    prm.zstd_level = 1;
    prm.emit_crc = raw_len & 1;
    prm.columns = raw_len >> 8;
    prm.max_streams = 0;
    if (ptwm_chunk_encode(NULL, chain, clen, d, &prm, data, body_len, enc, cap, &len, NULL) != PTWM_OK)
        __builtin_trap();
    if (len > cap) __builtin_trap();
    if (ptwm_chunk_decode(NULL, chain, clen, d, enc, len, dec, body_len, NULL) != PTWM_OK)
        __builtin_trap();
    if (body_len && memcmp(dec, data, body_len) != 0) __builtin_trap();
    free(enc);
    free(dec);
    return 0;
}
