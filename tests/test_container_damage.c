/* Damaged .ptwm files: every kind of damage gives its own error code and a
 * message naming what is wrong (tensor, chunk, numbers), never a crash and
 * never wrong bytes. Also the golden files of tests/golden/: old versions
 * must keep decoding to the same bytes, damaged ones must keep failing. */
#include "testutil.h"
#include "chunk.h"
#include "chunk_frame.h"
#include "container_format.h"
#include "entropy.h"
#include "hash.h"
#include "image.h"
#include "reader.h"

#include <stdlib.h>
#include <string.h>

typedef tu_image image;

static uint16_t wv[3][20000];
static const char *const wnames[3] = {"conv1/w", "conv2/w", "fc/bias"};

/* Three BF16 tensors of 40,000 bytes in chunks of `chunk` bytes. */
static image make_image_chunked(int plane_crc, int payload_hash, uint64_t chunk) {
    uint64_t shape[3][1] = {{20000}, {20000}, {20000}}, state = 11;
    ptwm_tensor_desc d[3];
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    image im = {NULL, 0};
    void *blob = NULL;
    size_t i, k;
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 20000; i++) wv[k][i] = (uint16_t)(0x3c00 + (tu_rand(&state) % 700) - 350);
        d[k].name = wnames[k];
        d[k].dtype = PTWM_DTYPE_BF16;
        d[k].ndim = 1;
        d[k].shape = shape[k];
        d[k].data = wv[k];
        d[k].nbytes = sizeof(wv[k]);
    }
    p.chunk_size = chunk;
    p.no_plane_crc = !plane_crc;
    p.no_payload_hash = !payload_hash;
    p.threads = 2;
    CHECK(ptwm_compress_blob(d, 3, NULL, &p, &blob, &im.len, &err) == PTWM_OK);
    im.p = (uint8_t *)blob;
    return im;
}

/* In 4 KiB chunks. */
static image make_image(int plane_crc, int payload_hash) {
    return make_image_chunked(plane_crc, payload_hash, 4096);
}

/* Open, verify and decode tensor 1; return the first failure. */
static ptwm_error try_all(const image *im, ptwm_err *err) {
    ptwm_reader *r = NULL;
    ptwm_error rc = ptwm_reader_open_memory(im->p, im->len, "damaged.ptwm", &r, err);
    if (!rc) {
        uint8_t *out = (uint8_t *)malloc(sizeof(wv[1]));
        rc = ptwm_reader_decode(r, 1, out, sizeof(wv[1]), err);
        if (!rc && memcmp(out, wv[1], sizeof(wv[1])) != 0)
            rc = ptwm_fail(err, PTWM_ERR_CORRUPT, "test: wrong bytes handed back silently");
        if (!rc) rc = ptwm_reader_verify(r, err);
        free(out);
        ptwm_reader_close(r);
    }
    return rc;
}

static void test_payload_damage(void) {
    image good = make_image(1, 1), im;
    ptwm_err err;
    uint64_t off = 0;
    uint32_t coded = 0;
    CHECK(try_all(&good, &err) == PTWM_OK);
    /* A flipped bit in the middle of chunk 3 of tensor 1. */
    tu_image_chunk_at(&good, 1, 3, &off, &coded);
    im = tu_image_copy(&good);
    im.p[off + coded / 2] ^= 0x10;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CRC, "file 'damaged.ptwm': tensor 'conv2/w' chunk 3 of 10: ");
    free(im.p);
    /* The first and last byte of a chunk (framing, not plane data). */
    im = tu_image_copy(&good);
    im.p[off] ^= 0x01;
    {
        ptwm_error rc = try_all(&im, &err);
        CHECK_MSG(rc == PTWM_ERR_CRC || rc == PTWM_ERR_CORRUPT || rc == PTWM_ERR_UNKNOWN_ID,
                  "first byte: %s", err.message);
        CHECK(strstr(err.message, "tensor 'conv2/w' chunk 3 of 10") != NULL);
    }
    free(im.p);
    im = tu_image_copy(&good);
    im.p[off + coded - 1] ^= 0x80;
    CHECK(try_all(&im, &err) != PTWM_OK);
    CHECK(strstr(err.message, "tensor 'conv2/w' chunk 3 of 10") != NULL);
    free(im.p);
    free(good.p);
}

