/* Huffman stage: round trips on real weight planes, edge cases around every
 * internal boundary, and hostile encodings (guaranteed errors asserted; for
 * payload corruption a prefix code cannot always notice, the decoder must still
 * stay in bounds and return either an error or exactly dst_size bytes). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "entropy.h"
#include "huffman.h"
#include "testutil.h"

/* Encode and decode; check the bound, the bytes and the exact-size contract. */
static size_t round_trip(const uint8_t *src, size_t n, const char *what) {
    size_t cap = ptwm_huf_bound(n), len = 0;
    uint8_t *enc = malloc(cap), *dec = malloc(n ? n : 1);
    ptwm_error rc;
    CHECK(enc && dec);
    rc = ptwm_huf_encode(src, n, enc, cap, &len);
    CHECK_MSG(rc == PTWM_OK, "%s: encode n=%zu: %s", what, n, ptwm_error_name(rc));
    CHECK_MSG(len >= 1 && len <= cap, "%s: n=%zu len=%zu cap=%zu", what, n, len, cap);
    rc = ptwm_huf_decode(enc, len, dec, n);
    CHECK_MSG(rc == PTWM_OK, "%s: decode n=%zu: %s", what, n, ptwm_error_name(rc));
    CHECK_MSG(rc || n == 0 || memcmp(src, dec, n) == 0, "%s: bytes differ, n=%zu", what, n);
    if (n > 0) CHECK(ptwm_huf_decode(enc, len, dec, n - 1) == PTWM_ERR_CORRUPT ||
                     (enc[0] == 1 && n > 1)); /* RLE decodes to any size >= 1 */
    free(enc);
    free(dec);
    return len;
}

/* ---- planes from the corpus ------------------------------------------- */

typedef struct {
    uint8_t *b[3];
    const char *name[3];
    size_t n;
    int count;
} planes;

/* Minimal safetensors split: 8-byte LE header length, JSON, data. The corpus
 * files hold one dtype each; its name is in the header. */
