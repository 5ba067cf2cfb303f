/* The widening kernels' variants, so tests can check every one this CPU runs
 * (the public functions use only the fastest), and the load layer's kernel
 * table (kernels.h), whose entry per level is one of them. */
#ifndef PTWM_WIDEN_H
#define PTWM_WIDEN_H

#include "common.h"
#include "kernels.h"

typedef struct ptwm_widen_impl {
    const char *name;
    void (*bf16_to_f32)(const uint16_t *restrict, float *restrict, size_t);
    void (*f16_to_f32)(const uint16_t *restrict, float *restrict, size_t);
    void (*f32_to_bf16)(const float *restrict, uint16_t *restrict, size_t);
} ptwm_widen_impl;

/* The variants the running CPU supports and the cap allows, plain C first,
 * fastest last. */
size_t ptwm_widen_variants(const ptwm_widen_impl *const **out);

/* The table of each level is the variant it runs (widen.c has the lines). */
extern ptwm_kernel_set ptwm_widen_kernel_set;
PTWM_INLINE const ptwm_widen_impl *ptwm_widen_kern(void) {
    return (const ptwm_widen_impl *)ptwm_kernel_table(&ptwm_widen_kernel_set);
}

extern const ptwm_widen_impl ptwm_widen_scalar;
#ifdef PTWM_CPU_X86
extern const ptwm_widen_impl ptwm_widen_avx2, ptwm_widen_f16c; /* widen_avx2.c */
#endif

#endif