static void test_hash_damage(void) {
    image good = tu_image_plain(make_image(0, 1)), im;
    uint8_t h[16];
    size_t at;
    ptwm_err err;
    uint64_t off = 0;
    uint32_t coded = 0;
    ptwm_xxh128_oneshot(wv[1], sizeof(wv[1]), h);
    /* Tensors of one chunk are hashed by the decoding worker, longer ones
     * in order as their chunks come back: both catch a wrong hash, and the
     * one-chunk tensor comes back zeroed from a decode of all three. */
    {
        image g1 = tu_image_plain(make_image_chunked(0, 1, 65536));
        ptwm_reader *r = NULL;
        void *dsts[3];
        size_t idx[3] = {0, 1, 2}, sizes[3], i, nonzero = 0;
        at = tu_image_find(&g1, h, 16);
        CHECK(at != 0);
        g1.p[at + 9] ^= 0x10;
        tu_image_reseal(&g1);
        CHECK_ERR(try_all(&g1, &err), &err, PTWM_ERR_HASH, "tensor 'conv2/w': payload XXH3-128 ");
        CHECK(ptwm_reader_open_memory(g1.p, g1.len, "one-chunk.ptwm", &r, &err) == PTWM_OK);
        for (i = 0; i < 3; i++) {
            sizes[i] = sizeof(wv[i]);
            dsts[i] = malloc(sizes[i]);
            memset(dsts[i], 0xAA, sizes[i]);
        }
        if (r) {
            ptwm_reader_set_threads(r, 2);
            CHECK_ERR(ptwm_reader_decode_many(r, idx, dsts, sizes, 3, &err), &err, PTWM_ERR_HASH, "conv2/w");
            for (i = 0; i < sizes[1]; i++) nonzero += ((uint8_t *)dsts[1])[i] != 0;
            CHECK_MSG(nonzero == 0, "one-chunk tensor with a wrong hash: %zu bytes handed back", nonzero);
            CHECK(memcmp(dsts[0], wv[0], sizes[0]) == 0);
        }
        ptwm_reader_close(r);
        for (i = 0; i < 3; i++) free(dsts[i]);
        free(g1.p);
    }
    at = tu_image_find(&good, h, 16);
    CHECK(at != 0);
    im = tu_image_copy(&good);
    im.p[at + 5] ^= 0x04;
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_HASH, "tensor 'conv2/w': payload XXH3-128 ");
    /* A tensor whose hash fails is not handed back: the buffer is zeroed, by
     * decode and by decode_many (which hashes chunk by chunk as they retire),
     * and the tensors beside it still decode. */
    {
        ptwm_reader *r = NULL;
        uint8_t *out = (uint8_t *)malloc(sizeof(wv[1])), *o0 = (uint8_t *)malloc(sizeof(wv[0]));
        void *dsts[2];
        size_t idx[2] = {0, 1}, sizes[2] = {sizeof(wv[0]), sizeof(wv[1])}, i, nonzero = 0;
        CHECK(ptwm_reader_open_memory(im.p, im.len, "damaged.ptwm", &r, &err) == PTWM_OK);
        if (r && out && o0) {
            memset(out, 0xAA, sizeof(wv[1]));
            CHECK_ERR(ptwm_reader_decode(r, 1, out, sizeof(wv[1]), &err), &err, PTWM_ERR_HASH, "conv2/w");
            for (i = 0; i < sizeof(wv[1]); i++) nonzero += out[i] != 0;
            CHECK_MSG(nonzero == 0, "decode: %zu bytes of a tensor whose hash failed handed back", nonzero);
            memset(out, 0xAA, sizeof(wv[1]));
            dsts[0] = o0;
            dsts[1] = out;
            CHECK_ERR(ptwm_reader_decode_many(r, idx, dsts, sizes, 2, &err), &err, PTWM_ERR_HASH, "conv2/w");
            for (i = 0, nonzero = 0; i < sizeof(wv[1]); i++) nonzero += out[i] != 0;
            CHECK_MSG(nonzero == 0, "decode_many: %zu bytes of a tensor whose hash failed handed back", nonzero);
            CHECK(memcmp(o0, wv[0], sizeof(wv[0])) == 0);
        }
        ptwm_reader_close(r);
        free(out);
        free(o0);
    }
    free(im.p);
    /* Without plane CRCs, payload damage is caught by the chunk entry's CRC. */
    tu_image_chunk_at(&good, 1, 5, &off, &coded);
    im = tu_image_copy(&good);
    im.p[off + coded / 2] ^= 0x08;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CRC, "tensor 'conv2/w' chunk 5 of 10: payload at bytes");
    free(im.p);
    free(good.p);
}

