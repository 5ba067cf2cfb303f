/* XXH3-128 paths against libxxhash on real weights: the AVX2 and AVX-512
 * forms (hash_avx2.c; the wrappers stream with AVX-512 where the CPU has
 * it, the AVX2 state is driven directly), the dispatching wrappers (hash.c)
 * and the library must give
 * the same canonical bytes, since .ptwm files store them. One-shot at every
 * length 0..300 and around the 240-byte, 64-byte stripe and 1024-byte block
 * boundaries, at misaligned starts, up to whole files; streaming with updates
 * split at odd points, a digest taken midway, and a reused state. Then the
 * reader, which hashes each chunk as it retires: decoding a mix of empty,
 * one-chunk and many-chunk tensors in one call must pass their stored hashes.
 * CRC32 (every plane, the table and the footer carry one) against a bitwise
 * reference: the check value, every length 0..300 at misaligned starts, long
 * runs, and continuation across splits. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "hash.h"
#include "testutil.h"

static void lib_oneshot(const void *p, size_t n, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
    memcpy(out, c.digest, 16);
}

static void lib_digest(const XXH3_state_t *s, uint8_t out[16]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s));
    memcpy(out, c.digest, 16);
}

static int have_avx2;

/* Every path on p[0..n): all equal to the library. */
static void check_oneshot(const uint8_t *p, size_t n, const char *what) {
    uint8_t want[16], got[16];
    char a[33], b[33];
    lib_oneshot(p, n, want);
    ptwm_xxh128_oneshot(p, n, got);
    CHECK_MSG(memcmp(got, want, 16) == 0, "%s, %zu bytes: dispatched %s, library %s", what, n, ptwm_hex128(got, a),
              ptwm_hex128(want, b));
#ifdef PTWM_CPU_X86
    if (have_avx2) {
        ptwm_xxh128_avx2_oneshot(p, n, got);
        CHECK_MSG(memcmp(got, want, 16) == 0, "%s, %zu bytes: AVX2 %s, library %s", what, n, ptwm_hex128(got, a),
                  ptwm_hex128(want, b));
    }
    if (ptwm_xxh128_have_avx512()) {
        ptwm_xxh128_avx512_oneshot(p, n, got);
        CHECK_MSG(memcmp(got, want, 16) == 0, "%s, %zu bytes: AVX-512 %s, library %s", what, n,
                  ptwm_hex128(got, a), ptwm_hex128(want, b));
    }
#endif
}

/* A piece length: mostly small and boundary-sized, sometimes large. */
static size_t piece_len(uint64_t *rng) {
    static const size_t edges[] = {1, 63, 64, 65, 239, 240, 241, 255, 256, 257, 1023, 1024, 1025};
    uint64_t r = tu_rand(rng);
    switch (r % 4) {
    case 0: return (size_t)(r >> 8) % 8;  /* 0..7, including empty updates */
    case 1: return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
    case 2: return (size_t)(r >> 8) % 3000;
    default: return (size_t)(r >> 8) % 70000;
    }
}

/* Stream p[0..n) in pieces through the library, the wrapper and the AVX2
 * state side by side; digest midway (which must not disturb the state) and at
 * the end, each against the library's one-shot hash of the prefix. */
