/* The column-scale loops compiled for level AVX2 (kernels/colscale_loops.h). */
#include "colscale_loops.h"

#ifdef PTWM_CPU_X86
COLSCALE_LOOPS(avx2, PTWM_TARGET_AVX2)
#endif
