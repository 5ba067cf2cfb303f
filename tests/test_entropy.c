/* Entropy dispatch: every stage id round-trips corpus planes and edge cases
 * through ptwm_entropy_*, unknown ids are refused, and the ZSTD and IDENTITY
 * stages reject encodings that are not exactly one plane of the right size.
 * Also the per-thread zstd contexts under concurrent use, and the zero-order
 * entropy helper. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "corpus_planes.h"
#include "entropy.h"
#include "testutil.h"

static const int stages[] = {PTWM_METHOD_HUFFMAN, PTWM_METHOD_ZSTD, PTWM_METHOD_RANS,
                             PTWM_METHOD_IDENTITY};

/* Encode through the dispatch, decode, compare; returns the coded length. */
static size_t dispatch_trip(int stage, int level, const uint8_t *src, size_t n, const char *what) {
    size_t cap = ptwm_entropy_bound(stage, n), len = 0;
    uint8_t *enc = malloc(cap ? cap : 1), *dec = malloc(n ? n : 1);
    ptwm_error rc;
    CHECK(enc && dec && cap >= n);
    rc = ptwm_entropy_encode(NULL, stage, level, src, n, enc, cap, &len);
    CHECK_MSG(rc == PTWM_OK && len <= cap, "%s: stage %d n=%zu: %s len %zu cap %zu", what, stage,
              n, ptwm_error_name(rc), len, cap);
    rc = ptwm_entropy_decode(NULL, stage, enc, len, dec, n);
    CHECK_MSG(rc == PTWM_OK, "%s: stage %d n=%zu decode: %s", what, stage, n, ptwm_error_name(rc));
    CHECK_MSG(rc || !n || memcmp(src, dec, n) == 0, "%s: stage %d n=%zu bytes differ", what,
              stage, n);
    free(enc);
    free(dec);
    return len;
}

static void dispatch_plane(const char *file, const char *label, const uint8_t *plane, size_t n) {
    char what[200];
    size_t i;
    /* A 1 MiB window keeps the sanitizer build quick; test_rans and
     * test_huffman take the whole planes. */
    if (n > (1u << 20)) n = 1u << 20;
    snprintf(what, sizeof(what), "%s %s", file, label);
    for (i = 0; i < PTWM_ARRAY_LEN(stages); i++) {
        size_t len = dispatch_trip(stages[i], 0, plane, n, what);
        if (stages[i] == PTWM_METHOD_IDENTITY) CHECK(len == n);
    }
}

static void test_edges(void) {
    uint8_t *b = malloc(70000);
    uint64_t seed = 7;
    size_t i, n;
    static const size_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 255, 256, 257, 4095, 4096,
                                   65535, 65536, 65537};
    CHECK(b);
    for (i = 0; i < PTWM_ARRAY_LEN(stages); i++) {
        size_t s;
        for (s = 0; s < PTWM_ARRAY_LEN(sizes); s++) {
            n = sizes[s];
            memset(b, 42, n);
            dispatch_trip(stages[i], 0, b, n, "one symbol");
            for (n = 0; n < sizes[s]; n++)
                b[n] = (uint8_t)__builtin_ctzll(tu_rand(&seed) | 1ull << 40);
            dispatch_trip(stages[i], 0, b, sizes[s], "geometric");
            for (n = 0; n < sizes[s]; n++) b[n] = (uint8_t)tu_rand(&seed);
            dispatch_trip(stages[i], 0, b, sizes[s], "uniform");
        }
    }
    /* zstd levels, including fast negative ones, and the rANS orders */
    for (n = 0; n < 70000; n++) b[n] = (uint8_t)(n % 251 < 40 ? n % 7 : 3);
    {
        static const int levels[] = {-5, -1, 0, 1, 3, 9, 19};
        for (i = 0; i < PTWM_ARRAY_LEN(levels); i++)
            dispatch_trip(PTWM_METHOD_ZSTD, levels[i], b, 70000, "zstd level");
        for (i = 0; i < 3; i++) dispatch_trip(PTWM_METHOD_RANS, (int)i - 1, b, 70000, "rans order");
    }
    free(b);
}

