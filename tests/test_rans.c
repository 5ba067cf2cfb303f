/* RANS stage: round trips on every corpus plane (with size properties: order 0
 * within 0.5% of the zero-order entropy on big planes, order 1 beating order
 * 0 on the quantized U8 weights), edge cases around the 8-state interleave
 * and the fast-loop margin, random data, and hostile encodings, each of which
 * must be rejected with PTWM_ERR_CORRUPT. */
#include <stdlib.h>
#include <string.h>

#include "corpus_planes.h"
#include "cpu.h"
#include "entropy.h"
#include "rans_impl.h"
#include "testutil.h"

/* One workspace for every round trip, as a worker keeps one: the order-1
 * decoder clears only the tables its last plane built, so planes of other
 * precisions and contexts must decode right after each other. */
static ptwm_ws *reused;

/* Encode at `order`, decode, compare; also check that one byte less of
 * capacity is refused and that a wrong dst_size is corrupt. Returns the coded
 * length (0 on failure). */
static size_t round_trip(const uint8_t *src, size_t n, int order, const char *what) {
    size_t cap = ptwm_rans_bound(n), len = 0, len2 = 0;
    uint8_t *enc = malloc(cap), *dec = malloc(n + 1);
    ptwm_error rc;
    CHECK(enc && dec);
    rc = ptwm_rans_encode(reused, src, n, order, enc, cap, &len);
    CHECK_MSG(rc == PTWM_OK, "%s: order %d n=%zu: %s", what, order, n, ptwm_error_name(rc));
    CHECK_MSG(len >= 1 && len <= cap, "%s: n=%zu len=%zu cap=%zu", what, n, len, cap);
    rc = ptwm_rans_decode(reused, enc, len, dec, n);
    CHECK_MSG(rc == PTWM_OK, "%s: order %d n=%zu decode: %s", what, order, n,
              ptwm_error_name(rc));
    CHECK_MSG(rc || n == 0 || memcmp(src, dec, n) == 0, "%s: order %d n=%zu bytes differ", what,
              order, n);
    /* RAW and O0 streams (one or two) fix their size. SINGLE decodes to any
     * size, and so can O1 where a context has one symbol (frequency M: a
     * step that reads nothing); the container records the size. */
    if (enc[0] == 0 || enc[0] == 2 || enc[0] == 4)
        CHECK_MSG(ptwm_rans_decode(NULL, enc, len, dec, n + 1) == PTWM_ERR_CORRUPT,
                  "%s: order %d n=%zu+1 mode %u", what, order, n, enc[0]);
    if (n > 0 && (enc[0] == 0 || enc[0] == 2 || enc[0] == 4))
        CHECK_MSG(ptwm_rans_decode(NULL, enc, len, dec, n - 1) == PTWM_ERR_CORRUPT,
                  "%s: order %d n=%zu-1 mode %u", what, order, n, enc[0]);
    /* The exact length fits; one byte less is refused without overrun. */
    rc = ptwm_rans_encode(NULL, src, n, order, enc, len, &len2);
    CHECK_MSG(rc == PTWM_OK && len2 == len, "%s: exact cap %zu: %s len %zu", what, len,
              ptwm_error_name(rc), len2);
    if (n < (1u << 20)) {
        uint8_t *tight = malloc(len ? len - 1 : 1);
        CHECK(ptwm_rans_encode(NULL, src, n, order, tight, len - 1, &len2) == PTWM_ERR_DST_SIZE);
        free(tight);
    }
    free(enc);
    free(dec);
    return rc ? 0 : len;
}

/* ---- corpus planes ------------------------------------------------------ */

static void rans_plane(const char *file, const char *label, const uint8_t *plane, size_t n) {
    char what[200];
    double h = ptwm_entropy_order0(plane, n), floor_bytes = h * (double)n / 8;
    size_t l0, l1, lb;
    snprintf(what, sizeof(what), "%s %s", file, label);
    l0 = round_trip(plane, n, 0, what);
    l1 = round_trip(plane, n, 1, what);
    lb = round_trip(plane, n, -1, what);
    printf("%-36s %-14s n=%8zu H0=%.3f o0=%.3f o1=%.3f best=%.3f bits/sym\n", file, label, n, h,
           8.0 * (double)l0 / (double)n, 8.0 * (double)l1 / (double)n,
           8.0 * (double)lb / (double)n);
    /* Order 0 within 0.5% of the entropy, table and states included. */
    if (n >= (1u << 18))
        CHECK_MSG((double)l0 <= floor_bytes * 1.005, "%s: order 0 %zu bytes vs floor %.0f", what,
                  l0, floor_bytes);
    CHECK_MSG(lb <= (l0 < l1 ? l0 : l1) + (l0 < l1 ? l0 : l1) / 200,
              "%s: order -1 chose %zu, o0 %zu, o1 %zu", what, lb, l0, l1);
    if (strstr(file, ".u8."))
        CHECK_MSG(l1 < l0 && lb == l1, "%s: order 1 %zu should beat order 0 %zu", what, l1, l0);
}