static int cut_planes(const uint8_t *file, size_t size, planes *p) {
    uint64_t hlen;
    const uint8_t *data;
    size_t dlen, i;
    char *json;
    int ok = 1;
    memset(p, 0, sizeof(*p));
    if (size < 8) return 0;
    hlen = (uint64_t)file[0] | ((uint64_t)file[1] << 8) | ((uint64_t)file[2] << 16) |
           ((uint64_t)file[3] << 24) | ((uint64_t)file[4] << 32) | ((uint64_t)file[5] << 40);
    if (hlen > size - 8) return 0;
    json = malloc(hlen + 1);
    memcpy(json, file + 8, hlen);
    json[hlen] = 0;
    data = file + 8 + hlen;
    dlen = size - 8 - hlen;
    if (strstr(json, "\"BF16\"") || strstr(json, "\"F16\"")) {
        int bf = strstr(json, "\"BF16\"") != NULL;
        p->n = dlen / 2;
        p->count = 3;
        for (i = 0; i < 3; i++) p->b[i] = malloc(p->n);
        for (i = 0; i < p->n; i++) {
            unsigned v = data[2 * i] | (data[2 * i + 1] << 8);
            if (bf) {
                p->b[0][i] = (uint8_t)((v >> 7) & 0xff);
                p->b[1][i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
                p->b[2][i] = (uint8_t)(v >> 8);
            } else {
                p->b[0][i] = (uint8_t)((v >> 10) & 0x1f);
                p->b[1][i] = (uint8_t)v;
                p->b[2][i] = (uint8_t)(((v >> 15) << 2) | ((v >> 8) & 3));
            }
        }
        p->name[0] = "exponent";
        p->name[1] = bf ? "sign+mantissa" : "mantissa low";
        p->name[2] = bf ? "high byte" : "sign+mantissa high";
    } else if (strstr(json, "\"F32\"")) {
        p->n = dlen / 4;
        p->count = 2;
        p->b[0] = malloc(p->n);
        p->b[1] = malloc(p->n);
        for (i = 0; i < p->n; i++) {
            uint32_t v = (uint32_t)data[4 * i] | ((uint32_t)data[4 * i + 1] << 8) |
                         ((uint32_t)data[4 * i + 2] << 16) | ((uint32_t)data[4 * i + 3] << 24);
            p->b[0][i] = (uint8_t)(v >> 23);
            p->b[1][i] = (uint8_t)v;
        }
        p->name[0] = "exponent";
        p->name[1] = "mantissa low byte";
    } else if (strstr(json, "\"U8\"")) {
        p->n = dlen;
        p->count = 1;
        p->b[0] = malloc(dlen);
        memcpy(p->b[0], data, dlen);
        p->name[0] = "bytes";
    } else {
        ok = 0;
    }
    free(json);
    return ok;
}

static void test_corpus(void) {
    const char *const *f;
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus not found (set PTWM_CORPUS)");
    if (!tu_corpus_dir()) return;
    for (f = tu_corpus_files(); *f; f++) {
        size_t size = 0, off;
        uint8_t *file = tu_read_file(tu_corpus_path(*f), &size);
        planes p;
        int k;
        CHECK_MSG(file != NULL, "cannot read %s", *f);
        if (!file) continue;
        CHECK_MSG(cut_planes(file, size, &p), "%s: not a single-dtype safetensors file", *f);
        for (k = 0; k < p.count; k++) {
            char what[200];
            size_t len;
            double h = ptwm_entropy_order0(p.b[k], p.n);
            snprintf(what, sizeof(what), "%s %s", *f, p.name[k]);
            len = round_trip(p.b[k], p.n, what);
            /* Huffman on a whole plane: within 2% of the order-0 floor, or raw
             * when the plane is near 8 bits (raw costs one byte). */
            CHECK_MSG((double)len * 8 <= h * (double)p.n * 1.02 + 8 * 300 || len == p.n + 1,
                      "%s: %zu bytes for %zu symbols at %.3f bits", what, len, p.n, h);
            /* the chunk sizes a container uses */
            for (off = 0; off + 65536 <= p.n && off < 4 * 65536; off += 65536)
                round_trip(p.b[k] + off, 65536, what);
            if (p.n > 1000003) round_trip(p.b[k] + 17, 1000003, what);
            free(p.b[k]);
        }
        free(file);
    }
}

/* ---- synthetic data ----------------------------------------------------- */

/* Geometric-ish symbols: a few common ones and a long tail (like exponents). */
static void fill_skewed(uint8_t *b, size_t n, uint64_t *seed, unsigned spread) {
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t r = tu_rand(seed);
        unsigned z = (unsigned)__builtin_ctzll(r | (1ull << 40));
        b[i] = (uint8_t)(120 - (z % spread) + ((r >> 50) & 1));
    }
}

