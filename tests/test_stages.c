/* Chunk payloads of format version 5 name their stages: hand-made payloads
 * that decode, and hostile stage lists (unknown ids, bad parameters, wrong
 * order, too many stages), each with its error code and message. The decode
 * plan of each kind of stage list: the forms each inverse takes and gives,
 * and which inverses run strip by strip inside another. */
#include <stdlib.h>
#include <string.h>
#include "chain.h"
#include "chunk.h"
#include "stage.h"
#include "testutil.h"

static uint8_t chain[PTWM_CHAIN_MAX_BYTES];
static size_t clen;

/* A payload: flags 0 (no CRCs), the stage bytes, then `planes` IDENTITY
 * entries of the given lengths with `fill` bytes as their content. */
static size_t payload(uint8_t *p, const uint8_t *stages, size_t slen, unsigned planes,
                      const size_t *len, uint8_t fill) {
    size_t o = 0, k;
    p[o++] = 0;
    memcpy(p + o, stages, slen);
    o += slen;
    for (k = 0; k < planes; k++) {
        p[o++] = PTWM_METHOD_IDENTITY;
        p[o++] = (uint8_t)len[k];
    }
    for (k = 0; k < planes; k++) {
        memset(p + o, fill, len[k]);
        o += len[k];
    }
    return o;
}

#define BAD(stages, code, msg)                                                                  \
    do {                                                                                        \
        static const uint8_t st_[] = stages;                                                    \
        size_t l_ = payload(buf, st_, sizeof(st_), 2, two, 0x3c);                                \
        CHECK_ERR(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, l_, dec, 16, &err), \
                  &err, code, msg);                                                             \
    } while (0)
#define L(...) {__VA_ARGS__}

