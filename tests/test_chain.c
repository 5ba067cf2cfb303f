/* Chains: wire round trip, text round trip, validation errors, the standard
 * table for every dtype and method, method names, and the parse cache a
 * workspace keeps (the same answers as a parse, errors never kept). */
#include <string.h>
#include "chain.h"
#include "testutil.h"

static const ptwm_method methods[] = {PTWM_METHOD_HUFFMAN, PTWM_METHOD_ZSTD, PTWM_METHOD_MICROSCALE,
                              PTWM_METHOD_RANS, PTWM_METHOD_IDENTITY};

static void test_standard_table(void) {
    unsigned d, m;
    for (d = 0; d < PTWM_DTYPE_COUNT; d++) {
        for (m = 0; m < PTWM_ARRAY_LEN(methods); m++) {
            uint8_t blob[PTWM_CHAIN_MAX_BYTES], back[PTWM_CHAIN_MAX_BYTES];
            char text[512], text2[512];
            size_t len = 0, blen = 0;
            ptwm_err err;
            ptwm_error e = ptwm_chain_standard((ptwm_dtype)d, methods[m], blob, sizeof(blob), &len,
                                               &err);
            CHECK_MSG(e == PTWM_OK, "%s method %d: %s", ptwm_dtype_name((ptwm_dtype)d), methods[m],
                      err.message);
            if (e) continue;
            CHECK(len >= 2 && len <= PTWM_CHAIN_MAX_BYTES);
            CHECK(ptwm_chain_validate(blob, len, (ptwm_dtype)d, &err) == PTWM_OK);
            CHECK(ptwm_chain_describe(blob, len, text, sizeof(text), &err) == PTWM_OK);
            CHECK_MSG(ptwm_chain_parse(text, back, sizeof(back), &blen, &err) == PTWM_OK, "%s: %s",
                      text, err.message);
            CHECK_MSG(blen == len && memcmp(back, blob, len) == 0, "text round trip of %s", text);
            CHECK(ptwm_chain_describe(back, blen, text2, sizeof(text2), &err) == PTWM_OK);
            CHECK(strcmp(text, text2) == 0);
        }
    }
}

/* Specific entries of the table, as docs/CHAINS.md documents them. */
static void test_standard_entries(void) {
    static const struct {
        ptwm_dtype d;
        ptwm_method method;
        const char *text;
    } want[] = {
        {PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, "split(e8m7) > microscale(32) > entropy(*:auto)"},
        {PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, "split(e8m23) > microscale(32) > entropy(*:auto)"},
        {PTWM_DTYPE_C64, PTWM_METHOD_MICROSCALE, "split(e8m23) > microscale(32) > entropy(*:auto)"},
        {PTWM_DTYPE_F64, PTWM_METHOD_MICROSCALE, "split(e11m52) > entropy(*:auto)"},
        {PTWM_DTYPE_F16, PTWM_METHOD_MICROSCALE, "planes(2) > entropy(*:auto)"},
        {PTWM_DTYPE_F16, PTWM_METHOD_RANS, "planes(2) > entropy(*:rans) > entropy(1:rans/o-1)"},
        {PTWM_DTYPE_U8, PTWM_METHOD_MICROSCALE, "entropy(*:auto/o-1)"},
        {PTWM_DTYPE_I32, PTWM_METHOD_RANS, "planes(4) > entropy(*:rans) > entropy(3:rans/o-1)"},
        {PTWM_DTYPE_BF16, PTWM_METHOD_HUFFMAN, "split(e8m7) > entropy(*:huffman)"},
        {PTWM_DTYPE_BF16, PTWM_METHOD_IDENTITY, "entropy(*:identity)"},
        {PTWM_DTYPE_F8_E4M3, PTWM_METHOD_ZSTD, "entropy(*:zstd)"},
        {PTWM_DTYPE_F4, PTWM_METHOD_MICROSCALE, "entropy(*:auto/o-1)"},
    };
    size_t i;
    for (i = 0; i < PTWM_ARRAY_LEN(want); i++) {
        uint8_t blob[PTWM_CHAIN_MAX_BYTES];
        char text[256];
        size_t len;
        ptwm_err err;
        CHECK(ptwm_chain_standard(want[i].d, want[i].method, blob, sizeof(blob), &len, &err) ==
              PTWM_OK);
        CHECK(ptwm_chain_describe(blob, len, text, sizeof(text), &err) == PTWM_OK);
        CHECK_MSG(strcmp(text, want[i].text) == 0, "%s/%s: got \"%s\", want \"%s\"",
                  ptwm_dtype_name(want[i].d), ptwm_method_name(want[i].method), text,
                  want[i].text);
    }
}

