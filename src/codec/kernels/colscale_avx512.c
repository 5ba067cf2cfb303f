/* The column-scale loops compiled for level AVX512, x86-64-v4
 * (kernels/colscale_loops.h). */
#include "colscale_loops.h"

#ifdef PTWM_CPU_X86
COLSCALE_LOOPS(avx512, PTWM_TARGET_V4)
#endif
