/* Shard sizes (ptwm_parse_size), greedy packing (ptwm_plan_shards) and
 * shard file names. */
#include <string.h>
#include "testutil.h"

static void size_ok(const char *text, uint64_t expected) {
    uint64_t v = 0;
    ptwm_err err = {0};
    CHECK_ERR(ptwm_parse_size(text, &v, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(v == expected, "'%s' -> %llu, expected %llu", text, (unsigned long long)v,
              (unsigned long long)expected);
}

static void size_bad(const char *text, const char *substr) {
    uint64_t v = 12345;
    ptwm_err err = {0};
    CHECK_ERR(ptwm_parse_size(text, &v, &err), &err, PTWM_ERR_INVALID_ARG, substr);
    CHECK(v == 12345);
}

static void parse_sizes(void) {
    size_ok("0", 0);
    size_ok("123", 123);
    size_ok("123B", 123);
    size_ok("5GB", 5000000000ull);
    size_ok("5GiB", 5ull << 30);
    size_ok("5giB", 5ull << 30);
    size_bad("5gib", "lower-case 'b' means bits");
    size_ok("500MB", 500000000ull);
    size_ok("500MiB", 500ull << 20);
    size_ok("1kB", 1000);
    size_ok("1KB", 1000);
    size_ok("1KiB", 1024);
    size_ok("2TB", 2000000000000ull);
    size_ok("1TiB", 1ull << 40);
    size_ok("1.5GB", 1500000000ull);
    size_ok("1.5GiB", 1610612736ull);
    size_ok("0.5KiB", 512);
    size_ok("18446744073709551615", UINT64_MAX);
    size_ok("16777215TiB", 16777215ull << 40);
    size_bad("", "is not a size");
    size_bad("GB", "is not a size");
    size_bad("-5GB", "'-5GB' is not a size");
    size_bad("+5GB", "is not a size");
    size_bad(" 5GB", "is not a size");
    size_bad("5 GB", "unknown unit ' GB'");
    size_bad("5GB ", "unknown unit 'GB '");
    size_bad("5XB", "unknown unit 'XB'");
    size_bad("5G", "unknown unit 'G'");
    size_bad("5Gb", "lower-case 'b' means bits; write '5GB'");
    size_bad("5b", "lower-case 'b' means bits");
    size_bad("5PB", "unknown unit");
    size_bad("1e9", "unknown unit 'e9'");
    size_bad("0x10", "unknown unit 'x10'");
    size_bad("5.", "must be followed by digits");
    size_bad(".5GB", "is not a size");
    size_bad("0.3B", "not a whole number of bytes");
    size_bad("1.0000001kB", "not a whole number of bytes");
    size_bad("18446744073709551616", "too large");
    size_bad("16777216TiB", "too large");
    size_bad("99999999999999999999GB", "too large");
    size_bad("1.1234567890123456789GB", "too many decimals");
    CHECK(ptwm_parse_size(NULL, NULL, NULL) == PTWM_ERR_INVALID_ARG);
}

static void plan(const uint64_t *sizes, size_t n, uint64_t max, const size_t *expected,
                 size_t expected_shards) {
    size_t shard_of[16], nshards = 99, i;
    ptwm_err err = {0};
    CHECK_ERR(ptwm_plan_shards(sizes, n, max, shard_of, &nshards, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(nshards == expected_shards, "%zu shards, expected %zu", nshards, expected_shards);
    for (i = 0; i < n; i++)
        CHECK_MSG(shard_of[i] == expected[i], "tensor %zu in shard %zu, expected %zu", i,
                  shard_of[i], expected[i]);
}

static void plans(void) {
    static const uint64_t exact[] = {40, 60, 100, 50, 50};
    static const size_t exact_s[] = {0, 0, 1, 2, 2};
    static const uint64_t over[] = {10, 250, 10, 10, 300};
    static const size_t over_s[] = {0, 1, 2, 2, 3};
    static const uint64_t one[] = {1, 2, 3};
    static const size_t one_s[] = {0, 0, 0};
    static const uint64_t zeros[] = {0, 0, 100, 0, 1};
    static const size_t zeros_s[] = {0, 0, 0, 0, 1};
    static const uint64_t huge[] = {UINT64_MAX, UINT64_MAX, 1};
    static const size_t huge_s[] = {0, 1, 2};
    size_t shard_of[1], nshards = 7;
    ptwm_err err = {0};
    plan(exact, 5, 100, exact_s, 3);      /* shards filled exactly to the maximum */
    plan(over, 5, 100, over_s, 4);        /* oversize tensors alone in their shards */
    plan(one, 3, 1000, one_s, 1);         /* everything fits one shard */
    plan(zeros, 5, 100, zeros_s, 2);      /* zero-size tensors join the current shard */
    plan(huge, 3, UINT64_MAX, huge_s, 3); /* sums that would wrap start a new shard */
    plan(NULL, 0, 100, NULL, 0);
    CHECK_ERR(ptwm_plan_shards(one, 1, 0, shard_of, &nshards, &err), &err, PTWM_ERR_INVALID_ARG,
              "must be positive");
    CHECK_ERR(ptwm_plan_shards(NULL, 1, 10, shard_of, &nshards, &err), &err, PTWM_ERR_INVALID_ARG,
              "NULL");
}

static void filenames(void) {
    char buf[64];
    CHECK(ptwm_shard_filename(1, 5, "safetensors", buf, sizeof(buf), NULL) == PTWM_OK);
    CHECK(strcmp(buf, "model-00001-of-00005.safetensors") == 0);
    CHECK(ptwm_shard_filename(5, 5, "ptwm", buf, sizeof(buf), NULL) == PTWM_OK);
    CHECK(strcmp(buf, "model-00005-of-00005.ptwm") == 0);
    CHECK(ptwm_shard_filename(123456, 123456, "safetensors", buf, sizeof(buf), NULL) == PTWM_OK);
    CHECK(strcmp(buf, "model-123456-of-123456.safetensors") == 0);
    CHECK(ptwm_shard_filename(0, 5, "safetensors", buf, sizeof(buf), NULL) == PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_shard_filename(6, 5, "safetensors", buf, sizeof(buf), NULL) == PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_shard_filename(1, 5, NULL, buf, sizeof(buf), NULL) == PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_shard_filename(1, 5, "safetensors", buf, 20, NULL) == PTWM_ERR_INVALID_ARG);
    CHECK(buf[0] == 0);
}

int main(void) {
    parse_sizes();
    plans();
    filenames();
    return tu_finish("test_shards");
}
