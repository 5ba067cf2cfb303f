/* Chunk codec: corpus round trips through every method, edge sizes, special
 * values, constant planes, and damaged payloads each asserting its error. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "chain.h"
#include "chunk.h"
#include "chunk_frame.h"
#include "legacy_chunk.h"
#include "microscale.h"
#include "planes.h"
#include "testutil.h"

static const int methods[] = {PTWM_METHOD_HUFFMAN, PTWM_METHOD_ZSTD, PTWM_METHOD_MICROSCALE,
                              PTWM_METHOD_RANS, PTWM_METHOD_IDENTITY};

/* Whether a chain has a transform (SPLIT or PLANES). */
static int chain_transform(const uint8_t *chain, size_t clen) {
    ptwm_chain_info c;
    return ptwm_chain_info_parse(chain, clen, -1, &c, NULL) == PTWM_OK &&
           c.xform != PTWM_XFORM_BYTES;
}

/* The stage of this id in a version 5 payload of raw_len bytes: 1 + its
 * position, or 0 (none, or not a valid payload). *h receives the header. */
static unsigned stage_in(const uint8_t *p, size_t len, size_t raw_len, unsigned id,
                         ptwm_chunk_head *h) {
    unsigned s;
    if (!p || ptwm_chunk_head_parse(5, NULL, p, len, raw_len, h, NULL) != PTWM_OK) return 0;
    return ptwm_chunk_layout_has(&h->L, id, &s) ? s + 1 : 0;
}

/* One workspace for every round trip of this (main) thread, as a worker
 * keeps one for chunks of every kind: what a chunk leaves in it must not
 * change the next chunk's bytes (the first encode of each round trip uses
 * a fresh one). */
static ptwm_ws *reused;
static unsigned x2_seen, x4_seen; /* payloads with a rANS plane in two, four streams */

/* Encode and decode; checks the bound, the bytes, and returns the payload
 * size (0 on failure, after a failed CHECK). out/out_len receive a copy of
 * the payload when non-NULL (malloc'd). */
static size_t round_trip_cols(const uint8_t *chain, size_t clen, ptwm_dtype d, int method,
                              size_t cols, const uint8_t *raw, size_t n, uint8_t **out) {
    size_t cap = ptwm_chunk_bound(n), len = 0;
    uint8_t *enc = malloc(cap + 1), *dec = malloc(n + 1);
    ptwm_chunk_params prm = {method, 0, 1, cols, 0};
    ptwm_err err;
    ptwm_error e;
    e = ptwm_chunk_encode(NULL, chain, clen, d, &prm, raw, n, enc, cap, &len, &err);
    CHECK_MSG(e == PTWM_OK, "encode %s method %d, %zu bytes: %s", ptwm_dtype_name(d), method, n,
              err.message);
    if (e == PTWM_OK) {
        /* With a work-bound dst the planes are coded in place behind a
         * guessed header: the same bytes as through scratch. */
        size_t wcap = ptwm_chunk_work_bound(n), wlen = 0;
        uint8_t *w = malloc(wcap);
        CHECK(w != NULL);
        if (w) {
            ptwm_error we = ptwm_chunk_encode(reused, chain, clen, d, &prm, raw, n, w, wcap, &wlen, &err);
            CHECK_MSG(we == PTWM_OK && wlen == len && memcmp(w, enc, len) == 0,
                      "%s method %d, %zu bytes: coded in place %zu bytes (%d), via scratch %zu",
                      ptwm_dtype_name(d), method, n, wlen, (int)we, len);
            free(w);
        }
        CHECK(len <= cap);
        e = ptwm_chunk_decode(reused, chain, clen, d, enc, len, dec, n, &err);
        CHECK_MSG(e == PTWM_OK, "decode %s method %d, %zu bytes: %s", ptwm_dtype_name(d), method,
                  n, err.message);
        CHECK_MSG(e != PTWM_OK || n == 0 || memcmp(dec, raw, n) == 0,
                  "%s method %d, %zu bytes: round trip differs", ptwm_dtype_name(d), method, n);
        /* The same planes in the version 4 form (a flags byte for the
         * stages) decode to the same bytes, unless a plane is rANS in two
         * streams (version 7 on) or four (version 8 on): that is refused in
         * a version 4 file, and four streams in a version 7 file. */
        if (e == PTWM_OK) {
            uint8_t *old = malloc(len + 64);
            size_t ol = old ? tu_chunk_v4(enc, len, n, chain_transform(chain, clen), old) : 0;
            unsigned need = ptwm_chunk_min_version(enc, len, n);
            memset(dec, 0xEE, n);
            if (need == PTWM_CHUNK_X4_VERSION) {
                CHECK_ERR(ptwm_chunk_decode_version(reused, 7, chain, clen, d, enc, len, dec, n, &err),
                          &err, PTWM_ERR_CORRUPT, "rANS in 4 streams in a version 7 file (from version 8 on)");
                x4_seen++;
            }
            if (need) {
                CHECK_MSG(need == PTWM_CHUNK_X2_VERSION || need == PTWM_CHUNK_X4_VERSION,
                          "a payload needs version %u", need);
                CHECK_ERR(ptwm_chunk_decode_version(reused, 4, chain, clen, d, old, ol, dec, n, &err),
                          &err, PTWM_ERR_CORRUPT, "streams in a version 4 file");
                x2_seen++;
            } else {
                CHECK_MSG(ol > 0 && ptwm_chunk_decode_version(reused, 4, chain, clen, d, old, ol, dec,
                                                              n, &err) == PTWM_OK &&
                              (n == 0 || memcmp(dec, raw, n) == 0),
                          "%s method %d, %zu bytes: version 4 form: %s", ptwm_dtype_name(d),
                          method, n, err.message);
            }
            free(old);
        }
    }
    free(dec);
    if (out && e == PTWM_OK) {
        *out = enc;
    } else {
        free(enc);
        if (out) *out = NULL;
    }
    return e == PTWM_OK ? len : 0;
}

static size_t round_trip_chain(const uint8_t *chain, size_t clen, ptwm_dtype d, int method,
                               const uint8_t *raw, size_t n, uint8_t **out) {
    return round_trip_cols(chain, clen, d, method, 0, raw, n, out);
}

static size_t round_trip(ptwm_dtype d, int method, const uint8_t *raw, size_t n, uint8_t **out) {
    uint8_t chain[PTWM_CHAIN_MAX_BYTES];
    size_t clen = 0;
    ptwm_err err;
    if (ptwm_chain_standard(d, method, chain, sizeof(chain), &clen, &err) != PTWM_OK) {
        CHECK_MSG(0, "%s", err.message);
        return 0;
    }
    return round_trip_chain(chain, clen, d, method, raw, n, out);
}

/* Every corpus tensor through every method (at most two 256 KiB chunks per
 * tensor, so the sanitizer build stays quick). The default method must beat
 * the raw size on every float file. */
static void test_corpus(void) {
    const char *const *files = tu_corpus_files();
    size_t f;
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus not found (set PTWM_CORPUS)");
    if (!tu_corpus_dir()) return;
    for (f = 0; files[f]; f++) {
        ptwm_st *st = NULL;
        ptwm_err err;
        size_t t, m;
        double raw_total = 0, coded_total = 0;
        if (ptwm_st_open(tu_corpus_path(files[f]), PTWM_OPEN_MMAP, &st, &err) != PTWM_OK) {
            CHECK_MSG(0, "%s: %s", files[f], err.message);
            continue;
        }
        for (t = 0; t < ptwm_st_count(st); t++) {
            ptwm_tensor_info ti;
            CHECK(ptwm_st_tensor(st, t, &ti, NULL) == PTWM_OK);
            for (m = 0; m < PTWM_ARRAY_LEN(methods); m++) {
                size_t chunk = 256 * 1024, off;
                for (off = 0; off < ti.nbytes && off < 2 * chunk; off += chunk) {
                    size_t n = (size_t)PTWM_MIN((uint64_t)chunk, ti.nbytes - off);
                    size_t c = round_trip(ti.dtype, methods[m], (const uint8_t *)ti.data + off, n,
                                          NULL);
                    if (methods[m] == PTWM_METHOD_MICROSCALE) {
                        raw_total += (double)n;
                        coded_total += (double)c;
                    }
                }
            }
        }
        CHECK_MSG(coded_total < raw_total * 0.9, "%s: default method coded %.0f of %.0f bytes",
                  files[f], coded_total, raw_total);
        ptwm_st_close(st);
    }
}

