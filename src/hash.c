/* CRC32 and XXH3-128 wrappers; see hash.h. */
#include "hash.h"

#include <libdeflate.h>
#include <xxhash.h>

uint32_t ptwm_crc32(uint32_t crc, const void *p, size_t n) {
    return libdeflate_crc32(crc, p, n);
}

ptwm_error ptwm_xxh128_begin(ptwm_xxh128 *h, ptwm_err *err) {
    XXH3_state_t *s = XXH3_createState();
    h->state = s;
    if (!s) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for an XXH3 state");
    if (XXH3_128bits_reset(s) != XXH_OK) {
        ptwm_xxh128_free(h);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "XXH3 reset failed");
    }
    return PTWM_OK;
}

void ptwm_xxh128_update(ptwm_xxh128 *h, const void *p, size_t n) {
    if (h->state && n) XXH3_128bits_update((XXH3_state_t *)h->state, p, n);
}

void ptwm_xxh128_end(ptwm_xxh128 *h, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_hash_t v;
    if (!h->state) {
        memset(out, 0, 16);
        return;
    }
    v = XXH3_128bits_digest((XXH3_state_t *)h->state);
    XXH128_canonicalFromHash(&c, v);
    memcpy(out, c.digest, 16);
    ptwm_xxh128_free(h);
}

void ptwm_xxh128_free(ptwm_xxh128 *h) {
    if (h->state) XXH3_freeState((XXH3_state_t *)h->state);
    h->state = NULL;
}

void ptwm_xxh128_oneshot(const void *p, size_t n, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
    memcpy(out, c.digest, 16);
}

const char *ptwm_hex128(const uint8_t h[16], char buf[33]) {
    static const char hex[] = "0123456789abcdef";
    int i;
    for (i = 0; i < 16; i++) {
        buf[2 * i] = hex[h[i] >> 4];
        buf[2 * i + 1] = hex[h[i] & 15];
    }
    buf[32] = 0;
    return buf;
}