static void test_structure_damage(void) {
    image good = tu_image_plain(make_image(1, 1)), im;
    ptwm_err err;
    uint64_t toff = tu_image_table_offset(&good);
    size_t at, i;
    static const size_t cuts[] = {0, 3, 8, 20, 63, 1000, 30000};
    /* Bad magic, unknown version, unknown flags. */
    im = tu_image_copy(&good);
    im.p[1] = 'Q';
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_BAD_MAGIC, "no .ptwm magic");
    free(im.p);
    im = tu_image_copy(&good);
    ptwm_store_le32(im.p + 8, PTWM_FMT_MAX_VERSION + 1);
    {
        char msg[80];
        snprintf(msg, sizeof(msg), "format version %u (this library reads 1..%u)", PTWM_FMT_MAX_VERSION + 1,
                 PTWM_FMT_MAX_VERSION);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_VERSION, msg);
    }
    free(im.p);
    im = tu_image_copy(&good);
    im.p[12] = 1;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_UNKNOWN_ID, "unknown file flags 0x00000001");
    free(im.p);
    /* A flipped bit in the table, in the footer, in the end magic. */
    im = tu_image_copy(&good);
    im.p[toff + 7] ^= 0x20;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CRC, "tensor table CRC 0x");
    free(im.p);
    im = tu_image_copy(&good);
    im.p[im.len - PTWM_FMT_FOOT_SIZE + 3] ^= 0x01;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CRC, "footer CRC 0x");
    free(im.p);
    im = tu_image_copy(&good);
    im.p[im.len - 2] ^= 0x01;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_TRUNCATED, "no footer at the end");
    free(im.p);
    /* Truncation at several points (and one byte extra). */
    for (i = 0; i < PTWM_ARRAY_LEN(cuts); i++) {
        image t = tu_image_copy(&good);
        ptwm_error rc;
        t.len = cuts[i];
        rc = try_all(&t, &err);
        if (cuts[i] < PTWM_FMT_MAGIC_LEN) CHECK_ERR(rc, &err, PTWM_ERR_BAD_MAGIC, "not a .ptwm file");
        else CHECK_ERR(rc, &err, PTWM_ERR_TRUNCATED, "damaged.ptwm");
        free(t.p);
    }
    im = tu_image_copy(&good);
    im.len = good.len - 1;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_TRUNCATED, "no footer");
    im.len = (size_t)toff + 10;
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_TRUNCATED, "no footer");
    free(im.p);
    {
        image ext = tu_image_copy(&good);
        ext.p = (uint8_t *)realloc(ext.p, good.len + 1);
        memmove(ext.p + good.len - PTWM_FMT_FOOT_SIZE + 1, ext.p + good.len - PTWM_FMT_FOOT_SIZE,
                PTWM_FMT_FOOT_SIZE);
        ext.len++;
        CHECK_ERR(try_all(&ext, &err), &err, PTWM_ERR_TRUNCATED, "its footer says");
        free(ext.p);
    }
    /* A chunk entry pointing past the end: tensor 2, chunk 4. */
    {
        ptwm_reader *r = NULL;
        uint64_t off = 0;
        uint32_t coded = 0, raw = 0;
        uint8_t pat[16];
        CHECK(ptwm_reader_open_memory(good.p, good.len, "x", &r, &err) == PTWM_OK);
        CHECK(ptwm_reader_chunk_info(r, 2, 4, &off, &coded, &raw, NULL) == PTWM_OK);
        ptwm_reader_close(r);
        ptwm_store_le64(pat, off);
        ptwm_store_le32(pat + 8, coded);
        ptwm_store_le32(pat + 12, raw);
        at = tu_image_find(&good, pat, 16);
        CHECK(at != 0);
        im = tu_image_copy(&good);
        ptwm_store_le64(im.p + at, good.len - 10);
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT,
                  "tensor 2 'fc/bias': chunk 4 of 10: bytes");
        free(im.p);
        im = tu_image_copy(&good);
        ptwm_store_le64(im.p + at, UINT64_MAX - 5);
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "outside the data region");
        free(im.p);
        /* Into the middle of another chunk's payload (a shared payload has
         * the same offset and length; part of one is not a payload). */
        {
            ptwm_reader *r3 = NULL;
            uint64_t off3 = 0;
            uint32_t coded3 = 0;
            char msg[160];
            CHECK(ptwm_reader_open_memory(good.p, good.len, "x", &r3, &err) == PTWM_OK);
            CHECK(ptwm_reader_chunk_info(r3, 2, 3, &off3, &coded3, NULL, NULL) == PTWM_OK);
            ptwm_reader_close(r3);
            im = tu_image_copy(&good);
            ptwm_store_le64(im.p + at, off3 + 1);
            tu_image_reseal(&im);
            snprintf(msg, sizeof(msg),
                     "tensor 'fc/bias' chunk 4 (bytes %llu..%llu) overlaps tensor 'fc/bias' chunk 3",
                     (unsigned long long)off3 + 1, (unsigned long long)(off3 + 1 + coded));
            CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, msg);
            free(im.p);
        }
        im = tu_image_copy(&good);
        ptwm_store_le32(im.p + at + 12, raw + 2);
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "chunk 4 of 10: 4098 raw bytes, expected 4096");
        free(im.p);
        im = tu_image_copy(&good);
        im.p[at + 16] = 3;
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "chunk 4 of 10: chain 3 of 1");
        free(im.p);
    }
    /* Duplicate names: rename "conv2/w" to "conv1/w". */
    {
        uint8_t pat[11];
        ptwm_store_le32(pat, 7);
        memcpy(pat + 4, "conv2/w", 7);
        at = tu_image_find(&good, pat, sizeof(pat));
        CHECK(at != 0);
        im = tu_image_copy(&good);
        im.p[at + 8] = '1';
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_DUPLICATE, "tensor name 'conv1/w' appears twice");
        free(im.p);
        /* A dtype out of range and unknown tensor flags. */
        im = tu_image_copy(&good);
        im.p[at + 11] = 77;
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_DTYPE, "tensor 1 'conv2/w': unknown dtype 77");
        free(im.p);
        im = tu_image_copy(&good);
        im.p[at + 13] |= 0x80;
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_UNKNOWN_ID, "unknown tensor flags 0x83");
        free(im.p);
        /* A shape that disagrees with nbytes. */
        im = tu_image_copy(&good);
        im.p[at + 15] ^= 1;
        tu_image_reseal(&im);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_SHAPE, "shape and BF16 need");
        free(im.p);
    }
    /* Unknown section id; a huge tensor count. */
    im = tu_image_copy(&good);
    im.p[toff] = 9;
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_UNKNOWN_ID, "unknown table section id 9");
    free(im.p);
    im = tu_image_copy(&good);
    ptwm_store_le32(im.p + toff + 9, 0x7fffffff);
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_TRUNCATED, "2147483647 tensors do not fit");
    free(im.p);
    /* A table offset that does not meet the footer. */
    im = tu_image_copy(&good);
    ptwm_store_le64(im.p + im.len - PTWM_FMT_FOOT_SIZE, toff + 1);
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "does not end at the footer");
    free(im.p);
    free(good.p);
}

/* Replace the stored table (sections) by `tab`, fixing sizes and CRCs. */
static image with_table(const image *im, const uint8_t *tab, size_t n) {
    uint64_t off = tu_image_table_offset(im);
    image out;
    uint8_t *foot;
    out.len = (size_t)off + n + PTWM_FMT_FOOT_SIZE;
    out.p = (uint8_t *)malloc(out.len);
    memcpy(out.p, im->p, (size_t)off);
    memcpy(out.p + off, tab, n);
    memcpy(out.p + off + n, im->p + im->len - PTWM_FMT_FOOT_SIZE, PTWM_FMT_FOOT_SIZE);
    foot = out.p + out.len - PTWM_FMT_FOOT_SIZE;
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_SIZE, n);
    ptwm_store_le64(foot + PTWM_FOOT_FILE_SIZE, out.len);
    tu_image_reseal(&out);
    return out;
}

