/* Checksums used by the container: CRC32 (ISA-L) for planes, table and
 * footer; XXH3-128 (libxxhash) for a tensor's raw bytes.
 *
 * XXH3-128 values are stored and compared in xxHash's canonical byte order
 * (big-endian, as `xxhsum -H2` prints them), so the wire bytes do not depend
 * on the host. */
#ifndef PTWM_HASH_H
#define PTWM_HASH_H

#include "common.h"
#include "kernels.h"

/* CRC32 (IEEE, as zlib): pass 0 to start, the previous value to continue. */
uint32_t ptwm_crc32(uint32_t crc, const void *p, size_t n);

/* Streaming XXH3-128. A zeroed struct is "not started"; ptwm_xxh128_free on it is fine.
 * Each state belongs to one thread at a time. */
typedef struct ptwm_xxh128 {
    void *state;
    int vec; /* state made by hash_avx2.c (the cap allowed AVX2 when it was made) */
} ptwm_xxh128;

/* Start a hash; a started struct is reset, keeping its memory. */
ptwm_error ptwm_xxh128_begin(ptwm_xxh128 *h, ptwm_err *err);
void ptwm_xxh128_update(ptwm_xxh128 *h, const void *p, size_t n);
/* Write the canonical 16 bytes of what was hashed; the state stays for begin. */
void ptwm_xxh128_digest(const ptwm_xxh128 *h, uint8_t out[16]);
/* Digest, then release the state. */
void ptwm_xxh128_end(ptwm_xxh128 *h, uint8_t out[16]);
void ptwm_xxh128_free(ptwm_xxh128 *h);
/* One-shot form. */
void ptwm_xxh128_oneshot(const void *p, size_t n, uint8_t out[16]);

/* The functions above use hash_avx2.c at level AVX2 and above (its AVX-512
 * loops from level AVX512; the kernel table below is asked at each call),
 * else libxxhash. Tests call both paths directly; callers of the AVX2 forms
 * check ptwm_xxh128_have_avx2() first. */
int ptwm_xxh128_have_avx2(void);
int ptwm_xxh128_have_avx512(void);

/* The platform's kernel table (kernels.h; its lines are in hash.c):
 * XXH3-128 one-shot, and the update of a state hash_avx2.c made (NULL
 * without x86 SIMD); xxh_vec: begin makes such states. */
typedef struct ptwm_hash_kernels {
    ptwm_isa level; /* the level this table was filled for */
    void (*xxh_oneshot)(const void *p, size_t n, uint8_t out[16]);
    void (*xxh_vec_update)(void *s, const void *p, size_t n);
    int xxh_vec;
} ptwm_hash_kernels;
extern ptwm_kernel_set ptwm_hash_kernel_set;
PTWM_INLINE const ptwm_hash_kernels *ptwm_hash_kern(void) {
    return (const ptwm_hash_kernels *)ptwm_kernel_table(&ptwm_hash_kernel_set);
}

#ifdef PTWM_CPU_X86
/* The variants of the table's entries (hash_avx2.c). */
void ptwm_xxh128_avx2_oneshot(const void *p, size_t n, uint8_t out[16]);
void ptwm_xxh128_avx512_oneshot(const void *p, size_t n, uint8_t out[16]);
void ptwm_xxh128_base_update(void *s, const void *p, size_t n);
void ptwm_xxh128_avx2_update(void *s, const void *p, size_t n);
void ptwm_xxh128_avx512_update(void *s, const void *p, size_t n);
/* An opaque XXH3 state, NULL when out of memory; reset before the first update. */
void *ptwm_xxh128_avx2_create(void);
void ptwm_xxh128_avx2_reset(void *s);
/* ptwm_xxh128_base_update: the update with the baseline loops, for a state
 * made here when the cap has since dropped below AVX2. The AVX-512 forms
 * give the same values (on a state from _avx2_create); callers check
 * ptwm_xxh128_have_avx512() first. */
void ptwm_xxh128_avx2_digest(const void *s, uint8_t out[16]);
void ptwm_xxh128_avx2_free(void *s);
#endif
/* Lowercase hex of 16 bytes into buf (33 bytes). */
const char *ptwm_hex128(const uint8_t h[16], char buf[33]);

#endif