static void test_wire_bytes(void) {
    /* The exact bytes of one chain: the wire format is stable. */
    static const uint8_t want[] = {1, 3, 1, 3, 2, 8, 7, 3, 2, 32, 0, 4, 4, 0xFF, 0x36, 0, 0};
    uint8_t blob[PTWM_CHAIN_MAX_BYTES];
    size_t len;
    ptwm_err err;
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, blob, sizeof(blob), &len,
                              &err) == PTWM_OK);
    CHECK(len == sizeof(want) && memcmp(blob, want, len) == 0);
    /* Too small a buffer. */
    CHECK_ERR(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, blob, 5, &len, &err),
              &err, PTWM_ERR_DST_SIZE, "too small");
    CHECK_ERR(ptwm_chain_standard(PTWM_DTYPE_BF16, 9, blob, sizeof(blob), &len, &err), &err,
              PTWM_ERR_UNKNOWN_ID, "method 9");
    CHECK_ERR(ptwm_chain_standard((ptwm_dtype)99, 3, blob, sizeof(blob), &len, &err), &err,
              PTWM_ERR_DTYPE, "dtype 99");
}

static void test_text_forms(void) {
    static const char *const good[] = {
        "entropy(*:identity)",
        "split(e8m7) > microscale(64) > entropy(*:huffman|rans) > entropy(1:identity)",
        "planes(8) > entropy(*:zstd/z19) > entropy(0:rans/o1) > entropy(7:open)",
        "split(e4m3) > entropy(0:rans/o-1) > entropy(1:huffman)",
        "split(e11m52) > entropy(*:open)",
        "planes(2) > entropy(*:rans|zstd/z5/o-1)",
    };
    static const struct {
        const char *text;
        ptwm_error code;
        const char *msg;
    } bad[] = {
        {"", PTWM_ERR_INVALID_ARG, "offset 0"},
        {"split(e8m8)", PTWM_ERR_INVALID_ARG, "multiple of 8"},
        {"split(e8m7) >", PTWM_ERR_INVALID_ARG, "expected split("},
        {"entropy(*:lz4)", PTWM_ERR_INVALID_ARG, "huffman, rans"},
        {"entropy(*:rans/o2)", PTWM_ERR_INVALID_ARG, "order"},
        {"entropy(*:zstd/z23)", PTWM_ERR_INVALID_ARG, "zstd level"},
        {"planes(4) > planes(4)", PTWM_ERR_CORRUPT, "first stage"},
        {"entropy(*:rans) > split(e8m7)", PTWM_ERR_CORRUPT, "first stage"},
        {"planes(4) > microscale(32)", PTWM_ERR_CORRUPT, "microscale must follow a split"},
        {"split(e11m52) > microscale(32)", PTWM_ERR_CORRUPT, "at most 8 bits"},
        {"split(e8m7) > microscale(1)", PTWM_ERR_CORRUPT, "block 1"},
        {"split(e8m7) > entropy(2:rans)", PTWM_ERR_CORRUPT, "plane 2"},
        {"planes(4) > entropy(1:rans) > entropy(1:huffman)", PTWM_ERR_CORRUPT, "plane 1"},
        {"planes(4) > entropy(1:rans) > entropy(*:huffman)", PTWM_ERR_CORRUPT, "every plane"},
        {"planes(9)", PTWM_ERR_INVALID_ARG, "planes(N)"},
        {"entropy(*:rans) x", PTWM_ERR_INVALID_ARG, "'>' or the end"},
    };
    size_t i;
    for (i = 0; i < PTWM_ARRAY_LEN(good); i++) {
        uint8_t blob[PTWM_CHAIN_MAX_BYTES];
        char text[256];
        size_t len;
        ptwm_err err;
        CHECK_MSG(ptwm_chain_parse(good[i], blob, sizeof(blob), &len, &err) == PTWM_OK, "%s: %s",
                  good[i], err.message);
        CHECK(ptwm_chain_describe(blob, len, text, sizeof(text), &err) == PTWM_OK);
        CHECK_MSG(strcmp(text, good[i]) == 0, "\"%s\" described as \"%s\"", good[i], text);
        CHECK_ERR(ptwm_chain_describe(blob, len, text, 8, &err), &err, PTWM_ERR_DST_SIZE,
                  "too small");
    }
    for (i = 0; i < PTWM_ARRAY_LEN(bad); i++) {
        uint8_t blob[PTWM_CHAIN_MAX_BYTES];
        size_t len;
        ptwm_err err;
        CHECK_ERR(ptwm_chain_parse(bad[i].text, blob, sizeof(blob), &len, &err), &err,
                  bad[i].code, bad[i].msg);
    }
    {
        /* 17 stages is one too many. */
        char text[1024] = "planes(8)";
        uint8_t blob[PTWM_CHAIN_MAX_BYTES];
        size_t len;
        ptwm_err err;
        for (i = 0; i < 8; i++) {
            char st[40];
            snprintf(st, sizeof(st), " > entropy(%zu:rans)", i);
            strcat(text, st);
        }
        CHECK(ptwm_chain_parse(text, blob, sizeof(blob), &len, &err) == PTWM_OK);
        for (i = 0; i < 8; i++) strcat(text, " > entropy(*:rans)");
        CHECK_ERR(ptwm_chain_parse(text, blob, sizeof(blob), &len, &err), &err, PTWM_ERR_DST_SIZE,
                  "16 stages");
    }
}