/* Section 4 (zstd-packed table): a bad frame, a declared size the frame does
 * not have, a size over the cap, a packed section among others or inside one. */
static void test_packed_damage(void) {
    image good = make_image(1, 1), flat = tu_image_plain(make_image(1, 1)), im;
    ptwm_err err;
    uint64_t toff = tu_image_table_offset(&good), tsize = good.len - PTWM_FMT_FOOT_SIZE - toff, raw;
    uint64_t ftab = flat.len - PTWM_FMT_FOOT_SIZE - tu_image_table_offset(&flat);
    size_t at = (size_t)toff + PTWM_FMT_SECTION_HEAD;     /* u64 raw_size, then the frame */
    char msg[200];
    CHECK(try_all(&good, &err) == PTWM_OK);
    CHECK(try_all(&flat, &err) == PTWM_OK);
    /* The entries' payload CRC32s do not compress: about 2x. */
    CHECK_MSG(tsize * 3 < ftab * 2, "packed table %llu bytes, plain %llu", (unsigned long long)tsize,
              (unsigned long long)ftab);
    raw = ptwm_load_le64(good.p + at);
    CHECK(raw == ftab);
    /* Not a zstd frame (magic damaged); a frame of another size than declared. */
    im = tu_image_copy(&good);
    im.p[at + 8] ^= 0x01;
    tu_image_reseal(&im);
    snprintf(msg, sizeof(msg), "file 'damaged.ptwm': packed table: %llu zstd bytes are not one frame of exactly the declared %llu bytes",
             (unsigned long long)(tsize - 17), (unsigned long long)raw);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, msg);
    free(im.p);
    im = tu_image_copy(&good);
    ptwm_store_le64(im.p + at, raw - 1);
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "are not one frame of exactly the declared");
    free(im.p);
    /* The frame cut short by one byte (section and table one byte shorter). */
    {
        uint8_t *t = (uint8_t *)malloc((size_t)tsize);
        memcpy(t, good.p + toff, (size_t)tsize - 1);
        ptwm_store_le64(t + 1, tsize - PTWM_FMT_SECTION_HEAD - 1);
        im = with_table(&good, t, (size_t)tsize - 1);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "are not one frame of exactly the declared");
        free(im.p);
        free(t);
    }
    /* Declared sizes over the cap (64 x stored bytes) and under one section. */
    im = tu_image_copy(&good);
    ptwm_store_le64(im.p + at, tsize * PTWM_FMT_PACK_RATIO + 1);
    tu_image_reseal(&im);
    snprintf(msg, sizeof(msg), "file 'damaged.ptwm': packed table declares %llu raw bytes, more than the limit %llu (64 x %llu stored",
             (unsigned long long)(tsize * 64 + 1), (unsigned long long)(tsize * 64), (unsigned long long)tsize);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, msg);
    ptwm_store_le64(im.p + at, UINT64_MAX);
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "declares 18446744073709551615 raw bytes, more than the limit");
    ptwm_store_le64(im.p + at, 3);
    tu_image_reseal(&im);
    CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "declares 3 raw bytes, less than one section");
    free(im.p);
    /* A packed section followed by another, or after another; one inside one. */
    {
        uint8_t *t = (uint8_t *)malloc((size_t)tsize + 64), *z;
        size_t zcap = ptwm_zstd_bound((size_t)tsize) + 64, zlen = 0;
        memcpy(t, good.p + toff, (size_t)tsize);
        t[tsize] = PTWM_SEC_METADATA;
        ptwm_store_le64(t + tsize + 1, 4);
        ptwm_store_le32(t + tsize + 9, 0);
        im = with_table(&good, t, (size_t)tsize + 13);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT,
                  "file 'damaged.ptwm': a packed table section that is not the whole table");
        free(im.p);
        memcpy(t, t + tsize, 13);
        memcpy(t + 13, good.p + toff, (size_t)tsize);
        im = with_table(&good, t, (size_t)tsize + 13);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "a packed table section that is not the whole table");
        free(im.p);
        /* Pack the packed table once more. */
        z = (uint8_t *)malloc(zcap);
        z[0] = PTWM_SEC_PACKED;
        CHECK(ptwm_zstd_encode(NULL, good.p + toff, (size_t)tsize, 3, z + 17, zcap - 17, &zlen) == PTWM_OK);
        ptwm_store_le64(z + 1, 8 + zlen);
        ptwm_store_le64(z + 9, tsize);
        im = with_table(&good, z, zlen + 17);
        CHECK_ERR(try_all(&im, &err), &err, PTWM_ERR_CORRUPT, "a packed table section that is not the whole table");
        free(im.p);
        free(z);
        free(t);
    }
    free(flat.p);
    free(good.p);
    /* A table that zstd cannot shrink (its bulk a name of random bytes) is
     * stored plain. */
    {
        uint16_t v[4] = {1, 2, 3, 4}, back[4];
        uint64_t shape[1] = {4}, state = 5;
        char name[1001];
        ptwm_tensor_desc d = {name, PTWM_DTYPE_BF16, 1, shape, v, sizeof(v)};
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_reader *r = NULL;
        void *blob = NULL;
        size_t len = 0, i;
        for (i = 0; i < 1000; i++) name[i] = (char)(1 + tu_rand(&state) % 255);
        name[1000] = 0;
        CHECK(ptwm_compress_blob(&d, 1, NULL, &p, &blob, &len, &err) == PTWM_OK);
        im.p = (uint8_t *)blob;
        im.len = len;
        CHECK_MSG(blob && im.p[tu_image_table_offset(&im)] == PTWM_SEC_TENSORS, "tiny table stored as section %u",
                  blob ? im.p[tu_image_table_offset(&im)] : 0);
        CHECK(ptwm_reader_open_memory(blob, len, "tiny", &r, &err) == PTWM_OK);
        CHECK(r && ptwm_reader_decode(r, 0, back, sizeof(back), &err) == PTWM_OK && memcmp(v, back, 8) == 0);
        ptwm_reader_close(r);
        free(blob);
    }
}