static ptwm_error dec(int stage, const uint8_t *src, size_t size, size_t n) {
    uint8_t *out = malloc(n ? n : 1);
    ptwm_error rc = ptwm_entropy_decode(NULL, stage, src, size, out, n);
    free(out);
    return rc;
}

static void test_refusals(void) {
    uint8_t src[4096], enc[8192], out[16];
    size_t len = 0, n = sizeof(src), i;
    static const int unknown[] = {-1, 0, 3, 6, 255};
    for (i = 0; i < n; i++) src[i] = (uint8_t)(i * i % 13);
    /* unknown stage ids */
    for (i = 0; i < PTWM_ARRAY_LEN(unknown); i++) {
        CHECK(ptwm_entropy_bound(unknown[i], 100) == 0);
        CHECK(ptwm_entropy_encode(NULL, unknown[i], 0, src, 100, enc, sizeof(enc), &len) ==
              PTWM_ERR_UNKNOWN_ID);
        CHECK(ptwm_entropy_decode(NULL, unknown[i], src, 100, out, 10) == PTWM_ERR_UNKNOWN_ID);
    }
    /* bad arguments */
    CHECK(ptwm_entropy_encode(NULL, PTWM_METHOD_ZSTD, 100, src, n, enc, sizeof(enc), &len) ==
          PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_entropy_encode(NULL, PTWM_METHOD_RANS, 2, src, n, enc, sizeof(enc), &len) ==
          PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_entropy_encode(NULL, PTWM_METHOD_IDENTITY, 0, src, n, enc, sizeof(enc), NULL) ==
          PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_entropy_decode(NULL, PTWM_METHOD_IDENTITY, NULL, 5, out, 5) == PTWM_ERR_INVALID_ARG);
    /* capacity one short of what is needed */
    for (i = 0; i < PTWM_ARRAY_LEN(stages); i++) {
        CHECK(ptwm_entropy_encode(NULL, stages[i], 0, src, n, enc, sizeof(enc), &len) == PTWM_OK);
        CHECK_MSG(ptwm_entropy_encode(NULL, stages[i], 0, src, n, enc, len - 1, &len) ==
                      PTWM_ERR_DST_SIZE,
                  "stage %d", stages[i]);
    }

    /* IDENTITY: the size must match exactly */
    CHECK(dec(PTWM_METHOD_IDENTITY, src, 10, 10) == PTWM_OK);
    CHECK(dec(PTWM_METHOD_IDENTITY, src, 10, 9) == PTWM_ERR_CORRUPT);
    CHECK(dec(PTWM_METHOD_IDENTITY, src, 9, 10) == PTWM_ERR_CORRUPT);
    CHECK(dec(PTWM_METHOD_IDENTITY, src, 0, 0) == PTWM_OK);

    /* ZSTD: exactly one frame with the right content size */
    CHECK(ptwm_entropy_encode(NULL, PTWM_METHOD_ZSTD, 3, src, n, enc, sizeof(enc), &len) == PTWM_OK);
    CHECK(dec(PTWM_METHOD_ZSTD, enc, len, n) == PTWM_OK);
    CHECK(dec(PTWM_METHOD_ZSTD, enc, len, n - 1) == PTWM_ERR_CORRUPT);
    CHECK(dec(PTWM_METHOD_ZSTD, enc, len, n + 1) == PTWM_ERR_CORRUPT);
    for (i = 0; i < len; i++)
        CHECK_MSG(dec(PTWM_METHOD_ZSTD, enc, i, n) == PTWM_ERR_CORRUPT, "zstd prefix %zu", i);
    enc[len] = 0;
    CHECK(dec(PTWM_METHOD_ZSTD, enc, len + 1, n) == PTWM_ERR_CORRUPT); /* trailing byte */
    memcpy(enc + len, enc, len);
    CHECK(dec(PTWM_METHOD_ZSTD, enc, 2 * len, n) == PTWM_ERR_CORRUPT); /* two frames */
    CHECK(dec(PTWM_METHOD_ZSTD, src, 100, 100) == PTWM_ERR_CORRUPT);   /* not a frame */
    /* flipped bytes: rejected or decoded in bounds (no checksum in the frame) */
    for (i = 0; i < len; i++) {
        ptwm_error rc;
        uint8_t *m = malloc(len);
        memcpy(m, enc, len);
        m[i] ^= 0x21;
        rc = dec(PTWM_METHOD_ZSTD, m, len, n);
        CHECK_MSG(rc == PTWM_OK || rc == PTWM_ERR_CORRUPT, "zstd flip %zu", i);
        free(m);
    }
    {
        /* a frame without a recorded content size, and a skippable frame */
        ZSTD_CCtx *cc = ZSTD_createCCtx();
        ZSTD_outBuffer ob = {enc, sizeof(enc), 0};
        ZSTD_inBuffer ib = {src, n, 0};
        static const uint8_t skippable[] = {0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0};
        CHECK(cc != NULL);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
        CHECK(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_end) == 0);
        CHECK(ZSTD_getFrameContentSize(enc, ob.pos) == ZSTD_CONTENTSIZE_UNKNOWN);
        CHECK(dec(PTWM_METHOD_ZSTD, enc, ob.pos, n) == PTWM_ERR_CORRUPT);
        ZSTD_freeCCtx(cc);
        CHECK(dec(PTWM_METHOD_ZSTD, skippable, sizeof(skippable), 0) == PTWM_ERR_CORRUPT);
    }
    /* the empty plane is one small frame */
    CHECK(ptwm_entropy_encode(NULL, PTWM_METHOD_ZSTD, 0, NULL, 0, enc, sizeof(enc), &len) == PTWM_OK);
    CHECK(dec(PTWM_METHOD_ZSTD, enc, len, 0) == PTWM_OK);
    CHECK(dec(PTWM_METHOD_ZSTD, enc, len, 1) == PTWM_ERR_CORRUPT);
}