/* Edge sizes and special values, every dtype and method. */
static void test_edges(void) {
    static const size_t elems[] = {0, 1, 2, 31, 32, 33, 63, 64, 65, 1000};
    uint64_t rng = 12345;
    unsigned d;
    size_t i, k, m;
    for (d = 0; d < PTWM_DTYPE_COUNT; d++) {
        unsigned bits = ptwm_dtype_bits((ptwm_dtype)d);
        for (i = 0; i < PTWM_ARRAY_LEN(elems); i++) {
            size_t n = bits < 8 ? elems[i] : elems[i] * (bits / 8);
            uint8_t *buf = malloc(n + 1);
            for (k = 0; k < n; k++) buf[k] = (uint8_t)tu_rand(&rng);
            for (m = 0; m < PTWM_ARRAY_LEN(methods); m++) round_trip((ptwm_dtype)d, methods[m], buf, n, NULL);
            /* Weight-like data: small exponents spread, as real planes are. */
            for (k = 0; k < n; k++) buf[k] = (uint8_t)(k % 7 == 0 ? tu_rand(&rng) : 0x3c + (k % 3));
            for (m = 0; m < PTWM_ARRAY_LEN(methods); m++) round_trip((ptwm_dtype)d, methods[m], buf, n, NULL);
            free(buf);
        }
    }
    /* Sub-byte dtypes: odd byte counts are plain bytes. */
    for (i = 1; i < 9; i += 2) {
        uint8_t buf[16];
        for (k = 0; k < i; k++) buf[k] = (uint8_t)(k * 37);
        round_trip(PTWM_DTYPE_F4, PTWM_METHOD_MICROSCALE, buf, i, NULL);
        round_trip(PTWM_DTYPE_F6_E3M2, PTWM_METHOD_RANS, buf, i, NULL);
    }
}

static void test_special_values(void) {
    static const uint32_t f32[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                   0x7fc00000u, 0x7fa00001u, 0xffffffffu, 0x00000001u,
                                   0x807fffffu, 0x3f800000u, 0x00400000u, 0x7f7fffffu};
    static const uint16_t h16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff,
                                   0x0001, 0x83ff, 0x3c00, 0x7f80, 0xff81, 0x0080, 0x8001};
    static const uint64_t f64[] = {0, 0x8000000000000000ull, 0x7ff0000000000000ull,
                                   0xfff8000000000001ull, 1, 0x000fffffffffffffull,
                                   0x3ff0000000000000ull};
    uint8_t buf[4096];
    size_t i, m, n;
    for (m = 0; m < PTWM_ARRAY_LEN(methods); m++) {
        for (n = 0; n < 1000; n++) ptwm_store_le32(buf + 4 * n, f32[(n * 7) % PTWM_ARRAY_LEN(f32)]);
        round_trip(PTWM_DTYPE_F32, methods[m], buf, 4000, NULL);
        round_trip(PTWM_DTYPE_C64, methods[m], buf, 4000, NULL);
        for (n = 0; n < 2000; n++) ptwm_store_le16(buf + 2 * n, h16[(n * 5) % PTWM_ARRAY_LEN(h16)]);
        round_trip(PTWM_DTYPE_BF16, methods[m], buf, 4000, NULL);
        round_trip(PTWM_DTYPE_F16, methods[m], buf, 4000, NULL);
        for (n = 0; n < 500; n++) ptwm_store_le64(buf + 8 * n, f64[(n * 3) % PTWM_ARRAY_LEN(f64)]);
        round_trip(PTWM_DTYPE_F64, methods[m], buf, 4000, NULL);
        for (i = 0; i < 4000; i++) buf[i] = (uint8_t)(i * 13);
        round_trip(PTWM_DTYPE_F8_E4M3, methods[m], buf, 4000, NULL);
        round_trip(PTWM_DTYPE_F8_E8M0, methods[m], buf, 4000, NULL);
    }
}

/* Custom chains: splits that widen the data (FP8 fields, F16 exponent |
 * sign:mantissa) still round trip and stay within the bound. */
static void test_custom_chains(void) {
    static const char *const chains[] = {
        "split(e4m3) > entropy(*:rans)", "split(e5m10) > microscale(32) > entropy(*:auto)",
        "split(e5m10) > entropy(0:huffman) > entropy(1:rans/o1) > entropy(2:zstd/z19)",
        "planes(8) > entropy(*:huffman|rans)", "split(e8m23) > microscale(2) > entropy(*:rans)",
        "split(e11m52) > entropy(*:open)"};
    static const ptwm_dtype dts[] = {PTWM_DTYPE_F8_E4M3, PTWM_DTYPE_F16, PTWM_DTYPE_F16,
                                     PTWM_DTYPE_I64, PTWM_DTYPE_F32, PTWM_DTYPE_F64};
    uint8_t buf[8192];
    uint64_t rng = 99;
    size_t i, k;
    for (k = 0; k < sizeof(buf); k++) buf[k] = (uint8_t)(k & 1 ? 0x3c + (tu_rand(&rng) & 3) : tu_rand(&rng));
    for (i = 0; i < PTWM_ARRAY_LEN(chains); i++) {
        uint8_t chain[PTWM_CHAIN_MAX_BYTES];
        size_t clen, n;
        ptwm_err err;
        CHECK_MSG(ptwm_chain_parse(chains[i], chain, sizeof(chain), &clen, &err) == PTWM_OK, "%s",
                  err.message);
        for (n = 0; n <= sizeof(buf); n += 8 * 97)
            round_trip_chain(chain, clen, dts[i], PTWM_METHOD_MICROSCALE, buf, n, NULL);
    }
}

/* Constant planes cost a few bytes: a zero tensor, and F32 widened from BF16
 * (the two low mantissa bytes all zero). */
static void test_constant_planes(void) {
    size_t n = 1 << 16, k, c_zero, c_wide, c_bf16;
    uint8_t *buf = calloc(n, 4), *bf = malloc(n * 2);
    uint64_t rng = 7;
    c_zero = round_trip(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, buf, n * 4, NULL);
    CHECK_MSG(c_zero > 0 && c_zero < 64, "zero tensor of %zu bytes coded to %zu", n * 4, c_zero);
    c_zero = round_trip(PTWM_DTYPE_BF16, PTWM_METHOD_HUFFMAN, buf, n * 2, NULL);
    CHECK_MSG(c_zero > 0 && c_zero < 64, "zero BF16 coded to %zu", c_zero);
    for (k = 0; k < n; k++) {
        /* Gaussian-ish BF16 weights: exponent 118..124, random sign:mantissa. */
        uint16_t v = (uint16_t)(((118 + tu_rand(&rng) % 4 + tu_rand(&rng) % 4) << 7) |
                                (tu_rand(&rng) & 0x807f));
        ptwm_store_le16(bf + 2 * k, v);
        ptwm_store_le32(buf + 4 * k, (uint32_t)v << 16);
    }
    c_bf16 = round_trip(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, bf, n * 2, NULL);
    c_wide = round_trip(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, buf, n * 4, NULL);
    CHECK_MSG(c_wide > 0 && c_wide < c_bf16 + 64, "F32 widened from BF16: %zu bytes, BF16 %zu",
              c_wide, c_bf16);
    free(buf);
    free(bf);
}

/* zstd is tried on a large integer plane only where repeats could pay: a U8
 * plane of repeated phrases gets ZSTD (and codes far below its order-0
 * size), one of the same symbols drawn without repeats gets RANS. */
static void test_lz_choice(void) {
    size_t n = 1 << 16, k, c_rep, c_noise;
    uint8_t *rep = malloc(n), *noise = malloc(n), *enc = NULL;
    uint8_t phrases[16][24];
    uint64_t rng = 99;
    for (k = 0; k < sizeof(phrases); k++) phrases[k / 24][k % 24] = (uint8_t)(tu_rand(&rng) & 31);
    for (k = 0; k < n; k += 24) {
        const uint8_t *ph = phrases[tu_rand(&rng) % 16];
        memcpy(rep + k, ph, PTWM_MIN((size_t)24, n - k));
    }
    for (k = 0; k < n; k++) noise[k] = (uint8_t)(tu_rand(&rng) & 31);
    c_rep = round_trip(PTWM_DTYPE_U8, PTWM_METHOD_MICROSCALE, rep, n, &enc);
    CHECK_MSG(enc && enc[1] == 0 && enc[2] == PTWM_METHOD_ZSTD && c_rep < n / 8,
              "repeated phrases: stage %d, %zu bytes of %zu", enc ? enc[2] : -1, c_rep, n);
    free(enc);
    c_noise = round_trip(PTWM_DTYPE_U8, PTWM_METHOD_MICROSCALE, noise, n, &enc);
    CHECK_MSG(enc && enc[1] == 0 && enc[2] == PTWM_METHOD_RANS && c_noise < n * 5 / 8 + 512,
              "5-bit noise: stage %d, %zu bytes of %zu", enc ? enc[2] : -1, c_noise, n);
    free(enc);
    free(rep);
    free(noise);
}