/* The file reader sees the same damage through pread. */
static void test_file_damage(void) {
    image good = make_image(1, 1);
    char path[1024];
    ptwm_reader *r = NULL;
    ptwm_err err;
    uint64_t off = 0;
    uint32_t coded = 0;
    tu_image_chunk_at(&good, 0, 9, &off, &coded);
    good.p[off + coded / 2] ^= 0x40;
    snprintf(path, sizeof(path), "%s/damaged.ptwm", tu_tmpdir());
    CHECK(tu_write_file(path, good.p, good.len) == 0);
    CHECK(ptwm_reader_open(path, &r, &err) == PTWM_OK);
    if (r) {
        CHECK_ERR(ptwm_reader_verify(r, &err), &err, PTWM_ERR_CRC, "tensor 'conv1/w' chunk 9 of 10");
        snprintf(path, sizeof(path), "%s/out.safetensors", tu_tmpdir());
        CHECK_ERR(ptwm_reader_write_safetensors(r, path, &err), &err, PTWM_ERR_CRC, "chunk 9 of 10");
        {
            FILE *f = fopen(path, "rb");   /* a failed rebuild leaves no file behind */
            CHECK(f == NULL);
            if (f) fclose(f);
        }
        ptwm_reader_close(r);
    }
    CHECK_ERR(ptwm_reader_open("/nonexistent/x.ptwm", &r, &err), &err, PTWM_ERR_NOT_FOUND, "x.ptwm");
    free(good.p);
}

/* ---- golden files -------------------------------------------------------- */

static const char *golden_dir(void) {
    static char buf[1024];
    const char *src = getenv("PTWM_SOURCE_DIR");
    snprintf(buf, sizeof(buf), "%s/tests/golden", src ? src : "..");
    return buf;
}

/* With PTWM_GOLDEN_WRITE=1 (once per format version, by hand): write the
 * golden files of this version (committed; once released, never rewritten).
 * The damaged copies were made once, from version 1: damage is found the
 * same way in every version. */
static void golden_write(void) {
    static const int methods[2] = {PTWM_METHOD_MICROSCALE, PTWM_METHOD_HUFFMAN};
    char path[1200];
    int i;
    for (i = 0; i < 2; i++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_err err;
        p.method = methods[i];
        p.chunk_size = 65536;
        snprintf(path, sizeof(path), "%s/emotion.bf16.%s.v%u.ptwm", golden_dir(), ptwm_method_name(methods[i]),
                 PTWM_FMT_VERSION);
        CHECK_MSG(ptwm_compress_safetensors(tu_corpus_path("emotion.bf16.safetensors"), path, &p, &err) == PTWM_OK,
                  "%s", err.message);
    }
    /* From version 3: real pruned weights (signed zeros), chunks of 8 KiB. */
    if (PTWM_FMT_VERSION >= 3) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_err err;
        char src[1200];
        p.chunk_size = 8192;
        snprintf(src, sizeof(src), "%s/pruned.f16.safetensors", golden_dir());
        snprintf(path, sizeof(path), "%s/pruned.f16.microscale.v%u.ptwm", golden_dir(), PTWM_FMT_VERSION);
        CHECK_MSG(ptwm_compress_safetensors(src, path, &p, &err) == PTWM_OK, "%s", err.message);
    }
    /* From version 7: the emotion file in chunks of 1 MiB, whose tensor of
     * 64K elements has a rANS plane in two streams (the version this file
     * must have; its other files stay version 5). */
    {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_err err;
        size_t len = 0;
        uint8_t *img;
        snprintf(path, sizeof(path), "%s/emotion.bf16.microscale.v%u.ptwm", golden_dir(), PTWM_FMT_X2_VERSION);
        CHECK_MSG(ptwm_compress_safetensors(tu_corpus_path("emotion.bf16.safetensors"), path, &p, &err) == PTWM_OK,
                  "%s", err.message);
        img = tu_read_file(path, &len);
        CHECK(img && len > 16 && ptwm_load_le32(img + 8) == PTWM_FMT_X2_VERSION);
        free(img);
    }
    /* From version 8: one real tensor of 256K elements (faceres-deep's
     * feats/kernel, BF16), whose rANS plane is four streams. */
    {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_err err;
        size_t len = 0;
        uint8_t *img;
        char src[1200];
        snprintf(src, sizeof(src), "%s/feats.bf16.safetensors", golden_dir());
        snprintf(path, sizeof(path), "%s/feats.bf16.microscale.v%u.ptwm", golden_dir(), PTWM_FMT_X4_VERSION);
        CHECK_MSG(ptwm_compress_safetensors(src, path, &p, &err) == PTWM_OK, "%s", err.message);
        img = tu_read_file(path, &len);
        CHECK(img && len > 16 && ptwm_load_le32(img + 8) == PTWM_FMT_X4_VERSION);
        free(img);
    }
    /* Damaged copies of the first: a flipped bit in the middle of the
     * second chunk of the tensor with the most chunks, and a truncation. */
    if (PTWM_FMT_VERSION == 1) {
        image im;
        ptwm_reader *r = NULL;
        ptwm_err err;
        size_t t, best = 0;
        uint64_t n, most = 0, off = 0;
        uint32_t coded = 0;
        ptwm_tensor_info info;
        snprintf(path, sizeof(path), "%s/emotion.bf16.microscale.v1.ptwm", golden_dir());
        im.p = tu_read_file(path, &im.len);
        CHECK(im.p && ptwm_reader_open_memory(im.p, im.len, "g", &r, &err) == PTWM_OK);
        if (!r) return;
        for (t = 0; t < ptwm_reader_count(r); t++)
            if (ptwm_reader_chunk_info(r, t, 0, NULL, NULL, NULL, &n) == PTWM_OK && n > most) {
                most = n;
                best = t;
            }
        CHECK(ptwm_reader_chunk_info(r, best, 1, &off, &coded, NULL, &n) == PTWM_OK);
        ptwm_reader_tensor(r, best, &info, NULL);
        printf("crcflip: tensor '%s' chunk 1 of %llu\n", info.name, (unsigned long long)n);
        ptwm_reader_close(r);
        im.p[off + coded / 2] ^= 0x04;
        snprintf(path, sizeof(path), "%s/emotion.bf16.microscale.v1.crcflip.ptwm", golden_dir());
        CHECK(tu_write_file(path, im.p, im.len) == 0);
        snprintf(path, sizeof(path), "%s/emotion.bf16.microscale.v1.truncated.ptwm", golden_dir());
        CHECK(tu_write_file(path, im.p, im.len / 2) == 0);
        free(im.p);
    }
}