static void test_hostile(void) {
    static const size_t two[2] = {8, 8};
    uint8_t buf[256], dec[16];
    ptwm_err err;
    size_t l, k;
    /* The plain BF16 split of 8 elements decodes: exponent 0x3c, sign and
     * mantissa 0x3c. */
    {
        static const uint8_t st[] = {1, 1, 2, 8, 7};
        l = payload(buf, st, sizeof(st), 2, two, 0x3c);
        CHECK(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, l, dec, 16, &err) ==
              PTWM_OK);
        for (k = 0; k < 8; k++) CHECK(ptwm_load_le16(dec + 2 * k) == (0x3cu << 7 | 0x3c));
    }
    BAD(L(1, 9), PTWM_ERR_UNKNOWN_ID, "stage 0: unknown id 9");
    BAD(L(1, 0), PTWM_ERR_UNKNOWN_ID, "stage 0: unknown id 0");
    BAD(L(2, 1, 2, 8, 7, 200), PTWM_ERR_UNKNOWN_ID, "stage 1: unknown id 200");
    BAD(L(7, 1, 2, 8, 7), PTWM_ERR_CORRUPT, "7 stages (at most 6)");
    BAD(L(1, 1, 2, 8, 8), PTWM_ERR_CORRUPT,
        "stage 0 (split): width 2 bytes, exponent 8 bits, mantissa 8 bits");
    BAD(L(1, 1, 2, 0x88, 0), PTWM_ERR_CORRUPT, "stage 0 (split): parameter 1 malformed");
    BAD(L(1, 2, 9), PTWM_ERR_CORRUPT, "stage 0 (planes): width 9 (1..8)");
    /* Order. */
    BAD(L(2, 4, 32, 1, 2, 8, 7), PTWM_ERR_CORRUPT,
        "stage 0 (blocks): needs a split with an exponent of at most 8 bits before it");
    BAD(L(2, 1, 2, 8, 7, 3, 2, 4, 1), PTWM_ERR_CORRUPT, "stage 1 (sparse): must be the first stage");
    BAD(L(2, 1, 2, 8, 7, 2, 2), PTWM_ERR_CORRUPT, "stage 1 (planes): a second transform");
    BAD(L(3, 1, 2, 8, 7, 4, 32, 4, 32), PTWM_ERR_CORRUPT, "stage 2 (blocks): named twice");
    BAD(L(3, 1, 2, 8, 7, 6, 0, 4, 32), PTWM_ERR_CORRUPT, "stage 2 (blocks): must come before joint");
    BAD(L(3, 1, 2, 8, 7, 4, 32, 6, 0), PTWM_ERR_CORRUPT,
        "stage 2 (joint): over block-relative exponents");
    BAD(L(3, 1, 2, 8, 7, 5, 2, 4, 32), PTWM_ERR_CORRUPT,
        "stage 2 (blocks): exponents already relative to scales");
    BAD(L(2, 2, 2, 4, 32), PTWM_ERR_CORRUPT, "stage 1 (blocks): needs a split");
    BAD(L(2, 1, 2, 5, 10, 6, 0), PTWM_ERR_CORRUPT,
        "stage 1 (joint): needs a split with a one-byte exponent and whole sign:mantissa bytes");
    /* Parameters against the chunk. */
    BAD(L(2, 3, 2, 9, 1, 1, 2, 8, 7), PTWM_ERR_CORRUPT,
        "stage 0 (sparse): 9 nonzero elements in a chunk of 8");
    BAD(L(2, 3, 2, 4, 2, 1, 2, 8, 7), PTWM_ERR_CORRUPT, "stage 0 (sparse): width 2 (1..8), signs 2");
    BAD(L(2, 3, 4, 2, 1, 1, 2, 8, 7), PTWM_ERR_CORRUPT,
        "stage 1 (split): width 2 after sparse elements of width 4");
    BAD(L(1, 3, 2, 4, 1), PTWM_ERR_CORRUPT, "sparse elements, but no transform stage follows");
    /* BASE: first, then a transform of its width. */
    BAD(L(1, 7, 2, 1), PTWM_ERR_CORRUPT, "base difference elements, but no transform stage follows");
    BAD(L(2, 7, 9, 1, 2, 9), PTWM_ERR_CORRUPT, "stage 0 (base): width 9 (1..8), ordered 1 (0 or 1)");
    BAD(L(2, 7, 0, 1, 2, 2), PTWM_ERR_CORRUPT, "stage 0 (base): width 0 (1..8), ordered 1");
    BAD(L(2, 7, 2, 2, 2, 2), PTWM_ERR_CORRUPT, "stage 0 (base): width 2 (1..8), ordered 2 (0 or 1)");
    BAD(L(2, 2, 2, 7, 2, 1), PTWM_ERR_CORRUPT, "stage 1 (base): must be the first stage");
    BAD(L(2, 7, 4, 1, 2, 2), PTWM_ERR_CORRUPT,
        "stage 1 (planes): width 2 after base elements of width 4");
    BAD(L(3, 7, 2, 1, 3, 4, 2, 1, 2, 4), PTWM_ERR_CORRUPT,
        "stage 1 (sparse): width 4 after base elements of width 2");
    BAD(L(3, 3, 2, 4, 1, 7, 2, 1, 2, 2), PTWM_ERR_CORRUPT, "stage 1 (base): must be the first stage");
    BAD(L(3, 2, 2, 3, 2, 4, 1, 7, 2, 1), PTWM_ERR_CORRUPT,
        "stage 1 (sparse): must be the first stage (or right after base)");
    BAD(L(3, 7, 2, 1, 7, 2, 1, 2, 2), PTWM_ERR_CORRUPT, "stage 1 (base): named twice");
    BAD(L(3, 7, 2, 1, 2, 2, 4, 32), PTWM_ERR_CORRUPT, "stage 2 (blocks): needs a split");
    BAD(L(2, 1, 2, 8, 7, 5, 1), PTWM_ERR_CORRUPT, "stage 1 (cols): 1 columns for 8 elements (2 to 4)");
    BAD(L(2, 1, 2, 8, 7, 5, 5), PTWM_ERR_CORRUPT, "stage 1 (cols): 5 columns for 8 elements");
    BAD(L(3, 3, 2, 8, 1, 1, 2, 8, 7, 5, 2), PTWM_ERR_CORRUPT,
        "stage 2 (cols): column scales of sparse elements");
    BAD(L(2, 1, 2, 8, 7, 4, 1), PTWM_ERR_CORRUPT, "stage 1 (blocks): block of 1 elements");
    BAD(L(2, 1, 2, 8, 7, 6, 9), PTWM_ERR_CORRUPT, "stage 1 (joint): 9 escapes for 8 elements");
    /* Planes the stages do not make: two entries where block scales add a
     * third; none where the split makes two. */
    BAD(L(2, 1, 2, 8, 7, 4, 2), PTWM_ERR_UNKNOWN_ID, "plane 2: unknown stage id 60");
    BAD(L(0), PTWM_ERR_CORRUPT, "identity stage with coded length 8 for 16 bytes");
    /* Flag bits other than the CRCs', and a stage list past the end. */
    l = payload(buf, (const uint8_t[]){1, 1, 2, 8, 7}, 5, 2, two, 0);
    buf[0] = 2;
    CHECK_ERR(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, l, dec, 16, &err), &err,
              PTWM_ERR_CORRUPT, "unknown flags 0x02");
    buf[0] = 0;
    CHECK_ERR(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, 4, dec, 16, &err), &err,
              PTWM_ERR_CORRUPT, "stage 0 (split): parameter 1 malformed or past the end");
    buf[1] = 2;
    CHECK_ERR(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, 6, dec, 16, &err), &err,
              PTWM_ERR_CORRUPT, "stage 1 of 2 past the end");
}