static void test_edges(void) {
    static const size_t sizes[] = {0,    1,    2,    3,    4,    5,    7,    8,     9,     15,
                                   16,   17,   31,   32,   33,   39,   40,   41,    63,    64,
                                   65,   127,  128,  129,  255,  256,  257,  511,   512,   513,
                                   1023, 1024, 1025, 4095, 4096, 4097, 65535, 65536, 65537, 131075};
    uint64_t seed = 1;
    uint8_t *b = malloc(262144), enc[8];
    size_t i, len = 0;
    for (i = 0; i < PTWM_ARRAY_LEN(sizes); i++) {
        char what[64];
        snprintf(what, sizeof(what), "skewed n=%zu", sizes[i]);
        fill_skewed(b, sizes[i], &seed, 12);
        round_trip(b, sizes[i], what);
        memset(b, 0x42, sizes[i]);
        snprintf(what, sizeof(what), "one symbol n=%zu", sizes[i]);
        CHECK(round_trip(b, sizes[i], what) <= 2);
    }
    /* every size up to 700: the fast loop's margins and the 4-way split */
    for (i = 0; i <= 700; i++) {
        fill_skewed(b, i, &seed, 6);
        round_trip(b, i, "small");
    }
    /* empty and single byte are RAW; one repeated symbol is RLE */
    CHECK(ptwm_huf_encode(b, 0, enc, sizeof(enc), &len) == PTWM_OK && len == 1 && enc[0] == 0);
    b[0] = 7;
    CHECK(ptwm_huf_encode(b, 1, enc, sizeof(enc), &len) == PTWM_OK && len == 2);
    memset(b, 9, 100000);
    CHECK(ptwm_huf_encode(b, 100000, enc, sizeof(enc), &len) == PTWM_OK && len == 2 &&
          enc[0] == 1 && enc[1] == 9);
    /* all 256 symbols, uniform: does not shrink, so RAW (n + 1 bytes) */
    for (i = 0; i < 65536; i++) b[i] = (uint8_t)tu_rand(&seed);
    CHECK(round_trip(b, 65536, "uniform random") == 65537);
    /* all 256 symbols, skewed: HUFFMAN with a full-range table */
    for (i = 0; i < 65536; i++) b[i] = (uint8_t)(i < 256 ? i : (tu_rand(&seed) & 15));
    CHECK(round_trip(b, 65536, "all 256 skewed") < 40000);
    /* Fibonacci frequencies: optimal lengths reach 20+ bits, so the 11-bit
     * limit decides the code */
    {
        size_t f0 = 1, f1 = 1, pos = 0, s;
        for (s = 0; s < 24 && pos < 262144; s++) {
            size_t k;
            for (k = 0; k < f0 && pos < 262144; k++) b[pos++] = (uint8_t)(s * 7);
            f1 += f0;
            f0 = f1 - f0;
        }
        for (s = pos; s-- > 1;) { /* shuffle */
            size_t j = (size_t)(tu_rand(&seed) % (s + 1));
            uint8_t t = b[s];
            b[s] = b[j];
            b[j] = t;
        }
        round_trip(b, pos, "fibonacci");
    }
    /* Many rare symbols next to a few common ones: lengths of 12-13 bits pay,
     * and the decoder's multi-symbol table meets codes longer than its
     * 11-bit index. Sizes straddle the multi-symbol threshold. */
    {
        static const size_t rare_sizes[] = {3000, 16383, 16384, 16385, 40000, 100003};
        for (i = 0; i < PTWM_ARRAY_LEN(rare_sizes); i++) {
            size_t n = rare_sizes[i], j, len13;
            uint8_t *e13 = malloc(n + 1);
            for (j = 0; j < n; j++) {
                uint64_t r = tu_rand(&seed);
                unsigned z = (unsigned)__builtin_ctzll(r | (1ull << 40)) % 10;
                b[j] = (r >> 58) == 0 ? (uint8_t)(140 + (r >> 8) % 110) : (uint8_t)(120 - z);
            }
            len13 = round_trip(b, n, "rare symbols");
            CHECK(ptwm_huf_encode(b, n, e13, n + 1, &len) == PTWM_OK && len == len13);
            if (n >= 40000) { /* the encoder chose 13-bit codes */
                unsigned k, maxlen = 0;
                CHECK(e13[0] == 2);
                for (k = 0; k <= (unsigned)(e13[2] - e13[1]); k++) {
                    unsigned v = (e13[3 + k / 2] >> (4 * (k & 1))) & 15;
                    maxlen = v > maxlen ? v : maxlen;
                }
                CHECK_MSG(maxlen > 11, "n=%zu longest code %u", n, maxlen);
            }
            free(e13);
        }
    }
    /* one stream under 64 bits next to longer ones: the short one goes
     * through the checked tail alone */
    for (i = 0; i < 8; i++) {
        size_t j, n = 240 + i;
        for (j = 0; j < n; j++)
            b[j] = (j < 60 || (tu_rand(&seed) & 1)) ? 7 : (uint8_t)(tu_rand(&seed) & 63);
        CHECK(round_trip(b, n, "short stream 0") < n);
    }
    /* random data of many kinds and sizes */
    for (i = 0; i < 300; i++) {
        size_t n = (size_t)(tu_rand(&seed) % 20000), j;
        unsigned mask = (unsigned)(tu_rand(&seed) % 256);
        for (j = 0; j < n; j++) b[j] = (uint8_t)(tu_rand(&seed) & mask);
        round_trip(b, n, "random masked");
    }
    free(b);
}