static void golden_check_line(const char *file, const char *expect, const char *detail) {
    char path[1200];
    size_t len = 0;
    uint8_t *img;
    ptwm_reader *r = NULL;
    ptwm_err err;
    ptwm_error rc;
    snprintf(path, sizeof(path), "%s/%s", golden_dir(), file);
    img = tu_read_file(path, &len);
    CHECK_MSG(img != NULL, "golden file %s missing", path);
    if (!img) return;
    rc = ptwm_reader_open_memory(img, len, file, &r, &err);
    if (!rc) rc = ptwm_reader_verify(r, &err);
    if (strcmp(expect, "ok") == 0) {
        char out[1200];
        size_t ol = 0, sl = 0;
        uint8_t *a, *b;
        CHECK_MSG(rc == PTWM_OK, "golden %s: %s", file, err.message);
        snprintf(out, sizeof(out), "%s/golden.out", tu_tmpdir());
        if (!rc) {
            rc = ptwm_reader_write_safetensors(r, out, &err);
            CHECK_MSG(rc == PTWM_OK, "golden %s: %s", file, err.message);
        }
        a = tu_read_file(out, &ol);
        /* a source kept beside the golden files, else a corpus file */
        snprintf(path, sizeof(path), "%s/%s", golden_dir(), detail);
        b = tu_read_file(path, &sl);
        if (!b) b = tu_read_file(tu_corpus_path(detail), &sl);
        CHECK_MSG(a && b && ol == sl && memcmp(a, b, ol) == 0, "golden %s does not rebuild %s", file, detail);
        free(a);
        free(b);
    } else {
        CHECK_MSG(rc != PTWM_OK && strcmp(ptwm_error_name(rc), expect) == 0 && strstr(err.message, detail),
                  "golden %s: expected %s \"%s\", got %s \"%s\"", file, expect, detail, ptwm_error_name(rc),
                  rc ? err.message : "");
    }
    ptwm_reader_close(r);
    free(img);
}

/* MANIFEST: one file a line, "name<TAB>ok<TAB>file it rebuilds" (in the
 * golden directory, else the corpus) or
 * "name<TAB>PTWM_ERR_X<TAB>message substring"; '#' starts a comment. */
static void test_golden(void) {
    char path[1200];
    size_t len = 0, lines = 0;
    char *text, *line, *save = NULL;
    snprintf(path, sizeof(path), "%s/MANIFEST", golden_dir());
    text = (char *)tu_read_file(path, &len);
    CHECK_MSG(text != NULL, "no %s", path);
    if (!text) return;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f1, *f2, *f3, *s2 = NULL;
        if (line[0] == '#' || !line[0]) continue;
        f1 = strtok_r(line, "\t", &s2);
        f2 = strtok_r(NULL, "\t", &s2);
        f3 = strtok_r(NULL, "", &s2);
        CHECK_MSG(f1 && f2 && f3, "bad MANIFEST line");
        if (f1 && f2 && f3) golden_check_line(f1, f2, f3);
        lines++;
    }
    CHECK(lines >= 3);
    free(text);
}

/* Chunks of a golden file whose payload (p, coded bytes, raw bytes) passes
 * `has`, given `arg`. */
typedef int (*chunk_test)(const uint8_t *p, uint32_t coded, uint32_t raw, unsigned arg);

static size_t golden_chunks(const char *file, chunk_test has, unsigned arg) {
    char path[1200];
    size_t len = 0, t, found = 0;
    uint8_t *img;
    ptwm_reader *r = NULL;
    ptwm_err err;
    snprintf(path, sizeof(path), "%s/%s", golden_dir(), file);
    img = tu_read_file(path, &len);
    CHECK_MSG(img && ptwm_reader_open_memory(img, len, "g", &r, &err) == PTWM_OK, "%s", path);
    for (t = 0; r && t < ptwm_reader_count(r); t++) {
        uint64_t k, n = 0, off = 0;
        uint32_t coded = 0, raw = 0;
        CHECK(ptwm_reader_chunk_info(r, t, 0, NULL, NULL, NULL, &n) == PTWM_OK);
        for (k = 0; k < n; k++)
            if (ptwm_reader_chunk_info(r, t, k, &off, &coded, &raw, NULL) == PTWM_OK && coded &&
                has(img + off, coded, raw, arg))
                found++;
    }
    ptwm_reader_close(r);
    free(img);
    return found;
}