static void test_validation(void) {
    static const struct {
        uint8_t bytes[24];
        size_t len;
        int dtype;
        ptwm_error code;
        const char *msg;
    } cases[] = {
        {{2, 1, 4, 4, 0xFF, 0x20, 0, 0}, 8, PTWM_DTYPE_U8, PTWM_ERR_VERSION, "version 2"},
        {{1, 1, 9, 0}, 4, PTWM_DTYPE_U8, PTWM_ERR_UNKNOWN_ID, "unknown stage id 9"},
        {{1, 1, 4, 4, 0xFF, 0x08, 0, 0}, 8, PTWM_DTYPE_U8, PTWM_ERR_UNKNOWN_ID, "mask 0x08"},
        {{1, 1, 4, 4, 0xFF, 0x01, 0, 0}, 8, PTWM_DTYPE_U8, PTWM_ERR_UNKNOWN_ID, "mask 0x01"},
        {{1, 0}, 2, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "0 stages"},
        {{1, 17}, 2, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "17 stages"},
        {{1}, 1, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "1 bytes"},
        {{1, 1, 4, 4, 0xFF, 0x20, 0}, 7, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "4 parameter bytes, 3 left"},
        {{1, 2, 4, 4, 0xFF, 0x20, 0, 0}, 8, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "stage 1 header past"},
        {{1, 1, 4, 4, 0xFF, 0x20, 0, 0, 7}, 9, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "1 trailing"},
        {{1, 1, 4, 3, 0xFF, 0x20, 0}, 7, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "(got 3)"},
        {{1, 1, 4, 4, 0xFF, 0x20, 23, 0}, 8, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "zstd level 23"},
        {{1, 1, 4, 4, 0xFF, 0x20, 0, 2}, 8, PTWM_DTYPE_U8, PTWM_ERR_CORRUPT, "rANS order 2"},
        {{1, 1, 1, 3, 2, 8, 8}, 7, PTWM_DTYPE_BF16, PTWM_ERR_CORRUPT, "must equal 8 x width"},
        {{1, 1, 1, 3, 9, 8, 63}, 7, PTWM_DTYPE_BF16, PTWM_ERR_CORRUPT, "width 1..8"},
        {{1, 1, 2, 1, 0}, 5, PTWM_DTYPE_BF16, PTWM_ERR_CORRUPT, "planes width 0"},
        /* Dtype checks: 4-byte fields on a 2-byte dtype, fields on sub-byte dtypes. */
        {{1, 1, 2, 1, 4}, 5, PTWM_DTYPE_BF16, PTWM_ERR_DTYPE, "BF16 elements of 16 bits"},
        {{1, 1, 2, 1, 2}, 5, PTWM_DTYPE_F4, PTWM_ERR_DTYPE, "F4 elements of 4 bits"},
        {{1, 1, 1, 3, 4, 8, 23}, 7, PTWM_DTYPE_F16, PTWM_ERR_DTYPE, "F16"},
        {{1, 1, 4, 4, 0xFF, 0x20, 0, 0}, 8, 99, PTWM_ERR_DTYPE, "dtype 99"},
    };
    size_t i;
    for (i = 0; i < PTWM_ARRAY_LEN(cases); i++) {
        ptwm_err err;
        CHECK_ERR(ptwm_chain_validate(cases[i].bytes, cases[i].len, (ptwm_dtype)cases[i].dtype,
                                      &err),
                  &err, cases[i].code, cases[i].msg);
    }
    {
        /* C64 takes F32 fields; U64 takes 4-byte planes (a whole number of them). */
        static const uint8_t f32split[] = {1, 1, 1, 3, 4, 8, 23};
        static const uint8_t planes4[] = {1, 1, 2, 1, 4};
        ptwm_err err;
        CHECK(ptwm_chain_validate(f32split, sizeof(f32split), PTWM_DTYPE_C64, &err) == PTWM_OK);
        CHECK(ptwm_chain_validate(planes4, sizeof(planes4), PTWM_DTYPE_U64, &err) == PTWM_OK);
        CHECK_ERR(ptwm_chain_validate(planes4, sizeof(planes4), PTWM_DTYPE_U16, &err), &err,
                  PTWM_ERR_DTYPE, "4-byte fields");
    }
}

