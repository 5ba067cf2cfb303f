/* What planes.c shares with its vector kernels (kernels/planes_*.c): the
 * signs plane's bit writer and reader, and unaligned 16-byte moves. */
#ifndef PTWM_PLANES_KERNELS_H
#define PTWM_PLANES_KERNELS_H

#include "common.h"
#include "codec_kernels.h"
#include "planes.h"

/* The signs plane, written and read a few bits at a time (LSB first). */
typedef struct sign_writer {
    uint8_t *p;
    uint64_t acc;
    unsigned n; /* bits in acc, < 32 between calls */
} sign_writer;

/* Append the low `cnt` (<= 32) bits of v; v has no bits above them. */
PTWM_INLINE void signs_put(sign_writer *w, uint64_t v, unsigned cnt) {
    w->acc |= v << w->n;
    w->n += cnt;
    if (w->n >= 32) {
        ptwm_store_le32(w->p, (uint32_t)w->acc);
        w->p += 4;
        w->acc >>= 32;
        w->n -= 32;
    }
}

typedef struct sign_reader {
    const uint8_t *p, *end;
    uint64_t acc;
    unsigned n;
} sign_reader;

/* The next `cnt` (<= 32) bits; past the end (or with no plane) zeros. */
PTWM_INLINE uint32_t signs_get(sign_reader *r, unsigned cnt) {
    uint32_t v;
    while (r->n < cnt) {
        if (r->p < r->end) r->acc |= (uint64_t)*r->p++ << r->n;
        r->n += 8;
    }
    v = (uint32_t)(r->acc & ((1ull << cnt) - 1));
    r->acc >>= cnt;
    r->n -= cnt;
    return v;
}

/* Vector loads and stores go through void * casts: unaligned by design, and
 * the casts must not claim an alignment (-Wcast-align). */
#define JOINT_LD128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define JOINT_ST128(p, v) _mm_storeu_si128((__m128i *)(void *)(p), v)

#endif