/* Damaged payloads in the version 4 form (files of versions 1-4 hold them),
 * each with its error code and message. */
static void test_damage(void) {
    size_t n = 4096 * 2, len, len5, k;
    uint8_t *raw = malloc(n), *enc = NULL, *enc5 = NULL, *bad = malloc(ptwm_chunk_bound(n) + 16),
            *dec = malloc(n);
    uint8_t chain[PTWM_CHAIN_MAX_BYTES];
    size_t clen;
    uint64_t rng = 5;
    ptwm_err err;
    for (k = 0; k < n / 2; k++)
        ptwm_store_le16(raw + 2 * k, (uint16_t)(((120 + tu_rand(&rng) % 5) << 7) |
                                                (tu_rand(&rng) & 0x807f)));
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, chain, sizeof(chain),
                              &clen, &err) == PTWM_OK);
    len5 = round_trip(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, raw, n, &enc5);
    enc = enc5 ? malloc(len5 + 64) : NULL;
    len = enc ? tu_chunk_v4(enc5, len5, n, 1, enc) : 0;
    CHECK(enc != NULL && len > 16);
    if (!enc) return;
    /* Layout of this payload: flags, count 2, entry 0 (stage, varint 4096 =
     * 2 bytes, varint coded, CRC), entry 1, then the planes. */
    CHECK(enc[0] == 1 && enc[1] == 2);

    /* A flipped bit in the last byte (plane 1's coded bytes). */
    memcpy(bad, enc, len);
    bad[len - 1] ^= 0x10;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CRC, "plane 1");
    CHECK(strstr(err.message, "stored CRC32") && strstr(err.message, "computed"));

    /* Truncated: every shorter length fails (never a crash). */
    for (k = 0; k < len; k++) {
        ptwm_error e = ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, enc, k, dec, n, &err);
        CHECK_MSG(e == PTWM_ERR_CORRUPT, "truncated to %zu of %zu: %s", k, len,
                  ptwm_error_name(e));
    }
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, enc, len - 1, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "coded bytes");
    /* Extended by one byte. */
    memcpy(bad, enc, len);
    bad[len] = 0;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len + 1, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "follow the");
    /* Unknown stage id in plane 0's entry, and the MICROSCALE id 3. */
    memcpy(bad, enc, len);
    bad[2] = 9;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_UNKNOWN_ID, "unknown stage id 9");
    bad[2] = 3;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_UNKNOWN_ID, "not an entropy stage");
    /* Wrong raw length for plane 0 (4096 as 0x80 0x20 -> 0x81 0x20). */
    memcpy(bad, enc, len);
    CHECK(bad[3] == 0x80 && bad[4] == 0x20);
    bad[3] = 0x81;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "raw length 4097, expected 4096");
    /* Coded length past the end of the payload. */
    memcpy(bad, enc, len);
    bad[5] = 0xff;
    bad[6] = 0x7f;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "exceeds the payload");
    /* Non-minimal varint. */
    memcpy(bad, enc, len);
    bad[3] = 0x80;
    bad[4] = 0x00;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "lengths malformed");
    /* Unknown flags, wrong plane count, MICROSCALE flag on a chain without it. */
    memcpy(bad, enc, len);
    bad[0] = 0x81;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "unknown flags 0x81");
    bad[0] = enc[0];
    bad[1] = 1;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "1 planes, the chain makes 2");
    bad[1] = 13;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
              PTWM_ERR_CORRUPT, "13 planes (at most 12)");
    {
        uint8_t plain[PTWM_CHAIN_MAX_BYTES];
        size_t plen;
        CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_RANS, plain, sizeof(plain), &plen,
                                  &err) == PTWM_OK);
        memcpy(bad, enc, len);
        bad[0] |= 2;
        CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, plain, plen, PTWM_DTYPE_BF16, bad, len, dec, n, &err), &err,
                  PTWM_ERR_CORRUPT, "no microscale");
    }
    /* Wrong raw size asked of the decoder. */
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, enc, len, dec, n - 2, &err), &err,
              PTWM_ERR_CORRUPT, "expected 4095");
    /* Without CRCs, damage inside a plane is caught by its stage. */
    {
        ptwm_chunk_params prm = {PTWM_METHOD_MICROSCALE, 0, 0, 0, 0};
        size_t l2;
        ptwm_error e;
        CHECK(ptwm_chunk_encode(NULL, chain, clen, PTWM_DTYPE_BF16, &prm, raw, n, bad,
                                ptwm_chunk_bound(n), &l2, &err) == PTWM_OK);
        CHECK(bad[0] == 0 && l2 == len5 - 8);
        e = ptwm_chunk_decode(NULL, chain, clen, PTWM_DTYPE_BF16, bad, l2 - 3, dec, n, &err);
        CHECK(e == PTWM_ERR_CORRUPT);
    }
    /* An encode buffer below the bound. */
    CHECK_ERR(ptwm_chunk_encode(NULL, chain, clen, PTWM_DTYPE_BF16, NULL, raw, n, bad, 10, &len, &err),
              &err, PTWM_ERR_DST_SIZE, "buffer of 10");
    free(raw);
    free(enc);
    free(enc5);
    free(bad);
    free(dec);
}