/* Two threads coding at once each use their own zstd contexts. */
static void *zstd_worker(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    uint8_t *src = malloc(100000), *enc = malloc(ptwm_zstd_bound(100000)), *out = malloc(100000);
    int r, *bad = calloc(1, sizeof(int));
    size_t i, len;
    if (!src || !enc || !out || !bad) abort();
    for (r = 0; r < 20; r++) {
        for (i = 0; i < 100000; i++) src[i] = (uint8_t)(tu_rand(&seed) % (r + 2));
        if (ptwm_zstd_encode(NULL, src, 100000, 1 + r % 5, enc, ptwm_zstd_bound(100000), &len) ||
            ptwm_zstd_decode(NULL, enc, len, out, 100000) || memcmp(src, out, 100000))
            (*bad)++;
    }
    free(src);
    free(enc);
    free(out);
    return bad;
}

static void test_threads(void) {
    pthread_t t[3];
    int i;
    for (i = 0; i < 3; i++)
        CHECK(pthread_create(&t[i], NULL, zstd_worker, (void *)(uintptr_t)(i + 1)) == 0);
    for (i = 0; i < 3; i++) {
        void *res = NULL;
        CHECK(pthread_join(t[i], &res) == 0);
        CHECK(res && *(int *)res == 0);
        free(res);
    }
}