/* cap below the encoded size: PTWM_ERR_DST_SIZE and no byte written past cap */
static void test_cap(void) {
    uint64_t seed = 5;
    size_t n = 5000, full = 0, cap, len;
    uint8_t *b = malloc(n), *enc = malloc(n + 64);
    fill_skewed(b, n, &seed, 10);
    CHECK(ptwm_huf_encode(b, n, enc, n + 1, &full) == PTWM_OK && full < n / 2);
    for (cap = 0; cap < full; cap += (cap < 64 || cap + 70 > full) ? 1 : 37) {
        memset(enc, 0xA5, n + 64);
        CHECK(ptwm_huf_encode(b, n, enc, cap, &len) == PTWM_ERR_DST_SIZE);
        CHECK(enc[cap] == 0xA5 && enc[cap + 7] == 0xA5);
    }
    memset(enc, 0xA5, n + 64);
    CHECK(ptwm_huf_encode(b, n, enc, full, &len) == PTWM_OK && len == full);
    CHECK(enc[full] == 0xA5 && enc[full + 7] == 0xA5);
    /* RAW and RLE */
    for (len = 0; len < n; len++) b[len] = (uint8_t)tu_rand(&seed);
    CHECK(ptwm_huf_encode(b, n, enc, n, &len) == PTWM_ERR_DST_SIZE);
    memset(b, 1, n);
    CHECK(ptwm_huf_encode(b, n, enc, 1, &len) == PTWM_ERR_DST_SIZE);
    CHECK(ptwm_huf_encode(b, 0, enc, 0, &len) == PTWM_ERR_DST_SIZE);
    free(b);
    free(enc);
}

/* ---- hostile encodings ---------------------------------------------------- */

static ptwm_error dec(const uint8_t *src, size_t size, size_t n) {
    /* exact-size buffers so ASan sees any overrun */
    uint8_t *s = malloc(size ? size : 1), *d = malloc(n ? n : 1);
    ptwm_error rc;
    memcpy(s, src, size);
    rc = ptwm_huf_decode(s, size, d, n);
    free(s);
    free(d);
    return rc;
}

#define EXPECT_CORRUPT(buf, size, n, why) \
    CHECK_MSG(dec((buf), (size), (n)) == PTWM_ERR_CORRUPT, "%s", why)

/* Hand-made HUFFMAN encoding of 4 symbols over {0, 1}, both 1-bit codes:
 * one 1-symbol segment per stream. Stream byte 0x02 | bit = code bit plus the
 * sentinel. */
static size_t tiny(uint8_t *b, const uint8_t stream_bytes[4]) {
    size_t k = 0;
    int s;
    b[k++] = 2;    /* HUFFMAN */
    b[k++] = 0;    /* lo */
    b[k++] = 1;    /* hi */
    b[k++] = 0x11; /* both length 1 */
    for (s = 0; s < 4; s++) {
        ptwm_store_le32(b + k, 1);
        k += 4;
    }
    for (s = 0; s < 4; s++) b[k++] = stream_bytes[s];
    return k;
}

