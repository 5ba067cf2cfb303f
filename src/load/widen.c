/* Exact conversions between F32 and the 16-bit float formats.
 *
 * BF16 is the top half of an F32, so widening is a shift and exact for every
 * pattern, NaN payloads included (bf16.to(torch.float32)).
 *
 * F16 is widened with integer bit manipulation only, so no floating-point
 * operation can touch a NaN (hardware conversions such as F16C's vcvtph2ps
 * quiet a signalling NaN; numpy's npy_halfbits_to_floatbits and this code keep
 * the payload bits as they are, shifted into place). Subnormals go through an
 * int-to-float conversion of the 10-bit mantissa, which is exact. Every branch
 * is a select, so the loops vectorise with plain SSE2; an AVX2 copy of the same
 * loops (widen_avx2.c) is chosen through the load layer's kernel table
 * (kernels.h), whose lines are here.
 */
#include "widen_loops.h"

PTWM_WIDEN_LOOPS(generic, )

const ptwm_widen_impl ptwm_widen_scalar = {"generic", bf16_to_f32_generic, f16_to_f32_generic,
                                            f32_to_bf16_generic};

/* The variants the cap allows, in order: F16C comes with AVX2 in the levels
 * (ptwm.h), so they are always a prefix of the list. */
size_t ptwm_widen_variants(const ptwm_widen_impl *const **out) {
#ifdef PTWM_CPU_X86
    static const ptwm_widen_impl *const list[3] = {&ptwm_widen_scalar, &ptwm_widen_avx2,
                                                   &ptwm_widen_f16c};
    *out = list;
    return ptwm_isa_level() >= PTWM_ISA_AVX2 ? 3 : 1;
#else
    static const ptwm_widen_impl *const list[1] = {&ptwm_widen_scalar};
    *out = list;
    return 1;
#endif
}

/* Each level's table is the fastest variant it allows. */
static void widen_kernels_fill(void *table, ptwm_isa level) {
    const ptwm_widen_impl *v = &ptwm_widen_scalar;
#ifdef PTWM_CPU_X86
    if (level >= PTWM_ISA_AVX2) v = &ptwm_widen_f16c; /* F16C comes with AVX2 (cpu.h) */
#else
    (void)level;
#endif
    memcpy(table, v, sizeof(*v));
}

static ptwm_widen_impl widen_tables[PTWM_ISA_BEST + 1];
ptwm_kernel_set ptwm_widen_kernel_set = {"widen", sizeof(ptwm_widen_impl), widen_kernels_fill,
                                         widen_tables, NULL, NULL};

/* The fastest variant the cap allows, asked at each call. */
#define widen_choose() ptwm_widen_kern()

void ptwm_bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    widen_choose()->bf16_to_f32(src, dst, n);
}

void ptwm_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    widen_choose()->f16_to_f32(src, dst, n);
}

void ptwm_f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    widen_choose()->f32_to_bf16(src, dst, n);
}
