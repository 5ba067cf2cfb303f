/* XXH3-128 with AVX2 or AVX-512 stripe loops, for CPUs that have them (see
 * hash.h).
 *
 * Distribution builds of libxxhash target baseline x86-64 (SSE2). Here the
 * header's own code is compiled inline (XXH_INLINE_ALL, private XXH_INLINE_
 * names), with its AVX2 and AVX-512 accumulate and scramble kernels enabled
 * under function-level target attributes the way upstream's
 * xxh_x86dispatch.c does it: XXH_X86DISPATCH, XXH_DISPATCH_AVX2/AVX512,
 * XXH_TARGET_AVX2/AVX512. XXH_VECTOR stays at the baseline, so the rest of
 * the build keeps its flags; only the functions marked AVX2_FN or AVX512_FN
 * below run vector code, and only the kernel table (hash.c) of a level
 * that has them points at them. XXH3 defines its result independently of the vector width, so the
 * values equal libxxhash's (test_hash compares them). */
#include "hash.h"

#ifdef PTWM_CPU_X86
#define XXH_INLINE_ALL
/* As in xxh_x86dispatch.c: accumulators and secrets 64-byte aligned. The
 * AVX2 kernels load and store the accumulators with aligned 32-byte moves;
 * the baseline's 16-byte alignment only happens to suffice when the
 * optimiser keeps them in registers (at -O0 it faults). */
#define XXH_X86DISPATCH
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((target("avx2")))
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX512 __attribute__((target("avx512f")))
#include <immintrin.h> /* the header includes it only when the whole build is AVX2 */
#include <xxhash.h>

#define AVX2_FN XXH_TARGET_AVX2
#define AVX512_FN XXH_TARGET_AVX512

/* Inputs above 240 bytes; shorter ones have no stripe loop to speed up. */
static AVX2_FN XXH128_hash_t hash_long_avx2(const void *XXH_RESTRICT p, size_t n, XXH64_hash_t seed,
                                            const void *XXH_RESTRICT secret, size_t secret_len) {
    (void)seed;
    (void)secret;
    (void)secret_len;
    return XXH3_hashLong_128b_internal(p, n, XXH3_kSecret, sizeof(XXH3_kSecret), XXH3_accumulate_512_avx2,
                                       XXH3_scrambleAcc_avx2);
}

/* The same stripes 64 bytes a step (faster than AVX2's on data in cache:
 * docs/ARCHITECTURE.md, "Measurements behind the code"). */
static AVX512_FN XXH128_hash_t hash_long_avx512(const void *XXH_RESTRICT p, size_t n, XXH64_hash_t seed,
                                                const void *XXH_RESTRICT secret, size_t secret_len) {
    (void)seed;
    (void)secret;
    (void)secret_len;
    return XXH3_hashLong_128b_internal(p, n, XXH3_kSecret, sizeof(XXH3_kSecret), XXH3_accumulate_512_avx512,
                                       XXH3_scrambleAcc_avx512);
}

static void canonical(XXH128_hash_t v, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, v);
    memcpy(out, c.digest, 16);
}

void ptwm_xxh128_avx2_oneshot(const void *p, size_t n, uint8_t out[16]) {
    canonical(XXH3_128bits_internal(p, n, 0, XXH3_kSecret, sizeof(XXH3_kSecret), hash_long_avx2), out);
}

void ptwm_xxh128_avx512_oneshot(const void *p, size_t n, uint8_t out[16]) {
    canonical(XXH3_128bits_internal(p, n, 0, XXH3_kSecret, sizeof(XXH3_kSecret), hash_long_avx512), out);
}

AVX512_FN void ptwm_xxh128_avx512_update(void *s, const void *p, size_t n) {
    XXH3_update((XXH3_state_t *)s, (const xxh_u8 *)p, n, XXH3_accumulate_512_avx512, XXH3_scrambleAcc_avx512);
}

void *ptwm_xxh128_avx2_create(void) {
    return XXH3_createState();
}

void ptwm_xxh128_avx2_reset(void *s) {
    XXH3_128bits_reset((XXH3_state_t *)s);
}

AVX2_FN void ptwm_xxh128_avx2_update(void *s, const void *p, size_t n) {
    XXH3_update((XXH3_state_t *)s, (const xxh_u8 *)p, n, XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
}

void ptwm_xxh128_base_update(void *s, const void *p, size_t n) {
    XXH3_128bits_update((XXH3_state_t *)s, p, n);
}

/* The digest consumes at most the 256 buffered bytes: the baseline code is enough. */
void ptwm_xxh128_avx2_digest(const void *s, uint8_t out[16]) {
    canonical(XXH3_128bits_digest((const XXH3_state_t *)s), out);
}

void ptwm_xxh128_avx2_free(void *s) {
    XXH3_freeState((XXH3_state_t *)s);
}
#endif