/* Zero-heavy chunks take the sparse form (bitmap + nonzero elements). */
static void test_sparse(void) {
    static const ptwm_dtype dts[] = {PTWM_DTYPE_BF16, PTWM_DTYPE_F16, PTWM_DTYPE_F32,
                                     PTWM_DTYPE_F64, PTWM_DTYPE_I32, PTWM_DTYPE_C64};
    uint8_t buf[8192], *enc = NULL, dec[512];
    uint8_t chain[PTWM_CHAIN_MAX_BYTES];
    size_t i, m, k, len, clen;
    uint64_t rng = 11;
    ptwm_err err;
    for (i = 0; i < PTWM_ARRAY_LEN(dts); i++) {
        size_t w = ptwm_dtype_bits(dts[i]) / 8, dense, sparse;
        for (k = 0; k < sizeof(buf); k++) buf[k] = (uint8_t)tu_rand(&rng);
        dense = round_trip(dts[i], PTWM_METHOD_MICROSCALE, buf, sizeof(buf), NULL);
        for (k = 0; k < sizeof(buf) / w; k++)
            if (tu_rand(&rng) % 3) memset(buf + k * w, 0, w);
        for (m = 0; m < PTWM_ARRAY_LEN(methods); m++)
            round_trip(dts[i], methods[m], buf, sizeof(buf), NULL);
        sparse = round_trip(dts[i], PTWM_METHOD_MICROSCALE, buf, sizeof(buf), NULL);
        CHECK_MSG(sparse < dense / 2, "%s: 2/3 zeros coded to %zu, dense %zu",
                  ptwm_dtype_name(dts[i]), sparse, dense);
    }
    /* All zero but one element; all zero. */
    memset(buf, 0, sizeof(buf));
    buf[77] = 1;
    CHECK(round_trip(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, buf, sizeof(buf), NULL) < 256);
    buf[77] = 0;
    CHECK(round_trip(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, buf, sizeof(buf), NULL) < 64);

    /* A bitmap that disagrees with the planes: 64 F32, every even one zero,
     * so the bitmap plane is the constant 0xAA (the payload's last byte).
     * Damaged in the version 4 form (then the same planes in the version 5
     * form, test_stage_lists). */
    for (k = 0; k < 64; k++) ptwm_store_le32(buf + 4 * k, k & 1 ? 0x3f800000u + (uint32_t)k : 0);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, chain, sizeof(chain), &clen,
                              &err) == PTWM_OK);
    {
        ptwm_chunk_params prm = {PTWM_METHOD_MICROSCALE, 0, 0, 0, 0};
        uint8_t out[1024], out5[1024];
        size_t len5 = 0;
        CHECK(ptwm_chunk_encode(NULL, chain, clen, PTWM_DTYPE_F32, &prm, buf, 256, out5, sizeof(out5),
                                &len5, &err) == PTWM_OK);
        len = tu_chunk_v4(out5, len5, 256, 1, out);
        /* sparse, signed zeros; the bitmap then the signs (32 +0: 0x00) */
        CHECK(out[0] == 0x48 && out[len - 2] == 0xAA && out[len - 1] == 0);
        out[len - 2] = 0xAB;
        CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_F32, out, len, dec, 256, &err), &err,
                  PTWM_ERR_CORRUPT, "marks 40 nonzero elements, the planes hold 32");
        out[len - 2] = 0xAA;
        CHECK(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_F32, out, len, dec, 256, &err) == PTWM_OK);
        CHECK(memcmp(dec, buf, 256) == 0);
        /* Signs 0x01 in every byte: zeros 0, 8, 16 and 24 (elements 0, 16,
         * 32, 48) are -0. */
        out[len - 1] = 0x01;
        CHECK(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_F32, out, len, dec, 256, &err) == PTWM_OK);
        for (k = 0; k < 64; k += 16) buf[4 * k + 3] = 0x80;
        CHECK(memcmp(dec, buf, 256) == 0);
        for (k = 0; k < 64; k += 16) buf[4 * k + 3] = 0;
        /* Read as version 2, or without the sparse flag: not a valid payload. */
        CHECK_ERR(ptwm_chunk_decode_version(NULL, 2, chain, clen, PTWM_DTYPE_F32, out, len, dec, 256,
                                            &err),
                  &err, PTWM_ERR_CORRUPT, "flag 0x40 (signed zeros) in a version 2 file");
        out[0] = 0x40;
        CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_F32, out, len, dec, 256, &err), &err,
                  PTWM_ERR_CORRUPT, "unknown flags 0x40");
        out[0] = 0x48;
        /* The version 1 and 2 form: flag 0x08 alone, no signs plane (its
         * entry, 3 bytes here without CRCs, and its coded byte dropped);
         * every zero is +0, read as either version. */
        {
            uint8_t old[1024];
            size_t hl = 2 + 3 * (size_t)out[1], ol = 0;
            old[ol++] = 0x08;
            old[ol++] = (uint8_t)(out[1] - 1);
            memcpy(old + ol, out + 2, hl - 5);
            ol += hl - 5;
            memcpy(old + ol, out + hl, len - hl - 1);
            ol += len - hl - 1;
            memset(dec, 0xEE, 256);
            CHECK(ptwm_chunk_decode_version(NULL, 2, chain, clen, PTWM_DTYPE_F32, old, ol, dec, 256,
                                            &err) == PTWM_OK &&
                  memcmp(dec, buf, 256) == 0);
            memset(dec, 0xEE, 256);
            CHECK(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_F32, old, ol, dec, 256, &err) ==
                      PTWM_OK &&
                  memcmp(dec, buf, 256) == 0);
        }
    }
    /* 76 elements: 38 zeros, so the last signs byte has 2 padding bits
     * (0x40 in every byte sets bit 38). */
    {
        ptwm_chunk_params prm = {PTWM_METHOD_MICROSCALE, 0, 0, 0, 0};
        uint8_t out[1024], out5[1024];
        size_t len5 = 0;
        for (k = 0; k < 76; k++) ptwm_store_le32(buf + 4 * k, k & 1 ? 0x3f800000u + (uint32_t)k : 0);
        CHECK(ptwm_chunk_encode(NULL, chain, clen, PTWM_DTYPE_F32, &prm, buf, 304, out5, sizeof(out5),
                                &len5, &err) == PTWM_OK);
        len = tu_chunk_v4(out5, len5, 304, 1, out);
        CHECK_MSG(out[0] == 0x48 && out[len - 1] == 0, "flags 0x%02x, last byte 0x%02x", out[0],
                  out[len - 1]);
        out[len - 1] = 0x40;
        CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_F32, out, len, dec, 304, &err), &err,
                  PTWM_ERR_CORRUPT, "signs plane 5 has bits past its 38 zero elements");
    }
    free(enc);
}

/* Pruned weights keep their signs: about half their zeros are -0. A
 * corpus tensor pruned that way (handlandmark-full.f16 Conv2D_28/filter:
 * 64% zeros, half of them -0), and corpus BF16 and F32 weights pruned the
 * same way, code as sparse chunks with signed zeros, round-trip, and cost at
 * most a bit per zero (plus a few bytes) more than the same chunk with every
 * zero +0: coded as nonzero elements, the -0 would cost several bits. */
static void test_signed_zeros(void) {
    static const char *const files[3] = {"handlandmark-full.f16.safetensors",
                                         "emotion.bf16.safetensors", "emotion.f32.safetensors"};
    size_t f;
    for (f = 0; f < 3; f++) {
        ptwm_st *st = NULL;
        ptwm_err err;
        ptwm_tensor_info ti, best;
        size_t t, n, w, i, zeros = 0, with, without;
        uint8_t *buf, *enc = NULL;
        uint64_t rng = 5;
        CHECK_MSG(ptwm_st_open(tu_corpus_path(files[f]), PTWM_OPEN_MMAP, &st, &err) == PTWM_OK,
                  "%s: %s", files[f], err.message);
        if (!st) continue;
        memset(&best, 0, sizeof(best));
        for (t = 0; t < ptwm_st_count(st); t++)
            if (ptwm_st_tensor(st, t, &ti, NULL) == PTWM_OK &&
                (f == 0 ? strcmp(ti.name, "Conv2D_28/filter") == 0 : ti.nbytes > best.nbytes))
                best = ti;
        CHECK_MSG(best.nbytes >= 65536, "%s: no tensor to prune", files[f]);
        w = ptwm_dtype_bits(best.dtype) / 8;
        n = (size_t)PTWM_MIN(best.nbytes, (uint64_t)262144) / w * w;
        buf = (uint8_t *)malloc(n);
        memcpy(buf, best.data, n);
        for (i = 0; i < n / w; i++) {
            uint8_t *e = buf + i * w;
            size_t k;
            int zero = (e[w - 1] & 0x7f) == 0;
            for (k = 0; k + 1 < w; k++) zero &= e[k] == 0;
            if (f > 0 && !zero && tu_rand(&rng) % 5 < 3) { /* prune, keeping the sign */
                memset(e, 0, w - 1);
                e[w - 1] &= 0x80;
                zero = 1;
            }
            zeros += (size_t)zero;
        }
        CHECK_MSG(zeros * 4 >= n / w, "%s: %zu zeros of %zu", files[f], zeros, n / w);
        with = round_trip(best.dtype, PTWM_METHOD_MICROSCALE, buf, n, &enc);
        {
            ptwm_chunk_head h;
            unsigned sp = stage_in(enc, with, n, PTWM_CSTAGE_SPARSE, &h);
            CHECK_MSG(sp && h.use[sp - 1].p[2] == 1, "%s: not sparse with signed zeros",
                      files[f]);
        }
        free(enc);
        for (i = 0; i < n / w; i++) {
            uint8_t *e = buf + i * w;
            size_t k;
            int zero = (e[w - 1] & 0x7f) == 0;
            for (k = 0; k + 1 < w; k++) zero &= e[k] == 0;
            if (zero) e[w - 1] = 0;
        }
        without = round_trip(best.dtype, PTWM_METHOD_MICROSCALE, buf, n, NULL);
        CHECK_MSG(with <= without + zeros / 8 + 64,
                  "%s: %zu zeros of %zu elements: %zu bytes with their signs, %zu all +0", files[f],
                  zeros, n / w, with, without);
        free(buf);
        ptwm_st_close(st);
    }
}

/* Float values whose top mantissa bits mostly follow the exponent (what
 * joint planes capture, strongly), with random low bits and sign; one in 200
 * has an exponent far out (escapes from the map of 15). */
static void fill_joint(uint8_t *buf, size_t count, int f32, uint64_t *rng) {
    size_t k;
    for (k = 0; k < count; k++) {
        uint32_t e = 120 + (uint32_t)(tu_rand(rng) % 6), top = e & 7, u;
        if (tu_rand(rng) % 4 == 0) top = (uint32_t)tu_rand(rng) & 7;
        if (tu_rand(rng) % 200 == 0) e = 40 + (uint32_t)(tu_rand(rng) % 60);
        u = (uint32_t)(tu_rand(rng) & 0x800fffffu) | e << 23 | top << 20;
        if (f32)
            ptwm_store_le32(buf + 4 * k, u);
        else
            ptwm_store_le16(buf + 2 * k, (uint16_t)(u >> 16));
    }
}

