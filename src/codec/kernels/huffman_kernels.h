/* What huffman.c shares with its per-level kernels (kernels/huffman_*.c):
 * the stream layout, the encoder's four-stream writer and the decoder's fast
 * loops, written once as macros and compiled for each level by
 * HUF_KERNELS (the same C; the AVX2 level's copy may use BMI2's flag-free
 * shifts shlx/shrx). */
#ifndef PTWM_HUFFMAN_KERNELS_H
#define PTWM_HUFFMAN_KERNELS_H

#include "common.h"
#include "codec_kernels.h"

#define HUF_MAX_LEN 13  /* longest code the format allows */
#define HUF_FAST_LEN 11 /* the encoder prefers this limit when it costs little */
#define HUF_STREAMS 4
/* Codes per stream between flushes (encoder) and refills (decoder): a 64-bit
 * container holds 63 usable bits (the decoder keeps a marker in bit 0) and up
 * to 7 are left over from the previous refill: 7 + 4 * 13 = 59 <= 63. The
 * decoder's loops for 11-bit tables take 5 (7 + 5 * 11 = 62). */
#define HUF_PER_FLUSH 4

/* Table entry: code length in bits 0..5, symbol in bits 8..15. */
typedef uint16_t huf_entry;
typedef uint64_t huf_mentry;

/* Bit writer: LSB-first 64-bit container, whole bytes flushed with one 8-byte
 * store while 8 bytes of room remain before `end`, byte by byte after that. */
typedef struct {
    uint64_t bits;
    unsigned count;
    uint8_t *out;
    uint8_t *end;
} huf_writer;

PTWM_INLINE void huf_flush(huf_writer *w) {
    unsigned nbytes = w->count >> 3;
    if (likely(w->end - w->out >= 8)) {
        ptwm_store_le64(w->out, w->bits);
    } else {
        unsigned k;
        for (k = 0; k < nbytes; k++) w->out[k] = (uint8_t)(w->bits >> (8 * k));
    }
    w->out += nbytes;
    w->bits = w->bits >> (8 * nbytes); /* nbytes <= 7: count <= 7 + 4 * 13 */
    w->count &= 7;
}

/* All four segments at once, in lockstep, so the CPU has four independent
 * chains (as the decoder does). Each stream is written only inside its own
 * exact region [out[s], end[s]): the byte-wise flush near a region's end keeps
 * an 8-byte store from clobbering the next stream's first bytes. */
PTWM_INLINE void huf_encode_4streams(const uint8_t *src, const size_t begin[HUF_STREAMS + 1],
                                     const uint32_t ce[256], uint8_t *const out[HUF_STREAMS],
                                     uint8_t *const end[HUF_STREAMS]) {
    huf_writer w0, w1, w2, w3;
    const uint8_t *s0 = src + begin[0], *s1 = src + begin[1], *s2 = src + begin[2],
                  *s3 = src + begin[3];
    size_t q = begin[1], extra = begin[4] - begin[3] - q, i;
    w0.bits = w1.bits = w2.bits = w3.bits = 0;
    w0.count = w1.count = w2.count = w3.count = 0;
    w0.out = out[0], w1.out = out[1], w2.out = out[2], w3.out = out[3];
    w0.end = end[0], w1.end = end[1], w2.end = end[2], w3.end = end[3];
#define HUF_PUT(w, s)                                       \
    do {                                                    \
        uint32_t e_ = ce[(s)];                              \
        w.bits |= (uint64_t)(e_ & 0xffff) << w.count;       \
        w.count += e_ >> 16;                                \
    } while (0)
    /* segment 3's extra last symbols, so the rest runs in lockstep */
    for (i = q + extra; i > q; i--) {
        HUF_PUT(w3, s3[i - 1]);
        huf_flush(&w3);
    }
    i = q;
    while (i % HUF_PER_FLUSH) {
        i--;
        HUF_PUT(w0, s0[i]);
        HUF_PUT(w1, s1[i]);
        HUF_PUT(w2, s2[i]);
        HUF_PUT(w3, s3[i]);
        huf_flush(&w0);
        huf_flush(&w1);
        huf_flush(&w2);
        huf_flush(&w3);
    }
    while (i) {
        size_t k;
        for (k = 1; k <= HUF_PER_FLUSH; k++) {
            HUF_PUT(w0, s0[i - k]);
            HUF_PUT(w1, s1[i - k]);
            HUF_PUT(w2, s2[i - k]);
            HUF_PUT(w3, s3[i - k]);
        }
        i -= HUF_PER_FLUSH;
        huf_flush(&w0);
        huf_flush(&w1);
        huf_flush(&w2);
        huf_flush(&w3);
    }
#undef HUF_PUT
#define HUF_FINISH(w)                                                          \
    do {                                                                       \
        w.bits |= (uint64_t)1 << w.count; /* sentinel */                       \
        w.count += 1 + 7;                 /* then round up to a byte */        \
        huf_flush(&w);                                                         \
    } while (0)
    HUF_FINISH(w0);
    HUF_FINISH(w1);
    HUF_FINISH(w2);
    HUF_FINISH(w3);
#undef HUF_FINISH
}

