/* One chunk through a chain: transform into planes, code each plane, frame.
 *
 * Payload (docs/CHAINS.md, "Chunk payload"):
 *   u8 flags        bit 0: a CRC32 follows each plane entry
 *                   bit 1: MICROSCALE block-relative exponents in this chunk
 *                   bit 2: transform bypassed: one plane, the raw bytes (used
 *                          when the planes would not beat the raw chunk)
 *                   bit 3: sparse: only nonzero elements are in the planes; a
 *                          bitmap plane marks them
 *                   bit 4: joint: exponent and top 4 sign:mantissa bits as one
 *                          symbol plane, the low 4 bits as nibbles, a side
 *                          plane with the exponent map and escapes
 *                   bit 5: MICROSCALE column-relative exponents (the scale
 *                          plane holds one scale per column; its length is
 *                          the column count)
 *                   bit 6: signed zeros (with bit 3; version 3 on): zero
 *                          elements may have their top bit set, and a
 *                          signs plane gives it for each
 *   u8 planes P
 *   P entries       u8 stage (0 CONST, 1 HUFFMAN, 2 ZSTD, 4 RANS, 5 IDENTITY),
 *                   varint raw length, varint coded length, [u32 LE CRC32 of
 *                   the coded bytes]
 *   coded planes    concatenated in entry order; they end exactly at the end
 *
 * Plane order: the transform's planes (plane 0 holds the MICROSCALE residuals
 * when bit 1 or 5 is set, planes 0 and 1 the joint symbols and nibbles when
 * bit 4 is), then the side plane (bit 4), the scale plane (bit 1 or 5), the
 * bitmap (bit 3), the signs (bit 6), then a tail plane with the raw_len %
 * width bytes that do not fill an element.
 *
 * Work memory comes from the caller's workspace (workspace.h): one region per
 * use, kept from chunk to chunk by the worker that owns it. */
#include <math.h>
#include <stdlib.h>
#include "chain.h"
#include "chunk.h"
#include "entropy.h"
#include "hash.h"
#include "microscale.h"
#include "planes.h"
#include "workspace.h"

#define STAGE_CONST 0
#define FLAG_CRC 1u
#define FLAG_MICRO 2u
#define FLAG_RAW 4u
#define FLAG_SPARSE 8u
#define FLAG_JOINT 16u
#define FLAG_COLS 32u
#define FLAG_SIGNS 64u
#define MAX_PLANES (PTWM_MAX_BASE_PLANES + 3)
#define ENTRY_MAX (1 + 10 + 10 + 4)
#define HEADER_MAX (2 + MAX_PLANES * ENTRY_MAX)

/* Regions above this are not kept after the call (a huge one-off chunk
 * should not pin memory in every worker). */
#define SCRATCH_KEEP ((size_t)64 << 20)

/* ---- plane layout shared by encoder and decoder --------------------------- */

typedef struct plane_layout {
    unsigned count;
    size_t len[MAX_PLANES];
    unsigned setting[MAX_PLANES]; /* index into the chain's per-plane entropy settings */
    size_t n;      /* elements the transform codes (the nonzero ones when sparse) */
    size_t total;  /* elements in the chunk */
    size_t tail, blocks;
    int micro, sparse; /* sparse: 1 bitmap, 2 bitmap and signs */
    size_t cols;   /* column-relative exponents: the column count (0: not) */
    size_t side;   /* joint planes: side plane length (0: not joint) */
    unsigned scale_plane, bitmap_plane, signs_plane, tail_plane, side_plane;
} plane_layout;

/* Planes, in order: the transform's (n bytes each; joint: plane 1 holds
 * (n + 1) / 2 nibbles), the joint side plane (`side` bytes, side > 0), the
 * scales (MICROSCALE: one per block, or `cols` > 0 per column), the nonzero
 * bitmap (sparse), the zeros' signs (sparse 2), the tail. mode < 0:
 * bypassed, one plane of raw bytes. */
static void layout_make(const ptwm_chain_info *c, size_t raw_len, size_t n, int mode, int micro,
                        size_t cols, int sparse, size_t side, plane_layout *L) {
    unsigned k;
    memset(L, 0, sizeof(*L));
    if (mode < 0) {
        L->count = 1;
        L->len[0] = raw_len;
        L->setting[0] = c->nplanes;
        return;
    }
    L->total = raw_len / c->width;
    L->tail = raw_len % c->width;
    L->n = sparse ? n : L->total;
    L->micro = micro;
    L->sparse = sparse;
    for (k = 0; k < c->nplanes; k++) {
        L->len[L->count] = L->n;
        L->setting[L->count++] = k;
    }
    if (side) {
        L->side = side;
        L->len[1] = L->n / 2 + (L->n & 1);
        L->side_plane = L->count;
        L->len[L->count] = side;
        L->setting[L->count++] = 0;
    }
    if (micro || cols) {
        L->cols = cols;
        L->blocks = cols ? cols : ptwm_micro_blocks(L->n, c->micro_block);
        L->scale_plane = L->count;
        L->len[L->count] = L->blocks;
        L->setting[L->count++] = 0;
    }
    if (sparse) {
        L->bitmap_plane = L->count;
        L->len[L->count] = L->total / 8 + (L->total % 8 != 0);
        L->setting[L->count++] = 0;
    }
    if (sparse == 2) {
        size_t zeros = L->total - L->n;
        L->signs_plane = L->count;
        L->len[L->count] = zeros / 8 + (zeros % 8 != 0);
        L->setting[L->count++] = 0;
    }
    if (L->tail) {
        L->tail_plane = L->count;
        L->len[L->count] = L->tail;
        L->setting[L->count++] = c->nplanes; /* marks the tail: stored as is */
    }
}

/* ---- varints --------------------------------------------------------------- */

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t k = 0;
    while (v >= 0x80) {
        p[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[k++] = (uint8_t)v;
    return k;
}

static int get_varint(const uint8_t *p, size_t avail, size_t *pos, uint64_t *out) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (*pos < avail && shift < 64) {
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            /* Reject non-minimal encodings (a trailing zero group) and bits
             * past 64: every value has exactly one encoding. */
            if (shift && b == 0) return 0;
            if (shift == 63 && b > 1) return 0;
            *out = v;
            return 1;
        }
        shift += 7;
    }
    return 0;
}

/* ---- stage choice ------------------------------------------------------- */

/* Counts of the bytes of src[0..n) (step 1), or of one 64-byte block in
 * every `step` (whole cache lines: a byte every step-th position would still
 * read every line of the plane); returns how many bytes were counted. */
#define SAMPLE_BLOCK 64
/* Four tables break the store-to-load chain on runs of one symbol (an
 * exponent plane is full of them: one table was 2-3x slower even on 512
 * bytes); 16-bit counters while a table cannot reach 2^16 clear and merge
 * in half the time. */
#define HIST_COUNT(T)                                                                           \
    do {                                                                                        \
        T h[4][256];                                                                            \
        memset(h, 0, sizeof(h));                                                                \
        for (b = 0; b < n; b += step * block) {                                                 \
            size_t end = n - b < block ? n : b + block;                                         \
            for (i = b; i + 4 <= end; i += 4) {                                                 \
                h[0][src[i]]++;                                                                 \
                h[1][src[i + 1]]++;                                                             \
                h[2][src[i + 2]]++;                                                             \
                h[3][src[i + 3]]++;                                                             \
            }                                                                                   \
            for (; i < end; i++) h[0][src[i]]++;                                                \
            seen += end - b;                                                                    \
        }                                                                                       \
        for (s = 0; s < 256; s++)                                                               \
            hist[s] = (uint32_t)h[0][s] + h[1][s] + h[2][s] + h[3][s];                          \
    } while (0)

