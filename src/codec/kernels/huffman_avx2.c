/* The Huffman loops compiled for level AVX2: the same C as huffman.c's, with
 * BMI2's flag-free variable shifts (shlx/shrx), which the baseline build
 * cannot assume. */
#include "huffman_kernels.h"

#ifdef PTWM_CPU_X86
HUF_KERNELS(avx2, __attribute__((target("bmi2"))))
#endif
