/* CPU features, detected once for the whole library, and the run-time cap on
 * them (ptwm_set_isa_limit, PTWM_ISA). Every kernel with a CPU-specific form
 * asks here, at each call, whether the features it needs are allowed:
 * ptwm_cpu_has() is one relaxed atomic load.
 *
 * PTWM_NO_SIMD (or a compiler or target without x86 support) removes the
 * CPU-specific kernels: PTWM_CPU_X86 stays undefined, no kernel compiles a
 * target attribute, and ptwm_cpu_has() answers 0 for every feature. */
#ifndef PTWM_CPU_H
#define PTWM_CPU_H

#include "common.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(PTWM_NO_SIMD)
#define PTWM_CPU_X86 1
#endif

#define PTWM_CPU_SSSE3 (1u << 0)
#define PTWM_CPU_POPCNT (1u << 1)
#define PTWM_CPU_AVX2 (1u << 2)
#define PTWM_CPU_BMI2 (1u << 3)
#define PTWM_CPU_F16C (1u << 4)
#define PTWM_CPU_AVX512F (1u << 5)
#define PTWM_CPU_AVX512BW (1u << 6)
#define PTWM_CPU_AVX512CD (1u << 7)
#define PTWM_CPU_AVX512DQ (1u << 8)
#define PTWM_CPU_AVX512VL (1u << 9)
#define PTWM_CPU_AVX512VBMI (1u << 10)
#define PTWM_CPU_AVX512VBMI2 (1u << 11)
/* The rest of x86-64-v3 (FMA, BMI1, LZCNT, MOVBE): no kernel names them, but
 * the compiler may use them in a copy built for arch=x86-64-v4. */
#define PTWM_CPU_V3REST (1u << 12)
/* Set in every answer once detection has run (so 0 means "not yet"). */
#define PTWM_CPU_KNOWN (1u << 31)

/* The features of the running CPU that the current cap allows. */
extern unsigned ptwm_cpu_allowed; /* read through ptwm_cpu_features only */
unsigned ptwm_cpu_features_slow(void);
PTWM_INLINE unsigned ptwm_cpu_features(void) {
    unsigned f = __atomic_load_n(&ptwm_cpu_allowed, __ATOMIC_RELAXED);
    return likely(f) ? f : ptwm_cpu_features_slow();
}

/* All of the features in `mask` are present and allowed. */
PTWM_INLINE int ptwm_cpu_has(unsigned mask) {
#ifdef PTWM_CPU_X86
    return (ptwm_cpu_features() & mask) == mask;
#else
    (void)mask;
    return 0;
#endif
}

/* Kernels of the vectorising plain loops compiled once per level (planes,
 * microscale): the same C, each copy with its own target attribute. */
#ifdef PTWM_CPU_X86
#if defined(__clang__)
#define PTWM_TARGET_V4                                                                   \
    __attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,bmi,bmi2,fma,f16c," \
                          "lzcnt,movbe,popcnt")))
#else
#define PTWM_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#endif
#define PTWM_TARGET_AVX2 __attribute__((target("avx2")))
/* What those copies may use: levels AVX512 and AVX2 as ptwm.h defines them. */
#define PTWM_CPU_LEVEL_AVX2                                                           \
    (PTWM_CPU_SSSE3 | PTWM_CPU_POPCNT | PTWM_CPU_AVX2 | PTWM_CPU_BMI2 | PTWM_CPU_F16C | \
     PTWM_CPU_V3REST)
#define PTWM_CPU_LEVEL_AVX512 (PTWM_CPU_LEVEL_AVX2 | PTWM_CPU_AVX512F | PTWM_CPU_AVX512BW | \
                               PTWM_CPU_AVX512CD | PTWM_CPU_AVX512DQ | PTWM_CPU_AVX512VL)
#endif

/* One plain C loop body (an always-inline NAME_body), compiled once per level
 * into NAME_v4, NAME_avx2 and NAME_base, and NAME calling the best copy the
 * cap allows (zstd's HUF_DGEN idea): the loops vectorise as wide as the
 * level allows. LINK is `static` or empty; PARAMS and ARGS are parenthesised
 * lists. */
#ifdef PTWM_CPU_X86
#define PTWM_VEC_VARIANTS(LINK, NAME, PARAMS, ARGS)                                  \
    PTWM_TARGET_V4 PTWM_NOINLINE static void NAME##_v4 PARAMS { NAME##_body ARGS; }   \
    PTWM_TARGET_AVX2 PTWM_NOINLINE static void NAME##_avx2 PARAMS { NAME##_body ARGS; } \
    PTWM_NOINLINE static void NAME##_base PARAMS { NAME##_body ARGS; }                \
    LINK void NAME PARAMS {                                                         \
        unsigned f_ = ptwm_cpu_features();                                          \
        if ((f_ & PTWM_CPU_LEVEL_AVX512) == PTWM_CPU_LEVEL_AVX512)                  \
            NAME##_v4 ARGS;                                                         \
        else if (f_ & PTWM_CPU_AVX2)                                                \
            NAME##_avx2 ARGS;                                                       \
        else                                                                        \
            NAME##_base ARGS;                                                       \
    }
#else
#define PTWM_VEC_VARIANTS(LINK, NAME, PARAMS, ARGS) \
    LINK void NAME PARAMS { NAME##_body ARGS; }
#endif

#endif