static int has_flag(const uint8_t *p, uint32_t coded, uint32_t raw, unsigned bit) {
    (void)coded, (void)raw;
    return (p[0] & bit) != 0;
}

static int has_stage(const uint8_t *p, uint32_t coded, uint32_t raw, unsigned id) {
    ptwm_chunk_head h;
    return ptwm_chunk_head_parse(5, NULL, p, coded, raw, &h, NULL) == PTWM_OK &&
           ptwm_chunk_layout_has(&h.L, id, NULL);
}

/* Golden files that hold chunks with a flag bit of a later version (the
 * version 2 file: column-relative chunks, bit 5; the version 3 pruned file:
 * signed zeros, bit 6), or, from version 5, a stage (the emotion file:
 * column scales; the pruned file: sparse elements), so reading them back is
 * part of the golden check. */
static void test_golden_flag(const char *file, unsigned bit) {
    CHECK_MSG(golden_chunks(file, has_flag, bit) > 0, "%s: no chunk with flag 0x%02x", file, bit);
}

static void test_golden_stage(const char *file, unsigned id) {
    CHECK_MSG(golden_chunks(file, has_stage, id) > 0, "%s: no chunk with stage %u", file, id);
}

/* A chunk with a rANS plane in more streams than a file of `version` may
 * hold (two before version 7, four before 8): read as one, it is refused. */
static int has_streams(const uint8_t *p, uint32_t coded, uint32_t raw, unsigned version) {
    uint8_t *out;
    ptwm_err err;
    uint8_t chain[PTWM_CHAIN_MAX_BYTES];
    size_t clen = 0;
    char msg[64];
    if (ptwm_chunk_min_version(p, coded, raw) <= version) return 0;
    snprintf(msg, sizeof(msg), "streams in a version %u file", version);
    out = malloc(raw + 1);
    CHECK(out && ptwm_chain_standard(PTWM_DTYPE_BF16, PTWM_METHOD_MICROSCALE, chain, sizeof(chain),
                                     &clen, NULL) == PTWM_OK);
    if (out)
        CHECK_ERR(ptwm_chunk_decode_version(NULL, version, chain, clen, PTWM_DTYPE_BF16, p, coded, out,
                                            raw, &err),
                  &err, PTWM_ERR_CORRUPT, msg);
    free(out);
    return 1;
}

/* The writer writes version 8 only where a chunk has a rANS plane in four
 * streams (from 128K symbols), 7 where in two (from 32K): a 256K-element
 * tensor in chunks of 1 MiB (8) and of 128 KiB (7), the emotion file in
 * chunks of 1 MiB (7: its 64K-element tensor), not in chunks of 32 KiB,
 * which stays version 5 for older readers. Head and foot agree. */
static void test_written_version(void) {
    static const struct {
        const char *file;
        uint64_t chunk;
        uint32_t version;
    } cases[] = {{"feats", 1 << 20, PTWM_FMT_X4_VERSION},
                 {"feats", 1 << 17, PTWM_FMT_X2_VERSION},
                 {"emotion", 1 << 20, PTWM_FMT_X2_VERSION},
                 {"emotion", 32768, 5}};
    size_t i, len;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_err err;
        const char *path = tu_tmp_path("version.ptwm");
        uint8_t *img;
        char src[1200];
        p.chunk_size = cases[i].chunk;
        if (cases[i].file[0] == 'f')
            snprintf(src, sizeof(src), "%s/feats.bf16.safetensors", golden_dir());
        else
            snprintf(src, sizeof(src), "%s", tu_corpus_path("emotion.bf16.safetensors"));
        CHECK_MSG(ptwm_compress_safetensors(src, path, &p, &err) == PTWM_OK, "%s", err.message);
        img = tu_read_file(path, &len);
        CHECK_MSG(img && len > 64 && ptwm_load_le32(img + 8) == cases[i].version &&
                      ptwm_load_le32(img + len - PTWM_FMT_FOOT_SIZE + 20) == cases[i].version,
                  "%s, chunks of %llu: head version %u, foot %u, want %u", cases[i].file,
                  (unsigned long long)cases[i].chunk,
                  img ? ptwm_load_le32(img + 8) : 0, img ? ptwm_load_le32(img + len - PTWM_FMT_FOOT_SIZE + 20) : 0,
                  cases[i].version);
        free(img);
    }
}

#define FEATS_BYTES ((size_t)1024 * 256 * 2)

/* A file held to an older version (ptwm_cparams.format_version): the
 * 256K-element tensor at most 7 is version 7, at 6 or 5 version 5 (no base:
 * the oldest that holds it), and each decodes to the same bytes; versions
 * this library does not write, and 5 with a base, are refused. */
