/* The coder policy (see plane_coder.h): estimates, the pick among the
 * chain's candidate coders, and the trial encodes that settle close calls. */
#include <math.h>
#include "coder.h"
#include "histogram.h"
#include "plane_coder.h"

/* Counts of the bytes of the runs src[b..b+run) for b = first, first +
 * stride, ... below n (the last run cut at n); returns how many bytes were
 * counted. A plane's sample is one 64-byte block in every `step` (whole
 * cache lines: a byte every step-th position would still read every line of
 * the plane); all of it is one run. */
#define SAMPLE_BLOCK 64
/* Four tables break the store-to-load chain on runs of one symbol (an
 * exponent plane is full of them); a sample's whole blocks go to eight,
 * unrolled (a 16-step loop left every 64 bytes mispredicted, and eight
 * tables counted samples of split planes a little faster: docs/CHAINS.md);
 * 16-bit counters, while a table cannot reach 2^16, clear and merge in half
 * the time. */
#define HIST_8(p)                                                                               \
    (h[0][(p)[0]]++, h[1][(p)[1]]++, h[2][(p)[2]]++, h[3][(p)[3]]++, h[4][(p)[4]]++,            \
     h[5][(p)[5]]++, h[6][(p)[6]]++, h[7][(p)[7]]++)
#define HIST_32(p) (HIST_8(p), HIST_8((p) + 8), HIST_8((p) + 16), HIST_8((p) + 24))
#define HIST_COUNT(T, NT)                                                                       \
    do {                                                                                        \
        T h[NT][256];                                                                           \
        int t;                                                                                  \
        memset(h, 0, sizeof(h));                                                                \
        for (b = first; b < n; b += stride) {                                                   \
            size_t end = n - b < run ? n : b + run;                                             \
            if ((NT) == 8 && end - b == SAMPLE_BLOCK) {                                         \
                const uint8_t *p = src + b;                                                     \
                HIST_32(p), HIST_32(p + 32);                                                    \
                seen += SAMPLE_BLOCK;                                                           \
                continue;                                                                       \
            }                                                                                   \
            for (i = b; i + 4 <= end; i += 4) {                                                 \
                h[0][src[i]]++;                                                                 \
                h[1][src[i + 1]]++;                                                             \
                h[2][src[i + 2]]++;                                                             \
                h[3][src[i + 3]]++;                                                             \
            }                                                                                   \
            for (; i < end; i++) h[0][src[i]]++;                                                \
            seen += end - b;                                                                    \
        }                                                                                       \
        for (s = 0; s < 256; s++) {                                                             \
            uint32_t c = 0;                                                                     \
            for (t = 0; t < (NT); t++) c += h[t][s];                                            \
            hist[s] = c;                                                                        \
        }                                                                                       \
    } while (0)

static size_t histogram_runs(const uint8_t *restrict src, size_t n, size_t first, size_t stride,
                             size_t run, uint32_t *restrict hist) {
    size_t b, i, seen = 0;
    int s;
    if (first == 0 && run >= n && n < 64) {
        memset(hist, 0, 256 * sizeof(hist[0]));
        for (i = 0; i < n; i++) hist[src[i]]++;
        return n;
    }
    /* at most (n - first) / stride + 1 runs counted, a quarter of each (and
     * 3 bytes of its end) per table */
    if (first >= n || (n - first) / stride * run + run + 64 < (size_t)4 * 65535) {
        if (run == SAMPLE_BLOCK)
            HIST_COUNT(uint16_t, 8);
        else
            HIST_COUNT(uint16_t, 4);
    } else if (run == SAMPLE_BLOCK) {
        HIST_COUNT(uint32_t, 8);
    } else {
        HIST_COUNT(uint32_t, 4);
    }
    return seen;
}

/* The sample of `step` (1: every byte). */
static size_t histogram(const uint8_t *src, size_t n, size_t step, uint32_t *hist) {
    return step == 1 ? histogram_runs(src, n, 0, n ? n : 1, n, hist)
                     : histogram_runs(src, n, 0, step * SAMPLE_BLOCK, SAMPLE_BLOCK, hist);
}

/* Order-0 estimate of a plane: ideal code bytes plus a table cost, from
 * e->hist, counts of `seen` of its n bytes (scaled to the plane). */
