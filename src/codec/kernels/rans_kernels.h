/* What the rANS coder (rans_encode.c, rans_decode.c) shares with its
 * per-level kernels (kernels/rans_*.c): the state layout, the encoder's word
 * writer and vector tables, and unaligned vector moves. The format and the
 * reasons for its shape are in rans.c. */
#ifndef PTWM_RANS_KERNELS_H
#define PTWM_RANS_KERNELS_H

#include "common.h"
#include "codec_kernels.h"

#define RANS_STATES 32 /* four vectors of eight; order 1: one state per segment */
#define RANS_O0_STATES RANS_STATES
#define RANS_L (1u << 16)
/* The largest precision of the packed decode table (rans_table.c,
 * ptwm_rans_dtab_packs), and the entries its build may write past the last
 * slot. */
#define RANS_PACK_PREC 12
#define RANS_PACK_SLACK 15

/* The vector decoders read each stream's words this many bytes ahead
 * (about ten rounds): the loads of a stream's next words are on its chain,
 * and the hardware's prefetch left them waiting on memory often enough that
 * asking ahead made whole BF16 and F32 decodes 3-9% faster on Zen 5
 * (docs/SCALING.md, "Reading a stream ahead"). */
#define RANS_DEC_AHEAD 640
#define RANS_READ_AHEAD(p) __builtin_prefetch((const void *)((p) + RANS_DEC_AHEAD), 0, 3)

/* Backward word writer: words go down from `p` towards `lim`. */
typedef struct rans_ewriter {
    uint8_t *p, *lim;
    int full;
} ewriter;

/* Bytes a round of one symbol per state can write, plus the spare word the
 * fast form stores below p. */
#define ENC_ROUND_MARGIN (2 * RANS_STATES + 2)

/* The order-0 encoder's tables for the vector loop: per symbol the 32-bit
 * reciprocal r - 2^32 of the portable form (see enc_sym) and f << 16 | cum;
 * x_max = f << (32 - prec), M - f and s = ceil(log2 f) follow from f. */
typedef struct rans_vsym {
    uint32_t rcp[256];
    uint32_t fc[256];
} enc_vsym;

/* Vector loads and stores go through void * casts: unaligned by design
 * (loadu/storeu), and the casts must not claim an alignment (-Wcast-align). */
#define RANS_LD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define RANS_ST256(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define RANS_LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

#endif