/* Joint exponent planes: chosen on float-like data, round trips (BF16 fused
 * path, F32 generic path, odd lengths), and hand-made hostile payloads. */
static void test_joint(void) {
    uint8_t buf[4 * 4096], *enc = NULL, dec[128], bad[256];
    uint8_t chain[PTWM_CHAIN_MAX_BYTES], u8chain[PTWM_CHAIN_MAX_BYTES];
    ptwm_chunk_head h;
    size_t clen, u8len, len, k, n = 37, pos;
    uint64_t rng = 21;
    ptwm_err err;
    fill_joint(buf, 4096, 0, &rng);
    len = round_trip(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, buf, 2 * 4096, &enc);
    CHECK_MSG(stage_in(enc, len, 2 * 4096, PTWM_CSTAGE_JOINT, &h) && h.L.count == 3,
              "BF16 joint: %u stages, %u planes", h.nuse, h.L.count);
    CHECK(len > 0 && len < 2 * 4096 * 7 / 10);
    free(enc);
    for (k = 1; k < 40; k += 3) round_trip(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, buf, 2 * (300 + k), NULL);
    fill_joint(buf, 3 * 1024 + 1, 1, &rng);
    len = round_trip(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, buf, 4 * (3 * 1024 + 1), &enc);
    CHECK_MSG(stage_in(enc, len, 4 * (3 * 1024 + 1), PTWM_CSTAGE_JOINT, &h) && h.L.count == 5,
              "F32 joint: %u stages, %u planes", h.nuse, h.L.count);
    free(enc);
    /* With a third of the elements zero: sparse and joint together. */
    fill_joint(buf, 4096, 0, &rng);
    for (k = 0; k < 4096; k += 3) ptwm_store_le16(buf + 2 * k, 0);
    len = round_trip(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, buf, 2 * 4096, &enc);
    CHECK_MSG(stage_in(enc, len, 2 * 4096, PTWM_CSTAGE_JOINT, &h) &&
                  stage_in(enc, len, 2 * 4096, PTWM_CSTAGE_SPARSE, &h) == 1,
              "BF16 sparse joint: %u stages", h.nuse);
    free(enc);

    /* By hand, in the version 4 form: 37 BF16 elements, every plane IDENTITY: symbols (37), nibbles
     * (19), side (map of 15 + escapes). Symbol 0x12 = map[1] with sign:mantissa
     * 0x2_; nibble byte 0x43: element 2k gets 3, element 2k+1 gets 4. */
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, chain, sizeof(chain),
                              &clen, &err) == PTWM_OK);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_U8, PTWM_METHOD_MICROSCALE, u8chain, sizeof(u8chain),
                              &u8len, &err) == PTWM_OK);
#define JOINT_PAYLOAD(side_len)                                                              \
    do {                                                                                     \
        pos = 0;                                                                             \
        bad[pos++] = 0x10;                                                                   \
        bad[pos++] = 3;                                                                      \
        bad[pos++] = 5, bad[pos++] = 37, bad[pos++] = 37;                                    \
        bad[pos++] = 5, bad[pos++] = 19, bad[pos++] = 19;                                    \
        bad[pos++] = 5, bad[pos++] = (uint8_t)(side_len), bad[pos++] = (uint8_t)(side_len);  \
        memset(bad + pos, 0x12, 37);                                                         \
        memset(bad + pos + 37, 0x43, 19);                                                    \
        for (k = 0; k < (side_len); k++) bad[pos + 56 + k] = (uint8_t)(120 + k);             \
        pos += 56 + (side_len);                                                              \
    } while (0)
#define JOINT_BAD(msg)                                                                     \
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, pos, dec, 2 * n, &err), &err, \
              PTWM_ERR_CORRUPT, msg)
    JOINT_PAYLOAD(15);
    CHECK(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, pos, dec, 2 * n, &err) == PTWM_OK);
    for (k = 0; k < n; k++) {
        unsigned sm = k & 1 ? 0x24 : 0x23;
        CHECK_MSG(ptwm_load_le16(dec + 2 * k) == (121u << 7 | sm), "element %zu: %04x", k,
                  ptwm_load_le16(dec + 2 * k));
    }
    /* An escape symbol with its exponent in the side plane. */
    JOINT_PAYLOAD(16);
    bad[11 + 36] = 0xF3;
    bad[11 + 56 + 15] = 200;
    CHECK(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, pos, dec, 2 * n, &err) == PTWM_OK);
    CHECK(ptwm_load_le16(dec + 2 * 36) == (200u << 7 | 0x33));
    CHECK(ptwm_load_le16(dec + 2 * 35) == (121u << 7 | 0x24));
    /* The escape without its exponent, an exponent without its escape. */
    JOINT_PAYLOAD(15);
    bad[11 + 36] = 0xF3;
    JOINT_BAD("plane 0 has 1 escape symbols, side plane 2 holds 0 exponents");
    JOINT_PAYLOAD(17);
    JOINT_BAD("plane 0 has 0 escape symbols, side plane 2 holds 2 exponents");
    /* Side plane lengths outside 15..15 + n. */
    JOINT_PAYLOAD(14);
    JOINT_BAD("joint side plane 2 of 14 bytes (at least 15)");
    JOINT_PAYLOAD(53);
    JOINT_BAD("stage 1 (joint): 38 escapes for 37 elements");
    /* Nibble plane of the wrong length; joint with MICROSCALE; joint on a
     * chain without a float split; too few planes. */
    JOINT_PAYLOAD(15);
    bad[6] = bad[7] = 18;
    JOINT_BAD("plane 1: raw length 18, expected 19");
    JOINT_PAYLOAD(15);
    bad[0] = 0x12;
    JOINT_BAD("unknown flags 0x12");
    bad[0] = 0x14;
    JOINT_BAD("unknown flags 0x14");
    bad[0] = 0x10;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, u8chain, u8len, PTWM_DTYPE_U8, bad, pos, dec, 2 * n, &err), &err,
              PTWM_ERR_CORRUPT, "joint exponent planes, but the chain has no split");
    bad[1] = 2;
    JOINT_BAD("joint side plane 2 of 0 bytes (at least 15)");
#undef JOINT_BAD
#undef JOINT_PAYLOAD
}

/* Column-relative exponents: the transform against its definition; corpus
 * tensors with their last dimension as columns (the form must be picked,
 * alone and under joint planes, and save bytes); damaged column payloads. */
static uint8_t column_mean(const uint8_t *x, size_t n, size_t cols, size_t c) {
    size_t i, cnt = 0, sum = 0;
    for (i = c; i < n; i += cols, cnt++) sum += x[i];
    return (uint8_t)((sum + cnt / 2) / cnt);
}

/* PyTorch keeps weights as [out, in...]: the last dimension, whose columns
 * the writer offers, is then an input channel, and column scales rarely pay.
 * Where they lose, block-relative exponents must still be tried: corpus BF16
 * kernels moved to that layout code no larger with the columns on offer than
 * without them, and blocks (flag bit 1) win some. */
static void test_rows_layout(void) {
    ptwm_st *st = NULL;
    ptwm_err err;
    size_t t, done = 0, blocks = 0;
    uint8_t std[PTWM_CHAIN_MAX_BYTES];
    size_t slen = 0;
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, std, sizeof(std), &slen,
                              &err) == PTWM_OK);
    if (!tu_corpus_dir() || ptwm_st_open(tu_corpus_path("faceres-deep.bf16.safetensors"),
                                         PTWM_OPEN_MMAP, &st, &err) != PTWM_OK) {
        CHECK_MSG(0, "faceres-deep.bf16: corpus file missing");
        return;
    }
    for (t = 0; t < ptwm_st_count(st); t++) {
        ptwm_tensor_info ti;
        size_t outs, rows, o, r, n, c_cols, c_none;
        uint16_t *tr;
        uint8_t *enc = NULL;
        CHECK(ptwm_st_tensor(st, t, &ti, NULL) == PTWM_OK);
        if (ti.dtype != PTWM_DTYPE_BF16 || ti.ndim < 2 || ti.nbytes < 65536 || ti.nbytes > 1 << 20)
            continue;
        outs = (size_t)ti.shape[ti.ndim - 1];
        n = (size_t)ti.nbytes / 2;
        rows = n / outs;
        tr = malloc(n * 2);
        for (r = 0; r < rows; r++)
            for (o = 0; o < outs; o++)
                tr[o * rows + r] = ptwm_load_le16((const uint8_t *)ti.data + 2 * (r * outs + o));
        c_cols = round_trip_cols(std, slen, PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, rows,
                                 (const uint8_t *)tr, n * 2, &enc);
        c_none = round_trip_cols(std, slen, PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, 0,
                                 (const uint8_t *)tr, n * 2, NULL);
        CHECK_MSG(c_cols <= c_none, "%s as [%zu, %zu]: %zu bytes with %zu columns offered, %zu "
                  "without", ti.name, outs, rows, c_cols, rows, c_none);
        {
            ptwm_chunk_head h;
            blocks += stage_in(enc, c_cols, n * 2, PTWM_CSTAGE_BLOCKS, &h) != 0;
        }
        free(enc);
        free(tr);
        done++;
    }
    CHECK_MSG(done >= 8 && blocks >= 1, "%zu kernels moved, %zu coded with block scales", done,
              blocks);
    ptwm_st_close(st);
}