static void test_format_cap(void) {
    static const struct {
        uint64_t cap;
        uint32_t version;
    } cases[] = {{0, PTWM_FMT_X4_VERSION}, {8, PTWM_FMT_X4_VERSION}, {7, PTWM_FMT_X2_VERSION},
                 {6, 5},
                 {5, 5}};
    char src[1200];
    size_t i, len, slen = 0;
    ptwm_err err;
    uint8_t *file, *got = (uint8_t *)malloc(FEATS_BYTES);
    snprintf(src, sizeof(src), "%s/feats.bf16.safetensors", golden_dir());
    file = tu_read_file(src, &slen);
    CHECK(file && got && slen > FEATS_BYTES);
    if (!file || !got || slen <= FEATS_BYTES) return;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        const char *path = tu_tmp_path("cap.ptwm");
        ptwm_reader *r = NULL;
        uint8_t *img;
        p.format_version = cases[i].cap;
        CHECK_MSG(ptwm_compress_safetensors(src, path, &p, &err) == PTWM_OK, "%s", err.message);
        img = tu_read_file(path, &len);
        CHECK_MSG(img && len > 64 && ptwm_load_le32(img + 8) == cases[i].version,
                  "at most version %llu: version %u, want %u", (unsigned long long)cases[i].cap,
                  img ? ptwm_load_le32(img + 8) : 0, cases[i].version);
        /* the tensor's bytes end the source file */
        memset(got, 0, FEATS_BYTES);
        CHECK_MSG(img && ptwm_reader_open_memory(img, len, "cap", &r, &err) == PTWM_OK &&
                      ptwm_reader_decode(r, 0, got, FEATS_BYTES, &err) == PTWM_OK &&
                      memcmp(got, file + slen - FEATS_BYTES, FEATS_BYTES) == 0,
                  "at most version %llu: does not decode to the tensor", (unsigned long long)cases[i].cap);
        ptwm_reader_close(r);
        free(img);
    }
    free(file);
    free(got);
    {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_source *base = NULL;
        p.format_version = 4;
        CHECK_ERR(ptwm_compress_safetensors(src, tu_tmp_path("cap4.ptwm"), &p, &err), &err,
                  PTWM_ERR_INVALID_ARG, "format version 4: this library writes 5..8");
        p.format_version = 9;
        CHECK_ERR(ptwm_compress_safetensors(src, tu_tmp_path("cap9.ptwm"), &p, &err), &err,
                  PTWM_ERR_INVALID_ARG, "format version 9");
        CHECK(ptwm_source_open(src, PTWM_SOURCE_AUTO, &base, &err) == PTWM_OK);
        p.format_version = 5;
        p.base = base;
        CHECK_ERR(ptwm_compress_safetensors(src, tu_tmp_path("cap5b.ptwm"), &p, &err), &err,
                  PTWM_ERR_INVALID_ARG, "cannot hold tensors coded against a base");
        ptwm_source_close(base);
    }
}

/* The version 7 and 8 golden files have their versions and such chunks. */
static void test_golden_streams(const char *file, unsigned version) {
    char path[1200];
    size_t len = 0;
    uint8_t *img;
    snprintf(path, sizeof(path), "%s/%s", golden_dir(), file);
    img = tu_read_file(path, &len);
    CHECK_MSG(img && len > 16 && ptwm_load_le32(img + 8) == version, "%s: not version %u", file,
              version);
    free(img);
    CHECK_MSG(golden_chunks(file, has_streams, version - 1) > 0,
              "%s: no chunk with a rANS plane in %s streams", file, version == 7 ? "two" : "four");
}

/* A version 3 file written with neither plane CRCs nor payload hashes has
 * nothing to check its tensors against; a file with either, and every file
 * of version 4 (its chunk entries carry payload CRCs), has no such tensor. */
static void test_unchecked(void) {
    static const struct {
        const char *file;
        size_t unchecked;
    } cases[] = {{"emotion.bf16.microscale.v3.nocheck.ptwm", 21},
                 {"emotion.bf16.microscale.v3.ptwm", 0},
                 {"emotion.bf16.microscale.v4.ptwm", 0},
                 {"emotion.bf16.microscale.v5.ptwm", 0}};
    image bare = make_image(0, 0);
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i;
    char path[1200];
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", golden_dir(), cases[i].file);
        CHECK_MSG(ptwm_reader_open(path, &r, &err) == PTWM_OK, "%s", path);
        CHECK_MSG(ptwm_reader_unchecked_count(r) == cases[i].unchecked, "%s: %zu unchecked",
                  cases[i].file, ptwm_reader_unchecked_count(r));
        ptwm_reader_close(r);
        r = NULL;
    }
    CHECK(ptwm_reader_open_memory(bare.p, bare.len, "bare.ptwm", &r, &err) == PTWM_OK);
    CHECK(ptwm_reader_unchecked_count(r) == 0);
    ptwm_reader_close(r);
    free(bare.p);
}

int main(void) {
    if (!tu_corpus_dir()) {
        fprintf(stderr, "corpus not found (set PTWM_CORPUS)\n");
        return 1;
    }
    if (getenv("PTWM_GOLDEN_WRITE")) golden_write();
    test_golden_flag("emotion.bf16.microscale.v2.ptwm", 0x20);
    test_golden_flag("pruned.f16.microscale.v3.ptwm", 0x40);
    test_golden_stage("emotion.bf16.microscale.v5.ptwm", PTWM_CSTAGE_COLS);
    test_golden_stage("pruned.f16.microscale.v5.ptwm", PTWM_CSTAGE_SPARSE);
    test_golden_streams("emotion.bf16.microscale.v7.ptwm", PTWM_FMT_X2_VERSION);
    test_golden_streams("feats.bf16.microscale.v8.ptwm", PTWM_FMT_X4_VERSION);
    test_written_version();
    test_format_cap();
    test_payload_damage();
    test_hash_damage();
    test_structure_damage();
    test_packed_damage();
    test_file_damage();
    test_golden();
    test_unchecked();
    return tu_finish("test_container_damage");
}