static void test_method_names(void) {
    ptwm_method m, got;
    for (m = PTWM_METHOD_HUFFMAN; m <= PTWM_METHOD_IDENTITY; m++) {
        char num[4] = {(char)('0' + m), 0};
        CHECK(ptwm_method_name(m) != NULL);
        CHECK(ptwm_method_from_name(ptwm_method_name(m), &got, NULL) == PTWM_OK && got == m);
        CHECK(ptwm_method_from_name(num, &got, NULL) == PTWM_OK && got == m);
    }
    CHECK(ptwm_method_from_name("MicroScale", &got, NULL) == PTWM_OK && got == PTWM_METHOD_MICROSCALE);
    CHECK(ptwm_method_name((ptwm_method)0) == NULL && ptwm_method_name((ptwm_method)6) == NULL);
    CHECK(ptwm_method_from_name("lz4", &got, NULL) == PTWM_ERR_UNKNOWN_ID);
    CHECK(ptwm_method_from_name("6", &got, NULL) == PTWM_ERR_UNKNOWN_ID);
    CHECK(ptwm_method_from_name(NULL, &got, NULL) == PTWM_ERR_INVALID_ARG);
}

/* Each call answers what ptwm_chain_info_parse answers for its own bytes
 * and dtype, whatever the cache held before. */
static void check_cached(ptwm_chain_cache *cache, const uint8_t *chain, size_t len, int dtype) {
    ptwm_chain_info want, got;
    ptwm_err e1, e2;
    ptwm_error r1 = ptwm_chain_info_parse(chain, len, dtype, &want, &e1);
    ptwm_error r2;
    memset(&got, 0xA5, sizeof(got));
    r2 = ptwm_chain_info_parse_cached(cache, chain, len, dtype, &got, &e2);
    CHECK_MSG(r1 == r2, "%zu-byte chain, dtype %d: parse %d, cached parse %d", len, dtype, (int)r1,
              (int)r2);
    if (r1 == PTWM_OK && r2 == PTWM_OK)
        CHECK_MSG(memcmp(&want, &got, sizeof(want)) == 0, "%zu-byte chain, dtype %d: other info",
                  len, dtype);
    if (r1 != PTWM_OK && r2 != PTWM_OK) CHECK(strcmp(e1.message, e2.message) == 0);
}

static void test_cache(void) {
    ptwm_chain_cache cache;
    uint8_t a[PTWM_CHAIN_MAX_BYTES], b[PTWM_CHAIN_MAX_BYTES], bad[PTWM_CHAIN_MAX_BYTES];
    size_t la = 0, lb = 0, i;
    ptwm_err err;
    memset(&cache, 0, sizeof(cache));
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, a, sizeof(a), &la,
                              &err) == PTWM_OK);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_HUFFMAN, b, sizeof(b), &lb,
                              &err) == PTWM_OK);
    check_cached(&cache, a, 0, PTWM_DTYPE_BF16);     /* empty cache, empty chain */
    check_cached(&cache, a, la, PTWM_DTYPE_BF16);
    check_cached(&cache, a, la, PTWM_DTYPE_BF16);    /* from the cache */
    check_cached(&cache, a, la, PTWM_DTYPE_U8);      /* another dtype: an error, not the kept one */
    CHECK_ERR(ptwm_chain_info_parse_cached(&cache, a, la, PTWM_DTYPE_U8, &(ptwm_chain_info){0},
                                           &err),
              &err, PTWM_ERR_DTYPE, "cannot be cut");
    check_cached(&cache, a, la, PTWM_DTYPE_BF16);
    check_cached(&cache, b, lb, PTWM_DTYPE_BF16);    /* other bytes */
    check_cached(&cache, a, la, PTWM_DTYPE_BF16);
    /* a's bytes with one changed: each is parsed, never answered from a */
    for (i = 0; i < la; i++) {
        memcpy(bad, a, la);
        bad[i] ^= 0x40;
        check_cached(&cache, bad, la, PTWM_DTYPE_BF16);
        check_cached(&cache, a, la, PTWM_DTYPE_BF16);
    }
    check_cached(&cache, a, la - 1, PTWM_DTYPE_BF16); /* a prefix */
    check_cached(&cache, a, 0, PTWM_DTYPE_BF16);
    /* a fresh (zeroed) cache holds nothing, even for an empty chain of dtype 0 */
    memset(&cache, 0, sizeof(cache));
    CHECK_ERR(ptwm_chain_info_parse_cached(&cache, a, 0, 0, &(ptwm_chain_info){0}, &err), &err,
              PTWM_ERR_CORRUPT, "chain: 0 bytes");
}

int main(void) {
    test_standard_table();
    test_cache();
    test_standard_entries();
    test_wire_bytes();
    test_text_forms();
    test_validation();
    test_method_names();
    return tu_finish("test_chain");
}