/* Fast loop state per stream: `bits` holds the 64 bits loaded at `ip` with a
 * marker 1 in bit 0, shifted left by the bits consumed, so ctz(bits) is the
 * number consumed (zstd's trick: no separate counter). Bit 0 of the loaded
 * word is never needed: at most 62 bits are consumed per load. */
typedef struct huf_state {
    const uint8_t *start[HUF_STREAMS];
    const uint8_t *ip[HUF_STREAMS];
    uint64_t bits[HUF_STREAMS];
    uint8_t *op[HUF_STREAMS];
    uint8_t *oend[HUF_STREAMS];
} huf_state;

/* Iterations that keep every refill inside its stream (each moves ip back by
 * at most 7 bytes) and every output inside its segment. */
PTWM_INLINE size_t huf_safe_iters(const huf_state *st, unsigned per) {
    size_t iters = SIZE_MAX;
    unsigned s;
    for (s = 0; s < HUF_STREAMS; s++) {
        size_t a = (size_t)(st->ip[s] - st->start[s]) / 7;
        size_t b = (size_t)(st->oend[s] - st->op[s]) / per;
        iters = PTWM_MIN(iters, PTWM_MIN(a, b));
    }
    return iters;
}

/* Multi-symbol table (zstd's HUF X2 idea, taken further): indexed by the next
 * 11 bits, each entry holds every whole code those bits contain, up to 4:
 *   bits 0..5   bits consumed (the shift count, used unmasked)
 *   bit 7       HUF_M_LONG: the first code is longer than 11 bits; decode
 *               one symbol from the 13-bit single table instead
 *   bits 8..39  the symbols, first in the low byte
 *   bits 40..42 how many symbols
 * The decoder stores all 4 symbol bytes with one host-order store (so this
 * path is for little-endian hosts only) and advances by the count. Exponent
 * planes (~3 bits a symbol) get ~3 symbols per lookup. */
#define HUF_M_LONG 0x80u
#define HUF_M_SIZE (1u << HUF_FAST_LEN)