/* Stages a decoder runs whatever the chain says (the payload names them):
 * block scales by hand over 8 BF16 elements, then every plane through the
 * registry's inverses. */
static void test_blocks_by_hand(void) {
    static const uint8_t st[] = {2, 1, 2, 8, 7, 4, 4}; /* split, blocks of 4 */
    static const size_t lens[3] = {8, 8, 2};
    uint8_t buf[128], dec[16];
    ptwm_err err;
    size_t l = payload(buf, st, sizeof(st), 3, lens, 1), k;
    /* residuals 1; scales: deltas 1, 1 -> 1 and 2; exponents 0 and 1 */
    CHECK(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, l, dec, 16, &err) == PTWM_OK);
    for (k = 0; k < 8; k++)
        CHECK_MSG(ptwm_load_le16(dec + 2 * k) == ((k < 4 ? 0u : 1u) << 7 | 1u), "element %zu: %04x",
                  k, ptwm_load_le16(dec + 2 * k));
    CHECK(ptwm_stage_find(PTWM_CSTAGE_BLOCKS) == &ptwm_stage_blocks);
    CHECK(ptwm_stage_find(PTWM_CSTAGE_IDS) == NULL && ptwm_stage_find(0) == NULL);
}

/* The ordered difference's reference, written the long way (branches, as
 * docs/DELTA.md defines it) for 16-bit elements. */
static uint16_t ord16(uint16_t u) { return (u & 0x8000u) ? (uint16_t)~u : (uint16_t)(u | 0x8000u); }
static uint16_t unord16(uint16_t v) { return (v & 0x8000u) ? (uint16_t)(v & 0x7fffu) : (uint16_t)~v; }

/* BASE by hand: BF16 differences of 2 (low plane) and 0 (high plane), i.e.
 * +1 ulp in float order, over a base of special values; then integers. */
static void test_base_by_hand(void) {
    static const uint8_t ordered[] = {2, 7, 2, 1, 2, 2}, integer[] = {2, 7, 2, 0, 2, 2};
    static const uint16_t b[8] = {0x3f80, 0xbf80, 0x8000, 0x0000, 0x7f80, 0xff80, 0x7fff, 0xffff};
    /* 1.0 -> next up; -1.0 -> toward zero; -0 -> +0; +0 -> smallest
     * subnormal; +inf -> a NaN; -inf -> the most negative finite; the
     * largest positive NaN and the negative NaN wrap around the order. */
    static const uint16_t want[8] = {0x3f81, 0xbf7f, 0x0000, 0x0001, 0x7f81, 0xff7f, 0xffff, 0xfffe};
    static const size_t lens[2] = {8, 8};
    uint8_t buf[128], base[16], dec[16];
    ptwm_err err;
    size_t l, k, o;
    for (k = 0; k < 8; k++) ptwm_store_le16(base + 2 * k, b[k]);
    /* plane 0 all 2, plane 1 all 0 */
    l = payload(buf, ordered, sizeof(ordered), 2, lens, 0);
    o = l - 16;
    memset(buf + o, 2, 8);
    CHECK(ptwm_chunk_decode_base(NULL, 5, chain, clen, PTWM_DTYPE_BF16, buf, l, base, dec, 16, 0,
                                 &err) == PTWM_OK);
    for (k = 0; k < 8; k++) {
        CHECK_MSG(ptwm_load_le16(dec + 2 * k) == want[k], "element %zu: %04x, want %04x", k,
                  ptwm_load_le16(dec + 2 * k), want[k]);
        CHECK(unord16((uint16_t)(ord16(b[k]) + 1)) == want[k]);
    }
    /* Integers: plain difference +1, wrapping. */
    l = payload(buf, integer, sizeof(integer), 2, lens, 0);
    memset(buf + l - 16, 2, 8);
    CHECK(ptwm_chunk_decode_base(NULL, 5, chain, clen, PTWM_DTYPE_BF16, buf, l, base, dec, 16, 0,
                                 &err) == PTWM_OK);
    for (k = 0; k < 8; k++) CHECK(ptwm_load_le16(dec + 2 * k) == (uint16_t)(b[k] + 1));
    /* Odd zigzag values are negative: 1 is -1 (+0 -> -0). */
    l = payload(buf, ordered, sizeof(ordered), 2, lens, 0);
    memset(buf + l - 16, 1, 8);
    CHECK(ptwm_chunk_decode_base(NULL, 5, chain, clen, PTWM_DTYPE_BF16, buf, l, base, dec, 16, 0,
                                 &err) == PTWM_OK);
    CHECK(ptwm_load_le16(dec + 6) == 0x8000 && ptwm_load_le16(dec) == 0x3f7f);
    /* Without a base it is an error, not a wrong chunk. */
    CHECK_ERR(ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, buf, l, dec, 16, &err), &err,
              PTWM_ERR_BASE_MISSING,
              "stage 0 (base): the chunk is coded against a base chunk, and no base was given");
}