static void test_hostile_handmade(void) {
    uint8_t b[64], out[4];
    uint8_t ok[4] = {0x02, 0x03, 0x03, 0x02};
    size_t k = tiny(b, ok);
    unsigned m;
    CHECK(ptwm_huf_decode(b, k, out, 4) == PTWM_OK && out[0] == 0 && out[1] == 1 && out[2] == 1 &&
          out[3] == 0);
    /* empty input, unknown modes */
    EXPECT_CORRUPT(b, 0, 4, "empty input");
    for (m = 3; m < 256; m++) {
        uint8_t x[2] = {(uint8_t)m, 0};
        EXPECT_CORRUPT(x, 2, 1, "unknown mode");
    }
    /* RAW and RLE sizes */
    {
        uint8_t raw[3] = {0, 1, 2}, rle[3] = {1, 5, 0};
        EXPECT_CORRUPT(raw, 3, 1, "raw too long");
        EXPECT_CORRUPT(raw, 3, 3, "raw too short");
        EXPECT_CORRUPT(rle, 3, 4, "rle with trailing byte");
        EXPECT_CORRUPT(rle, 1, 4, "rle without symbol");
        EXPECT_CORRUPT(rle, 2, 0, "rle of nothing");
    }
    /* streams that do not end on their last bit */
    {
        uint8_t x[64], s4[4];
        memcpy(s4, ok, 4);
        s4[2] = 0x04; /* two code bits for one symbol: a bit left over */
        k = tiny(x, s4);
        EXPECT_CORRUPT(x, k, 4, "bit left over");
        s4[2] = 0x01; /* sentinel only: runs out */
        k = tiny(x, s4);
        EXPECT_CORRUPT(x, k, 4, "stream runs out");
        s4[2] = 0x00; /* no sentinel */
        k = tiny(x, s4);
        EXPECT_CORRUPT(x, k, 4, "missing sentinel");
        s4[2] = 0x80; /* 7 code bits */
        k = tiny(x, s4);
        EXPECT_CORRUPT(x, k, 4, "seven bits left over");
        /* same streams, one symbol more or fewer than coded */
        k = tiny(x, ok);
        EXPECT_CORRUPT(x, k, 5, "dst one longer");
        EXPECT_CORRUPT(x, k, 3, "dst one shorter");
    }
    /* table: over-full, incomplete, over the limit, bad range, odd padding */
    {
        uint8_t x[64];
        k = tiny(x, ok);
        x[3] = 0x21; /* lengths 1 and 2: incomplete */
        EXPECT_CORRUPT(x, k, 4, "incomplete code");
        x[1] = 0;
        x[2] = 2;
        memmove(x + 5, x + 4, k - 4);
        x[3] = 0x11; /* three 1-bit codes: over-full */
        x[4] = 0x01;
        EXPECT_CORRUPT(x, k + 1, 4, "over-full code");
        x[3] = 0x21;
        x[4] = 0x12; /* lengths 1, 2, 2 plus a non-zero pad nibble */
        EXPECT_CORRUPT(x, k + 1, 4, "non-zero pad nibble");
        x[4] = 0x02;
        memset(x + k + 1 - 4, 0x02, 4); /* four '0' codes: symbol 0 */
        CHECK(dec(x, k + 1, 4) == PTWM_OK);
        k = tiny(x, ok);
        x[3] = 0xee; /* length 14 */
        EXPECT_CORRUPT(x, k, 4, "length over 13");
        x[3] = 0x11;
        x[1] = 1;
        x[2] = 1; /* lo == hi */
        EXPECT_CORRUPT(x, k, 4, "single-symbol range");
        x[1] = 2;
        x[2] = 1; /* lo > hi */
        EXPECT_CORRUPT(x, k, 4, "reversed range");
        k = tiny(x, ok);
        x[3] = 0x10; /* lo without a code */
        EXPECT_CORRUPT(x, k, 4, "lo without code");
    }
    /* jump table */
    {
        uint8_t x[64];
        k = tiny(x, ok);
        ptwm_store_le32(x + 4, 0);
        EXPECT_CORRUPT(x, k, 4, "empty stream");
        ptwm_store_le32(x + 4, 2);
        EXPECT_CORRUPT(x, k, 4, "sizes sum past the end");
        ptwm_store_le32(x + 4, 0xffffffffu);
        EXPECT_CORRUPT(x, k, 4, "stream size past the end");
        ptwm_store_le32(x + 4, 1);
        EXPECT_CORRUPT(x, 16, 4, "jump table cut");
        EXPECT_CORRUPT(x, 3, 4, "table cut");
    }
}

/* Streams of exactly 8 bytes whose last byte holds only the sentinel (56 code
 * bits): the fast loop's first 8-byte load must start inside the stream (an
 * earlier bound started it one byte before, reading the previous stream's or
 * the header's last byte). Two 1-bit codes, 56 symbols per stream. */
