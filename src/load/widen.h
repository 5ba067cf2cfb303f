/* The widening kernels' variants, so tests can check every one this CPU runs
 * (the public functions use only the fastest). */
#ifndef PTWM_WIDEN_H
#define PTWM_WIDEN_H

#include "common.h"

typedef struct ptwm_widen_impl {
    const char *name;
    void (*bf16_to_f32)(const uint16_t *restrict, float *restrict, size_t);
    void (*f16_to_f32)(const uint16_t *restrict, float *restrict, size_t);
    void (*f32_to_bf16)(const float *restrict, uint16_t *restrict, size_t);
} ptwm_widen_impl;

/* The variants the running CPU supports and the cap allows, plain C first,
 * fastest last. */
size_t ptwm_widen_variants(const ptwm_widen_impl *const **out);

#endif