static void estimate_finish(ptwm_plane_est *e, const uint8_t *src, size_t n, size_t seen) {
    const uint32_t *hist = e->hist;
    int s;
    /* sum h log2(seen / h) = seen log2 seen - sum h log2 h */
    e->entropy = ptwm_xlogx(seen);
    {
        /* The present symbols first, without a branch a symbol (they are
         * scattered: a branch a symbol mispredicted), skipping runs of 8
         * absent ones (most of an exponent plane's 256), then their terms
         * in symbol order. */
        const double *xt = ptwm_xlogx_table(); /* one lookup a count, no call */
        double ent = e->entropy;
        uint32_t present[256];
        unsigned k = 0, j;
        for (s = 0; s < 256; s += 8) {
            const uint32_t *h8 = hist + s;
            if (!(h8[0] | h8[1] | h8[2] | h8[3] | h8[4] | h8[5] | h8[6] | h8[7])) continue;
            for (j = 0; j < 8; j++) {
                present[k] = h8[j];
                k += h8[j] != 0;
            }
        }
        for (j = 0; j < k; j++)
            ent -= present[j] < PTWM_XLOGX_SMALL ? xt[present[j]] : ptwm_xlogx(present[j]);
        e->distinct = k;
        e->entropy = ent;
    }
    if (e->entropy < 0.0) e->entropy = 0.0; /* rounding, for one symbol */
    e->entropy = e->entropy / 8.0 * ((double)n / (double)seen);
    if (e->distinct == 1) {
        size_t i;
        for (i = 1; i < n && src[i] == src[0]; i++) {
        }
        e->constant = i == n;
    }
    /* A frequency table costs roughly 1.5 bytes a symbol. */
    e->bytes = e->entropy + 12.0 + 1.0 * e->distinct;
}

static void estimate_start(ptwm_plane_est *e, size_t step) {
    e->bytes = e->entropy = 0.0;
    e->distinct = 0;
    e->constant = 0;
    e->step = step;
}

/* Counts come from one 64-byte block in every `step`. */
static ptwm_plane_est estimate(const uint8_t *src, size_t n, size_t step) {
    ptwm_plane_est e;
    estimate_start(&e, step);
    if (n == 0) {
        memset(e.hist, 0, sizeof(e.hist));
        return e;
    }
    estimate_finish(&e, src, n, histogram(src, n, step, e.hist));
    return e;
}

/* The exact estimate of the plane that `sampled` estimated: its counts
 * plus those of the bytes between its blocks (each byte counted once). */
static void estimate_exact(const ptwm_plane_est *sampled, const uint8_t *src, size_t n,
                           ptwm_plane_est *e) {
    uint32_t more[256];
    size_t stride = sampled->step * SAMPLE_BLOCK;
    int s;
    if (sampled->step == 1) {
        *e = *sampled;
        return;
    }
    estimate_start(e, 1);
    histogram_runs(src, n, SAMPLE_BLOCK, stride, stride - SAMPLE_BLOCK, more);
    for (s = 0; s < 256; s++) e->hist[s] = sampled->hist[s] + more[s];
    estimate_finish(e, src, n, n);
}

/* Planes of at most SAMPLE_EXACT bytes are estimated from every byte;
 * longer ones from every 4th byte, or every 8th, 16th... while that still
 * leaves SAMPLE_MIN samples: the estimates pick forms and coders, and most
 * are of candidates that are then dropped. A coded plane of up to
 * SECOND_TRY_SMALL bytes is then counted exactly; a longer one coded by
 * order-0 rANS builds its table from the sample, doubled by est_refine
 * (counting every byte cost more than the sample loses). docs/CHAINS.md,
 * "Choosing stages per plane", has the figures. */
#define SAMPLE_MIN 8192
#define SAMPLE_EXACT 4096
#define SAMPLED_TABLE (SECOND_TRY_SMALL + 1)

/* est's counts with the blocks halfway between those it counted added (a
 * sample twice as large; the same counts if it was exact). */
static void est_refine(const ptwm_plane_est *est, const uint8_t *src, size_t n, uint32_t hist[256]) {
    size_t half = est->step / 2 * SAMPLE_BLOCK;
    int s;
    memcpy(hist, est->hist, 256 * sizeof(hist[0]));
    if (est->step >= 2 && n > half) {
        uint32_t more[256];
        histogram(src + half, n - half, est->step, more);
        for (s = 0; s < 256; s++) hist[s] += more[s];
    }
}