static size_t histogram(const uint8_t *restrict src, size_t n, size_t step,
                        uint32_t *restrict hist) {
    size_t block = step == 1 ? n : SAMPLE_BLOCK; /* every byte: one block */
    size_t b, i, seen = 0;
    int s;
    if (step == 1 && n < 64) {
        memset(hist, 0, 256 * sizeof(hist[0]));
        for (i = 0; i < n; i++) hist[src[i]]++;
        return n;
    }
    /* at most n / step + 64 bytes counted, a quarter of them per table */
    if (n / step + SAMPLE_BLOCK < (size_t)4 * 65535)
        HIST_COUNT(uint16_t);
    else
        HIST_COUNT(uint32_t);
    return seen;
}

/* Order-0 estimate of a plane: ideal code bytes plus a table cost. Counts
 * come from one 64-byte block in every `step` and are scaled to the plane. */
typedef struct plane_est {
    double bytes;      /* estimated coded size with an order-0 stage */
    double entropy;    /* ideal order-0 bytes, no table */
    unsigned distinct; /* symbols seen */
    int constant;      /* every byte equal (checked exactly) */
    size_t step;       /* one 64-byte block in every `step` was counted (1: every
                        * byte, the counts are exact) */
    uint32_t hist[256];
} plane_est;

static plane_est estimate(const uint8_t *src, size_t n, size_t step) {
    plane_est e;
    uint32_t *hist = e.hist;
    size_t seen;
    int s;
    e.bytes = e.entropy = 0.0;
    e.distinct = 0;
    e.constant = 0;
    e.step = step;
    if (n == 0) {
        memset(e.hist, 0, sizeof(e.hist));
        return e;
    }
    seen = histogram(src, n, step, hist);
    /* sum h log2(seen / h) = seen log2 seen - sum h log2 h */
    e.entropy = ptwm_xlogx(seen);
    {
        const double *xt = ptwm_xlogx_table(); /* one lookup a count, no call */
        double ent = e.entropy;
        for (s = 0; s < 256; s++) {
            if (hist[s]) {
                e.distinct++;
                ent -= hist[s] < PTWM_XLOGX_SMALL ? xt[hist[s]] : ptwm_xlogx(hist[s]);
            }
        }
        e.entropy = ent;
    }
    if (e.entropy < 0.0) e.entropy = 0.0; /* rounding, for one symbol */
    e.entropy = e.entropy / 8.0 * ((double)n / (double)seen);
    if (e.distinct == 1) {
        size_t i;
        for (i = 1; i < n && src[i] == src[0]; i++) {
        }
        e.constant = i == n;
    }
    /* A frequency table costs roughly 1.5 bytes a symbol. */
    e.bytes = e.entropy + 12.0 + 1.0 * e.distinct;
    return e;
}

/* Planes of at most SAMPLE_EXACT bytes are estimated from every byte;
 * longer ones from every 4th byte, or every 8th, 16th... while that still
 * leaves SAMPLE_MIN samples: the estimates pick forms and stages, and most
 * are of candidates that are then dropped (8K samples of 60 symbols bias an
 * exponent plane's entropy by under 0.2%). A coded plane of up to
 * SECOND_TRY_SMALL bytes is then counted exactly (encode_plane); a longer
 * one coded by order-0 rANS builds its table from the sample, first
 * doubled by the blocks halfway between those counted (est_refine: 16K
 * samples or more from 64 KiB on; ptwm_rans_encode_sampled: counting every
 * byte was a tenth of large tensors' compress time, and of 16-64 KiB planes
 * 8% of a file of small tensors). docs/CHAINS.md has the sizes each choice
 * costs. */
#define SAMPLE_MIN 8192
#define SAMPLE_EXACT 4096
#define SAMPLED_TABLE (SECOND_TRY_SMALL + 1)

/* est's counts with the blocks halfway between those it counted added (a
 * sample twice as large; the same counts if it was exact). */
static void est_refine(const plane_est *est, const uint8_t *src, size_t n, uint32_t hist[256]) {
    size_t half = est->step / 2 * SAMPLE_BLOCK;
    int s;
    memcpy(hist, est->hist, 256 * sizeof(hist[0]));
    if (est->step >= 2 && n > half) {
        uint32_t more[256];
        histogram(src + half, n - half, est->step, more);
        for (s = 0; s < 256; s++) hist[s] += more[s];
    }
}

static plane_est estimate_plane(const uint8_t *src, size_t n) {
    size_t step = n > SAMPLE_EXACT ? 4 : 1;
    while (n / (2 * step) >= SAMPLE_MIN) step *= 2;
    return estimate(src, n, step);
}

typedef struct stage_pick {
    int stage;
    int level;
} stage_pick;

/* The open-slot filling of method_hint. */
static uint8_t method_mask(int method, int8_t *order) {
    switch (method) {
    case PTWM_METHOD_HUFFMAN: return (uint8_t)PTWM_EMASK(PTWM_METHOD_HUFFMAN);
    case PTWM_METHOD_ZSTD: return (uint8_t)PTWM_EMASK(PTWM_METHOD_ZSTD);
    case PTWM_METHOD_RANS: *order = -1; return (uint8_t)PTWM_EMASK(PTWM_METHOD_RANS);
    case PTWM_METHOD_IDENTITY: return (uint8_t)PTWM_EMASK(PTWM_METHOD_IDENTITY);
    default: *order = -1; return (uint8_t)PTWM_EMASK_VALID;
    }
}

/* A plane whose estimate saves less than this fraction is stored raw: coding
 * it would cost time for nothing. */
#define WORTH_CODING 0.995

/* Joint planes need an exponent of one byte and a whole sign:mantissa byte
 * above the rest of the mantissa (BF16, F32); shorter runs of elements stay
 * plain (the joint table would not pay). */
#define JOINT_MIN 256
static int joint_ok(const ptwm_chain_info *c) {
    return c->xform == PTWM_XFORM_SPLIT && c->exp_bits <= 8 && (c->man_bits + 1) % 8 == 0;
}

/* Pick a stage. A single candidate is used as is; among several, the
 * estimate decides and only the pick is encoded (zstd is tried only when it
 * is the sole candidate: on weight planes it never beats an order-0 stage). */
static stage_pick pick_stage(const plane_est *e, size_t n, unsigned mask, int zlevel, int order) {
    stage_pick p;
    double best = (double)n * WORTH_CODING;
    p.stage = PTWM_METHOD_IDENTITY;
    p.level = 0;
    if ((mask & (mask - 1)) == 0 && mask) {
        for (p.stage = 1; !(mask & PTWM_EMASK(p.stage)); p.stage++) {
        }
        p.level = p.stage == PTWM_METHOD_ZSTD ? zlevel : p.stage == PTWM_METHOD_RANS ? order : 0;
        /* A fixed order-0 stage would store a near-uniform plane raw anyway;
         * skip the attempt. zstd may find repeats the estimate cannot see. */
        if ((p.stage == PTWM_METHOD_HUFFMAN || (p.stage == PTWM_METHOD_RANS && order == 0)) &&
            e->bytes >= best)
            p.stage = PTWM_METHOD_IDENTITY;
        return p;
    }
    if (mask & PTWM_EMASK(PTWM_METHOD_RANS)) {
        if (e->bytes < best || order != 0) {
            best = e->bytes;
            p.stage = PTWM_METHOD_RANS;
            /* Among several stages, order 1 must save enough to pay for its
             * slower decode (-2); a RANS-only chain gets the smaller (-1). */
            p.level = order == -1 ? -2 : order;
        }
    } else if (mask & PTWM_EMASK(PTWM_METHOD_HUFFMAN)) {
        /* Huffman's integer code lengths lose a little over the entropy. */
        double c = e->bytes * 1.02 + (double)n / 500.0;
        if (c < best) p.stage = PTWM_METHOD_HUFFMAN;
    }
    return p;
}