/* Encoding against a base and decoding with it gives back every bit
 * pattern, for each element width and both kinds of difference; a chunk
 * equal to its base codes to a few bytes. */
static void test_base_round_trip(void) {
    static const ptwm_dtype types[] = {PTWM_DTYPE_BF16, PTWM_DTYPE_F16, PTWM_DTYPE_F32,
                                       PTWM_DTYPE_F64,  PTWM_DTYPE_U8,  PTWM_DTYPE_I32,
                                       PTWM_DTYPE_F8_E4M3, PTWM_DTYPE_F4, PTWM_DTYPE_C64};
    enum { N = 8192 };
    uint8_t *t = (uint8_t *)malloc(N), *b = (uint8_t *)malloc(N), *dec = (uint8_t *)malloc(N);
    uint8_t *out = (uint8_t *)malloc(ptwm_chunk_bound(N)), ch[PTWM_CHAIN_MAX_BYTES];
    uint32_t x = 12345;
    size_t i, k, len, cl;
    ptwm_err err;
    for (i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (uint8_t)(x >> 24);
        /* most bytes unchanged, some moved a little, some anything */
        t[i] = (i % 7 == 0) ? (uint8_t)(b[i] + (x >> 8) % 3) : (i % 61 == 0) ? (uint8_t)(x >> 16) : b[i];
    }
    for (k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        CHECK(ptwm_chain_standard(types[k], PTWM_METHOD_MICROSCALE, ch, sizeof(ch), &cl, &err) ==
              PTWM_OK);
        CHECK(ptwm_chunk_encode_base(NULL, ch, cl, types[k], NULL, t, b, N, out,
                                     ptwm_chunk_bound(N), &len, &err) == PTWM_OK);
        memset(dec, 0, N);
        CHECK(ptwm_chunk_decode_base(NULL, 5, ch, cl, types[k], out, len, b, dec, N, 0, &err) ==
              PTWM_OK);
        CHECK_MSG(memcmp(dec, t, N) == 0, "dtype %s", ptwm_dtype_name(types[k]));
        CHECK_ERR(ptwm_chunk_decode(NULL, ch, cl, types[k], out, len, dec, N, &err), &err,
                  PTWM_ERR_BASE_MISSING, "no base was given");
        /* equal to the base: constant zero planes */
        CHECK(ptwm_chunk_encode_base(NULL, ch, cl, types[k], NULL, b, b, N, out,
                                     ptwm_chunk_bound(N), &len, &err) == PTWM_OK);
        CHECK_MSG(len < 16 + 8 * 8, "%s: %zu bytes", ptwm_dtype_name(types[k]), len);
        CHECK(ptwm_chunk_decode_base(NULL, 5, ch, cl, types[k], out, len, b, dec, N, 0, &err) ==
              PTWM_OK && memcmp(dec, b, N) == 0);
    }
    CHECK_ERR(ptwm_chunk_encode_base(NULL, ch, cl, PTWM_DTYPE_U8, NULL, t, NULL, N, out,
                                     ptwm_chunk_bound(N), &len, &err),
              &err, PTWM_ERR_INVALID_ARG, "NULL base chunk");
    free(t);
    free(b);
    free(dec);
    free(out);
}