static void test_eight_byte_streams(void) {
    uint64_t seed = 3;
    uint8_t x[4 + 16 + 32], out[224], *p;
    size_t k = 0, s, j;
    x[k++] = 2;
    x[k++] = 0;
    x[k++] = 1;
    x[k++] = 0x11;
    for (s = 0; s < 4; s++, k += 4) ptwm_store_le32(x + k, 8);
    p = x + k;
    for (s = 0; s < 4; s++) {
        for (j = 0; j < 7; j++) p[8 * s + j] = (uint8_t)tu_rand(&seed);
        p[8 * s + 7] = 0x01;
    }
    k += 32;
    CHECK(dec(x, k, 224) == PTWM_OK);
    CHECK(ptwm_huf_decode(x, k, out, 224) == PTWM_OK);
    for (s = 0; s < 4; s++) {
        int same = 1;
        for (j = 0; j < 56; j++) /* first symbol = highest code bit */
            same &= out[56 * s + j] == ((p[8 * s + (55 - j) / 8] >> ((55 - j) % 8)) & 1);
        CHECK_MSG(same, "stream %zu", s);
    }
    EXPECT_CORRUPT(x, k, 223, "one symbol fewer");
    EXPECT_CORRUPT(x, k, 225, "one symbol more");
    /* The same shape with 13-bit codes (lengths 1, 2, .., 12, 13, 13; all
     * ones is the last 13-bit code): 56 bits cannot hold 56 codes. */
    {
        uint8_t y[1 + 2 + 7 + 16 + 32];
        size_t m = 0;
        y[m++] = 2;
        y[m++] = 0;
        y[m++] = 13;
        for (j = 0; j < 14; j += 2) y[m++] = (uint8_t)((j + 1) | ((j + 2 < 14 ? j + 2 : 13) << 4));
        for (s = 0; s < 4; s++, m += 4) ptwm_store_le32(y + m, 8);
        for (s = 0; s < 4; s++) {
            memset(y + m, 0xff, 7);
            y[m + 7] = 0x01;
            m += 8;
        }
        CHECK(m == sizeof(y));
        EXPECT_CORRUPT(y, m, 224, "8-byte streams of 13-bit codes run out");
        EXPECT_CORRUPT(y, m, 16, "bits left over");
        CHECK(dec(y, m, 4 * 4) == PTWM_ERR_CORRUPT);
    }
}

/* Corrupt real encodings. Truncation, extension, length nibbles and the jump
 * table are always detected; payload bits may decode to other bytes. */