/* Planes up to this size choose between rANS and Huffman (docs/CHAINS.md:
 * past 16 KiB Huffman's sizing and encoder cost more than its wins save). */
#define SECOND_TRY_SMALL ((size_t)16 << 10)
/* Estimated rANS and Huffman sizes closer than this both get coded. */
#define CLOSE_CALL 0.005
#define LZ_SAMPLE ((size_t)16 << 10)
#define ZSTD_TRIAL_LEVEL 1
/* rANS's 32 states and table, paid once per plane, weigh more on the slice
 * than on the plane. */
#define LZ_RANS_FIXED 300

/* zstd codes a large integer plane's slice only where repeats are frequent
 * enough to pay: without them its literal coding is all it has, and it won
 * no corpus slice with fewer than 2.9% repeated positions (473 of 16384),
 * while most F16 and U8 slices have under 0.1%. Small planes keep zstd
 * first whatever the test says: there the test and the Huffman-beside-rANS
 * sizing it leads to cost more than zstd (4-16 KiB planes: 5.8 against 3.2
 * cycles a byte on handtrack.u8), and zstd's compact literal tables won
 * 0.45% of those planes' bytes even without repeats. */
#define LZ_HITS_DIV 256
#define LZ_HASH_LOG 12
#define LZ_TEST_MAX ((size_t)8 << 10)

/* Whether at least 1/LZ_HITS_DIV of the positions of src[0..n) (at most
 * its first LZ_TEST_MAX) start 5 bytes equal to those at the last earlier
 * position with the same hash: the repeats zstd's fast strategy finds
 * (level 1 takes 5 bytes or more on planes this small). Branch-free, ~3
 * cycles a byte, and it stops as soon as the answer is yes (planes rich in
 * repeats, which zstd codes anyway). */
static int lz_worth_trying(const uint8_t *src, size_t n) {
    uint16_t last[1u << LZ_HASH_LOG];
    size_t i = 0, hits = 0, need, end;
    if (n < 16) return 0;
    if (n > LZ_TEST_MAX) n = LZ_TEST_MAX;
    need = n / LZ_HITS_DIV ? n / LZ_HITS_DIV : 1;
    memset(last, 0, sizeof(last));
    for (end = 0; end < n - 7;) {
        end = end + 64 < n - 7 ? end + 64 : n - 7;
        for (; i < end; i++) {
            uint64_t v = ptwm_load_le64(src + i) << 24; /* the first 5 bytes */
            uint32_t h = (uint32_t)((v * 0x9E3779B185EBCA87ull) >> (64 - LZ_HASH_LOG));
            size_t c = last[h];
            last[h] = (uint16_t)i;
            hits += (ptwm_load_le64(src + c) << 24) == v;
        }
        if (hits >= need) return 1;
    }
    return 0;
}

/* Whether a Huffman coding could be smaller than `coded` bytes: it takes at
 * least the plane's order-0 entropy plus its header (mode, lo, hi, a nibble
 * a symbol, the 16-byte jump table). The estimate is exact (every byte
 * counted) on the coded planes of at most SECOND_TRY_SMALL bytes; a byte of
 * slack covers rounding. */
static int huf_may_beat(const plane_est *e, size_t len, size_t coded) {
    if (coded == SIZE_MAX) return 1;
    if (e->entropy + 3.0 + 16.0 + (double)e->distinct / 2.0 - 1.0 >= (double)coded) return 0;
    /* From exact counts, an optimal code's size bounds it without running
     * the encoder. */
    return e->step != 1 || ptwm_huf_size_floor(e->hist, len) < coded;
}

/* Whether the picked order-0 stage could code smaller than `coded` bytes: it
 * takes at least the plane's estimated order-0 size (entropy and a table of
 * about a byte a symbol; 0.5% off for a sampled estimate) plus its fixed
 * costs (rANS: 32 states; Huffman: header). With the entropy alone (2% off)
 * rANS was run after zstd on many handtrack.u8 planes and lost every time:
 * with the table counted, the corpus codes to the same bytes and U8
 * compresses 1.15x faster. Order 1 can go below that entropy, so it is
 * always tried where it may run. */
static int stage_may_beat(const plane_est *e, const stage_pick *p, size_t len, size_t coded) {
    if (coded == SIZE_MAX || p->level == 1 || (p->level < 0 && len >= PTWM_RANS_O1_MIN_AUTO))
        return 1;
    return e->bytes * 0.995 + (p->stage == PTWM_METHOD_RANS ? 130.0 : 19.0) < (double)coded;
}

/* Code src with one stage, using what sizing already found: Huffman the
 * planned code lengths (hlen, ptwm_huf_size's), rANS the planned table
 * (rplan) or else the plane's exact counts when est has them (no second
 * count). Each may be NULL. */
static ptwm_error encode_stage(ptwm_ws *ws, int stage, int level, const uint8_t *hlen,
                               const ptwm_rans_plan *rplan, const plane_est *est,
                               const uint8_t *src, size_t len, uint8_t *out, size_t cap,
                               size_t *got) {
    /* rANS writes down from the end of its room, then moves the stream
     * down: room past its bound would only touch pages (in place, fresh
     * pages of the image). */
    size_t b = ptwm_entropy_bound(stage, len);
    if (b && cap > b) cap = b;
    if (stage == PTWM_METHOD_HUFFMAN && hlen)
        return ptwm_huf_encode_lengths(src, len, hlen, out, cap, got);
    if (stage == PTWM_METHOD_RANS && rplan) return ptwm_rans_encode_plan(src, len, rplan, out, cap, got);
    if (stage == PTWM_METHOD_RANS && est && est->step == 1)
        return ptwm_rans_encode_counts(ws, src, len, level, est->hist, out, cap, got);
    if (stage == PTWM_METHOD_RANS && est && level == 0 && len >= SAMPLED_TABLE) {
        uint32_t hist[256];
        est_refine(est, src, len, hist);
        return ptwm_rans_encode_sampled(src, len, hist, out, cap, got);
    }
    return ptwm_entropy_encode(ws, stage, level, src, len, out, cap, got);
}

/* Encode src with another stage behind the current result in out, and keep
 * whichever is smaller at the front of out (planned lengths and counts as
 * encode_stage takes them). */
static void try_other(ptwm_ws *ws, int stage, int level, const uint8_t *hlen, const plane_est *est,
                      const uint8_t *src, size_t len, uint8_t *out, size_t cap, int *best_stage,
                      size_t *best_len) {
    size_t off2 = *best_len == SIZE_MAX ? 0 : *best_len, got;
    ptwm_error e;
    if (cap - off2 < ptwm_entropy_bound(stage, len)) return;
    e = encode_stage(ws, stage, level, hlen, NULL, est, src, len, out + off2, cap - off2, &got);
    if (e == PTWM_OK && got < *best_len) {
        memmove(out, out + off2, got);
        *best_len = got;
        *best_stage = stage;
    }
}

/* Encode one plane into out (room for the HUFFMAN, RANS and ZSTD bounds
 * together). `lz` marks planes of integer or quantized data, where zstd's
 * matches can beat order-0/1 statistics. */
