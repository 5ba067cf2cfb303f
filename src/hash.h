/* Checksums used by the container: CRC32 (libdeflate) for planes, table and
 * footer; XXH3-128 (libxxhash) for a tensor's raw bytes.
 *
 * XXH3-128 values are stored and compared in xxHash's canonical byte order
 * (big-endian, as `xxhsum -H2` prints them), so the wire bytes do not depend
 * on the host. */
#ifndef PTWM_HASH_H
#define PTWM_HASH_H

#include "common.h"

/* CRC32 (IEEE, as zlib): pass 0 to start, the previous value to continue. */
uint32_t ptwm_crc32(uint32_t crc, const void *p, size_t n);

/* Streaming XXH3-128. A zeroed struct is "not started"; ptwm_xxh128_free on it is fine. */
typedef struct ptwm_xxh128 {
    void *state;
} ptwm_xxh128;

ptwm_error ptwm_xxh128_begin(ptwm_xxh128 *h, ptwm_err *err);
void ptwm_xxh128_update(ptwm_xxh128 *h, const void *p, size_t n);
/* Write the canonical 16 bytes and release the state. */
void ptwm_xxh128_end(ptwm_xxh128 *h, uint8_t out[16]);
void ptwm_xxh128_free(ptwm_xxh128 *h);
/* One-shot form. */
void ptwm_xxh128_oneshot(const void *p, size_t n, uint8_t out[16]);
/* Lowercase hex of 16 bytes into buf (33 bytes). */
const char *ptwm_hex128(const uint8_t h[16], char buf[33]);

#endif
