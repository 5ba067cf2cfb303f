/* CRC32 and XXH3-128 wrappers; see hash.h. XXH3 runs through hash_avx2.c
 * where the platform's kernel table (its lines are below) says so, else
 * through libxxhash. */
#include "hash.h"

#include <isa-l/crc.h>
#include <xxhash.h>

/* ISA-L's gzip CRC is zlib's CRC32; it folds 64 bytes a step with
 * VPCLMULQDQ where the CPU has it, several times libdeflate's speed
 * (docs/ARCHITECTURE.md, "Dependencies and why"). ISA-L picks its kernel
 * itself: the instruction-set cap does not reach it. */
uint32_t ptwm_crc32(uint32_t crc, const void *p, size_t n) {
    /* ISA-L reads nothing for n == 0, but takes a non-const pointer. */
    return n ? crc32_gzip_refl(crc, (const unsigned char *)p, (uint64_t)n) : crc;
}

/* A state is made, reset and freed by one implementation (h->vec says
 * which). Updates of a hash_avx2.c state take the loops of the kernel table
 * in effect at each call (AVX-512, AVX2 or baseline); a libxxhash state,
 * made while the cap was below AVX2, stays with libxxhash. */
#ifndef PTWM_CPU_X86
/* No AVX2 forms in this build: no state is ever made by them. */
#define ptwm_xxh128_avx2_create() NULL
#define ptwm_xxh128_avx2_reset(s) ((void)0)
#define ptwm_xxh128_avx2_digest(s, out) ((void)0)
#define ptwm_xxh128_avx2_free(s) ((void)0)
#endif

static void canonical(XXH128_hash_t v, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, v);
    memcpy(out, c.digest, 16);
}

ptwm_error ptwm_xxh128_begin(ptwm_xxh128 *h, ptwm_err *err) {
    if (!h->state) {
        h->vec = ptwm_hash_kern()->xxh_vec;
        h->state = h->vec ? ptwm_xxh128_avx2_create() : (void *)XXH3_createState();
        if (!h->state) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for an XXH3 state");
    }
    /* Resetting to the default secret cannot fail on a valid state. */
    if (h->vec)
        ptwm_xxh128_avx2_reset(h->state);
    else
        XXH3_128bits_reset((XXH3_state_t *)h->state);
    return PTWM_OK;
}

void ptwm_xxh128_update(ptwm_xxh128 *h, const void *p, size_t n) {
    if (!h->state || !n) return;
    if (!h->vec)
        XXH3_128bits_update((XXH3_state_t *)h->state, p, n);
    else
        ptwm_hash_kern()->xxh_vec_update(h->state, p, n);
}

void ptwm_xxh128_digest(const ptwm_xxh128 *h, uint8_t out[16]) {
    if (!h->state)
        memset(out, 0, 16);
    else if (h->vec)
        ptwm_xxh128_avx2_digest(h->state, out);
    else
        canonical(XXH3_128bits_digest((const XXH3_state_t *)h->state), out);
}

void ptwm_xxh128_end(ptwm_xxh128 *h, uint8_t out[16]) {
    ptwm_xxh128_digest(h, out);
    ptwm_xxh128_free(h);
}

void ptwm_xxh128_free(ptwm_xxh128 *h) {
    if (!h->state) return;
    if (h->vec)
        ptwm_xxh128_avx2_free(h->state);
    else
        XXH3_freeState((XXH3_state_t *)h->state);
    h->state = NULL;
}

static void xxh128_scalar_oneshot(const void *p, size_t n, uint8_t out[16]) {
    canonical(XXH3_128bits(p, n), out);
}

/* The platform's kernel table (kernels.h): which variant each level runs. */
static void hash_kernels_fill(void *table, ptwm_isa level) {
    ptwm_hash_kernels *k = (ptwm_hash_kernels *)table;
    memset(k, 0, sizeof(*k));
    k->level = level;
    k->xxh_oneshot = xxh128_scalar_oneshot;
#ifdef PTWM_CPU_X86
    /* A state hash_avx2.c made before the cap dropped keeps its own loops. */
    k->xxh_vec_update = ptwm_xxh128_base_update;
    if (level >= PTWM_ISA_AVX2) {
        k->xxh_oneshot = ptwm_xxh128_avx2_oneshot;
        k->xxh_vec_update = ptwm_xxh128_avx2_update;
        k->xxh_vec = 1;
    }
    if (level >= PTWM_ISA_AVX512) {
        k->xxh_oneshot = ptwm_xxh128_avx512_oneshot;
        k->xxh_vec_update = ptwm_xxh128_avx512_update;
    }
#endif
}

static ptwm_hash_kernels hash_tables[PTWM_ISA_BEST + 1];
ptwm_kernel_set ptwm_hash_kernel_set = {"hash", sizeof(ptwm_hash_kernels), hash_kernels_fill,
                                        hash_tables, NULL, NULL};

int ptwm_xxh128_have_avx2(void) {
    return ptwm_hash_kern()->level >= PTWM_ISA_AVX2;
}

int ptwm_xxh128_have_avx512(void) {
    return ptwm_hash_kern()->level >= PTWM_ISA_AVX512;
}

void ptwm_xxh128_oneshot(const void *p, size_t n, uint8_t out[16]) {
    ptwm_hash_kern()->xxh_oneshot(p, n, out);
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
