/* Kernel tables: for every kernel with CPU-specific forms, the form the
 * instruction-set cap allows (docs/ARCHITECTURE.md, "Instruction sets").
 *
 * The layer that owns kernels owns their table: a struct of function
 * pointers and a function that fills it for one level (the platform's
 * hashes in hash.c, the codec's in codec_kernels.c, the load layer's
 * widening in widen.c). This file is the mechanism they share: a layer's
 * set registers itself at its first use, when the table of every level up
 * to the CPU's best is filled and the one of the capped level published;
 * setting a cap (ptwm_set_isa_limit, PTWM_ISA; cpu.c) publishes every
 * registered set's table of the new level. A caller loads the pointer once
 * per call and calls through it: a call already running keeps the kernels
 * it chose.
 *
 * Each variant lives in a file named for the level whose table line picks it
 * (src/codec/kernels/rans_avx2.c, src/load/widen_avx2.c, ...); the plain C
 * forms stay in their module. Kernels named "a prefix" process what their
 * vector loop can and return how far they got: the module's plain loop does
 * the rest, so their plain form is a stub returning where it started. */
#ifndef PTWM_KERNELS_H
#define PTWM_KERNELS_H

#include "common.h"

/* The one guard of x86 SIMD code: PTWM_NO_SIMD (the portable build) or a
 * compiler or target without x86 intrinsics leaves it undefined, and no
 * CPU-specific kernel is compiled at all. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(PTWM_NO_SIMD)
#define PTWM_CPU_X86 1
#endif

/* One layer's kernel tables, defined by that layer with static storage:
 *   static T tables[PTWM_ISA_BEST + 1];
 *   ptwm_kernel_set set = {"name", sizeof(T), fill, tables, NULL, NULL};
 * fill writes every entry of one level's table (a level starts from the
 * plain forms; each level above overrides what its instructions do faster). */
typedef struct ptwm_kernel_set {
    const char *name;
    size_t size;                          /* bytes of one table */
    void (*fill)(void *table, ptwm_isa level);
    void *tables;                         /* PTWM_ISA_BEST + 1 tables */
    const void *active;                   /* the capped level's; NULL until registered */
    struct ptwm_kernel_set *next;         /* the registered sets (kernels.c) */
} ptwm_kernel_set;

/* Register `set` on its first call (fill its tables, publish the capped
 * level's); return its table in effect. */
const void *ptwm_kernel_set_slow(ptwm_kernel_set *set);

/* The table in effect (acquire: its entries are filled before the pointer is
 * published). */
PTWM_INLINE const void *ptwm_kernel_table(ptwm_kernel_set *set) {
    const void *t = __atomic_load_n(&set->active, __ATOMIC_ACQUIRE);
    return likely(t != NULL) ? t : ptwm_kernel_set_slow(set);
}

/* Publish every registered set's table of the level in effect (cpu.c, after
 * the cap changed). */
void ptwm_kernels_publish(void);

#endif