/* A corpus file, mapped; a failed check and NULL when it is missing. */
static ptwm_st *open_corpus(const char *name) {
    ptwm_st *st = NULL;
    ptwm_err err;
    if (!tu_corpus_dir() || ptwm_st_open(tu_corpus_path(name), PTWM_OPEN_MMAP, &st, &err) != PTWM_OK) {
        CHECK_MSG(0, "%s: corpus file missing", name);
        return NULL;
    }
    return st;
}

/* Convolution kernels as PyTorch stores them, [out, in, kh, kw]: the
 * columns offered are kw (2, 3 or 5), rows narrower than the span the
 * column pass walks. On corpus BF16 kernels moved to that layout the pass
 * gives each column's rounded mean and the residuals of its definition, and
 * the kernels round-trip through the encoder with the columns on offer. */
static void test_pytorch_kernels(void) {
    static const char *const files[] = {"emotion.bf16.safetensors",
                                        "handskeleton.bf16.safetensors"};
    uint8_t std[PTWM_CHAIN_MAX_BYTES];
    size_t slen = 0, f, done = 0;
    ptwm_err err;
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, std, sizeof(std), &slen,
                              &err) == PTWM_OK);
    for (f = 0; f < PTWM_ARRAY_LEN(files); f++) {
        ptwm_st *st = open_corpus(files[f]);
        size_t t;
        if (!st) continue;
        for (t = 0; t < ptwm_st_count(st); t++) {
            ptwm_tensor_info ti;
            size_t kh, kw, cin, cout, n, i, c, a, b, ci, o, bad = 0;
            uint16_t *tr;
            uint8_t *x, *r, *d;
            uint32_t *sums;
            CHECK(ptwm_st_tensor(st, t, &ti, NULL) == PTWM_OK);
            if (ti.ndim != 4 || ti.shape[0] * ti.shape[1] < 2) continue;
            kh = (size_t)ti.shape[0];
            kw = (size_t)ti.shape[1];
            cin = (size_t)ti.shape[2];
            cout = (size_t)ti.shape[3];
            n = kh * kw * cin * cout;
            tr = malloc(n * 2);
            x = malloc(n);
            r = malloc(n);
            d = malloc(kw);
            sums = malloc(kw * sizeof(*sums));
            for (a = 0; a < kh; a++)
                for (b = 0; b < kw; b++)
                    for (ci = 0; ci < cin; ci++)
                        for (o = 0; o < cout; o++)
                            tr[((o * cin + ci) * kh + a) * kw + b] = ptwm_load_le16(
                                (const uint8_t *)ti.data + 2 * (((a * kw + b) * cin + ci) * cout + o));
            for (i = 0; i < n; i++) x[i] = (uint8_t)(tr[i] >> 7);
            ptwm_colscale_forward(x, n, kw, r, d, sums);
            for (c = 0; c < kw; c++) {
                uint8_t sc = column_mean(x, n, kw, c), prev = c ? column_mean(x, n, kw, c - 1) : 0;
                bad += d[c] != (uint8_t)(sc - prev);
                for (i = c; i < n; i += kw) bad += r[i] != (uint8_t)(sc - x[i]);
            }
            CHECK_MSG(bad == 0, "%s as [%zu, %zu, %zu, %zu]: %zu column values differ", ti.name, cout,
                      cin, kh, kw, bad);
            round_trip_cols(std, slen, PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, kw,
                            (const uint8_t *)tr, n * 2, NULL);
            free(tr);
            free(x);
            free(r);
            free(d);
            free(sums);
            done++;
        }
        ptwm_st_close(st);
    }
    CHECK_MSG(done >= 20, "%zu kernels moved to [out, in, kh, kw]", done);
}

static void test_columns(void) {
    /* Narrow rows are walked in spans of several rows (kw = 3 in PyTorch's
     * [out, in, kh, kw]): lengths of many spans with a partial one at the end,
     * widths on both sides of the span length. */
    static const size_t lens[] = {0, 1, 5, 64, 65, 1000, 4099};
    static const size_t colss[] = {1, 2, 3, 7, 64, 100, 255, 257};
    static const char *const files[] = {"faceres-deep.bf16.safetensors",
                                        "handskeleton.f32.safetensors"};
    static uint8_t x[4099], r[4099], y[4099], el[2 * 4099], sms[4099];
    uint8_t d[257], dec[64], bad[64];
    uint32_t sums[257];
    uint16_t s7[257 + 256];
    uint8_t chain[PTWM_CHAIN_MAX_BYTES], plain[PTWM_CHAIN_MAX_BYTES];
    size_t a, b, i, f, clen, plen, pos, picked = 0, under_joint = 0;
    double with = 0, without = 0;
    uint64_t rng = 77;
    ptwm_err err;
    for (a = 0; a < PTWM_ARRAY_LEN(lens); a++) {
        for (b = 0; b < PTWM_ARRAY_LEN(colss); b++) {
            size_t n = lens[a], cols = colss[b], c;
            /* Half the lengths take any byte (residuals wrap mod 256). */
            for (i = 0; i < n; i++) x[i] = (uint8_t)(a & 1 ? tu_rand(&rng) : 100 + tu_rand(&rng) % 40);
            ptwm_colscale_forward(x, n, cols, r, d, sums);
            for (c = 0; c < PTWM_MIN(cols, n); c++) {
                uint8_t s = column_mean(x, n, cols, c), prev = c ? column_mean(x, n, cols, c - 1) : 0;
                for (i = c; i < n; i += cols)
                    CHECK_MSG(r[i] == (uint8_t)(s - x[i]), "n %zu cols %zu: r[%zu]", n, cols, i);
                CHECK_MSG(d[c] == (uint8_t)(s - prev), "n %zu cols %zu: d[%zu]", n, cols, c);
            }
            memset(y, 0xAA, sizeof(y));
            ptwm_colscale_inverse(r, d, n, cols, y);
            CHECK_MSG(n == 0 || memcmp(x, y, n) == 0, "n %zu cols %zu: inverse differs", n, cols);
            /* On BF16 elements whose exponent fields hold the residuals. */
            for (i = 0; i < n; i++) {
                unsigned sm = (unsigned)tu_rand(&rng) & 0xff;
                ptwm_store_le16(el + 2 * i, (uint16_t)((sm & 0x80) << 8 | r[i] << 7 | (sm & 0x7f)));
                sms[i] = (uint8_t)sm;
            }
            ptwm_colscale_inverse_bf16(el, n, d, cols, s7);
            for (i = 0; i < n; i++)
                CHECK_MSG(ptwm_load_le16(el + 2 * i) ==
                              ((sms[i] & 0x80) << 8 | x[i] << 7 | (sms[i] & 0x7f)),
                          "n %zu cols %zu: BF16 element %zu is %04x", n, cols, i,
                          ptwm_load_le16(el + 2 * i));
        }
    }

    for (f = 0; f < PTWM_ARRAY_LEN(files); f++) {
        ptwm_st *st = open_corpus(files[f]);
        size_t t;
        if (!st) continue;
        for (t = 0; t < ptwm_st_count(st); t++) {
            ptwm_tensor_info ti;
            uint8_t *enc = NULL;
            size_t n, cl;
            CHECK(ptwm_st_tensor(st, t, &ti, NULL) == PTWM_OK);
            if (ti.ndim < 2) continue;
            n = (size_t)PTWM_MIN(ti.nbytes, (uint64_t)1 << 20);
            CHECK(ptwm_chain_standard(ti.dtype, PTWM_METHOD_MICROSCALE, chain, sizeof(chain), &clen,
                                      &err) == PTWM_OK);
            cl = round_trip_cols(chain, clen, ti.dtype, PTWM_METHOD_MICROSCALE,
                                 (size_t)ti.shape[ti.ndim - 1], (const uint8_t *)ti.data, n, &enc);
            {
                ptwm_chunk_head h;
                if (stage_in(enc, cl, n, PTWM_CSTAGE_COLS, &h)) {
                    picked++;
                    under_joint += stage_in(enc, cl, n, PTWM_CSTAGE_JOINT, &h) != 0;
                }
            }
            free(enc);
            with += (double)cl;
            without += (double)round_trip(ti.dtype, PTWM_METHOD_MICROSCALE,
                                          (const uint8_t *)ti.data, n, NULL);
        }
        ptwm_st_close(st);
    }
    CHECK_MSG(picked > under_joint && under_joint > 0, "column form picked %zu times, %zu joint",
              picked, under_joint);
    CHECK_MSG(with < without * 0.995, "with columns %.0f bytes, without %.0f", with, without);

    /* By hand, in the version 4 form: 8 BF16 elements in 4 columns, every plane IDENTITY:
     * residuals, sign:mantissa, scales (deltas 120, +1, +1, -3). */
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, chain, sizeof(chain),
                              &clen, &err) == PTWM_OK);
    CHECK(ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_RANS, plain, sizeof(plain), &plen,
                              &err) == PTWM_OK);
