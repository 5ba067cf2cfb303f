/* The float-split and byte-plane loops compiled for level AVX2
 * (kernels/planes_loops.h). */
#include "cpu.h"
#include "planes_loops.h"

#ifdef PTWM_CPU_X86
PLANES_LOOPS(avx2, PTWM_TARGET_AVX2)
#endif
