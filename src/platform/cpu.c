/* CPU feature detection and the instruction-set cap (see cpu.h, ptwm.h).
 *
 * Detection runs once (pthread_once) with CPUID and XGETBV: a feature counts
 * only when the OS saves its registers (YMM for AVX2, ZMM and mask registers
 * for AVX-512), as libdeflate's cpu_features.c does. The detected features
 * give the best level; the cap (the environment's, then the last one set)
 * lowers it. Kernels are looked up with each call through the layers' kernel
 * tables (kernels.h): setting a cap publishes the tables of the new level,
 * so the change reaches every later call without a lock, and a call already
 * running keeps what it chose. */
#include "cpu.h"

#include <pthread.h>
#include <stdlib.h>

#ifdef PTWM_CPU_X86
#include <cpuid.h>
#endif

#define PTWM_CPU_SSSE3 (1u << 0)
#define PTWM_CPU_POPCNT (1u << 1)
#define PTWM_CPU_AVX2 (1u << 2)
#define PTWM_CPU_BMI2 (1u << 3)
#define PTWM_CPU_F16C (1u << 4)
#define PTWM_CPU_AVX512F (1u << 5)
#define PTWM_CPU_AVX512BW (1u << 6)
#define PTWM_CPU_AVX512CD (1u << 7)
#define PTWM_CPU_AVX512DQ (1u << 8)
#define PTWM_CPU_AVX512VL (1u << 9)
#define PTWM_CPU_AVX512VBMI (1u << 10)
#define PTWM_CPU_AVX512VBMI2 (1u << 11)
#define PTWM_CPU_AVX512BITALG (1u << 13)
/* The rest of x86-64-v3 (FMA, BMI1, LZCNT, MOVBE): no kernel names them, but
 * the compiler may use them in a copy built for arch=x86-64-v4. */
#define PTWM_CPU_V3REST (1u << 12)
/* A trait, in no level's features (cpu.h). */
#define PTWM_CPU_FAST_GATHER (1u << 14)

/* The features of levels AVX2 and AVX512 as ptwm.h defines them (what the
 * loop copies of PTWM_TARGET_AVX2 and PTWM_TARGET_V4 may use, cpu.h). */
#define PTWM_CPU_LEVEL_AVX2                                                           \
    (PTWM_CPU_SSSE3 | PTWM_CPU_POPCNT | PTWM_CPU_AVX2 | PTWM_CPU_BMI2 | PTWM_CPU_F16C | \
     PTWM_CPU_V3REST)
#define PTWM_CPU_LEVEL_AVX512 (PTWM_CPU_LEVEL_AVX2 | PTWM_CPU_AVX512F | PTWM_CPU_AVX512BW | \
                               PTWM_CPU_AVX512CD | PTWM_CPU_AVX512DQ | PTWM_CPU_AVX512VL)

static unsigned cpu_detected;
static int cpu_cap = PTWM_ISA_BEST;
static int gather_override = -1;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* The features each level allows, those of the levels below included (ptwm.h
 * names the levels). */
static const unsigned level_features[PTWM_ISA_BEST + 1] = {
    0,
    PTWM_CPU_SSSE3,
#ifdef PTWM_CPU_X86
    PTWM_CPU_LEVEL_AVX2,
    PTWM_CPU_LEVEL_AVX512,
    PTWM_CPU_LEVEL_AVX512 | PTWM_CPU_AVX512VBMI | PTWM_CPU_AVX512VBMI2 | PTWM_CPU_AVX512BITALG,
#else
    0, 0, 0,
#endif
};

static const char *const level_names[PTWM_ISA_BEST + 1] = {"scalar", "ssse3", "avx2", "avx512",
                                                           "avx512vbmi"};