#define COLS_PAYLOAD(scale_len)                                                                \
    do {                                                                                       \
        static const uint8_t res[8] = {0, 1, 2, 0, 3, 0, 0, 1}, sc[5] = {120, 1, 1, 253, 0};    \
        pos = 0;                                                                               \
        bad[pos++] = 0x20;                                                                     \
        bad[pos++] = 3;                                                                        \
        bad[pos++] = 5, bad[pos++] = 8, bad[pos++] = 8;                                        \
        bad[pos++] = 5, bad[pos++] = 8, bad[pos++] = 8;                                        \
        bad[pos++] = 5, bad[pos++] = (uint8_t)(scale_len), bad[pos++] = (uint8_t)(scale_len);  \
        memcpy(bad + pos, res, 8);                                                             \
        for (i = 0; i < 8; i++) bad[pos + 8 + i] = (uint8_t)(i * 17);                          \
        memcpy(bad + pos + 16, sc, (scale_len));                                               \
        pos += 16 + (scale_len);                                                               \
    } while (0)
#define COLS_BAD(msg)                                                                          \
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, pos, dec, 16, &err), &err,  \
              PTWM_ERR_CORRUPT, msg)
    COLS_PAYLOAD(4);
    CHECK(ptwm_chunk_decode_version(NULL, 4, chain, clen, PTWM_DTYPE_BF16, bad, pos, dec, 16, &err) == PTWM_OK);
    {
        static const uint8_t scale[4] = {120, 121, 122, 119}, res[8] = {0, 1, 2, 0, 3, 0, 0, 1};
        for (i = 0; i < 8; i++)
            CHECK_MSG(ptwm_load_le16(dec + 2 * i) == ((unsigned)(scale[i % 4] - res[i]) << 7 |
                                                      (i * 17 & 0x80) << 8 | (i * 17 & 0x7f)),
                      "element %zu: %04x", i, ptwm_load_le16(dec + 2 * i));
    }
    /* The same payload in a version 1 file; scale planes of 1 and 5 (2 to
     * n / 2 columns); with block scales or sparse elements; on a chain
     * without MICROSCALE. */
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 1, chain, clen, PTWM_DTYPE_BF16, bad, pos, dec, 16, &err),
              &err, PTWM_ERR_CORRUPT, "flag 0x20 (column-relative exponents) in a version 1 file");
    COLS_PAYLOAD(1);
    COLS_BAD("stage 1 (cols): 1 columns for 8 elements (2 to 4)");
    COLS_PAYLOAD(5);
    COLS_BAD("stage 1 (cols): 5 columns for 8 elements (2 to 4)");
    COLS_PAYLOAD(4);
    bad[0] = 0x22;
    COLS_BAD("unknown flags 0x22");
    bad[0] = 0x28;
    COLS_BAD("unknown flags 0x28");
    bad[0] = 0x24;
    COLS_BAD("unknown flags 0x24");
    bad[0] = 0x20;
    CHECK_ERR(ptwm_chunk_decode_version(NULL, 4, plain, plen, PTWM_DTYPE_BF16, bad, pos, dec, 16, &err), &err,
              PTWM_ERR_CORRUPT, "column-relative exponents, but the chain has no microscale");
    bad[1] = 2;
    COLS_BAD("stage 1 (cols): 0 columns for 8 elements");
#undef COLS_BAD
#undef COLS_PAYLOAD
}

/* ptwm_joint_split against the definition in planes.h, element by element,
 * at lengths around the vector width (64) and with a map from sampled counts
 * (where exponents missing from the sample must escape). */