ptwm_plane_est ptwm_plane_estimate(const uint8_t *src, size_t n) {
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


/* Pick a stage. A single candidate is used as is; among several, the
 * estimate decides and only the pick is encoded (zstd is tried only when it
 * is the sole candidate: on weight planes it never beats an order-0 stage). */
static stage_pick pick_stage(const ptwm_plane_est *e, size_t n, unsigned mask, int zlevel, int order) {
    stage_pick p;
    double best = (double)n * PTWM_WORTH_CODING;
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
 * enough to pay: without them its literal coding is all it has. Small
 * planes keep zstd first whatever the test says: there the test and the
 * sizing it leads to cost more than zstd (docs/CHAINS.md has the figures). */
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
static int huf_may_beat(const ptwm_plane_est *e, size_t len, size_t coded) {
    if (coded == SIZE_MAX) return 1;
    if (e->entropy + 3.0 + 16.0 + (double)e->distinct / 2.0 - 1.0 >= (double)coded) return 0;
    /* From exact counts, an optimal code's size bounds it without running
     * the encoder. */
    return e->step != 1 || ptwm_coder_find(PTWM_METHOD_HUFFMAN)->floor(e->hist, len) < coded;
}

/* Whether the picked order-0 coder could code smaller than `coded` bytes: it
 * takes at least the plane's estimated order-0 size (entropy and a table of
 * about a byte a symbol; 0.5% off for a sampled estimate) plus its fixed
 * costs (rANS: 32 states; Huffman: header). Counting the table skips trials
 * that always lost (docs/CHAINS.md). Order 1 can go below that entropy, so
 * it is always tried where it may run. */
static int stage_may_beat(const ptwm_plane_est *e, const stage_pick *p, size_t len, size_t coded) {
    if (coded == SIZE_MAX || p->level == 1 || (p->level < 0 && len >= PTWM_CODER_O1_MIN))
        return 1;
    return e->bytes * 0.995 + (p->stage == PTWM_METHOD_RANS ? 130.0 : 19.0) < (double)coded;
}

/* Code src with one coder, handing it what sizing already found: its plan
 * (from its size() on the exact counts), else the plane's exact counts
 * when est has them (no second count), else, for a coder that takes them,
 * sampled counts (est's, doubled by est_refine) from SAMPLED_TABLE bytes on
 * at order 0. plan and est may be NULL. */
static ptwm_error encode_stage(ptwm_ws *ws, int stage, int level, const ptwm_coder_plan *plan,
                               const ptwm_plane_est *est, const uint8_t *src, size_t len,
                               uint8_t *out, size_t cap, size_t *got) {
    const ptwm_coder *c = ptwm_coder_find(stage);
    ptwm_coder_hint h;
    uint32_t sample[256];
    /* rANS writes down from the end of its room, then moves the stream
     * down: room past its bound would only touch pages (in place, fresh
     * pages of the image). */
    size_t b = c->bound(len);
    if (b && cap > b) cap = b;
    h.plan = plan;
    h.counts = est && est->step == 1 ? est->hist : NULL;
    h.sample = NULL;
    if (c->uses_sample && est && est->step != 1 && level == 0 && len >= SAMPLED_TABLE) {
        est_refine(est, src, len, sample);
        h.sample = sample;
    }
    return c->encode(ws, src, len, level, &h, out, cap, got);
}

/* Encode src with another stage behind the current result in out, and keep
 * whichever is smaller at the front of out (planned lengths and counts as
 * encode_stage takes them). */
static void try_other(ptwm_ws *ws, int stage, int level, const ptwm_coder_plan *plan,
                      const ptwm_plane_est *est, const uint8_t *src, size_t len, uint8_t *out,
                      size_t cap, int *best_stage, size_t *best_len) {
    size_t off2 = *best_len == SIZE_MAX ? 0 : *best_len, got;
    ptwm_error e;
    if (cap - off2 < ptwm_coder_find(stage)->bound(len)) return;
    e = encode_stage(ws, stage, level, plan, est, src, len, out + off2, cap - off2, &got);
    if (e == PTWM_OK && got < *best_len) {
        memmove(out, out + off2, got);
        *best_len = got;
        *best_stage = stage;
    }
}

/* A large plane where zstd is a candidate: the candidates code a slice from
 * its middle, and only the one smaller there codes the plane (one full
 * encode instead of two; the slice picks as the whole plane would,
 * docs/CHAINS.md). Where no order-0 coder pays, zstd codes the plane only
 * if it saved PTWM_WORTH_CODING on the slice (F16 low mantissa bytes).
 * best, coded: as try_other keeps them. */
static void lz_by_slice(ptwm_ws *ws, const stage_pick *p, int zlevel, const ptwm_plane_est *est,
                        const uint8_t *src, size_t len, uint8_t *out, size_t cap, int *best,
                        size_t *coded) {
    size_t a, b;
    const uint8_t *mid = src + (len - LZ_SAMPLE) / 2;
    int z = lz_worth_trying(mid, LZ_SAMPLE) &&
            encode_stage(ws, PTWM_METHOD_ZSTD, zlevel, NULL, NULL, mid, LZ_SAMPLE, out, cap, &a) ==
                PTWM_OK;
    /* (no repeats worth a try: the estimated stage codes the plane) */
    if (z && p->stage == PTWM_METHOD_IDENTITY)
        z = (double)a < (double)LZ_SAMPLE * PTWM_WORTH_CODING;
    else if (z)
        z = encode_stage(ws, p->stage, p->level, NULL, NULL, mid, LZ_SAMPLE, out, cap, &b) ||
            a + LZ_RANS_FIXED < b;
    if (z)
        try_other(ws, PTWM_METHOD_ZSTD, zlevel, NULL, NULL, src, len, out, cap, best, coded);
    else if (p->stage != PTWM_METHOD_IDENTITY)
        try_other(ws, p->stage, p->level, NULL, est, src, len, out, cap, best, coded);
}

/* A smaller plane where zstd is a candidate: zstd first, as it wins most
 * integer planes (docs/CHAINS.md), and the estimated coder is then run only
 * if its floor could beat zstd's result. */
static void lz_first(ptwm_ws *ws, const stage_pick *p, int zlevel, const ptwm_plane_est *est,
                     const uint8_t *src, size_t len, uint8_t *out, size_t cap, int *best,
                     size_t *coded) {
    ptwm_plane_est exact;
    try_other(ws, PTWM_METHOD_ZSTD, zlevel, NULL, NULL, src, len, out, cap, best, coded);
    if (p->stage != PTWM_METHOD_IDENTITY && est->step != 1 && len <= SECOND_TRY_SMALL &&
        stage_may_beat(est, p, len, *coded)) {
        /* (a sampled entropy errs low: it never skips a try the
         * exact one would make) */
        estimate_exact(est, src, len, &exact);
        est = &exact;
    }
    if (p->stage != PTWM_METHOD_IDENTITY && stage_may_beat(est, p, len, *coded))
        try_other(ws, p->stage, p->level, NULL, est, src, len, out, cap, best, coded);
}

/* Huffman and order-0 rANS sizes of a small plane from exact counts (order 1
 * is not tried below 64 KiB: the plan is order 0's). Huffman is sized
 * first against a floor under rANS's size (the counts' entropy, a byte a
 * frequency and its 99 bytes of header and states, or the stored plane): a
 * code that beats the floor beats rANS, whose table need not be planned
 * (most planes of a few KiB). Otherwise a Huffman floor past
 * r / (1 - CLOSE_CALL) has lost, and its lengths are then not limited.
 * Picks Huffman in p where it wins; returns 1 where the sizes are within
 * CLOSE_CALL (both get coded). hplan, rplan: the plans (*planned set). */
static int size_both(const ptwm_plane_est *est, size_t len, stage_pick *p, ptwm_coder_plan *hplan,
                     ptwm_coder_plan *rplan, size_t *hs, int *planned) {
    const ptwm_coder *huf = ptwm_coder_find(PTWM_METHOD_HUFFMAN);
    double f = est->entropy + (double)est->distinct + 99.0, r, h;
    size_t fbeat;
    if (f > (double)len + 1.0) f = (double)len + 1.0;
    fbeat = (size_t)(f / (1.0 - CLOSE_CALL));
    *hs = (size_t)huf->size(est->hist, len, fbeat, hplan);
    if (*hs <= fbeat && (double)*hs < f * (1.0 - CLOSE_CALL)) {
        r = f; /* unused: Huffman wins below */
    } else {
        r = ptwm_coder_find(PTWM_METHOD_RANS)->size(est->hist, len, SIZE_MAX, rplan);
        if (*hs > fbeat) *hs = (size_t)huf->size(est->hist, len, (size_t)(r / (1.0 - CLOSE_CALL)), hplan);
    }
    h = (double)*hs;
    *planned = 1;
    if (h < r * (1.0 - CLOSE_CALL)) {
        p->stage = PTWM_METHOD_HUFFMAN;
        p->level = 0;
        *planned = *hs > 2 && *hs <= len;
        return 0;
    }
    return !(r < h * (1.0 - CLOSE_CALL));
}

/* Encode one plane into out (room for the HUFFMAN, RANS and ZSTD bounds
 * together). `lz` marks planes of integer or quantized data, where zstd's
 * matches can beat order-0/1 statistics. */
ptwm_error ptwm_plane_encode(ptwm_ws *ws, const uint8_t *src, size_t len,
                             const ptwm_plane_est *sampled, unsigned mask, int zlevel, int order,
                             int lz, uint8_t *out, size_t cap, int *stage, size_t *coded) {
    stage_pick p;
    ptwm_error e;
    int second = 0, planned = 0;
    size_t hs = 0;
    ptwm_plane_est exact;
    ptwm_coder_plan rplan, hplan;
    const ptwm_plane_est *est = sampled;
    if (len == 0) {
        *stage = PTWM_METHOD_IDENTITY;
        *coded = 0;
        return PTWM_OK;
    }
    if (est->constant) {
        *stage = PTWM_CODER_CONST;
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
        estimate_exact(est, src, len, &exact);
        est = &exact;
    }
    *coded = SIZE_MAX;
    if (p.stage != PTWM_METHOD_IDENTITY || lz) {
        int best = PTWM_METHOD_IDENTITY;
        if (lz && len >= 2 * LZ_SAMPLE) {
            lz_by_slice(ws, &p, zlevel, est, src, len, out, cap, &best, coded);
        } else if (lz) {
            lz_first(ws, &p, zlevel, est, src, len, out, cap, &best, coded);
        } else if (p.stage != PTWM_METHOD_IDENTITY) {
            /* Small planes: Huffman beside rANS, where table and state costs
             * make the call close (on large planes rANS won every time on
             * the corpus; on small ones Huffman wins most). From exact
             * counts both sizes are known closely enough to code only the
             * smaller one, unless they are within CLOSE_CALL. */
            second = p.stage == PTWM_METHOD_RANS && (mask & PTWM_EMASK(PTWM_METHOD_HUFFMAN)) &&
                     len <= SECOND_TRY_SMALL;
            if (second && est->step == 1 && len < PTWM_CODER_O1_MIN)
                second = size_both(est, len, &p, &hplan, &rplan, &hs, &planned);
            e = encode_stage(ws, p.stage, p.level,
                             !planned ? NULL : p.stage == PTWM_METHOD_HUFFMAN ? &hplan : &rplan, est,
                             src, len, out, cap, coded);
            if (e != PTWM_OK && e != PTWM_ERR_DST_SIZE) return e;
            if (e != PTWM_OK) *coded = SIZE_MAX;
            best = p.stage;
        }
        if (second && huf_may_beat(est, len, *coded))
            try_other(ws, PTWM_METHOD_HUFFMAN, 0, planned && hs > 2 && hs <= len ? &hplan : NULL,
                      NULL, src, len, out, cap, &best, coded);
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


void ptwm_plane_settings(const ptwm_chain_info *c, unsigned set, int method, int zdefault,
                         unsigned *mask, int *zlevel, int *order) {
    int8_t o = 0;
    *zlevel = zdefault;
    if (set >= c->nplanes) {
        *mask = PTWM_EMASK(PTWM_METHOD_IDENTITY); /* the tail */
    } else {
        *mask = c->mask[set];
        o = c->rans_order[set];
        if (c->zstd_level[set]) *zlevel = c->zstd_level[set];
        if (*mask == 0) *mask = method_mask(method, &o);
    }
    *order = o;
    /* zstd as one candidate among others, at no level asked for: level 1
     * (docs/CHAINS.md: on the corpus' byte planes it codes as small as 3
     * and faster). Alone, the documented default 3. */
    if (*zlevel == 0 && (*mask & (*mask - 1)) != 0) *zlevel = ZSTD_TRIAL_LEVEL;
}