#ifdef PTWM_CPU_X86
static unsigned cpu_detect(void) {
    unsigned a, b, c, d, f = 0, xcr0 = 0, max, amd;
    if (!__get_cpuid(0, &max, &b, &c, &d)) return 0;
    /* "AuthenticAMD", family 1Ah (base 0Fh plus extended 0Bh) or later */
    amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (amd && ((a >> 8) & 0xf) == 0xf && ((a >> 20) & 0xff) + 0xf >= 0x1a)
        f |= PTWM_CPU_FAST_GATHER;
    if (c & (1u << 9)) f |= PTWM_CPU_SSSE3;
    if (c & (1u << 23)) f |= PTWM_CPU_POPCNT;
    if (c & (1u << 27)) { /* OSXSAVE: XGETBV says which register states the OS saves */
        unsigned hi;
        __asm__("xgetbv" : "=a"(xcr0), "=d"(hi) : "c"(0));
        (void)hi;
    }
    if ((xcr0 & 0x6) == 0x6 && (c & (1u << 28))) { /* SSE and YMM state, AVX */
        unsigned fma = c & (1u << 12), movbe = c & (1u << 22), f16c = c & (1u << 29);
        unsigned lzcnt = 0, a8, b8, c8, d8;
        if (__get_cpuid(0x80000001, &a8, &b8, &c8, &d8)) lzcnt = c8 & (1u << 5);
        if (f16c) f |= PTWM_CPU_F16C;
        if (max >= 7) {
            __cpuid_count(7, 0, a, b, c, d);
            if (b & (1u << 5)) f |= PTWM_CPU_AVX2;
            if (b & (1u << 8)) f |= PTWM_CPU_BMI2;
            if (fma && movbe && lzcnt && (b & (1u << 3))) f |= PTWM_CPU_V3REST;
            if ((xcr0 & 0xe0) == 0xe0) { /* opmask and ZMM state */
                if (b & (1u << 16)) f |= PTWM_CPU_AVX512F;
                if (b & (1u << 17)) f |= PTWM_CPU_AVX512DQ;
                if (b & (1u << 28)) f |= PTWM_CPU_AVX512CD;
                if (b & (1u << 30)) f |= PTWM_CPU_AVX512BW;
                if (b & (1u << 31)) f |= PTWM_CPU_AVX512VL;
                if (c & (1u << 1)) f |= PTWM_CPU_AVX512VBMI;
                if (c & (1u << 6)) f |= PTWM_CPU_AVX512VBMI2;
                if (c & (1u << 12)) f |= PTWM_CPU_AVX512BITALG;
            }
        }
    }
    return f;
}
#else
static unsigned cpu_detect(void) { return 0; }
#endif

static void cpu_init(void) {
    const char *env = getenv("PTWM_ISA");
    ptwm_isa cap;
    cpu_detected = cpu_detect();
    /* An unknown name asks for a cap all the same: the safest one. */
    if (env && *env)
        cpu_cap = ptwm_isa_from_name(env, &cap, NULL) == PTWM_OK ? (int)cap : PTWM_ISA_SCALAR;
}

int ptwm_cpu_best(void) {
    int l = 0;
    pthread_once(&cpu_once, cpu_init);
    while (l < PTWM_ISA_BEST &&
           (cpu_detected & level_features[l + 1]) == level_features[l + 1])
        l++;
    return l;
}

int ptwm_cpu_level(void) {
    return PTWM_MIN(ptwm_cpu_best(), __atomic_load_n(&cpu_cap, __ATOMIC_RELAXED));
}

int ptwm_cpu_fast_gather(void) {
    int o = __atomic_load_n(&gather_override, __ATOMIC_RELAXED);
    pthread_once(&cpu_once, cpu_init);
    return o >= 0 ? o : (cpu_detected & PTWM_CPU_FAST_GATHER) != 0;
}

void ptwm_cpu_set_fast_gather(int on) {
    __atomic_store_n(&gather_override, on < 0 ? -1 : on != 0, __ATOMIC_RELAXED);
}

ptwm_isa ptwm_set_isa_limit(ptwm_isa level) {
    int l = (int)level;
    pthread_once(&cpu_once, cpu_init); /* the environment's cap must not land later */
    __atomic_store_n(&cpu_cap, l < 0 ? 0 : PTWM_MIN(l, PTWM_ISA_BEST), __ATOMIC_RELAXED);
    ptwm_kernels_publish();
    return ptwm_isa_level();
}

ptwm_isa ptwm_isa_level(void) {
    return (ptwm_isa)ptwm_cpu_level();
}

const char *ptwm_isa_name(ptwm_isa level) {
    return (unsigned)level <= PTWM_ISA_BEST ? level_names[level] : "?";
}

ptwm_error ptwm_isa_from_name(const char *name, ptwm_isa *out, ptwm_err *err) {
    int l;
    if (!name || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_isa_from_name: NULL argument");
    for (l = 0; l <= PTWM_ISA_BEST; l++) {
        if (strcmp(name, level_names[l]) == 0) {
            *out = (ptwm_isa)l;
            return PTWM_OK;
        }
    }
    return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                     "'%s' is not an instruction set: use scalar, ssse3, avx2, avx512 or avx512vbmi",
                     name);
}