static void test_hostile_real(void) {
    uint64_t seed = 9;
    size_t n = 70000, len = 0, i, k;
    uint8_t *b = malloc(n), *enc = malloc(n + 2), *out = malloc(n);
    unsigned nib, flips_ok = 0, flips_err = 0;
    fill_skewed(b, n, &seed, 14);
    CHECK(ptwm_huf_encode(b, n, enc, n + 1, &len) == PTWM_OK && enc[0] == 2);
    nib = (enc[2] - enc[1] + 2) / 2;
    for (k = 1; k <= 40 && k < len; k++) EXPECT_CORRUPT(enc, len - k, n, "truncated");
    for (k = len - 1; k > 997; k -= 997) EXPECT_CORRUPT(enc, k, n, "truncated deep");
    for (k = 0; k < 256; k += 51) {
        enc[len] = (uint8_t)k;
        EXPECT_CORRUPT(enc, len + 1, n, "extended by a byte");
    }
    for (i = 3; i < 3 + nib; i++)
        for (k = 0; k < 8; k++) {
            enc[i] ^= (uint8_t)(1u << k);
            EXPECT_CORRUPT(enc, len, n, "length nibble bit flipped");
            enc[i] ^= (uint8_t)(1u << k);
        }
    for (i = 3 + nib; i < 3 + nib + 16; i++)
        for (k = 0; k < 8; k++) {
            enc[i] ^= (uint8_t)(1u << k);
            EXPECT_CORRUPT(enc, len, n, "jump table bit flipped");
            enc[i] ^= (uint8_t)(1u << k);
        }
    /* lo/hi bytes: the range and so every later offset moves; any result
     * must be in bounds */
    for (i = 1; i < 3; i++)
        for (k = 0; k < 8; k++) {
            ptwm_error rc;
            enc[i] ^= (uint8_t)(1u << k);
            rc = dec(enc, len, n);
            CHECK(rc == PTWM_ERR_CORRUPT || rc == PTWM_OK);
            enc[i] ^= (uint8_t)(1u << k);
        }
    /* payload bits: error or exactly n bytes, never out of bounds */
    for (i = 0; i < 2000; i++) {
        size_t at = 3 + nib + 16 + (size_t)(tu_rand(&seed) % (len - 3 - nib - 16));
        unsigned bit = (unsigned)(tu_rand(&seed) & 7);
        ptwm_error rc;
        enc[at] ^= (uint8_t)(1u << bit);
        rc = dec(enc, len, n);
        CHECK(rc == PTWM_ERR_CORRUPT || rc == PTWM_OK);
        if (rc == PTWM_OK) flips_ok++;
        else flips_err++;
        enc[at] ^= (uint8_t)(1u << bit);
    }
    printf("payload bit flips: %u detected, %u decoded to other bytes\n", flips_err, flips_ok);
    /* the untouched encoding still decodes */
    CHECK(ptwm_huf_decode(enc, len, out, n) == PTWM_OK && memcmp(out, b, n) == 0);
    /* random bytes after a valid header prefix, many sizes */
    for (i = 0; i < 3000; i++) {
        size_t sz = 3 + nib + 16 + (size_t)(tu_rand(&seed) % 300), want, j;
        uint8_t x[400];
        memcpy(x, enc, 3 + nib);
        for (j = 3 + nib; j < sz; j++) x[j] = (uint8_t)tu_rand(&seed);
        for (j = 0; j < 4; j++) ptwm_store_le32(x + 3 + nib + 4 * j, 1 + (uint32_t)(tu_rand(&seed) % 70));
        want = (size_t)(tu_rand(&seed) % 1200);
        {
            ptwm_error rc = dec(x, sz, want);
            CHECK(rc == PTWM_ERR_CORRUPT || rc == PTWM_OK);
        }
    }
    free(b);
    free(enc);
    free(out);
}

/* Files kept in tests/corrupt/huffman: good-N.huf must decode to good-N.raw
 * (the format stays readable), bad-N-why.huf must be rejected as corrupt for
 * dst_size N. */
static void test_golden_files(void) {
    const char *src = getenv("PTWM_SOURCE_DIR");
    char dir[1024], path[1400];
    DIR *d;
    struct dirent *ent;
    int good = 0, bad = 0;
    snprintf(dir, sizeof(dir), "%s/tests/corrupt/huffman", src ? src : "..");
    d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s (set PTWM_SOURCE_DIR)", dir);
    if (!d) return;
    while ((ent = readdir(d)) != NULL) {
        size_t n, len = 0, rlen = 0;
        uint8_t *enc, *raw, *out;
        const char *name = ent->d_name;
        size_t nl = strlen(name);
        if (nl < 5 || strcmp(name + nl - 4, ".huf") != 0) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        enc = tu_read_file(path, &len);
        CHECK_MSG(enc != NULL, "cannot read %s", path);
        if (!enc) continue;
        if (strncmp(name, "good-", 5) == 0) {
            n = (size_t)strtoul(name + 5, NULL, 10);
            snprintf(path, sizeof(path), "%s/%.*s.raw", dir, (int)(nl - 4), name);
            raw = tu_read_file(path, &rlen);
            out = malloc(n ? n : 1);
            CHECK_MSG(raw && rlen == n, "%s: raw file missing or not %zu bytes", name, n);
            CHECK_MSG(ptwm_huf_decode(enc, len, out, n) == PTWM_OK && raw && rlen == n &&
                          memcmp(out, raw, n) == 0,
                      "%s does not decode to its .raw", name);
            free(raw);
            free(out);
            good++;
        } else if (strncmp(name, "bad-", 4) == 0) {
            n = (size_t)strtoul(name + 4, NULL, 10);
            CHECK_MSG(dec(enc, len, n) == PTWM_ERR_CORRUPT, "%s accepted", name);
            bad++;
        }
        free(enc);
    }
    closedir(d);
    CHECK_MSG(good >= 1 && bad >= 9, "%d good and %d bad files in %s", good, bad, dir);
}

