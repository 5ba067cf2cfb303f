/* Kernels of level AVX2: the float-split and byte-plane loops
 * (kernels/planes_loops.h) and the joint planes' split (see planes.h). */
#include "cpu.h"
#include "planes_kernels.h"
#include "planes_loops.h"

#ifdef PTWM_CPU_X86
#include <immintrin.h>

PLANES_LOOPS(avx2, PTWM_TARGET_AVX2)

/* 32 elements a step. AVX2 has no 256-entry byte lookup, so an exponent's
 * rank comes from comparing it with the (at most 15) exponents the map
 * holds; j and the nibbles as the VBMI loop makes them (16-bit lanes
 * narrowed to bytes), the escapes' exponents from the same compares. The
 * scalar loop had been 18% of compress time at this level. */
__attribute__((target("avx2"))) size_t
ptwm_joint_split_avx2(const uint8_t *restrict ex, const uint8_t *restrict sm, size_t n,
                      const uint8_t rank[256], uint8_t *restrict j, uint8_t *restrict nib,
                      uint8_t *restrict esc, size_t *nesc) {
    const __m256i lo4 = _mm256_set1_epi8(15), hi4 = _mm256_set1_epi8((char)0xf0);
    const __m256i w_lo = _mm256_set1_epi16(0x000f), w_hi = _mm256_set1_epi16(0x00f0);
    const __m256i escape = _mm256_set1_epi8(PTWM_JOINT_MAP);
    __m256i val[PTWM_JOINT_MAP], rk_of[PTWM_JOINT_MAP];
    unsigned nm = 0, s, k;
    size_t i, ne = 0;
    *nesc = 0;
    for (s = 0; s < 256; s++)
        if (rank[s] < PTWM_JOINT_MAP) {
            if (nm == PTWM_JOINT_MAP) return 0; /* not a map: the scalar loop codes it */
            val[nm] = _mm256_set1_epi8((char)s);
            rk_of[nm++] = _mm256_set1_epi8((char)rank[s]);
        }
    for (i = 0; i + 32 <= n; i += 32) {
        __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(ex + i));
        __m256i sv = _mm256_loadu_si256((const __m256i *)(const void *)(sm + i));
        __m256i rk = escape, w;
        unsigned m;
        for (k = 0; k < nm; k++) rk = _mm256_blendv_epi8(rk, rk_of[k], _mm256_cmpeq_epi8(e, val[k]));
        _mm256_storeu_si256((__m256i *)(void *)(j + i),
                            _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(rk, 4), hi4),
                                            _mm256_and_si256(_mm256_srli_epi16(sv, 4), lo4)));
        /* nibble pair k: element 2k's low nibble, then 2k + 1's */
        w = _mm256_or_si256(_mm256_and_si256(sv, w_lo), _mm256_and_si256(_mm256_srli_epi16(sv, 4), w_hi));
        w = _mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0xd8);
        _mm_storeu_si128((__m128i *)(void *)(nib + i / 2), _mm256_castsi256_si128(w));
        m = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(rk, escape));
        for (; m; m &= m - 1) esc[ne++] = ex[i + (unsigned)__builtin_ctz(m)]; /* rare */
    }
    *nesc = ne;
    return i;
}
#endif