/* ---- edge cases and random data ---------------------------------------- */

static void fill(uint8_t *b, size_t n, uint64_t *seed, unsigned kind) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t r = tu_rand(seed);
        switch (kind) {
        case 0: b[i] = (uint8_t)r; break;                          /* uniform */
        case 1: b[i] = (uint8_t)(__builtin_ctzll(r | (1ull << 40))); break; /* geometric */
        case 2: b[i] = (uint8_t)(r % 3); break;                    /* few symbols */
        default: b[i] = (uint8_t)(i ? (b[i - 1] + (r % 5 == 0)) : 0); break; /* order-1 */
        }
    }
}

static void test_edges(void) {
    uint8_t *b = malloc(1 << 20);
    uint64_t seed = 12345;
    size_t n, i;
    int order, kind;
    CHECK(b);
    for (order = -1; order <= 1; order++) {
        char what[64];
        snprintf(what, sizeof(what), "edge order %d", order);
        CHECK(round_trip(b, 0, order, what) == 1);
        b[0] = 77;
        CHECK(round_trip(b, 1, order, what) == 2);
        memset(b, 9, 100000);
        CHECK(round_trip(b, 100000, order, what) == 2);
        /* all 256 symbols, each once and in a skewed mix */
        for (i = 0; i < 256; i++) b[i] = (uint8_t)i;
        round_trip(b, 256, order, what);
        for (i = 0; i < 65536; i++) b[i] = (uint8_t)(i % 7 ? 0 : i);
        round_trip(b, 65536, order, what);
        /* two symbols, extreme skew: one b among a million a (at order 0,
         * four streams of 32 states: 512 bytes of states) */
        memset(b, 'a', 1 << 20);
        b[123457] = 'b';
        CHECK(round_trip(b, 1 << 20, order, what) < 600);
        b[0] = 'b';
        round_trip(b, 1 << 20, order, what);
        /* every size around the 8-state interleave and the 16-byte margin */
        for (kind = 0; kind < 4; kind++)
            for (n = 2; n < 140; n++) {
                fill(b, n, &seed, (unsigned)kind);
                round_trip(b, n, order, what);
            }
        for (kind = 0; kind < 4; kind++)
            for (n = 4096 - 9; n < 4096 + 9; n++) {
                fill(b, n, &seed, (unsigned)kind);
                round_trip(b, n, order, what);
            }
        /* random data of every kind, big */
        for (kind = 0; kind < 4; kind++) {
            size_t len;
            fill(b, 1 << 20, &seed, (unsigned)kind);
            len = round_trip(b, 1 << 20, order, what);
            if (kind == 0) CHECK(len == (1u << 20) + 1); /* uniform bytes are stored */
            if (kind == 1) CHECK(len < (1u << 19));
        }
    }
    free(b);
}

/* ---- hostile encodings -------------------------------------------------- */

static ptwm_error dec(const uint8_t *src, size_t size, size_t n) {
    uint8_t *out = malloc(n + 1);
    ptwm_error rc = ptwm_rans_decode(reused, src, size, out, n);
    free(out);
    return rc;
}

/* Parse a symbol set at enc[pos]; mark its gap bytes in `shift` (moving a run
 * renames symbols without changing any frequency, which no entropy coder can
 * notice: the container's CRC does). Returns the position after it and the
 * number of symbols in *count. */
static size_t parse_symset(const uint8_t *enc, size_t pos, uint8_t *shift, size_t *count) {
    size_t r = enc[pos], j, c = 0;
    if (r == 0) {
        for (j = 0; j < 256; j++) c += (enc[pos + 1 + j / 8] >> (j % 8)) & 1;
        *count = c;
        return pos + 33;
    }
    for (j = 0; j < r; j++) {
        shift[pos + 1 + 2 * j] = 1;
        c += (size_t)enc[pos + 2 + 2 * j] + 1;
    }
    *count = c;
    return pos + 1 + 2 * r;
}

static size_t parse_freqtab(const uint8_t *enc, size_t pos, uint8_t *shift) {
    size_t syms, j;
    pos = parse_symset(enc, pos, shift, &syms);
    for (j = 0; j < syms; j++) pos += (enc[pos] & 0x80) ? 2 : 1;
    return pos;
}

/* Truncation, extension and table damage must be rejected; damage to states
 * and words must be rejected or decode in bounds to exactly n bytes. */