#define HUF_DEC(s, j)                                         \
    do {                                                      \
        huf_entry e_ = table[bits##s >> shift];               \
        bits##s <<= e_ & 63;                                  \
        op##s[j] = (uint8_t)(e_ >> 8);                        \
    } while (0)
#define HUF_DEC4(j) \
    HUF_DEC(0, j);  \
    HUF_DEC(1, j);  \
    HUF_DEC(2, j);  \
    HUF_DEC(3, j)
#define HUF_MDEC(s)                                                          \
    do {                                                                     \
        huf_mentry e_ = mt[bits##s >> (64 - HUF_FAST_LEN)];                  \
        if (unlikely(e_ & HUF_M_LONG)) {                                     \
            huf_entry l_ = table[bits##s >> (64 - HUF_MAX_LEN)];             \
            *op##s++ = (uint8_t)(l_ >> 8);                                   \
            bits##s <<= l_ & 63;                                             \
        } else {                                                             \
            uint32_t sy_ = (uint32_t)(e_ >> 8);                              \
            memcpy(op##s, &sy_, 4);                                          \
            op##s += (e_ >> 40) & 7;                                         \
            bits##s <<= e_ & 63;                                             \
        }                                                                    \
    } while (0)
#define HUF_MDEC4 \
    HUF_MDEC(0);  \
    HUF_MDEC(1);  \
    HUF_MDEC(2);  \
    HUF_MDEC(3)
/* With codes of at most 11 bits no entry is HUF_M_LONG. */
#define HUF_MDEC_SHORT(s)                                                    \
    do {                                                                     \
        huf_mentry e_ = mt[bits##s >> (64 - HUF_FAST_LEN)];                  \
        uint32_t sy_ = (uint32_t)(e_ >> 8);                                  \
        memcpy(op##s, &sy_, 4);                                              \
        op##s += (e_ >> 40) & 7;                                             \
        bits##s <<= e_ & 63;                                                 \
    } while (0)
#define HUF_MDEC4_SHORT  \
    HUF_MDEC_SHORT(0);   \
    HUF_MDEC_SHORT(1);   \
    HUF_MDEC_SHORT(2);   \
    HUF_MDEC_SHORT(3)
#define HUF_REFILL(s)                                                  \
    do {                                                               \
        unsigned used_ = (unsigned)__builtin_ctzll(bits##s);           \
        ip##s -= used_ >> 3;                                           \
        bits##s = (ptwm_load_le64(ip##s) | 1) << (used_ & 7);          \
    } while (0)

/* One fast loop per table kind, so the inner body is unrolled; the streams
 * live in locals so the compiler can keep them in registers. OMAX bounds the
 * bytes one iteration may write past op (stores included). */
#define HUF_FAST_LOOP(NAME, ATTR, OMAX, TLOG, BODY)                                  \
    ATTR static void NAME(huf_state *st, const huf_entry *restrict table,            \
                          const huf_mentry *restrict mt) {                           \
        const unsigned shift = 64 - TLOG;                                            \
        size_t iters;                                                                \
        (void)shift;                                                                 \
        (void)table;                                                                 \
        (void)mt;                                                                    \
        while ((iters = huf_safe_iters(st, OMAX)) != 0) {                            \
            const uint8_t *ip0 = st->ip[0], *ip1 = st->ip[1], *ip2 = st->ip[2],      \
                          *ip3 = st->ip[3];                                          \
            uint64_t bits0 = st->bits[0], bits1 = st->bits[1], bits2 = st->bits[2],  \
                     bits3 = st->bits[3];                                            \
            uint8_t *op0 = st->op[0], *op1 = st->op[1], *op2 = st->op[2],            \
                    *op3 = st->op[3];                                                \
            do {                                                                     \
                BODY;                                                                \
                HUF_REFILL(0);                                                       \
                HUF_REFILL(1);                                                       \
                HUF_REFILL(2);                                                       \
                HUF_REFILL(3);                                                       \
            } while (--iters);                                                       \
            st->ip[0] = ip0, st->ip[1] = ip1, st->ip[2] = ip2, st->ip[3] = ip3;      \
            st->bits[0] = bits0, st->bits[1] = bits1, st->bits[2] = bits2;           \
            st->bits[3] = bits3;                                                     \
            st->op[0] = op0, st->op[1] = op1, st->op[2] = op2, st->op[3] = op3;      \
        }                                                                            \
    }
/* The same for one stream, for what is left when the first stream of the
 * four runs out of margin (segments code to different bit counts). */
#define HUF_FAST_ONE(NAME, ATTR, OMAX, TLOG, BODY)                                   \
    ATTR static void NAME(huf_state *st, unsigned s, const huf_entry *restrict table, \
                          const huf_mentry *restrict mt) {                           \
        const unsigned shift = 64 - TLOG;                                            \
        const uint8_t *ip0 = st->ip[s];                                              \
        uint64_t bits0 = st->bits[s];                                                \
        uint8_t *op0 = st->op[s];                                                    \
        size_t iters;                                                                \
        (void)shift;                                                                 \
        (void)table;                                                                 \
        (void)mt;                                                                    \
        for (;;) {                                                                   \
            iters = PTWM_MIN((size_t)(ip0 - st->start[s]) / 7,                       \
                             (size_t)(st->oend[s] - op0) / OMAX);                    \
            if (!iters) break;                                                       \
            do {                                                                     \
                BODY;                                                                \
                HUF_REFILL(0);                                                       \
            } while (--iters);                                                       \
        }                                                                            \
        st->ip[s] = ip0;                                                             \
        st->bits[s] = bits0;                                                         \
        st->op[s] = op0;                                                             \
    }
#define HUF_BODY5                                                                   \
    HUF_DEC4(0); HUF_DEC4(1); HUF_DEC4(2); HUF_DEC4(3); HUF_DEC4(4);               \
    op0 += 5, op1 += 5, op2 += 5, op3 += 5
#define HUF_BODY4                                                                   \
    HUF_DEC4(0); HUF_DEC4(1); HUF_DEC4(2); HUF_DEC4(3);                            \
    op0 += 4, op1 += 4, op2 += 4, op3 += 4
/* 4 lookups of at most 13 bits per refill (7 + 4 * 13 <= 63); each advances
 * op by at most 4 and the last 4-byte store ends at most 16 past op. */
#define HUF_BODYM HUF_MDEC4; HUF_MDEC4; HUF_MDEC4; HUF_MDEC4
/* 11-bit codes: 5 lookups per refill (7 + 5 * 11 <= 63), at most 20 bytes. */
#define HUF_BODYM5 \
    HUF_MDEC4_SHORT; HUF_MDEC4_SHORT; HUF_MDEC4_SHORT; HUF_MDEC4_SHORT; HUF_MDEC4_SHORT
#define HUF_BODY1_M5 \
    HUF_MDEC_SHORT(0); HUF_MDEC_SHORT(0); HUF_MDEC_SHORT(0); HUF_MDEC_SHORT(0); HUF_MDEC_SHORT(0)
#define HUF_BODY1_5 \
    HUF_DEC(0, 0); HUF_DEC(0, 1); HUF_DEC(0, 2); HUF_DEC(0, 3); HUF_DEC(0, 4); op0 += 5
#define HUF_BODY1_4 HUF_DEC(0, 0); HUF_DEC(0, 1); HUF_DEC(0, 2); HUF_DEC(0, 3); op0 += 4
#define HUF_BODY1_M HUF_MDEC(0); HUF_MDEC(0); HUF_MDEC(0); HUF_MDEC(0)

/* Every loop of one level: the encoder ptwm_huf_encode_SUFFIX and the
 * decoder's loops ptwm_huf_loops_SUFFIX (codec_kernels.h), under ATTR. */
#define HUF_KERNELS(SUFFIX, ATTR)                                                       \
    ATTR void ptwm_huf_encode_##SUFFIX(const uint8_t *src, const size_t *begin,          \
                                       const uint32_t *ce, uint8_t *const *out,          \
                                       uint8_t *const *end) {                            \
        huf_encode_4streams(src, begin, ce, out, end);                                  \
    }                                                                                   \
    HUF_FAST_LOOP(huf_fast5_##SUFFIX, ATTR, 5, HUF_FAST_LEN, HUF_BODY5)                 \
    HUF_FAST_LOOP(huf_fast4_##SUFFIX, ATTR, 4, HUF_MAX_LEN, HUF_BODY4)                  \
    HUF_FAST_LOOP(huf_fastm_##SUFFIX, ATTR, 16, HUF_MAX_LEN, HUF_BODYM)                 \
    HUF_FAST_LOOP(huf_fastm5_##SUFFIX, ATTR, 20, HUF_FAST_LEN, HUF_BODYM5)              \
    HUF_FAST_ONE(huf_one5_##SUFFIX, ATTR, 5, HUF_FAST_LEN, HUF_BODY1_5)                 \
    HUF_FAST_ONE(huf_one4_##SUFFIX, ATTR, 4, HUF_MAX_LEN, HUF_BODY1_4)                  \
    HUF_FAST_ONE(huf_onem_##SUFFIX, ATTR, 16, HUF_MAX_LEN, HUF_BODY1_M)                 \
    HUF_FAST_ONE(huf_onem5_##SUFFIX, ATTR, 20, HUF_FAST_LEN, HUF_BODY1_M5)              \
    const ptwm_huf_loops ptwm_huf_loops_##SUFFIX = {                                    \
        {{huf_fast4_##SUFFIX, huf_fast5_##SUFFIX}, {huf_fastm_##SUFFIX, huf_fastm5_##SUFFIX}}, \
        {{huf_one4_##SUFFIX, huf_one5_##SUFFIX}, {huf_onem_##SUFFIX, huf_onem5_##SUFFIX}}};

#endif