static void check_stream(const uint8_t *p, size_t n, uint64_t seed, const char *what) {
    XXH3_state_t *lib = XXH3_createState();
    ptwm_xxh128 h = {NULL};
    void *v = NULL;
    uint64_t rng = seed;
    size_t off = 0, pieces = 0;
    uint8_t want[16], got[16];
    ptwm_err err;
    (void)v;  /* only the AVX2 build uses it */
    CHECK(lib != NULL && XXH3_128bits_reset(lib) == XXH_OK);
    CHECK(ptwm_xxh128_begin(&h, &err) == PTWM_OK);
#ifdef PTWM_CPU_X86
    if (have_avx2) {
        v = ptwm_xxh128_avx2_create();
        CHECK(v != NULL);
        if (v) ptwm_xxh128_avx2_reset(v);
    }
#endif
    if (!lib || !h.state) goto out;
    while (off < n) {
        size_t len = PTWM_MIN(piece_len(&rng), n - off);
        XXH3_128bits_update(lib, p + off, len);
        ptwm_xxh128_update(&h, p + off, len);
#ifdef PTWM_CPU_X86
        if (v) ptwm_xxh128_avx2_update(v, p + off, len);
#endif
        off += len;
        if (++pieces % 7 == 0 || off == n) {
            lib_oneshot(p, off, want);
            lib_digest(lib, got);
            CHECK_MSG(memcmp(got, want, 16) == 0, "%s: library stream at %zu of %zu", what, off, n);
            ptwm_xxh128_digest(&h, got);
            CHECK_MSG(memcmp(got, want, 16) == 0, "%s: wrapper stream at %zu of %zu (seed %llu)", what, off, n,
                      (unsigned long long)seed);
#ifdef PTWM_CPU_X86
            if (v) {
                ptwm_xxh128_avx2_digest(v, got);
                CHECK_MSG(memcmp(got, want, 16) == 0, "%s: AVX2 stream at %zu of %zu (seed %llu)", what, off, n,
                          (unsigned long long)seed);
            }
#endif
        }
    }
    if (n == 0) {
        lib_oneshot(p, 0, want);
        ptwm_xxh128_end(&h, got);
        CHECK_MSG(memcmp(got, want, 16) == 0, "%s: wrapper stream of nothing", what);
    }
out:
    XXH3_freeState(lib);
    ptwm_xxh128_free(&h);
#ifdef PTWM_CPU_X86
    if (v) ptwm_xxh128_avx2_free(v);
#endif
}

static void test_lengths(const uint8_t *p, size_t n) {
    static const size_t offsets[] = {0, 1, 7, 33};
    static const size_t big[] = {2047, 2048, 2049, 4095, 4097, 16385, 65543, (1u << 20) - 1, (1u << 20) + 13,
                                 (3u << 20) + 5};
    size_t o, len, k;
    for (o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
        for (len = 0; len <= 300; len++) check_oneshot(p + offsets[o], len, "sweep 0..300");
        for (len = 1000; len <= 1100; len++) check_oneshot(p + offsets[o], len, "block boundary");
        for (k = 1; k <= 40; k++) {
            check_oneshot(p + offsets[o], 64 * k - 1, "stripe boundary");
            check_oneshot(p + offsets[o], 64 * k + 1, "stripe boundary");
        }
    }
    for (k = 0; k < sizeof(big) / sizeof(big[0]); k++)
        if (big[k] + 1 <= n) {
            check_oneshot(p, big[k], "large");
            check_oneshot(p + 1, big[k], "large, odd start");
        }
}

static void test_streams(const uint8_t *p, size_t n) {
    static const size_t sizes[] = {0, 1, 17, 240, 241, 256, 257, 300, 1024, 1025, 5000, 70001, (1u << 20) + 13};
    size_t k;
    uint64_t seed;
    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (seed = 1; seed <= 4; seed++)
            if (sizes[k] + 3 <= n) check_stream(p + 3, sizes[k], seed * 1000 + k, "stream");
}

/* A stream whose cap (ptwm_set_isa_limit) changes between updates: a state
 * made at one level is updated, digested and freed at every other. */