static void mutate_all(const uint8_t *src, size_t n, int order, const char *what) {
    size_t cap = ptwm_rans_bound(n), len = 0, i, tables_end, ctxs, c, state_bytes;
    uint8_t *enc = malloc(cap + 8), *m = malloc(cap + 8), *shift = calloc(1, cap + 8);
    CHECK(enc && m && shift);
    CHECK(ptwm_rans_encode(NULL, src, n, order, enc, cap, &len) == PTWM_OK);
    /* order 0 in two streams from RANS_X2_MIN symbols (mutated planes stay
     * below RANS_X4_MIN) */
    CHECK_MSG(enc[0] == (order == 1 ? 3 : n >= RANS_X2_MIN ? 4 : 2), "%s: mode %u", what, enc[0]);
    if (enc[0] != 3) {
        /* (a two-stream plane's first length counted with the tables: a
         * flipped bit there moves the streams' boundary, which is corrupt) */
        tables_end = parse_freqtab(enc, 2, shift) + (enc[0] == 4 ? 4 : 0);
    } else {
        tables_end = parse_symset(enc, 2, shift, &ctxs);
        for (c = 0; c < ctxs; c++) tables_end = parse_freqtab(enc, tables_end, shift);
    }
    /* order 0 has 32 states (a stream), order 1 has 8 */
    state_bytes = enc[0] != 3 ? 128 : 32;
    CHECK(tables_end + state_bytes <= len);
    /* truncated: every prefix */
    for (i = 0; i < len; i++)
        CHECK_MSG(dec(enc, i, n) == PTWM_ERR_CORRUPT, "%s: prefix %zu", what, i);
    /* extended by a byte of any value */
    for (i = 0; i < 256; i += 51) {
        memcpy(m, enc, len);
        m[len] = (uint8_t)i;
        CHECK_MSG(dec(m, len + 1, n) == PTWM_ERR_CORRUPT, "%s: extended by %zu", what, i);
    }
    /* flipped bits in the tables and the states, and in the last words */
    for (i = 0; i < len; i++) {
        int bit;
        if (i >= tables_end + state_bytes && i + 16 < len) continue;
        for (bit = 0; bit < 8; bit += 3) {
            ptwm_error rc;
            memcpy(m, enc, len);
            m[i] ^= (uint8_t)(1u << bit);
            rc = dec(m, len, n);
            /* A moved symbol run, or a changed state or word, can be another
             * valid message: rANS maps (message, final states) one-to-one to
             * (initial states, words). It must still decode in bounds. */
            if (shift[i] || i >= tables_end)
                CHECK_MSG(rc == PTWM_ERR_CORRUPT || rc == PTWM_OK, "%s: byte %zu", what, i);
            else
                CHECK_MSG(rc == PTWM_ERR_CORRUPT, "%s: flip byte %zu bit %d (tables end %zu)",
                          what, i, bit, tables_end);
        }
    }
    free(enc);
    free(m);
    free(shift);
}

static void test_hostile(void) {
    uint8_t *b = malloc(70000), buf[600] = {0};
    uint64_t seed = 99;
    size_t i;
    CHECK(b);
    fill(b, 3000, &seed, 1);
    mutate_all(b, 3000, 0, "o0 geometric");
    fill(b, 3000, &seed, 3);
    mutate_all(b, 3000, 1, "o1 runs");
    fill(b, 70000, &seed, 2);
    mutate_all(b, 70000, 0, "o0 three symbols");

    /* empty input, unknown modes, bad precisions */
    CHECK(dec(buf, 0, 0) == PTWM_ERR_CORRUPT);
    for (i = 4; i < 256; i += 17) {
        buf[0] = (uint8_t)i;
        CHECK(dec(buf, 1, 0) == PTWM_ERR_CORRUPT);
    }
    /* RAW and SINGLE with the wrong sizes */
    buf[0] = 0;
    CHECK(dec(buf, 3, 1) == PTWM_ERR_CORRUPT);
    CHECK(dec(buf, 1, 0) == PTWM_OK);
    buf[0] = 1;
    buf[1] = 5;
    CHECK(dec(buf, 2, 0) == PTWM_ERR_CORRUPT);
    CHECK(dec(buf, 3, 4) == PTWM_ERR_CORRUPT);
    CHECK(dec(buf, 1, 4) == PTWM_ERR_CORRUPT);

    /* Hand-made O0 stream: prec 8, symbols {0, 1} (one run), freqs 100 (one
     * byte: 99) and 156 (two bytes: 0x80, 155), then the 32 states (SB bytes),
     * all L = 0x00010000. */
    {
        enum { SB = 4 * 32 };
        static const uint8_t head[] = {2, 8, 1, 0, 1, 99, 0x80, 155};
        const size_t h = sizeof(head), size = h + SB;
        uint8_t *st = buf + h;
        memcpy(buf, head, h);
        for (i = 0; i < SB; i++) st[i] = i % 4 == 2 ? 1 : 0;
        CHECK(dec(buf, size, 0) == PTWM_OK); /* zero symbols, states at L */
        CHECK(dec(buf, size - 1, 0) == PTWM_ERR_CORRUPT);
        buf[7] = 199; /* over-full: 100 + 200 */
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        buf[7] = 99; /* under-full: 100 + 100 */
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        buf[5] = 0x80; /* 100 in a non-canonical two-byte form, then 155 + 1 */
        buf[6] = 99;
        buf[7] = 155;
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        memcpy(buf, head, h);
        CHECK(dec(buf, size, 0) == PTWM_OK);
        /* a state below L, or above it with nothing to decode: bad final state */
        st[4 * 5 + 2] = 0;
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        st[4 * 5 + 2] = 1;
        st[4 * 31 + 1] = 1;
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        st[4 * 31 + 1] = 0;
        /* precision out of range */
        buf[1] = 7;
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        buf[1] = 16;
        CHECK(dec(buf, size, 0) == PTWM_ERR_CORRUPT);
        buf[1] = 8;
        CHECK(dec(buf, size, 0) == PTWM_OK);
        /* symbol runs: gap 0 after a run (not canonical), run past 255, R > 128 */
        {
            static const uint8_t runs_bad[][5] = {
                {2, 0, 0, 0, 0}, {1, 250, 9, 0, 0}, {129, 0, 0, 0, 0}};
            for (i = 0; i < 3; i++) {
                memcpy(buf + 2, runs_bad[i], 5);
                CHECK(dec(buf, 2 + 5 + 140, 0) == PTWM_ERR_CORRUPT);
            }
        }
        /* an empty bitmap */
        buf[2] = 0;
        memset(buf + 3, 0, 32);
        CHECK(dec(buf, 3 + 32 + 40, 0) == PTWM_ERR_CORRUPT);
    }

    /* O1 where a context met has no table: symbols {1, 2}, contexts {0, 1, 2};
     * dropping context 2's table (and its bit) must be rejected. */
    {
        size_t n = 800, len = 0, t0, t1, t2, t3, k;
        uint8_t *enc = malloc(ptwm_rans_bound(n)), *m = malloc(ptwm_rans_bound(n));
        CHECK(enc && m);
        for (k = 0; k < n; k++) b[k] = (uint8_t)(1 + ((k * 7919) % 13 < 4));
        CHECK(ptwm_rans_encode(NULL, b, n, 1, enc, ptwm_rans_bound(n), &len) == PTWM_OK);
        CHECK(enc[0] == 3 && enc[2] == 1 && enc[3] == 0 && enc[4] == 2);
        /* each table: run set (1 + 2R bytes) then one or two bytes per frequency */
        t0 = 5;
        {
            size_t *ts[3] = {&t1, &t2, &t3}, t = t0;
            int c;
            for (c = 0; c < 3; c++) {
                size_t r = enc[t], syms = 0, j;
                size_t q = t + 1 + 2 * r;
                for (j = 0; j < r; j++) syms += (size_t)enc[t + 2 + 2 * j] + 1;
                for (j = 0; j < syms; j++) q += (enc[q] & 0x80) ? 2 : 1;
                *ts[c] = q;
                t = q;
            }
        }
        memcpy(m, enc, t2);
        m[4] = 1; /* contexts {0, 1} */
        memcpy(m + t2, enc + t3, len - t3);
        CHECK(dec(m, len - (t3 - t2), n) == PTWM_ERR_CORRUPT);
        free(enc);
        free(m);
    }
    free(b);
}