static ptwm_error encode_plane(ptwm_ws *ws, const uint8_t *src, size_t len, const plane_est *sampled,
                               unsigned mask, int zlevel, int order, int lz, uint8_t *out,
                               size_t cap, int *stage, size_t *coded) {
    stage_pick p;
    ptwm_error e;
    int second = 0, planned = 0;
    size_t hs = 0;
    plane_est exact;
    ptwm_rans_plan rplan;
    uint8_t hlen[256];
    const plane_est *est = sampled;
    if (len == 0) {
        *stage = PTWM_METHOD_IDENTITY;
        *coded = 0;
        return PTWM_OK;
    }
    if (est->constant) {
        *stage = STAGE_CONST;
        out[0] = src[0];
        *coded = 1;
        return PTWM_OK;
    }
    p = pick_stage(est, len, mask, zlevel, order);
    /* zstd's matches are invisible to the estimate: on integer planes it is
     * tried even where no order-0/1 stage pays. */
    lz = lz && (mask & (mask - 1)) != 0 && (mask & PTWM_EMASK(PTWM_METHOD_ZSTD));
    /* Beside zstd (whose matches capture the context), order-1 rANS never
     * won a corpus plane: order 0 only, sparing its 64K-context counts
     * (also where the match test rules zstd out). */
    if (lz && p.stage == PTWM_METHOD_RANS && p.level == -2) p.level = 0;

    /* A plane that gets coded gets exact counts (estimates of the planes
     * that stay raw, or lose to another form, are sampled): the stages and
     * the Huffman/rANS call read them. A small integer plane is counted only
     * if zstd, coding it first, leaves the stage a chance (below). */
    if (est->step != 1 && len <= SECOND_TRY_SMALL && p.stage != PTWM_METHOD_IDENTITY &&
        !(lz && len < 2 * LZ_SAMPLE)) {
        exact = estimate(src, len, 1);
        est = &exact;
    }
    *coded = SIZE_MAX;
    if (p.stage != PTWM_METHOD_IDENTITY || lz) {
        int best = PTWM_METHOD_IDENTITY;
        if (lz && len >= 2 * LZ_SAMPLE) {
            /* A large plane: the candidates code a slice from its middle,
             * and only the one smaller there codes the plane (one full
             * encode instead of two; the slice's pick agreed with the full
             * planes' on the corpus to within 0.1% of F16 and U8 sizes).
             * Where no order-0 stage pays, zstd codes the plane only if it
             * saved WORTH_CODING on the slice (F16 low mantissa bytes). */
            size_t a, b;
            const uint8_t *mid = src + (len - LZ_SAMPLE) / 2;
            int z = lz_worth_trying(mid, LZ_SAMPLE) &&
                    ptwm_entropy_encode(ws, PTWM_METHOD_ZSTD, zlevel, mid, LZ_SAMPLE, out, cap, &a) ==
                        PTWM_OK;
            /* (no repeats worth a try: the estimated stage codes the plane) */
            if (z && p.stage == PTWM_METHOD_IDENTITY)
                z = (double)a < (double)LZ_SAMPLE * WORTH_CODING;
            else if (z)
                z = encode_stage(ws, p.stage, p.level, NULL, NULL, NULL, mid, LZ_SAMPLE, out, cap, &b) ||
                    a + LZ_RANS_FIXED < b;
            if (z)
                try_other(ws, PTWM_METHOD_ZSTD, zlevel, NULL, NULL, src, len, out, cap, &best, coded);
            else if (p.stage != PTWM_METHOD_IDENTITY)
                try_other(ws, p.stage, p.level, NULL, est, src, len, out, cap, &best, coded);
        } else if (lz) {
            /* zstd first: it wins most integer planes (F16 byte planes: 420
             * of 472, handtrack.u8: 123 of 202), and the estimated stage is
             * then run only if its floor could beat zstd's result. */
            try_other(ws, PTWM_METHOD_ZSTD, zlevel, NULL, NULL, src, len, out, cap, &best, coded);
            if (p.stage != PTWM_METHOD_IDENTITY && est->step != 1 && len <= SECOND_TRY_SMALL &&
                stage_may_beat(est, &p, len, *coded)) {
                /* (a sampled entropy errs low: it never skips a try the
                 * exact one would make) */
                exact = estimate(src, len, 1);
                est = &exact;
            }
            if (p.stage != PTWM_METHOD_IDENTITY && stage_may_beat(est, &p, len, *coded))
                try_other(ws, p.stage, p.level, NULL, est, src, len, out, cap, &best, coded);
        } else if (p.stage != PTWM_METHOD_IDENTITY) {
            /* Small planes: Huffman beside rANS, where table and state costs
             * make the call close (on large planes rANS won every time on
             * the corpus; on small ones Huffman wins most). From exact
             * counts both sizes are known closely enough to code only the
             * smaller one, unless they are within CLOSE_CALL. */
            second = p.stage == PTWM_METHOD_RANS && (mask & PTWM_EMASK(PTWM_METHOD_HUFFMAN)) &&
                     len <= SECOND_TRY_SMALL;
            if (second && est->step == 1 && len < PTWM_RANS_O1_MIN_AUTO) {
                /* (order 1 is not tried below 64 KiB: the plan is order 0's)
                 * Huffman is sized first against a floor under rANS's size
                 * (the counts' entropy, a byte a frequency and its 99 bytes
                 * of header and states, or the stored plane): a code that
                 * beats the floor beats rANS, whose table need not be
                 * planned (most planes of a few KiB). Otherwise as before:
                 * a Huffman floor past r / (1 - CLOSE_CALL) has lost, and
                 * its lengths are then not limited. */
                double f = est->entropy + (double)est->distinct + 99.0, r, h;
                size_t fbeat;
                if (f > (double)len + 1.0) f = (double)len + 1.0;
                fbeat = (size_t)(f / (1.0 - CLOSE_CALL));
                hs = ptwm_huf_size(est->hist, len, fbeat, hlen);
                if (hs <= fbeat && (double)hs < f * (1.0 - CLOSE_CALL)) {
                    r = f; /* unused: Huffman wins below */
                } else {
                    r = ptwm_rans_o0_size(est->hist, len, &rplan);
                    if (hs > fbeat)
                        hs = ptwm_huf_size(est->hist, len, (size_t)(r / (1.0 - CLOSE_CALL)), hlen);
                }
                h = (double)hs;
                planned = 1;
                if (h < r * (1.0 - CLOSE_CALL)) {
                    p.stage = PTWM_METHOD_HUFFMAN;
                    p.level = 0;
                    second = 0;
                    planned = hs > 2 && hs <= len;
                } else if (r < h * (1.0 - CLOSE_CALL)) {
                    second = 0;
                }
            }
            e = encode_stage(ws, p.stage, p.level, planned ? hlen : NULL, planned ? &rplan : NULL, est,
                             src, len, out, cap, coded);
            if (e != PTWM_OK && e != PTWM_ERR_DST_SIZE) return e;
            if (e != PTWM_OK) *coded = SIZE_MAX;
            best = p.stage;
        }
        if (second && huf_may_beat(est, len, *coded))
            try_other(ws, PTWM_METHOD_HUFFMAN, 0, planned && hs > 2 && hs <= len ? hlen : NULL, NULL,
                      src, len, out, cap, &best, coded);
        if (*coded < len) {
            *stage = best;
            return PTWM_OK;
        }
    }
    /* A plane that does not shrink is stored as is. */
    memcpy(out, src, len);
    *stage = PTWM_METHOD_IDENTITY;
    *coded = len;
    return PTWM_OK;
}

/* The bypassed form: flags, count, one entry, the raw bytes. */
static size_t raw_form_size(size_t raw_len, int crc) {
    uint8_t tmp[10];
    return 3 + 2 * put_varint(tmp, raw_len) + (crc ? 4 : 0) + raw_len;
}

size_t ptwm_chunk_bound(size_t raw_len) {
    /* The encoder falls back to the bypassed form whenever the planes are
     * larger, so that form's size is the bound. */
    return raw_form_size(raw_len, 1);
}