/* Lengths planned from exact counts (ptwm_huf_size, as the coder policy
 * plans small planes) code to the bytes ptwm_huf_encode gives, and decode
 * back: on symbol sets at both ends of the range and at 8-byte word
 * boundaries, with the lowest or highest symbol holding a 1-bit code (the
 * encoder finds the used range from the lengths a word at a time). */
static void test_planned_lengths(void) {
    static const unsigned pairs[][2] = {{0, 255}, {255, 0}, {7, 8}, {8, 7},  {0, 1},
                                        {254, 255}, {63, 64}, {64, 63}, {128, 135}, {1, 254}};
    uint64_t seed = 11;
    uint8_t *b = malloc(20000), *e1 = malloc(20001), *e2 = malloc(20001), *d = malloc(20000);
    size_t i, k, planned = 0;
    CHECK(b && e1 && e2 && d);
    for (i = 0; i < PTWM_ARRAY_LEN(pairs) * 6; i++) {
        const unsigned *pr = pairs[i % PTWM_ARRAY_LEN(pairs)];
        unsigned lo = pr[0] < pr[1] ? pr[0] : pr[1], hi = pr[0] ^ pr[1] ^ lo;
        size_t n = i < PTWM_ARRAY_LEN(pairs) * 3 ? 300 + i : 5000 + 97 * i, l1 = 0, l2 = 0, sz;
        unsigned extra = (unsigned)(i / PTWM_ARRAY_LEN(pairs)); /* a few other symbols */
        uint32_t hist[256] = {0};
        uint8_t len[256];
        /* pr[0] takes about 3/4 of the plane (a 1-bit code), pr[1] and up
         * to 5 symbols between them the rest */
        for (k = 0; k < n; k++) {
            uint64_t r = tu_rand(&seed);
            unsigned mid = extra && (r & 4) && hi - lo > 1
                               ? lo + 1 + (unsigned)((r >> 8) % extra) % (hi - lo - 1)
                               : pr[1];
            b[k] = (uint8_t)((r & 3) ? pr[0] : mid);
            hist[b[k]]++;
        }
        sz = ptwm_huf_size(hist, n, SIZE_MAX, len);
        CHECK(ptwm_huf_encode(b, n, e1, n + 1, &l1) == PTWM_OK);
        if (sz > 2 && sz <= n) {
            CHECK(ptwm_huf_encode_lengths(b, n, len, e2, n + 1, &l2) == PTWM_OK);
            CHECK_MSG(l1 == l2 && memcmp(e1, e2, l1) == 0,
                      "symbols %u/%u, n=%zu: planned lengths code to %zu bytes, chosen ones to %zu",
                      pr[0], pr[1], n, l2, l1);
            CHECK_MSG(e2[0] == 2 && e2[1] == lo && e2[2] == hi, "symbols %u/%u: range %u..%u",
                      pr[0], pr[1], e2[1], e2[2]);
            CHECK(ptwm_huf_decode(e2, l2, d, n) == PTWM_OK && memcmp(d, b, n) == 0);
            planned++;
        }
    }
    CHECK_MSG(planned == PTWM_ARRAY_LEN(pairs) * 6, "%zu of %zu planes planned", planned,
              PTWM_ARRAY_LEN(pairs) * 6);
    free(b);
    free(e1);
    free(e2);
    free(d);
}

int main(void) {
    test_edges();
    test_planned_lengths();
    test_cap();
    test_hostile_handmade();
    test_eight_byte_streams();
    test_golden_files();
    test_hostile_real();
    test_corpus();
    return tu_finish("test_huffman");
}