static void test_stream_caps(const uint8_t *p, size_t n) {
    static const ptwm_isa start[2] = {PTWM_ISA_SCALAR, PTWM_ISA_BEST};
    int k;
    for (k = 0; k < 2; k++) {
        ptwm_xxh128 h = {NULL};
        uint64_t rng = 77 + (uint64_t)k;
        size_t off = 0, pieces = 0, len = PTWM_MIN(n, (size_t)3 << 20);
        uint8_t want[16], got[16];
        ptwm_err err;
        ptwm_set_isa_limit(start[k]);
        CHECK(ptwm_xxh128_begin(&h, &err) == PTWM_OK);
        while (off < len) {
            size_t m = PTWM_MIN(piece_len(&rng), len - off);
            ptwm_set_isa_limit((ptwm_isa)(pieces++ % (PTWM_ISA_BEST + 1)));
            ptwm_xxh128_update(&h, p + off, m);
            off += m;
        }
        lib_oneshot(p, len, want);
        ptwm_xxh128_end(&h, got);
        CHECK_MSG(memcmp(got, want, 16) == 0, "stream begun at %s, %zu updates at changing levels",
                  ptwm_isa_name(start[k]), pieces);
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* begin on a started struct resets it; end releases it. */
static void test_reuse(const uint8_t *p, size_t n) {
    ptwm_xxh128 h = {NULL};
    uint8_t want[16], got[16];
    ptwm_err err;
    size_t len = PTWM_MIN(n, (size_t)100000);
    lib_oneshot(p, len, want);
    CHECK(ptwm_xxh128_begin(&h, &err) == PTWM_OK);
    ptwm_xxh128_update(&h, p + 5, 777);
    CHECK(ptwm_xxh128_begin(&h, &err) == PTWM_OK);
    ptwm_xxh128_update(&h, p, len / 3);
    ptwm_xxh128_update(&h, p + len / 3, len - len / 3);
    ptwm_xxh128_end(&h, got);
    CHECK(h.state == NULL);
    CHECK(memcmp(got, want, 16) == 0);
    /* A struct never started digests to zeros and frees as a no-op. */
    memset(got, 1, 16);
    ptwm_xxh128_end(&h, got);
    memset(want, 0, 16);
    CHECK(memcmp(got, want, 16) == 0);
}

/* BF16 tensors cut from real bytes, 4 KiB chunks: empty, short, exactly one
 * chunk, one byte over, many chunks with a short last one. Decoded together
 * in a mixed order (one twice) they must come back equal with their hashes
 * passing, whatever the thread count. */
static void test_reader(const uint8_t *p, size_t n) {
    static const uint64_t elems[] = {0, 50, 2048, 2049, 25001};
    static const char *const names[] = {"empty", "short", "one_chunk", "two_chunks", "thirteen_chunks"};
    static const size_t order[] = {4, 0, 2, 3, 1, 4};
    enum { NT = sizeof(elems) / sizeof(elems[0]), NO = sizeof(order) / sizeof(order[0]) };
    ptwm_tensor_desc d[NT];
    uint64_t shape[NT][1];
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    ptwm_reader *r = NULL;
    ptwm_err err;
    void *blob = NULL, *dsts[NO];
    size_t len = 0, sizes[NO], i, off = 0;
    int threads;
    for (i = 0; i < NT; i++) {
        shape[i][0] = elems[i];
        d[i].name = names[i];
        d[i].dtype = PTWM_DTYPE_BF16;
        d[i].ndim = 1;
        d[i].shape = shape[i];
        d[i].data = p + off;
        d[i].nbytes = elems[i] * 2;
        off += (size_t)d[i].nbytes + 1;  /* odd starts */
    }
    CHECK(off <= n);
    if (off > n) return;
    cp.chunk_size = 4096;
    cp.no_payload_hash = 0;
    CHECK(ptwm_compress_blob(d, NT, NULL, &cp, &blob, &len, &err) == PTWM_OK);
    CHECK(blob && ptwm_reader_open_memory(blob, len, "mix.ptwm", &r, &err) == PTWM_OK);
    for (threads = 1; r && threads <= 2; threads++) {
        ptwm_error rc;
        ptwm_reader_set_threads(r, threads);
        for (i = 0; i < NO; i++) {
            sizes[i] = (size_t)d[order[i]].nbytes;
            dsts[i] = malloc(sizes[i] ? sizes[i] : 1);
        }
        rc = ptwm_reader_decode_many(r, order, dsts, sizes, NO, &err);
        CHECK_MSG(rc == PTWM_OK, "%d threads: %s", threads, err.message);
        for (i = 0; i < NO; i++) {
            CHECK_MSG(memcmp(dsts[i], d[order[i]].data, sizes[i]) == 0, "%d threads: tensor '%s' differs", threads,
                      names[order[i]]);
            free(dsts[i]);
        }
        rc = ptwm_reader_verify(r, &err);
        CHECK_MSG(rc == PTWM_OK, "verify: %s", err.message);
    }
    ptwm_reader_close(r);
    free(blob);
}

/* CRC32 as zlib defines it, one bit at a time (reflected, 0xEDB88320). */
static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t n) {
    size_t i;
    int k;
    crc = ~crc;
    for (i = 0; i < n; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void test_crc(const uint8_t *p, size_t n) {
    size_t len, off, cut;
    uint64_t rng = 9;
    CHECK(ptwm_crc32(0, "123456789", 9) == 0xCBF43926u); /* the CRC-32 check value */
    CHECK(ptwm_crc32(0, NULL, 0) == 0 && ptwm_crc32(0x1234u, NULL, 0) == 0x1234u);
    for (len = 0; len <= 300 && len + 3 <= n; len++)
        for (off = 0; off < 3; off++)
            CHECK_MSG(ptwm_crc32(0, p + off, len) == crc_ref(0, p + off, len),
                      "crc32 of %zu bytes at offset %zu", len, off);
    for (len = 1000; len <= n && len <= ((size_t)1 << 20); len = len * 3 + 7) {
        uint32_t whole = ptwm_crc32(0, p, len);
        CHECK_MSG(whole == crc_ref(0, p, len), "crc32 of %zu bytes", len);
        cut = (size_t)(tu_rand(&rng) % len);
        CHECK_MSG(ptwm_crc32(ptwm_crc32(0, p, cut), p + cut, len - cut) == whole,
                  "crc32 of %zu bytes continued after %zu", len, cut);
    }
}

int main(void) {
    const char *const *files = tu_corpus_files();
    uint8_t *big = NULL, h[16];
    size_t big_n = 0, f;
    char hex[33];
    have_avx2 = ptwm_xxh128_have_avx2();
#ifdef PTWM_CPU_X86
    if (!have_avx2) fprintf(stderr, "test_hash: no AVX2 on this CPU; only the library path is checked\n");
#else
    CHECK(!have_avx2);
#endif
    /* xxHash's published XXH3-128 of no bytes, in canonical order. */
    ptwm_xxh128_oneshot("", 0, h);
    CHECK(strcmp(ptwm_hex128(h, hex), "99aa06d3014798d86001c324468d497f") == 0);

    CHECK_MSG(tu_corpus_dir() != NULL, "corpus not found (set PTWM_CORPUS)");
    if (!tu_corpus_dir()) return tu_finish("test_hash");
    for (f = 0; files[f]; f++) {
        size_t n;
        uint8_t *p = tu_read_file(tu_corpus_path(files[f]), &n);
        CHECK_MSG(p != NULL, "reading %s", files[f]);
        if (!p) continue;
        check_oneshot(p, n, files[f]);
        if (f == 0) test_crc(p, n);
        if (n > big_n) {
            free(big);
            big = p;
            big_n = n;
        } else {
            free(p);
        }
    }
    CHECK_MSG(big_n >= (4u << 20), "largest corpus file has %zu bytes; the large cases need 4 MiB", big_n);
    if (big) {
        test_lengths(big, big_n);
        test_streams(big, big_n);
        test_stream_caps(big, big_n);
        test_reuse(big, big_n);
        test_reader(big, big_n);
    }
    free(big);
    return tu_finish("test_hash");
}