static ptwm_isa isa_now = PTWM_ISA_BEST;

/* The levels with rANS loops of their own (ptwm_set_isa_limit; a level above
 * the machine's runs the machine's best). */
#define NISA 4
static const ptwm_isa isas[NISA] = {PTWM_ISA_SCALAR, PTWM_ISA_AVX2, PTWM_ISA_AVX512,
                                    PTWM_ISA_AVX512VBMI};

/* Every encoder loop (scalar, AVX2, AVX-512 VBMI) writes the same bytes, on
 * real planes and on lengths around their steps (32 and 64 symbols). */
static void encoders_agree(const char *file, const char *label, const uint8_t *plane, size_t n) {
    static const size_t cuts[] = {31, 32, 63, 64, 65, 127, 129, 1000, 4097};
    size_t k, cap, len[NISA];
    uint8_t *out[NISA];
    int isa, order;
    if (n > (1u << 20)) n = 1u << 20;
    cap = ptwm_rans_bound(n);
    for (isa = 0; isa < NISA; isa++) out[isa] = (uint8_t *)malloc(cap);
    for (k = 0; k <= sizeof(cuts) / sizeof(cuts[0]); k++) {
        size_t m = k < sizeof(cuts) / sizeof(cuts[0]) ? cuts[k] : n;
        if (m > n) continue;
        for (order = 0; order <= 1; order++) {
            for (isa = 0; isa < NISA; isa++) {
                ptwm_set_isa_limit(isas[isa]);
                CHECK(ptwm_rans_encode(NULL, plane, m, order, out[isa], cap, &len[isa]) == PTWM_OK);
            }
            for (isa = 1; isa < NISA; isa++)
                CHECK_MSG(len[0] == len[isa] && memcmp(out[0], out[isa], len[0]) == 0,
                          "%s %s, %zu symbols, order %d: %s encoder differs (%zu bytes, "
                          "scalar %zu)",
                          file, label, m, order, ptwm_isa_name(isas[isa]), len[isa], len[0]);
        }
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
    for (isa = 0; isa < NISA; isa++) free(out[isa]);
}

/* Every encoder loop on skewed planes whose tables take each precision from
 * 10 to 15 bits and give many symbols a frequency of 1, 2 or a power of
 * two (the cases the vector loops' division treats apart). */
static void test_encoders_precisions(void) {
    size_t n = (size_t)1 << 20, cap = ptwm_rans_bound(n), len[NISA], i, m;
    uint8_t *plane = (uint8_t *)malloc(n), *out[NISA];
    uint64_t seed = 99;
    unsigned seen = 0, rare, isa;
    CHECK(plane != NULL);
    for (isa = 0; isa < NISA; isa++) CHECK((out[isa] = (uint8_t *)malloc(cap)) != NULL);
    /* a geometric head over a few symbols, then `rare` symbols of 1 to 8
     * occurrences each: the head's skew pushes the precision up */
    for (rare = 0; rare <= 240; rare += 16) {
        for (m = 4096; m <= n; m *= 4) {
            size_t at = 0;
            for (i = 0; i < m; i++) {
                uint64_t r = tu_rand(&seed);
                plane[i] = (uint8_t)(__builtin_ctzll(r | (1ull << (4 + rare / 48))));
            }
            for (i = 0; i < rare && at + 8 < m; i++) {
                size_t k, c = 1 + i % 8;
                for (k = 0; k < c; k++) plane[(at += 997) % m] = (uint8_t)(16 + i);
            }
            for (isa = 0; isa < NISA; isa++) {
                ptwm_set_isa_limit(isas[isa]);
                CHECK(ptwm_rans_encode(NULL, plane, m, 0, out[isa], cap, &len[isa]) == PTWM_OK);
            }
            if (len[0] > 2 && (out[0][0] == 2 || out[0][0] == 4 || out[0][0] == 5) /* order 0 */) seen |= 1u << out[0][1];
            for (isa = 1; isa < NISA; isa++)
                CHECK_MSG(len[0] == len[isa] && memcmp(out[0], out[isa], len[0]) == 0,
                          "skewed plane, %u rare symbols, %zu bytes, precision %u: %s encoder "
                          "differs (%zu bytes, scalar %zu)",
                          rare, m, out[0][1], ptwm_isa_name(isas[isa]), len[isa], len[0]);
        }
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
    CHECK_MSG((seen >> 10 & 63) == 63, "precisions reached: mask 0x%x, want 10..15", seen);
    for (isa = 0; isa < NISA; isa++) free(out[isa]);
    free(plane);
}

/* Order 0 over tables of precision 12 or less, whose AVX-512 decode table is
 * built 16 slots a store, a symbol's last store running into the next
 * symbol's slots and the last one past the table: frequencies on both sides
 * of every multiple of 16 up to 49, symbol 255 present and the last slot in
 * the middle of a store. The plane holds each symbol exactly 4f times (4 x
 * 4096 in all, shuffled: one stream), so that a table of precision 12 is
 * exact and costs least: the test checks that the encoder chose it. Decoded
 * at every level. */
#define PACKED_N (4 * 4096)
static void packed_table_plane(const uint32_t f[256], const char *what) {
    uint8_t *b = malloc(PACKED_N), *enc = malloc(ptwm_rans_bound(PACKED_N)), *out = malloc(PACKED_N);
    uint64_t seed = 4242;
    size_t n = 0, i, len = 0;
    int s, isa;
    CHECK(b && enc && out);
    for (s = 0; s < 256; s++)
        for (i = 0; i < 4 * f[s] && n < PACKED_N; i++) b[n++] = (uint8_t)s;
    CHECK_MSG(n == PACKED_N, "%s: frequencies sum to %zu / 4", what, n);
    for (i = n - 1; i > 0; i--) {
        size_t k = (size_t)(tu_rand(&seed) % (i + 1));
        uint8_t t = b[i];
        b[i] = b[k];
        b[k] = t;
    }
    CHECK(ptwm_rans_encode(reused, b, n, 0, enc, ptwm_rans_bound(n), &len) == PTWM_OK);
    CHECK_MSG(enc[0] == 2 && enc[1] == 12, "%s: mode %u precision %u, not an order-0 table of 12",
              what, enc[0], enc[1]);
    for (isa = 0; isa < NISA; isa++) {
        ptwm_set_isa_limit(isas[isa]);
        memset(out, 0xee, n);
        CHECK_MSG(ptwm_rans_decode(reused, enc, len, out, n) == PTWM_OK && memcmp(out, b, n) == 0,
                  "%s: isa %s does not decode the plane", what, ptwm_isa_name(isas[isa]));
    }
    ptwm_set_isa_limit(isa_now);
    free(b);
    free(enc);
    free(out);
}

static void test_packed_tables(void) {
    static const uint32_t edge[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49};
    uint32_t f[256], sum = 0, d;
    int s;
    /* every symbol: every fourth through the edges, the others 1; symbol 255
     * takes the rest, made 1 more than a multiple of 16 (its last store then
     * holds one slot) by moving slots to symbol 1 */
    for (s = 0; s < 255; s++) sum += f[s] = s % 4 ? 1 : edge[s / 4 % (sizeof(edge) / sizeof(edge[0]))];
    f[255] = 4096 - sum;
    d = (f[255] - 1) % 16;
    f[1] += d;
    f[255] -= d;
    packed_table_plane(f, "packed table, 256 symbols");
    /* three long runs of slots and single ones every fifth symbol, with gaps
     * (the single ones make a table of precision 12 worth its cost) */
    memset(f, 0, sizeof(f));
    for (s = 0; s < 255; s += 5) f[s] = 1;
    f[3] = 2063;
    f[200] = 17;
    for (sum = 0, s = 0; s < 255; s++) sum += f[s];
    f[255] = 4096 - sum;
    packed_table_plane(f, "packed table, 53 symbols");
}

/* The capped decoders on real planes (1 MiB windows keep the sanitizer
 * build quick): every order, bytes compared. */
static void scalar_plane(const char *file, const char *label, const uint8_t *plane, size_t n) {
    char what[200];
    int order;
    if (n > (1u << 20)) n = 1u << 20;
    snprintf(what, sizeof(what), "isa %s %s %s", ptwm_isa_name(isa_now), file, label);
    for (order = 0; order <= 1; order++) round_trip(plane, n, order, what);
}

/* Order 0 from sampled counts (one 64-byte block in 16, as the chunk coder
 * samples): every encoder loop writes the same bytes, they decode to the
 * plane, and from 16K samples on cost at most 0.2% over exact counts. */
static void sampled_plane(const char *file, const char *label, const uint8_t *plane, size_t n) {
    uint32_t sample[256] = {0};
    size_t i, j, cap, len[NISA], exact;
    uint8_t *out[NISA], *dec;
    int isa;
    if (n > (1u << 20)) n = 1u << 20;
    for (i = 0; i < n; i += 16 * 64)
        for (j = i; j < i + 64 && j < n; j++) sample[plane[j]]++;
    cap = ptwm_rans_bound(n);
    for (isa = 0; isa < NISA; isa++) {
        out[isa] = (uint8_t *)malloc(cap);
        ptwm_set_isa_limit(isas[isa]);
        CHECK(ptwm_rans_encode_sampled(plane, n, sample, 0, out[isa], cap, &len[isa]) == PTWM_OK);
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
    for (isa = 1; isa < NISA; isa++)
        CHECK_MSG(len[0] == len[isa] && memcmp(out[0], out[isa], len[0]) == 0,
                  "%s %s: sampled %s encoder differs (%zu bytes, scalar %zu)", file, label,
                  ptwm_isa_name(isas[isa]), len[isa], len[0]);
    dec = (uint8_t *)malloc(n + 1);
    CHECK_MSG(ptwm_rans_decode(NULL, out[0], len[0], dec, n) == PTWM_OK && memcmp(dec, plane, n) == 0,
              "%s %s: sampled coding does not round-trip", file, label);
    CHECK(ptwm_rans_encode(NULL, plane, n, 0, out[1], cap, &exact) == PTWM_OK);
    if (n >= 16 * 64 * 256) /* 16K samples */
        CHECK_MSG((double)len[0] <= (double)exact * 1.002 + 16.0,
                  "%s %s: sampled table %zu bytes against %zu from exact counts", file, label,
                  len[0], exact);
    for (isa = 0; isa < NISA; isa++) free(out[isa]);
    free(dec);
}

/* Symbols a sample missed, at the edges of the 64-byte blocks the scan
 * steps by and in the partial block at the end, get a frequency; a sample
 * that is empty or counts more bytes than the plane has falls back to exact
 * counts. */
static void test_sampled_edges(void) {
    static const size_t at[] = {0, 63, 64, 127, 4096, 99935, 99999};
    size_t n = 100000, i, cap = ptwm_rans_bound(n), a, b;
    uint8_t *src = (uint8_t *)malloc(n), *enc = (uint8_t *)malloc(cap), *enc2 = (uint8_t *)malloc(cap),
            *dec = (uint8_t *)malloc(n);
    uint32_t sample[256] = {0};
    uint64_t seed = 7;
    int isa;
    for (i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = (uint8_t)(120 + (seed >> 62)); /* 120..123 */
    }
    for (i = 0; i < sizeof(at) / sizeof(at[0]); i++) src[at[i]] = (uint8_t)(200 + i);
    for (i = 0; i < n; i++)
        if (src[i] < 200) sample[src[i]]++;
    for (i = 120; i < 124; i++) sample[i] /= 8;
    for (isa = 0; isa < NISA; isa++) {
        ptwm_set_isa_limit(isas[isa]);
        CHECK(ptwm_rans_encode_sampled(src, n, sample, 0, enc, cap, &a) == PTWM_OK);
        CHECK_MSG(enc[0] == 4 && ptwm_rans_decode(NULL, enc, a, dec, n) == PTWM_OK &&
                      memcmp(dec, src, n) == 0,
                  "isa %s: symbols missing from the sample do not round-trip (mode %u)",
                  ptwm_isa_name(isas[isa]), enc[0]);
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
    CHECK(ptwm_rans_encode(NULL, src, n, 0, enc2, cap, &b) == PTWM_OK);
    memset(sample, 0, sizeof(sample));
    CHECK(ptwm_rans_encode_sampled(src, n, sample, 0, enc, cap, &a) == PTWM_OK);
    CHECK_MSG(a == b && memcmp(enc, enc2, a) == 0, "empty sample: not the exact coding");
    sample[120] = (uint32_t)n + 1;
    CHECK(ptwm_rans_encode_sampled(src, n, sample, 0, enc, cap, &a) == PTWM_OK);
    CHECK_MSG(a == b && memcmp(enc, enc2, a) == 0, "oversized sample: not the exact coding");
    free(src);
    free(enc);
    free(enc2);
    free(dec);
}

/* Order-0 planes of RANS_X2_MIN (32K) symbols or more are coded in two
 * streams (mode 4: table, the first stream's length, then each stream's 32
 * states and words), of RANS_X4_MIN (128K) or more in four (mode 5: the
 * lengths of the first three).
 * Every level decodes them, the AVX-512 one in a loop over two streams and
 * the VBMI one over four: sizes around the splits (each stream but the last
 * takes 1/k of the whole rounds), and parts of very different entropy, so
 * that one stream's words run out long before another's and each finishes
 * alone. Every level's encoder writes the same bytes (the VBMI one codes
 * pairs of streams in one loop, each in its share of the output, and codes
 * them one after the other where one does not fit in its share: kinds 4 and
 * 5, one stream's symbols uniform and the rest constant). Damage to any
 * length or to a stream is refused, in bounds. */
static void test_streams(void) {
    static const size_t sizes[] = {RANS_X2_MIN,       RANS_X2_MIN + 1,       RANS_X2_MIN + 31,
                                   RANS_X2_MIN + 63,  50000,                 2 * RANS_X2_MIN + 5,
                                   RANS_X4_MIN - 1,   RANS_X4_MIN,           RANS_X4_MIN + 31,
                                   RANS_X4_MIN + 127, RANS_X4_MIN + 128 + 5, 150001,
                                   300001,            (1 << 20) + 17};
    size_t n_max = (1 << 20) + 17, cap = ptwm_rans_bound(n_max), k, i, len;
    uint8_t *b = malloc(n_max), *enc = malloc(cap + 8), *m = malloc(cap + 8), *out = malloc(n_max);
    uint64_t seed = 4242;
    int kind, isa;
    size_t len2;
    unsigned precs = 0; /* bit 0: a packed table (precision <= 12), bit 1: split */
    unsigned modes = 0;
    CHECK(b && enc && m && out);
    if (!b || !enc || !m || !out) return;
    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (kind = 0; kind < 6; kind++) {
            size_t n = sizes[k], ns = n >= RANS_X4_MIN ? 4 : 2, part = n / (64 * ns / 2) * 32;
            if (kind >= 4) {
                /* one stream's symbols uniform (kind 4: the second, 5: the
                 * first), the rest constant */
                size_t at = kind == 4 ? part : 0;
                memset(b, 'c', n);
                fill(b + at, part, &seed, 0);
            } else if (kind < 2) {
                fill(b, n, &seed, 1);
            } else {
                /* the first stream (kind 2) or all but it nearly constant (few
                 * words), the rest geometric */
                memset(b + (kind == 2 ? 0 : part), 'a', kind == 2 ? part : n - part);
                fill(b + (kind == 2 ? part : 0), kind == 2 ? n - part : part, &seed, 1);
                for (i = 0; i < n; i += 977) b[i] = 'b';
            }
            if (kind == 1) {
                /* many rare symbols: a precision above 12, the split table */
                size_t at = 0, r, c;
                for (r = 0; r < 200; r++)
                    for (c = 0; c <= r % 8; c++) b[(at += 997) % n] = (uint8_t)(40 + r);
            }
            ptwm_set_isa_limit(PTWM_ISA_SCALAR);
            CHECK(ptwm_rans_encode(reused, b, n, 0, m, cap, &len2) == PTWM_OK);
            ptwm_set_isa_limit(PTWM_ISA_BEST);
            CHECK(ptwm_rans_encode(reused, b, n, 0, enc, cap, &len) == PTWM_OK);
            CHECK_MSG(len == len2 && memcmp(enc, m, len) == 0,
                      "n=%zu kind %d: the best level's encoder wrote %zu bytes, the scalar %zu",
                      n, kind, len, len2);
            CHECK_MSG(enc[0] == (ns == 4 ? 5 : 4), "n=%zu kind %d: mode %u, not %zu streams", n,
                      kind, enc[0], ns);
            modes |= 1u << enc[0];
            precs |= 1u << (enc[1] > 12);
            for (isa = 0; isa < NISA; isa++) {
                ptwm_set_isa_limit(isas[isa]);
                memset(out, 0xee, n);
                CHECK_MSG(ptwm_rans_decode(reused, enc, len, out, n) == PTWM_OK &&
                              memcmp(out, b, n) == 0,
                          "n=%zu kind %d precision %u: isa %s does not decode %zu streams", n,
                          kind, enc[1], ptwm_isa_name(isas[isa]), ns);
            }
            ptwm_set_isa_limit(PTWM_ISA_BEST);
        }
    CHECK_MSG(precs == 3, "multi-stream planes over tables 0x%x (want packed and split)", precs);
    CHECK_MSG(modes == (1u << 4 | 1u << 5), "modes seen 0x%x", modes);
    /* Damage to a length: every length but the true one, in steps, moves a
     * boundary between streams; a plane of two streams (its one length) and
     * of four (each of its three). */
    for (k = 5; k < sizeof(sizes) / sizeof(sizes[0]); k += 7) {
        size_t n = sizes[k], ns, at, f, lena;
        fill(b, n, &seed, 1);
        CHECK(ptwm_rans_encode(reused, b, n, 0, enc, cap, &len) == PTWM_OK);
        ns = enc[0] == 5 ? 4 : 2;
        at = parse_freqtab(enc, 2, m);
        for (f = 0; f + 1 < ns; f++) {
            size_t lf = ptwm_load_le32(enc + at + 4 * f);
            CHECK(lf > 128 && at + 4 * (ns - 1) + lf < len);
            for (i = 0; i < 40; i++) {
                static const long d[] = {-2, 2, -64, 64, -1000};
                size_t bad = i < 5 ? (size_t)((long)lf + d[i]) : i < 39 ? (lf * i) / 40 : len;
                memcpy(m, enc, len);
                ptwm_store_le32(m + at + 4 * f, (uint32_t)bad);
                for (isa = 0; isa < NISA; isa++) {
                    ptwm_set_isa_limit(isas[isa]);
                    CHECK_MSG(dec(m, len, n) == PTWM_ERR_CORRUPT,
                              "%zu streams: stream %zu of %zu bytes said %zu: isa %s", ns, f, lf,
                              bad, ptwm_isa_name(isas[isa]));
                }
            }
        }
        /* the last stream cut short, or a state of the second below L */
        lena = ptwm_load_le32(enc + at);
        memcpy(m, enc, len);
        CHECK(dec(m, len - 2, n) == PTWM_ERR_CORRUPT);
        memset(m + at + 4 * (ns - 1) + lena, 0, 4);
        for (isa = 0; isa < NISA; isa++) {
            ptwm_set_isa_limit(isas[isa]);
            CHECK_MSG(dec(m, len, n) == PTWM_ERR_CORRUPT, "%zu streams: a state below L: isa %s",
                      ns, ptwm_isa_name(isas[isa]));
        }
        ptwm_set_isa_limit(PTWM_ISA_BEST);
    }
    /* A cap on the streams (a file held to an older container version):
     * a plane of four streams in two (2) or one (1), decoding the same. */
    {
        static const struct {
            unsigned cap, mode;
        } caps[] = {{0, 5}, {4, 5}, {2, 4}, {1, 2}};
        size_t n = 300001, lens[4], i2;
        fill(b, n, &seed, 1);
        for (i2 = 0; i2 < 4; i2++) {
            CHECK(ptwm_rans_encode_counts(reused, b, n, 0, NULL, caps[i2].cap, enc, cap, &lens[i2]) ==
                  PTWM_OK);
            CHECK_MSG(enc[0] == caps[i2].mode, "at most %u streams: mode %u", caps[i2].cap, enc[0]);
            memset(out, 0, n);
            CHECK(ptwm_rans_decode(reused, enc, lens[i2], out, n) == PTWM_OK && memcmp(out, b, n) == 0);
        }
        /* each stream's states: 128 bytes */
        CHECK_MSG(lens[2] < lens[0] && lens[3] < lens[2], "%zu, %zu, %zu bytes", lens[0], lens[2],
                  lens[3]);
    }
    free(b);
    free(enc);
    free(m);
    free(out);
}

int main(void) {
    int rc;
    reused = ptwm_ws_create();
    CHECK(reused != NULL);
    test_sampled_edges();
    test_packed_tables();
    test_streams();
    cp_for_each(sampled_plane);
    test_edges();
    test_hostile();
    cp_for_each(rans_plane);
    cp_for_each(encoders_agree);
    test_encoders_precisions();
    /* Again with the scalar loops, then with AVX2 only, then AVX-512 without
     * VBMI, where this machine has a better path. */
    ptwm_set_isa_limit(isa_now = PTWM_ISA_SCALAR);
    test_edges();
    test_hostile();
    cp_for_each(scalar_plane);
    ptwm_set_isa_limit(isa_now = PTWM_ISA_AVX2);
    test_edges();
    test_hostile();
    cp_for_each(scalar_plane);
    ptwm_set_isa_limit(isa_now = PTWM_ISA_AVX512);
    test_edges();
    test_hostile();
    cp_for_each(scalar_plane);
    ptwm_set_isa_limit(isa_now = PTWM_ISA_BEST);
    /* The best level again with the other choice of one-stream decoder
     * (gathers or byte permutes, cpu.h): the CPU makes one, this the other. */
    ptwm_cpu_set_fast_gather(!ptwm_cpu_fast_gather());
    test_packed_tables();
    test_streams();
    test_edges();
    test_hostile();
    cp_for_each(scalar_plane);
    ptwm_cpu_set_fast_gather(-1);
    rc = tu_finish("rans");
    ptwm_ws_free(reused);
    return rc;
}
