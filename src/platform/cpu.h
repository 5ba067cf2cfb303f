/* CPU features, detected once for the whole library (cpu.c, the only file
 * that asks the CPU), and the run-time cap on them (ptwm_set_isa_limit,
 * PTWM_ISA). Kernels do not ask here: they are called through their layer's
 * kernel table of the level in effect (kernels.h).
 *
 * PTWM_NO_SIMD (or a compiler or target without x86 support) removes the
 * CPU-specific kernels: PTWM_CPU_X86 (kernels.h) stays undefined, no kernel
 * compiles a target attribute, and the only level is scalar. */
#ifndef PTWM_CPU_H
#define PTWM_CPU_H

#include "common.h"
#include "kernels.h"

/* The highest level whose features the CPU has (detecting them on the first
 * call), and the level in effect: that one under the cap. */
int ptwm_cpu_best(void);
int ptwm_cpu_level(void);

/* Whether this CPU's 512-bit gathers are fast: on AMD's family 1Ah (Zen 5)
 * one rANS stream decodes faster by gathers than by byte permutes (0.54
 * against 0.72 ns a symbol); on the Intel core measured before, the permutes
 * were the faster, and other cores keep them. A trait, not a level: it picks
 * between kernels of one level.
 * ptwm_cpu_set_fast_gather overrides it (0 or 1; -1 asks the CPU again) so
 * tests reach both kernels on any machine. */
int ptwm_cpu_fast_gather(void);
void ptwm_cpu_set_fast_gather(int on);

/* Target attributes of the vectorising plain loops compiled once per level
 * (kernels/planes_loops.h, kernels/colscale_loops.h): the same C, each copy
 * with its own. */
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

/* One copy of a plain C loop body (an always-inline NAME_body) under target
 * attribute ATTR, named NAME_SUFFIX, for a level's table of loops (zstd's
 * HUF_DGEN idea). PARAMS and ARGS are parenthesised lists. */
#define PTWM_LOOP_COPY(ATTR, NAME, SUFFIX, PARAMS, ARGS) \
    ATTR PTWM_NOINLINE static void NAME##_##SUFFIX PARAMS { NAME##_body ARGS; }

#endif