/* The decode plan of a stage list for a chunk of raw_len bytes: each
 * stage's input and output form (P: planes, E: elements) and the stage whose
 * inverse runs it, as "in>out@host" per stage, first stage first. */
static void plan_is(const ptwm_stage_use *use, unsigned n, size_t raw_len, const char *want) {
    ptwm_chunk_layout L;
    ptwm_decode_plan D;
    ptwm_err err;
    char got[128] = "";
    unsigned s;
    CHECK_ERR(ptwm_chunk_layout_make(use, n, raw_len, &L, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_decode_plan_make(&L, &D, &err), &err, PTWM_OK, NULL);
    for (s = 0; s < n; s++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%c>%c@%u", s ? " " : "",
                 D.in[s] == PTWM_FORM_PLANES ? 'P' : 'E', D.out[s] == PTWM_FORM_PLANES ? 'P' : 'E',
                 (unsigned)D.host[s]);
    CHECK_MSG(strcmp(got, want) == 0, "plan %s, expected %s", got, want);
}

static void test_plans(void) {
    static const ptwm_stage_use bf16_cols_joint[] = {{PTWM_CSTAGE_SPLIT, {2, 8, 7}},
                                                     {PTWM_CSTAGE_COLS, {4}},
                                                     {PTWM_CSTAGE_JOINT, {0}}};
    static const ptwm_stage_use f32_cols_joint[] = {{PTWM_CSTAGE_SPLIT, {4, 8, 23}},
                                                    {PTWM_CSTAGE_COLS, {4}},
                                                    {PTWM_CSTAGE_JOINT, {0}}};
    static const ptwm_stage_use bf16_sparse_joint[] = {{PTWM_CSTAGE_SPARSE, {2, 8, 1}},
                                                       {PTWM_CSTAGE_SPLIT, {2, 8, 7}},
                                                       {PTWM_CSTAGE_JOINT, {0}}};
    static const ptwm_stage_use base_bf16_blocks[] = {{PTWM_CSTAGE_BASE, {2, 1}},
                                                      {PTWM_CSTAGE_SPLIT, {2, 8, 7}},
                                                      {PTWM_CSTAGE_BLOCKS, {32}}};
    static const ptwm_stage_use bytes[] = {{PTWM_CSTAGE_PLANES, {4}}};
    static const ptwm_stage_use blocks_alone[] = {{PTWM_CSTAGE_BLOCKS, {32}}};
    ptwm_chunk_layout L;
    ptwm_decode_plan D;
    ptwm_err err;
    /* BF16 joint planes merge into elements and finish the column scales
     * strip by strip; the split then takes elements and does nothing. */
    plan_is(bf16_cols_joint, 3, 256, "E>E@0 E>E@2 P>E@2");
    /* F32: no merge into elements above the split; each inverse its own. */
    plan_is(f32_cols_joint, 3, 256, "P>E@0 P>P@1 P>P@2");
    plan_is(bf16_sparse_joint, 3, 256, "E>E@0 E>E@1 P>E@2");
    plan_is(base_bf16_blocks, 3, 256, "E>E@0 P>E@1 P>P@2");
    plan_is(bytes, 1, 256, "P>E@0");
    /* A list no plan undoes (not one a payload can name: layouts refuse
     * it) is refused by the plan too. */
    ptwm_chunk_layout_start(256, &L);
    L.use[0] = blocks_alone[0];
    L.nstages = 1;
    CHECK_ERR(ptwm_decode_plan_make(&L, &D, &err), &err, PTWM_ERR_CORRUPT,
              "its 1 stages cannot be undone from its planes");
}

int main(void) {
    ptwm_err err;
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, chain, sizeof(chain), &clen,
                              &err) == PTWM_OK);
    test_hostile();
    test_blocks_by_hand();
    test_base_by_hand();
    test_base_round_trip();
    test_plans();
    return tu_finish("test_stages");
}
