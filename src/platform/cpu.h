/* CPU features, detected once for the whole library (cpu.c, the only file
 * that asks the CPU), and the run-time cap on them (ptwm_set_isa_limit,
 * PTWM_ISA). Kernels do not ask here: they are called through the kernel
 * table of the level in effect (kernels.h).
 *
 * PTWM_NO_SIMD (or a compiler or target without x86 support) removes the
 * CPU-specific kernels: PTWM_CPU_X86 (kernels.h) stays undefined, no kernel
 * compiles a target attribute, and the only level is scalar. */
#ifndef PTWM_CPU_H
#define PTWM_CPU_H

#include "common.h"
#include "kernels.h"

/* Target attributes of the vectorising plain loops compiled once per level
 * (kernels/planes_loops.h, PTWM_VEC_VARIANTS): the same C, each copy with
 * its own. */
#ifdef PTWM_CPU_X86
#if defined(__clang__)
#define PTWM_TARGET_V4                                                                   \
    __attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,bmi,bmi2,fma,f16c," \
                          "lzcnt,movbe,popcnt")))
#else
#define PTWM_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#endif
#define PTWM_TARGET_AVX2 __attribute__((target("avx2")))
#endif

/* One plain C loop body (an always-inline NAME_body), compiled once per level
 * into NAME_v4, NAME_avx2 and NAME_base in the module's own file, and NAME
 * calling the copy of the kernel table's level (zstd's HUF_DGEN idea). The
 * column-scale loops (microscale.c) still use it; a table entry and copies
 * in per-level files, as kernels/planes_loops.h does, are the form to move
 * them to. LINK is `static` or empty; PARAMS and ARGS are parenthesised
 * lists. */
#ifdef PTWM_CPU_X86
#define PTWM_VEC_VARIANTS(LINK, NAME, PARAMS, ARGS)                                  \
    PTWM_TARGET_V4 PTWM_NOINLINE static void NAME##_v4 PARAMS { NAME##_body ARGS; }   \
    PTWM_TARGET_AVX2 PTWM_NOINLINE static void NAME##_avx2 PARAMS { NAME##_body ARGS; } \
    PTWM_NOINLINE static void NAME##_base PARAMS { NAME##_body ARGS; }                \
    LINK void NAME PARAMS {                                                         \
        ptwm_isa l_ = ptwm_kern()->level;                                           \
        if (l_ >= PTWM_ISA_AVX512)                                                  \
            NAME##_v4 ARGS;                                                         \
        else if (l_ >= PTWM_ISA_AVX2)                                               \
            NAME##_avx2 ARGS;                                                       \
        else                                                                        \
            NAME##_base ARGS;                                                       \
    }
#else
#define PTWM_VEC_VARIANTS(LINK, NAME, PARAMS, ARGS) \
    LINK void NAME PARAMS { NAME##_body ARGS; }
#endif

#endif