size_t ptwm_chunk_work_bound(size_t raw_len) {
    /* The planes of any chain total at most 1.25x raw_len and a few
     * side bytes per element run (scales of half a row, bitmap and signs
     * an eighth each), and each needs three stages' bounds (about
     * len + len/128 + 64 each); 4x + 64 KiB covers that with room. */
    if (raw_len > (SIZE_MAX - 65536) / 4) return SIZE_MAX;
    return 4 * raw_len + 65536;
}

/* Bytes of the header `frame` writes for `count` planes of these raw and
 * coded lengths. */
static size_t header_size(unsigned count, const size_t *len, const size_t *coded, int crc) {
    uint8_t tmp[10];
    size_t h = 2;
    unsigned k;
    for (k = 0; k < count; k++)
        h += 1 + put_varint(tmp, len[k]) + put_varint(tmp, coded[k]) + (crc ? 4 : 0);
    return h;
}

/* Write the header for `count` planes and the coded bytes `body` to dst
 * (body may lie in dst itself, behind the header's room). */
static ptwm_error frame(unsigned flags, unsigned count, const int *stage, const size_t *len,
                        const size_t *coded, const uint8_t *body, size_t body_len, uint8_t *dst,
                        size_t cap, size_t *out_len, ptwm_err *err) {
    uint8_t hdr[HEADER_MAX];
    size_t h = 2, pos = 0, total;
    unsigned k;
    hdr[0] = (uint8_t)flags;
    hdr[1] = (uint8_t)count;
    for (k = 0; k < count; k++) {
        hdr[h++] = (uint8_t)stage[k];
        h += put_varint(hdr + h, len[k]);
        h += put_varint(hdr + h, coded[k]);
        if (flags & FLAG_CRC) {
            ptwm_store_le32(hdr + h, ptwm_crc32(0, body + pos, coded[k]));
            h += 4;
        }
        pos += coded[k];
    }
    total = h + body_len;
    if (total > cap)
        return ptwm_fail(err, PTWM_ERR_DST_SIZE,
                         "chunk_encode: payload of %zu bytes, buffer of %zu (ptwm_chunk_bound "
                         "gives the worst case)",
                         total, cap);
    /* body may already be in dst (coded in place behind a guessed header):
     * it moves only if the guess was off. */
    if (body_len && body != dst + h) memmove(dst + h, body, body_len);
    memcpy(dst, hdr, h);
    *out_len = total;
    return PTWM_OK;
}

static ptwm_error encode_ws(ptwm_ws *s, const uint8_t *chain, size_t chain_len, ptwm_dtype dtype,
                            const ptwm_chunk_params *prm, const uint8_t *raw, size_t raw_len,
                            uint8_t *dst, size_t cap, size_t *out_len, ptwm_err *err);