static void test_joint_split_reference(void) {
    static const size_t lens[] = {1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4096, 4097};
    static const ptwm_isa isas[] = {PTWM_ISA_SCALAR, PTWM_ISA_AVX2, PTWM_ISA_BEST};
    uint64_t rng = 0x5eed;
    size_t li, ii;
    /* every level's split (the kernels do a prefix, planes.c the rest) */
    for (ii = 0; ii < sizeof(isas) / sizeof(isas[0]); ii++) {
        ptwm_set_isa_limit(isas[ii]);
        for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            size_t n = lens[li], i, ne, esc = 0;
            uint8_t *ex = (uint8_t *)malloc(n), *sm = (uint8_t *)malloc(n), *j = (uint8_t *)malloc(n);
            uint8_t *nib = (uint8_t *)malloc(n / 2 + 1), *side = (uint8_t *)malloc(n + PTWM_JOINT_MAP);
            uint32_t hist[256];
            int sampled;
            for (i = 0; i < n; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                /* ~20 common exponents, some rare ones across the whole byte range */
                ex[i] = (uint8_t)((rng >> 60) < 14 ? 110 + (rng >> 33) % 20 : (rng >> 24) & 0xff);
                sm[i] = (uint8_t)(rng >> 40);
            }
            for (sampled = 0; sampled < 2; sampled++) {
                uint8_t rank[256];
                memset(hist, 0, sizeof(hist));
                for (i = 0; i < n; i += sampled ? 8 : 1) hist[ex[i]]++;
                ne = ptwm_joint_split(ex, sm, n, hist, j, nib, side);
                memset(rank, PTWM_JOINT_MAP, sizeof(rank));
                for (i = 0; i < PTWM_JOINT_MAP; i++)
                    if (hist[side[i]] && rank[side[i]] == PTWM_JOINT_MAP) rank[side[i]] = (uint8_t)i;
                esc = PTWM_JOINT_MAP;
                for (i = 0; i < n; i++) {
                    unsigned want = (unsigned)(rank[ex[i]] << 4 | sm[i] >> 4);
                    unsigned wn = (nib[i / 2] >> (4 * (i & 1))) & 15;
                    if (j[i] != want || wn != (sm[i] & 15u)) break;
                    if (rank[ex[i]] == PTWM_JOINT_MAP && side[esc++] != ex[i]) break;
                }
                CHECK_MSG(i == n && ne == esc,
                          "joint split of %zu elements (%s counts, isa %s): element %zu differs, %zu "
                          "side bytes, expected %zu",
                          n, sampled ? "sampled" : "exact", ptwm_isa_name(isas[ii]), i, ne, esc);
                /* And back: the BF16 elements (sign, exponent, mantissa) from the
                 * joint planes, vector and scalar parts. */
                {
                    uint8_t *bf = (uint8_t *)malloc(2 * n);
                    size_t got = ptwm_joint_merge_bf16(j, nib, side, ne, n, bf);
                    for (i = 0; i < n; i++) {
                        unsigned v = (unsigned)(sm[i] & 0x80) << 8 | (unsigned)ex[i] << 7 | (sm[i] & 0x7fu);
                        if (bf[2 * i] != (uint8_t)v || bf[2 * i + 1] != (uint8_t)(v >> 8)) break;
                    }
                    CHECK_MSG(i == n && got == ne - PTWM_JOINT_MAP,
                              "joint merge to BF16 of %zu elements: element %zu differs, %zu escapes", n, i,
                              got);
                    free(bf);
                }
            }
            free(ex), free(sm), free(j), free(nib), free(side);
        }
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* ptwm_sparse_compact and ptwm_sparse_expand against their definition, for
 * every width with a vector path (2, 4) and two without (3, 8), at lengths
 * around the vector steps, with runs of zeros and scattered zeros of both
 * signs: an element is zero when every bit but its top one is 0, its top
 * bit goes to the signs plane. Expanding without signs (versions 1 and 2)
 * gives every zero as +0. */
static void test_sparse_reference(void) {
    static const size_t lens[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 95, 1000, 4099};
    static const unsigned widths[] = {2, 3, 4, 8};
    uint64_t rng = 0xbeef;
    size_t li, wi;
    for (wi = 0; wi < 4; wi++)
        for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            unsigned w = widths[wi];
            size_t n = lens[li], i, j = 0, z = 0, got, bad = SIZE_MAX, slen;
            uint8_t *src = (uint8_t *)calloc(n, w), *dst = (uint8_t *)malloc(n * w + 8);
            uint8_t *bm = (uint8_t *)malloc(n / 8 + 1), *back = (uint8_t *)malloc(n * w + 8);
            uint8_t *sg = (uint8_t *)malloc(n / 8 + 9);
            for (i = 0; i < n; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                /* zero runs in the first quarter, then one element in three */
                if (i < n / 4 ? (rng >> 62) == 0 : (rng >> 33) % 3 != 0)
                    memcpy(src + i * w, &rng, w);
                if (i % 5 == 0 && w > 2) src[i * w + w - 1] = 0; /* zero high byte, nonzero element */
                if (i % 7 == 3) src[i * w + w - 1] |= 0x80;      /* -0, or a negative element */
                if (i % 11 == 5) {                                /* only a low bit: nonzero */
                    memset(src + i * w, 0, w);
                    src[i * w] = 1;
                }
            }
            memset(sg, 0xAA, n / 8 + 9);
            got = ptwm_sparse_compact(src, n, w, bm, dst, sg);
            for (i = 0; i < n && bad == SIZE_MAX; i++) {
                size_t k;
                int nz = (src[i * w + w - 1] & 0x7f) != 0;
                for (k = 0; k + 1 < w; k++) nz |= src[i * w + k] != 0;
                if (((bm[i / 8] >> (i % 8)) & 1) != nz || (nz && memcmp(dst + j * w, src + i * w, w)))
                    bad = i;
                if (!nz && ((sg[z / 8] >> (z % 8)) & 1) != src[i * w + w - 1] >> 7) bad = i;
                j += (size_t)nz;
                z += (size_t)!nz;
            }
            slen = z / 8 + (z % 8 != 0);
            CHECK_MSG(bad == SIZE_MAX && got == j && ptwm_bitmap_count(bm, n) == j,
                      "sparse compact, width %u, %zu elements: element %zu wrong, %zu kept of %zu",
                      w, n, bad, got, j);
            CHECK_MSG(ptwm_bitmap_count(sg, z) != SIZE_MAX && (slen == 0 || sg[slen] == 0xAA),
                      "sparse compact, width %u, %zu elements: signs plane of %zu zeros: padding "
                      "bits set or written past %zu bytes",
                      w, n, z, slen);
            memset(back, 0xAA, n * w);
            ptwm_sparse_expand(dst, bm, n, w, sg, slen, back);
            CHECK_MSG(memcmp(back, src, n * w) == 0, "sparse expand, width %u, %zu elements", w, n);
            memset(back, 0xAA, n * w);
            ptwm_sparse_expand(dst, bm, n, w, NULL, 0, back);
            for (i = 0, bad = SIZE_MAX; i < n && bad == SIZE_MAX; i++) {
                int zero = !((bm[i / 8] >> (i % 8)) & 1);
                size_t k;
                for (k = 0; k < w; k++)
                    if (back[i * w + k] != (zero ? 0 : src[i * w + k])) bad = i;
            }
            CHECK_MSG(bad == SIZE_MAX,
                      "sparse expand without signs, width %u, %zu elements: element %zu", w, n, bad);
            free(src), free(dst), free(bm), free(back), free(sg);
        }
}

/* Random noise takes the bypassed form and stays within the bound. */
static void test_bypass(void) {
    size_t n = 10000, k, c;
    uint8_t *buf = malloc(n);
    uint64_t rng = 3;
    for (k = 0; k < n; k++) buf[k] = (uint8_t)tu_rand(&rng);
    c = round_trip(PTWM_DTYPE_F32, PTWM_METHOD_MICROSCALE, buf, n, NULL);
    CHECK(c > n && c <= ptwm_chunk_bound(n));
    free(buf);
}

/* Encode and decode from several threads at once (per-thread scratch):
 * each thread's payloads equal the single-thread ones. */
typedef struct thread_job {
    const uint8_t *raw;
    size_t n;
    ptwm_dtype d;
    const uint8_t *want;
    size_t want_len;
    int bad;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = (thread_job *)arg;
    uint8_t chain[PTWM_CHAIN_MAX_BYTES];
    size_t clen, len, cap = ptwm_chunk_bound(j->n);
    uint8_t *enc = malloc(cap), *dec = malloc(j->n);
    ptwm_ws *ws = ptwm_ws_create(); /* each thread its own, as each worker */
    int r;
    if (ptwm_chain_standard(j->d, PTWM_METHOD_MICROSCALE, chain, sizeof(chain), &clen, NULL))
        j->bad++;
    for (r = 0; r < 20; r++) {
        if (ptwm_chunk_encode(ws, chain, clen, j->d, NULL, j->raw, j->n, enc, cap, &len, NULL) ||
            len != j->want_len || memcmp(enc, j->want, len) != 0 ||
            ptwm_chunk_decode(ws, chain, clen, j->d, enc, len, dec, j->n, NULL) ||
            memcmp(dec, j->raw, j->n) != 0)
            j->bad++;
    }
    ptwm_ws_free(ws);
    free(enc);
    free(dec);
    return NULL;
}

static void test_threads(void) {
    enum { T = 4 };
    static const ptwm_dtype dts[T] = {PTWM_DTYPE_BF16, PTWM_DTYPE_F32, PTWM_DTYPE_F16,
                                      PTWM_DTYPE_U8};
    size_t n = 1 << 17, k, i;
    uint8_t *raw = malloc(n), *want[T];
    thread_job jobs[T];
    pthread_t th[T];
    uint64_t rng = 17;
    for (k = 0; k < n; k++) raw[k] = (uint8_t)(k & 1 ? 0x3c + (tu_rand(&rng) & 3) : tu_rand(&rng));
    for (i = 0; i < T; i++) {
        jobs[i].raw = raw;
        jobs[i].n = n - i * 4; /* different sizes: scratch buffers differ */
        jobs[i].d = dts[i];
        jobs[i].want_len = round_trip(dts[i], PTWM_METHOD_MICROSCALE, raw, jobs[i].n, &want[i]);
        jobs[i].want = want[i];
        jobs[i].bad = 0;
    }
    for (i = 0; i < T; i++) CHECK(pthread_create(&th[i], NULL, thread_main, &jobs[i]) == 0);
    for (i = 0; i < T; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK_MSG(jobs[i].bad == 0, "thread %zu (%s): %d bad round trips", i,
                  ptwm_dtype_name(dts[i]), jobs[i].bad);
        free(want[i]);
    }
    free(raw);
}

int main(void) {
    int rc;
    reused = ptwm_ws_create();
    CHECK(reused != NULL);
    test_signed_zeros();
    test_threads();
    test_edges();
    test_special_values();
    test_custom_chains();
    test_constant_planes();
    test_damage();
    test_lz_choice();
    test_bypass();
    test_sparse();
    test_joint();
    test_joint_split_reference();
    test_columns();
    test_rows_layout();
    test_pytorch_kernels();
    test_sparse_reference();
    test_corpus();
    /* Large planes were coded in two streams, and refused as version 4. */
    CHECK_MSG(x2_seen > x4_seen, "no payload had a rANS plane in two streams");
    CHECK_MSG(x4_seen > 0, "no payload had a rANS plane in four streams");
    rc = tu_finish("test_chunk");
    ptwm_ws_free(reused);
    return rc;
}