static void test_order0(void) {
    uint8_t b[512];
    int i;
    memset(b, 5, sizeof(b));
    CHECK(ptwm_entropy_order0(b, 0) == 0.0);
    CHECK(ptwm_entropy_order0(b, sizeof(b)) == 0.0);
    for (i = 0; i < 512; i++) b[i] = (uint8_t)i;
    CHECK(fabs(ptwm_entropy_order0(b, 512) - 8.0) < 1e-12);
    for (i = 0; i < 512; i++) b[i] = (uint8_t)(i & 1);
    CHECK(fabs(ptwm_entropy_order0(b, 512) - 1.0) < 1e-12);
    for (i = 0; i < 4; i++) b[i] = (uint8_t)(i == 3); /* 3:1 -> 0.811278 bits */
    CHECK(fabs(ptwm_entropy_order0(b, 4) - 0.8112781244591328) < 1e-12);
}

/* The size estimates the chunk codec uses to code only the smaller stage:
 * from exact counts, rANS order 0's plan and Huffman's lengths code the
 * plane to the same bytes as the plain encoders, and their sizes are close
 * (rANS within 0.5% plus a few bytes, Huffman within 2 bytes). Windows of the
 * corpus planes at the sizes where the codec uses them (up to 64 KiB). */
static void plan_plane(const char *file, const char *label, const uint8_t *plane, size_t n) {
    static const size_t sizes[] = {2, 300, 4096, 20000, 65535};
    size_t k;
    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && sizes[k] <= n; k++) {
        size_t m = sizes[k], i, la, lb, lh, lg, hs;
        uint32_t hist[256];
        uint8_t len[256];
        ptwm_rans_plan pl;
        double est;
        uint8_t *a = (uint8_t *)malloc(m + 64), *b = (uint8_t *)malloc(m + 64);
        memset(hist, 0, sizeof(hist));
        for (i = 0; i < m; i++) hist[plane[i]]++;
        est = ptwm_rans_o0_size(hist, m, &pl);
        CHECK(ptwm_rans_encode(NULL, plane, m, 0, a, m + 64, &la) == PTWM_OK);
        CHECK(ptwm_rans_encode_plan(plane, m, &pl, 0, b, m + 64, &lb) == PTWM_OK);
        CHECK_MSG(la == lb && memcmp(a, b, la) == 0, "%s %s, %zu bytes: planned rANS differs (%zu vs %zu)",
                  file, label, m, lb, la);
        CHECK_MSG(fabs(est - (double)la) <= (double)la * 0.005 + 8.0,
                  "%s %s, %zu bytes: rANS estimate %.0f, coded %zu", file, label, m, est, la);
        hs = ptwm_huf_size(hist, m, SIZE_MAX, len);
        {
            /* A floor past `beat` comes back as the floor. */
            size_t fl = ptwm_huf_size_floor(hist, m);
            uint8_t unused[256];
            CHECK_MSG(fl <= hs + 2 || hs == m + 1, "%s %s: floor %zu over the size %zu", file, label, fl, hs);
            if (fl > 2) CHECK(ptwm_huf_size(hist, m, fl - 1, unused) == fl);
        }
        CHECK(ptwm_huf_encode(plane, m, a, m + 64, &lh) == PTWM_OK);
        CHECK(ptwm_huf_encode_lengths(plane, m, hs > 2 && hs <= m ? len : NULL, b, m + 64, &lg) == PTWM_OK);
        CHECK_MSG(lh == lg && memcmp(a, b, lh) == 0, "%s %s, %zu bytes: Huffman with given lengths differs",
                  file, label, m);
        /* The encoder may store a plane that looks incompressible (n + 1). */
        CHECK_MSG(lh == m + 1 || (hs + 2 >= lh && hs <= lh + 2), "%s %s, %zu bytes: Huffman size %zu, coded %zu",
                  file, label, m, hs, lh);
        free(a);
        free(b);
    }
}

int main(void) {
    test_order0();
    test_refusals();
    test_edges();
    test_threads();
    cp_for_each(dispatch_plane);
    cp_for_each(plan_plane);
    return tu_finish("entropy");
}
