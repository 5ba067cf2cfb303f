/* Chunk payloads of format version 5 name their stages: hand-made payloads
 * that decode, and hostile stage lists (unknown ids, bad parameters, wrong
 * order, too many stages), each with its error code and message. */
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

int main(void) {
    ptwm_err err;
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, chain, sizeof(chain), &clen,
                              &err) == PTWM_OK);
    test_hostile();
    test_blocks_by_hand();
    return tu_finish("test_stages");
}