ptwm_error ptwm_chunk_encode(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                             ptwm_dtype dtype, const ptwm_chunk_params *prm, const uint8_t *raw,
                             size_t raw_len, uint8_t *dst, size_t cap, size_t *out_len,
                             ptwm_err *err) {
    ptwm_ws *own;
    ptwm_error e;
    if (!(ws = ptwm_ws_or_temp(ws, &own)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: no workspace memory");
    e = encode_ws(ws, chain, chain_len, dtype, prm, raw, raw_len, dst, cap, out_len, err);
    ptwm_ws_trim(ws, SCRATCH_KEEP);
    ptwm_ws_free(own);
    return e;
}

static ptwm_error encode_ws(ptwm_ws *s, const uint8_t *chain, size_t chain_len, ptwm_dtype dtype,
                            const ptwm_chunk_params *prm, const uint8_t *raw, size_t raw_len,
                            uint8_t *dst, size_t cap, size_t *out_len, ptwm_err *err) {
    ptwm_chain_info c;
    plane_layout L;
    plane_est est[MAX_PLANES];
    uint8_t *pb, *cb;
    uint8_t *plane[MAX_PLANES];
    size_t coded[MAX_PLANES], cb_need = 0, off, k;
    int stage[MAX_PLANES];
    int method = prm ? prm->method : PTWM_METHOD_MICROSCALE;
    unsigned crc_flag = !prm || prm->emit_crc ? FLAG_CRC : 0;
    int zdefault = prm ? prm->zstd_level : 0;
    int micro = 0, sparse = 0, use_planes;
    size_t side = 0, cols = 0, want_cols = prm ? prm->columns : 0;
    uint8_t *scale = NULL, *side_plane = NULL;
    plane_est scale_est;
    uint32_t ex_hist[256];
    ptwm_error e;

    if (!out_len || (!raw && raw_len) || (!dst && cap))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_encode: NULL argument");
    e = ptwm_chain_info_parse(chain, chain_len, (int)dtype, &c, err);
    if (e) return e;

    /* Sparse: with at least 1/16 zero elements (+0 or -0), code a bitmap,
     * the zeros' signs and only the nonzero elements (pruned or padded
     * weights; 64% of one corpus file, half of them -0). */
    {
        size_t total = raw_len / c.width, need;
        const uint8_t *el = raw;
        uint8_t *bitmap = NULL, *signs = NULL;
        size_t n = total;
        /* Decided from every 8th element: the choice only affects size. */
        if (c.xform != PTWM_XFORM_BYTES && c.width >= 2 && total >= 64 &&
            ptwm_count_zero_elems(raw, total, c.width, 8) * 16 >= (total + 7) / 8)
            sparse = 1;
        /* Column scales need a whole row twice over to pay; sparse chunks
         * have lost the columns. */
        if (sparse || !c.micro_block || want_cols < 2 || want_cols > total / 2 ||
            total / want_cols >= (1u << 24))
            want_cols = 0;
        /* The transform's planes (BYTES: the raw bytes are the plane). */
        need = c.xform == PTWM_XFORM_BYTES ? 16 : total * c.nplanes + 16;
        pb = (uint8_t *)ptwm_ws_get(s, PTWM_WS_PLANES, need, 0);
        if (!pb) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", need);
        if (sparse) {
            /* The nonzero elements, the bitmap and the signs. */
            uint8_t *compact = (uint8_t *)ptwm_ws_get(s, PTWM_WS_SPARSE, raw_len + total / 4 + 32, 0);
            if (!compact)
                return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", raw_len);
            bitmap = compact + raw_len + 8;
            signs = bitmap + total / 8 + 8;
            n = ptwm_sparse_compact(raw, total, c.width, bitmap, compact, signs);
            el = compact;
        }
        for (k = 0; k < c.nplanes; k++) plane[k] = pb + k * n;
        if (c.xform == PTWM_XFORM_SPLIT)
            ptwm_split_float(el, n, c.width, c.exp_bits, c.man_bits, plane);
        else if (c.xform == PTWM_XFORM_PLANES)
            ptwm_split_bytes(el, n, c.width, plane);
        else
            plane[0] = (uint8_t *)(uintptr_t)raw; /* BYTES: the raw bytes are the plane */
        for (k = 0; k < c.nplanes; k++) est[k] = estimate_plane(plane[k], n);
        /* The exponents' (sampled) counts pick the joint map below. */
        if (joint_ok(&c)) memcpy(ex_hist, est[0].hist, sizeof(ex_hist));

        /* Column-relative exponents: kept when they estimate smaller than
         * the plain ones. */
        if (want_cols && !est[0].constant) {
            /* Residuals, then the sums (16-aligned), then the scales. */
            size_t sums_at = (n + 15) & ~(size_t)15;
            uint8_t *r = (uint8_t *)ptwm_ws_get(s, PTWM_WS_COLS, sums_at + 5 * want_cols + 16, 0);
            uint8_t *d;
            uint32_t *sums;
            plane_est er, ed;
            if (!r) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", n);
            sums = (uint32_t *)(void *)(r + sums_at);
            d = r + sums_at + 4 * want_cols;
            ptwm_colscale_forward(pb, n, want_cols, r, d, sums); /* pb: the exponents */
            er = estimate_plane(r, n);
            ed = estimate_plane(d, want_cols);
            if (er.bytes + ed.bytes < est[0].bytes) {
                cols = want_cols;
                plane[0] = r;
                est[0] = er;
                scale = d;
                scale_est = ed;
                if (joint_ok(&c)) memcpy(ex_hist, er.hist, sizeof(ex_hist));
            }
        }
        /* MICROSCALE: keep block-relative exponents when they estimate
         * smaller. Where column scales were on offer they are tried only if
         * those lost: beside winning column scales they changed corpus files
         * by under 240 bytes and cost 8% of BF16 compress time, but in
         * PyTorch's [out, in] layout the columns are the input channels,
         * whose scales rarely pay, and blocks within a row follow the
         * output channel's scale (faceres-deep.bf16 transposed to that
         * layout: 0.56% smaller; the corpus as stored: 164 bytes smaller). */
        if (c.micro_block && !cols && n >= 2 * (size_t)c.micro_block && !est[0].constant) {
            uint8_t *r = (uint8_t *)ptwm_ws_get(s, PTWM_WS_EXP, 2 * n + 16, 0);
            uint8_t *d;
            plane_est er, ed;
            if (!r) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", 2 * n);
            d = r + n;
            ptwm_micro_forward(plane[0], n, c.micro_block, r, d);
            er = estimate_plane(r, n);
            ed = estimate_plane(d, ptwm_micro_blocks(n, c.micro_block));
            if (er.bytes + ed.bytes < est[0].bytes) {
                micro = 1;
                plane[0] = r;
                est[0] = er;
                scale = d;
                scale_est = ed;
            }
        }
        /* Joint exponent + top sign:mantissa bits: kept when they estimate
         * smaller than the exponent (or its block-relative form) beside the
         * sign:mantissa plane (raw where coding it would not pay). Over
         * column residuals, the residuals take the exponents' place. */
        if (joint_ok(&c) && n >= JOINT_MIN && !est[0].constant) {
            uint8_t *jp = (uint8_t *)ptwm_ws_get(s, PTWM_WS_JOINT, 3 * n + PTWM_JOINT_MAP + 16, 0);
            uint8_t *nib, *sd;
            size_t sl;
            plane_est ej;
            double scales = micro || cols ? scale_est.bytes : 0.0;
            double plain = est[0].bytes + scales +
                           (est[1].bytes < (double)n * WORTH_CODING ? est[1].bytes : (double)n);
            if (!jp) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", 3 * n);
            nib = jp + n;
            sd = nib + n / 2 + 1;
            sl = ptwm_joint_split(cols ? plane[0] : pb, plane[1], n, ex_hist, jp, nib, sd);
            ej = estimate_plane(jp, n);
            if (ej.bytes + (double)(n / 2 + (n & 1)) + (double)sl + (cols ? scales : 0.0) < plain) {
                micro = 0;
                side = sl;
                plane[0] = jp;
                est[0] = ej;
                plane[1] = nib;
                est[1] = estimate_plane(nib, n / 2 + (n & 1));
                side_plane = sd;
            }
        }
        layout_make(&c, raw_len, n, 0, micro, cols, sparse ? 2 : 0, side, &L);
        if (side) {
            plane[L.side_plane] = side_plane;
            est[L.side_plane] = estimate_plane(side_plane, side);
        }
        if (micro || cols) {
            plane[L.scale_plane] = scale;
            est[L.scale_plane] = scale_est;
        }
        if (sparse) {
            plane[L.bitmap_plane] = bitmap;
            est[L.bitmap_plane] = estimate_plane(bitmap, L.len[L.bitmap_plane]);
            plane[L.signs_plane] = signs;
            est[L.signs_plane] = estimate_plane(signs, L.len[L.signs_plane]);
        }
        if (L.tail) {
            plane[L.tail_plane] = (uint8_t *)(uintptr_t)(raw + raw_len - L.tail);
            est[L.tail_plane] = estimate_plane(plane[L.tail_plane], L.tail);
        }
    }

    for (k = 0; k < L.count; k++) cb_need += ptwm_entropy_bound(PTWM_METHOD_ZSTD, L.len[k]) +
                                              ptwm_entropy_bound(PTWM_METHOD_RANS, L.len[k]) +
                                              ptwm_entropy_bound(PTWM_METHOD_HUFFMAN, L.len[k]);
    /* Planes are coded straight into dst behind room for the header when
     * dst has room for the stages' bounds (ptwm_chunk_work_bound): the
     * header's varints fix where the body starts, so each plane's coded
     * length is guessed from its estimate, and the body moves only where a
     * guess changed a varint's length (the copy from scratch was 5% of
     * compress time). */
    {
        size_t hguess;
        for (k = 0; k < L.count; k++)
            coded[k] = est[k].constant ? 1
                       : est[k].bytes < (double)L.len[k] ? (size_t)est[k].bytes
                                                         : L.len[k];
        hguess = header_size(L.count, L.len, coded, crc_flag != 0);
        if (dst && cap >= hguess && cap - hguess >= cb_need) {
            cb = dst + hguess;
        } else {
            cb = (uint8_t *)ptwm_ws_get(s, PTWM_WS_CODED, cb_need, 0);
            if (!cb)
                return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu work bytes", cb_need);
        }
    }

    off = 0;
    for (k = 0; k < L.count; k++) {
        unsigned set = L.setting[k], mask;
        int8_t order = 0;
        int zl = zdefault;
        if (set >= c.nplanes) {
            mask = PTWM_EMASK(PTWM_METHOD_IDENTITY); /* the tail */
        } else {
            mask = c.mask[set];
            order = c.rans_order[set];
            if (c.zstd_level[set]) zl = c.zstd_level[set];
            if (mask == 0) mask = method_mask(method, &order);
        }
        /* zstd as one candidate among others, at no level asked for: level 1
         * (docs/CHAINS.md: on the corpus' byte planes it codes as small as 3
         * and 1.3x faster). Alone, the documented default 3. */
        if (zl == 0 && (mask & (mask - 1)) != 0) zl = ZSTD_TRIAL_LEVEL;
        /* zstd's matches: integer planes, and the bitmap (runs of zeros
         * where whole channels are pruned: handlandmark-full.f16 3.6%
         * smaller). */
        e = encode_plane(s, plane[k], L.len[k], &est[k], mask, zl, order,
                         (c.xform != PTWM_XFORM_SPLIT && k < c.nplanes) ||
                             (sparse && k == L.bitmap_plane),
                         cb + off, cb_need - off, &stage[k], &coded[k]);
        if (e) {
            return ptwm_fail(err, e, "chunk_encode: plane %zu of %u (%zu bytes): %s", k, L.count,
                             L.len[k], ptwm_error_string(e));
        }
        off += coded[k];
    }

    use_planes = header_size(L.count, L.len, coded, crc_flag != 0) + off <
                 raw_form_size(raw_len, crc_flag != 0);
    if (use_planes) {
        e = frame(crc_flag | (micro ? FLAG_MICRO : 0) | (sparse ? FLAG_SPARSE | FLAG_SIGNS : 0) |
                      (side ? FLAG_JOINT : 0) | (cols ? FLAG_COLS : 0),
                  L.count, stage, L.len, coded, cb, off, dst, cap, out_len, err);
    } else {
        /* Planes no smaller than the chunk (noise, or a chain that widens
         * the data): keep the raw bytes. */
        size_t rl = raw_len;
        int st = PTWM_METHOD_IDENTITY;
        e = frame(crc_flag | FLAG_RAW, 1, &st, &rl, &rl, raw, raw_len, dst, cap, out_len, err);
    }
    return e;
}

static const char *stage_label(int stage) {
    return stage == STAGE_CONST ? "const" : ptwm_method_name(stage);
}

ptwm_error ptwm_chunk_decode(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                             ptwm_dtype dtype, const uint8_t *src, size_t src_len, uint8_t *raw,
                             size_t raw_len, ptwm_err *err) {
    return ptwm_chunk_decode_version(ws, PTWM_CHUNK_VERSION, chain, chain_len, dtype, src, src_len, raw,
                                     raw_len, err);
}

static ptwm_error decode_payload(ptwm_ws *s, unsigned version, const uint8_t *chain,
                                 size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                 size_t src_len, uint8_t *raw, size_t raw_len, int plane_crcs,
                                 ptwm_err *err);

static ptwm_error decode_with(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                              size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                              size_t src_len, uint8_t *raw, size_t raw_len, int plane_crcs,
                              ptwm_err *err) {
    ptwm_ws *own;
    ptwm_error e;
    if (!(ws = ptwm_ws_or_temp(ws, &own)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: no workspace memory");
    e = decode_payload(ws, version, chain, chain_len, dtype, src, src_len, raw, raw_len, plane_crcs,
                       err);
    ptwm_ws_trim(ws, SCRATCH_KEEP);
    ptwm_ws_free(own);
    return e;
}

ptwm_error ptwm_chunk_decode_version(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                     size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                     size_t src_len, uint8_t *raw, size_t raw_len, ptwm_err *err) {
    return decode_with(ws, version, chain, chain_len, dtype, src, src_len, raw, raw_len, 1, err);
}

ptwm_error ptwm_chunk_decode_checked(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                     size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                     size_t src_len, uint8_t *raw, size_t raw_len, ptwm_err *err) {
    return decode_with(ws, version, chain, chain_len, dtype, src, src_len, raw, raw_len, 0, err);
}

static ptwm_error decode_payload(ptwm_ws *s, unsigned version, const uint8_t *chain, size_t chain_len,
                                 ptwm_dtype dtype, const uint8_t *src, size_t src_len,
                                 uint8_t *raw, size_t raw_len, int plane_crcs, ptwm_err *err) {
    ptwm_chain_info c;
    plane_layout L;
    uint8_t *pb;
    const uint8_t *plane[MAX_PLANES];
    const uint8_t *body;
    size_t coded[MAX_PLANES], pos, k, body_len, boff;
    uint64_t rawl[MAX_PLANES];
    uint32_t crc[MAX_PLANES];
    int stage[MAX_PLANES];
    unsigned flags, count;
    int bypass, sparse, micro, joint, colrel, zsigns;
    size_t n, side = 0, cols = 0;
    ptwm_error e;

    if ((!src && src_len) || (!raw && raw_len))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_decode: NULL argument");
    e = ptwm_chain_info_parse(chain, chain_len, (int)dtype, &c, err);
    if (e) return e;
    if (src_len < 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload of %zu bytes (at least 2)", src_len);
    flags = src[0];
    count = src[1];
    bypass = (flags & FLAG_RAW) != 0;
    sparse = (flags & FLAG_SPARSE) != 0;
    micro = (flags & FLAG_MICRO) != 0;
    joint = (flags & FLAG_JOINT) != 0;
    colrel = (flags & FLAG_COLS) != 0;
    zsigns = (flags & FLAG_SIGNS) != 0;
    if (zsigns && version < 3)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: flag 0x%02x (signed zeros) in a version %u file (from "
                         "version 3 on)",
                         FLAG_SIGNS, version);
    if (colrel && version < 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: flag 0x%02x (column-relative exponents) in a version %u "
                         "file (from version 2 on)",
                         FLAG_COLS, version);
    if (flags & ~(FLAG_CRC | FLAG_MICRO | FLAG_RAW | FLAG_SPARSE | FLAG_JOINT | FLAG_COLS |
                  FLAG_SIGNS) ||
        (bypass && (micro || sparse || joint || colrel)) || (joint && micro) ||
        (colrel && (micro || sparse)) || (zsigns && !sparse))
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: unknown flags 0x%02x", flags);
    if (joint && !joint_ok(&c))
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: joint exponent planes, but the chain has no split with "
                         "a one-byte exponent and whole sign:mantissa bytes");
    if ((micro || colrel) && !c.micro_block)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: %s-relative exponents, but the chain has no microscale",
                         micro ? "block" : "column");
    if (sparse && c.xform == PTWM_XFORM_BYTES)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: sparse elements, but the chain has no transform");
    if (count > MAX_PLANES)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: %u planes (at most %d)", count,
                         MAX_PLANES);

    /* The entries. */
    pos = 2;
    body_len = 0;
    for (k = 0; k < count; k++) {
        uint64_t cl;
        if (pos >= src_len)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu entry past the end (%zu bytes)", k, src_len);
        stage[k] = src[pos++];
        if (stage[k] != STAGE_CONST && !ptwm_method_name(stage[k]))
            return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID,
                             "chunk payload: plane %zu: unknown stage id %d", k, stage[k]);
        if (stage[k] == PTWM_METHOD_MICROSCALE)
            return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID,
                             "chunk payload: plane %zu: stage id 3 is not an entropy stage", k);
        if (!get_varint(src, src_len, &pos, &rawl[k]) || !get_varint(src, src_len, &pos, &cl))
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: lengths malformed or past the end", k);
        if (cl > src_len)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: coded length %llu exceeds the payload of "
                             "%zu bytes",
                             k, (unsigned long long)cl, src_len);
        if ((stage[k] == STAGE_CONST && cl != 1) ||
            (stage[k] == PTWM_METHOD_IDENTITY && cl != rawl[k]))
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: %s stage with coded length %llu for %llu "
                             "bytes",
                             k, stage_label(stage[k]), (unsigned long long)cl,
                             (unsigned long long)rawl[k]);
        coded[k] = (size_t)cl;
        body_len += coded[k]; /* no overflow: each <= src_len, at most MAX_PLANES */
        if (flags & FLAG_CRC) {
            if (src_len - pos < 4)
                return ptwm_fail(err, PTWM_ERR_CORRUPT,
                                 "chunk payload: plane %zu CRC past the end", k);
            crc[k] = ptwm_load_le32(src + pos);
            pos += 4;
        }
    }

    /* The layout the chain makes for this chunk; sparse chunks give their
     * element count as plane 0's length (at most the chunk's). */
    n = raw_len / c.width;
    if (sparse) {
        if (count == 0 || rawl[0] > n)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: %llu nonzero elements in a chunk of %zu",
                             count ? (unsigned long long)rawl[0] : 0ull, n);
        n = (size_t)rawl[0];
    }
    /* Joint: the side plane (after the transform's planes) gives its own
     * length: the map plus one exponent per escape, checked against the
     * symbols once they are decoded. */
    if (joint) {
        if (count <= c.nplanes || rawl[c.nplanes] < PTWM_JOINT_MAP ||
            rawl[c.nplanes] - PTWM_JOINT_MAP > n)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: joint side plane %u of %llu bytes for %zu elements "
                             "(%d to %zu)",
                             c.nplanes, count > c.nplanes ? (unsigned long long)rawl[c.nplanes] : 0ull,
                             n, PTWM_JOINT_MAP, n + PTWM_JOINT_MAP);
        side = (size_t)rawl[c.nplanes]; /* > 0: marks the layout joint */
    }
    /* Column-relative: the scale plane (after the side plane) gives the
     * column count, 2 to half the elements, as the encoder uses it. */
    if (colrel) {
        unsigned sp = c.nplanes + (joint ? 1u : 0u);
        if (count <= sp || rawl[sp] < 2 || rawl[sp] > n / 2)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: column scale plane %u of %llu bytes for %zu elements "
                             "(2 to %zu)",
                             sp, count > sp ? (unsigned long long)rawl[sp] : 0ull, n, n / 2);
        cols = (size_t)rawl[sp];
    }
    layout_make(&c, raw_len, n, bypass ? -1 : 0, micro, cols, sparse ? 1 + zsigns : 0, side, &L);
    if (count != L.count)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: %u planes, the chain makes %u for %zu raw bytes", count,
                         L.count, raw_len);
    for (k = 0; k < count; k++) {
        if (rawl[k] != L.len[k])
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: raw length %llu, expected %zu for a chunk "
                             "of %zu bytes",
                             k, (unsigned long long)rawl[k], L.len[k], raw_len);
    }
    if (body_len != src_len - pos)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: planes hold %zu coded bytes, %zu follow the %zu-byte "
                         "header",
                         body_len, src_len - pos, pos);
    body = src + pos;

    /* Room for every plane (identity planes are used in place; the planes
     * of a split may hold more bytes than the chunk). */
    {
        size_t need = 16;
        for (k = 0; k < count; k++) need += L.len[k];
        pb = (uint8_t *)ptwm_ws_get(s, PTWM_WS_PLANES, need, 0);
        if (!pb) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu work bytes", need);
    }

    boff = 0;
    {
        size_t poff = 0;
        for (k = 0; k < count; k++) {
            const uint8_t *cp = body + boff;
            if ((flags & FLAG_CRC) && plane_crcs) {
                uint32_t got = ptwm_crc32(0, cp, coded[k]);
                if (got != crc[k]) {
                    return ptwm_fail(err, PTWM_ERR_CRC,
                                     "chunk payload: plane %zu (%s, %zu coded bytes): stored CRC32 "
                                     "%08x, computed %08x",
                                     k, stage_label(stage[k]), coded[k], (unsigned)crc[k],
                                     (unsigned)got);
                }
            }
            if (stage[k] == PTWM_METHOD_IDENTITY) {
                plane[k] = cp;
            } else {
                /* Bypassed or BYTES: plane 0 is the raw bytes, decoded in place. */
                uint8_t *out = k == 0 && (bypass || c.xform == PTWM_XFORM_BYTES) ? raw : pb + poff;
                if (stage[k] == STAGE_CONST) {
                    memset(out, cp[0], L.len[k]);
                } else {
                    e = ptwm_entropy_decode(s, stage[k], cp, coded[k], out, L.len[k]);
                    if (e) {
                            return ptwm_fail(err, e == PTWM_ERR_UNKNOWN_ID ? e : PTWM_ERR_CORRUPT,
                                         "chunk payload: plane %zu (%s, %zu coded bytes, %zu raw): "
                                         "%s",
                                         k, stage_label(stage[k]), coded[k], L.len[k],
                                         ptwm_error_string(e));
                    }
                }
                plane[k] = out;
                poff += L.len[k];
            }
            boff += coded[k];
        }
    }
    if (sparse) {
        size_t marked = ptwm_bitmap_count(plane[L.bitmap_plane], L.total);
        if (marked != L.n) {
            if (marked == SIZE_MAX)
                return ptwm_fail(err, PTWM_ERR_CORRUPT,
                                 "chunk payload: bitmap plane %u marks elements past %zu",
                                 L.bitmap_plane, L.total);
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: bitmap plane %u marks %zu nonzero elements, the "
                             "planes hold %zu",
                             L.bitmap_plane, marked, L.n);
        }
        /* Its length is the zeros' (checked with the layout); no bits past. */
        if (zsigns && ptwm_bitmap_count(plane[L.signs_plane], L.total - L.n) == SIZE_MAX) {
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: signs plane %u has bits past its %zu zero elements",
                             L.signs_plane, L.total - L.n);
        }
    }

    /* Inverse transform: block scales, then fields or bytes into elements
     * (into scratch first when sparse), then zeros back in place. */
    {
        const uint8_t *pl[MAX_PLANES];
        uint8_t *xbuf = NULL, *jx = NULL, *el = raw;
        uint16_t *s7 = NULL;
        size_t esc = 0;
        /* BF16 joint planes merge straight into elements (column residuals
         * in the exponent fields, finished in place below). */
        int bf16 = c.width == 2 && c.exp_bits == 8 && c.man_bits == 7;
        for (k = 0; k < count; k++) pl[k] = plane[k];
        /* Each intermediate in a region of its own (workspace.h). */
        if (L.micro || L.cols) xbuf = (uint8_t *)ptwm_ws_get(s, PTWM_WS_EXP, L.n, 0);
        if (L.side) jx = (uint8_t *)ptwm_ws_get(s, PTWM_WS_JOINT, 2 * L.n, 0);
        if (sparse) el = (uint8_t *)ptwm_ws_get(s, PTWM_WS_SPARSE, L.n * c.width, 0);
        if (L.side && bf16 && L.cols)
            s7 = (uint16_t *)ptwm_ws_get(s, PTWM_WS_COLS, 2 * L.cols + 512, 0);
        if (((L.micro || L.cols) && !xbuf) || (L.side && !jx) || !el ||
            (L.side && bf16 && L.cols && !s7))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: no work memory for %zu elements",
                             L.n);
        if (L.micro) {
            ptwm_micro_inverse(plane[0], plane[L.scale_plane], L.n, c.micro_block, xbuf);
            pl[0] = xbuf;
        }
        if (L.side && !bf16) {
            esc = ptwm_joint_merge(plane[0], plane[1], plane[L.side_plane], L.side, L.n, jx,
                                   jx + L.n);
            pl[0] = jx;
            pl[1] = jx + L.n;
        }
        if (L.cols && !(L.side && bf16)) {
            ptwm_colscale_inverse(pl[0], plane[L.scale_plane], L.n, L.cols, xbuf);
            pl[0] = xbuf;
        }
        if (L.side && bf16)
            esc = ptwm_joint_merge_bf16(plane[0], plane[1], plane[L.side_plane], L.side, L.n, el);
        if (L.side && esc != L.side - PTWM_JOINT_MAP) {
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: joint plane 0 has %zu escape symbols, side plane %u "
                             "holds %zu exponents",
                             esc, L.side_plane, L.side - PTWM_JOINT_MAP);
        }
        if (L.side && bf16 && L.cols)
            ptwm_colscale_inverse_bf16(el, L.n, plane[L.scale_plane], L.cols, s7);
        if (bypass) {
            if (raw_len && pl[0] != raw) memcpy(raw, pl[0], raw_len);
        } else if (L.side && bf16) {
            /* merged above */
        } else if (c.xform == PTWM_XFORM_SPLIT) {
            ptwm_merge_float(pl, L.n, c.width, c.exp_bits, c.man_bits, el);
        } else if (c.xform == PTWM_XFORM_PLANES) {
            ptwm_merge_bytes(pl, L.n, c.width, el);
        } else if (L.n && pl[0] != raw) {
            memcpy(raw, pl[0], L.n);
        }
        if (sparse)
            ptwm_sparse_expand(el, plane[L.bitmap_plane], L.total, c.width,
                               zsigns ? plane[L.signs_plane] : NULL,
                               zsigns ? L.len[L.signs_plane] : 0, raw);
        if (L.tail) memcpy(raw + raw_len - L.tail, pl[L.tail_plane], L.tail);
    }
    return PTWM_OK;
}
