/* Tensors coded against a base (docs/DELTA.md): a fine-tune-like set of
 * tensors compressed with a base source, decoded with safetensors and .ptwm
 * bases byte for byte (whole, by range, one chunk), never larger than
 * without the base, and every base error with its code and message: no base,
 * a base lacking the tensor or of another shape, a different base (.ptwm:
 * hash; safetensors: chunk CRC), a damaged base. */
#include <stdlib.h>
#include <string.h>
#include "hash.h"
#include "image.h"
#include "testutil.h"

/* (chunks of 32 KiB: their planes stay one rANS stream, so the file without
 * a base is version 5) */
enum { NW = 300 * 256, NF = 40000, NU = 5000, NM = 20000, NE = 64, CHUNK = 32768 };

typedef struct set {
    uint16_t w[NW];   /* BF16 [300, 256] */
    float f[NF];      /* F32 [40000] */
    uint8_t u[NU];    /* U8 [5000] */
    float m[NM];      /* F32 [20000]: unrelated to the base's (optimizer state) */
    uint16_t e[NE];   /* BF16 [64]: the fine-tune's own, or [8, 8] in "reshaped" */
} set;

static uint32_t rng = 1;
static uint32_t next(void) {
    rng ^= rng << 13; /* xorshift32: every bit varies (an LCG's low bits repeat) */
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng >> 8;
}
/* A weight-like float: sign, exponent near 2^-6, random mantissa. */
static float weight(void) {
    uint32_t b = (next() & 1u) << 31 | (uint32_t)(118 + next() % 6) << 23 | (next() & 0x7fffffu);
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void make_base(set *s, uint32_t seed) {
    size_t i;
    rng = seed;
    for (i = 0; i < NW; i++) {
        float f = weight();
        uint32_t b;
        memcpy(&b, &f, 4);
        s->w[i] = (uint16_t)(b >> 16);
    }
    for (i = 0; i < NF; i++) s->f[i] = weight();
    for (i = 0; i < NU; i++) s->u[i] = (uint8_t)next();
    for (i = 0; i < NM; i++) s->m[i] = weight();
    for (i = 0; i < NE; i++) s->e[i] = (uint16_t)next();
}

/* The fine-tune: one weight in 8 moved by an ulp or two, F32 in its low
 * bits, bytes by small steps; the optimizer state anew. */
static void make_tuned(set *t, const set *b) {
    size_t i;
    *t = *b;
    rng = 777;
    for (i = 0; i < NW; i++)
        if (next() % 8 == 0) t->w[i] = (uint16_t)(t->w[i] + (next() % 2 ? 1 : -1));
    for (i = 0; i < NF; i++) {
        uint32_t x;
        memcpy(&x, &t->f[i], 4);
        x += next() % 512 - 256;
        memcpy(&t->f[i], &x, 4);
    }
    for (i = 0; i < NU; i++)
        if (next() % 4 == 0) t->u[i] = (uint8_t)(t->u[i] + 1);
    for (i = 0; i < NM; i++) t->m[i] = weight();
}

static const uint64_t shp_w[2] = {300, 256}, shp_f[1] = {NF}, shp_u[1] = {NU}, shp_m[1] = {NM},
                      shp_e[1] = {NE}, shp_e2[2] = {8, 8};

/* The tensors of s; `reshaped`: "e" as [8, 8] instead of [64]; `lack`:
 * without "u". Returns the count. */
static size_t descs(const set *s, ptwm_tensor_desc *d, int reshaped, int lack) {
    size_t n = 0;
    d[n++] = (ptwm_tensor_desc){"layer.w", PTWM_DTYPE_BF16, 2, shp_w, s->w, sizeof(s->w)};
    d[n++] = (ptwm_tensor_desc){"layer.f", PTWM_DTYPE_F32, 1, shp_f, s->f, sizeof(s->f)};
    if (!lack) d[n++] = (ptwm_tensor_desc){"layer.u", PTWM_DTYPE_U8, 1, shp_u, s->u, sizeof(s->u)};
    d[n++] = (ptwm_tensor_desc){"adam.m", PTWM_DTYPE_F32, 1, shp_m, s->m, sizeof(s->m)};
    d[n++] = (ptwm_tensor_desc){"e", PTWM_DTYPE_BF16, reshaped ? 2 : 1, reshaped ? shp_e2 : shp_e,
                                s->e, sizeof(s->e)};
    return n;
}

static ptwm_source *open_src(const char *path) {
    ptwm_source *s = NULL;
    ptwm_err err;
    CHECK_MSG(ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err) == PTWM_OK, "%s: %s", path,
              err.message);
    return s;
}

/* Compress `tuned` (with `base` or none) into a blob. */
static void *compress(const set *tuned, ptwm_source *base, size_t *len) {
    ptwm_tensor_desc d[5];
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    void *out = NULL;
    size_t n = descs(tuned, d, 0, 0);
    p.chunk_size = CHUNK;
    p.threads = 2;
    p.base = base;
    CHECK_MSG(ptwm_compress_blob(d, n, NULL, &p, &out, len, &err) == PTWM_OK, "%s", err.message);
    return out;
}

/* Every tensor of r decodes to the bytes of `want`. */
static void check_decodes(ptwm_reader *r, const set *want, const char *what) {
    ptwm_tensor_desc d[5];
    size_t n = descs(want, d, 0, 0), i, idx;
    ptwm_err err;
    for (i = 0; i < n; i++) {
        uint8_t *buf = (uint8_t *)malloc(d[i].nbytes);
        CHECK(ptwm_reader_find(r, d[i].name, &idx, &err) == PTWM_OK);
        CHECK_MSG(ptwm_reader_decode(r, idx, buf, d[i].nbytes, &err) == PTWM_OK, "%s: %s: %s",
                  what, d[i].name, err.message);
        CHECK_MSG(memcmp(buf, d[i].data, d[i].nbytes) == 0, "%s: %s differs", what, d[i].name);
        free(buf);
    }
}

/* Tensor `name` decodes to want[0..n). */
static void check_one(ptwm_reader *r, const char *name, const void *want, size_t n) {
    size_t idx;
    ptwm_err err;
    uint8_t *buf = (uint8_t *)malloc(n);
    CHECK(ptwm_reader_find(r, name, &idx, &err) == PTWM_OK);
    CHECK_MSG(ptwm_reader_decode(r, idx, buf, n, &err) == PTWM_OK, "%s: %s", name, err.message);
    CHECK(memcmp(buf, want, n) == 0);
    free(buf);
}

/* Decoding tensor `name` fails with code and a message holding `msg`. */
static void check_fails(ptwm_reader *r, const char *name, ptwm_error code, const char *msg) {
    size_t idx;
    ptwm_tensor_info info;
    ptwm_err err;
    uint8_t *buf;
    CHECK(ptwm_reader_find(r, name, &idx, &err) == PTWM_OK);
    ptwm_reader_tensor(r, idx, &info, &err);
    buf = (uint8_t *)malloc(info.nbytes);
    CHECK_ERR(ptwm_reader_decode(r, idx, buf, info.nbytes, &err), &err, code, msg);
    free(buf);
}

/* The table's fields of a tensor coded against a base, damaged one at a
 * time (the table stored plain, CRCs resealed so the parser sees them). */
static void test_hostile_table(const void *blob, size_t len, ptwm_source *st) {
    tu_image good = {(uint8_t *)malloc(len), len}, im;
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t at, entry;
    uint16_t chain_len;
    memcpy(good.p, blob, len);
    good = tu_image_plain(good);
    at = tu_image_find(&good, "layer.w", 7);
    CHECK(at != 0);
    if (!at) return;
    /* name, dtype ndim flags nchains, shape (2 dims), nbytes, chunk_size, chain */
    at += 7 + 4 + 16 + 16;
    chain_len = (uint16_t)(good.p[at] | good.p[at + 1] << 8);
    entry = at + 2 + chain_len + 16 + 16 + 8; /* payload hash, base hash, nchunks */
    CHECK(good.p[at - 7 - 4 - 16 - 16 + 7 + 2] == 7);   /* flags: hash, plane CRCs, base */
    CHECK(good.p[entry + 21] == 1);                    /* chunk 0 coded against the base */
    /* A version 5 file may not carry the flag. */
    im = tu_image_copy(&good);
    im.p[8] = 5;
    im.p[im.len - 48 + 20] = 5;
    tu_image_reseal(&im);
    CHECK_ERR(ptwm_reader_open_memory(im.p, im.len, "v5", &r, &err), &err, PTWM_ERR_UNKNOWN_ID,
              "tensor 0 'layer.w': unknown tensor flags 0x07");
    free(im.p);
    /* The base flag is 0 or 1; its CRC is 0 without it. */
    im = tu_image_copy(&good);
    im.p[entry + 21] = 2;
    tu_image_reseal(&im);
    CHECK_ERR(ptwm_reader_open_memory(im.p, im.len, "b", &r, &err), &err, PTWM_ERR_CORRUPT,
              "chunk 0 of 5: base flag 2 with base CRC32");
    im.p[entry + 21] = 0;
    tu_image_reseal(&im);
    CHECK_ERR(ptwm_reader_open_memory(im.p, im.len, "b", &r, &err), &err, PTWM_ERR_CORRUPT,
              "(0 or 1; the CRC 0 without the base)");
    free(im.p);
    /* A base CRC that is not the base chunk's: the base is taken as damaged. */
    im = tu_image_copy(&good);
    im.p[entry + 22] ^= 1;
    tu_image_reseal(&im);
    CHECK(ptwm_reader_open_memory(im.p, im.len, "c", &r, &err) == PTWM_OK);
    if (r) {
        CHECK(ptwm_reader_set_base(r, st, &err) == PTWM_OK);
        check_fails(r, "layer.w", PTWM_ERR_BASE_CRC, "chunk 0 of 5: the base");
        ptwm_reader_close(r);
    }
    free(im.p);
    free(good.p);
}

int main(void) {
    static set base, tuned, other;
    ptwm_tensor_desc d[5];
    ptwm_source *st, *pt, *src_other, *src_lack, *src_reshaped, *src_damaged, *pt_damaged;
    ptwm_reader *r = NULL, *plain_r = NULL;
    ptwm_err err;
    size_t len, plain_len, n, i, idx;
    void *blob, *plain;
    char msg[256], hex[33];
    uint8_t h[16];
    uint64_t nbased;

    make_base(&base, 1);
    make_tuned(&tuned, &base);
    make_base(&other, 2);
    /* Bases: safetensors and .ptwm of the same tensors; a different base; one
     * lacking a tensor; one with a tensor of another shape. */
    n = descs(&base, d, 0, 0);
    CHECK(ptwm_st_write(tu_tmp_path("base.safetensors"), d, n, NULL, 0, &err) == PTWM_OK);
    {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        p.chunk_size = CHUNK;
        CHECK(ptwm_compress_file(tu_tmp_path("base.ptwm"), d, n, NULL, &p, &err) == PTWM_OK);
        n = descs(&other, d, 0, 0);
        CHECK(ptwm_compress_file(tu_tmp_path("other.ptwm"), d, n, NULL, &p, &err) == PTWM_OK);
    }
    n = descs(&base, d, 0, 1);
    CHECK(ptwm_st_write(tu_tmp_path("lack.safetensors"), d, n, NULL, 0, &err) == PTWM_OK);
    n = descs(&base, d, 1, 0);
    CHECK(ptwm_st_write(tu_tmp_path("reshaped.safetensors"), d, n, NULL, 0, &err) == PTWM_OK);
    st = open_src(tu_tmp_path("base.safetensors"));
    pt = open_src(tu_tmp_path("base.ptwm"));
    src_other = open_src(tu_tmp_path("other.ptwm"));
    src_lack = open_src(tu_tmp_path("lack.safetensors"));
    src_reshaped = open_src(tu_tmp_path("reshaped.safetensors"));
    if (!st || !pt || !src_other || !src_lack || !src_reshaped) return tu_finish("test_base");

    /* The same file from either form of the base. */
    blob = compress(&tuned, st, &len);
    {
        size_t len2;
        void *blob2 = compress(&tuned, pt, &len2);
        CHECK(len2 == len && memcmp(blob, blob2, len) == 0);
        ptwm_free(blob2);
    }
    plain = compress(&tuned, NULL, &plain_len);
    CHECK(ptwm_reader_open_memory(blob, len, "tuned.ptwm", &r, &err) == PTWM_OK);
    CHECK(ptwm_reader_open_memory(plain, plain_len, "plain.ptwm", &plain_r, &err) == PTWM_OK);
    if (!r || !plain_r) return tu_finish("test_base");
    CHECK(blob && ((const uint8_t *)blob)[8] == 6 && ((const uint8_t *)plain)[8] == 5);
    /* A base that matches no tensor: the file without a base, byte for byte
     * (version 5, readable where version 6 is not). */
    {
        static const uint64_t one[1] = {4};
        static const float x[4] = {1, 2, 3, 4};
        ptwm_tensor_desc u = {"unrelated", PTWM_DTYPE_F32, 1, one, x, sizeof(x)};
        ptwm_source *none;
        size_t none_len = 0;
        void *none_blob;
        CHECK(ptwm_st_write(tu_tmp_path("none.safetensors"), &u, 1, NULL, 0, &err) == PTWM_OK);
        none = open_src(tu_tmp_path("none.safetensors"));
        none_blob = none ? compress(&tuned, none, &none_len) : NULL;
        CHECK_MSG(none_blob && none_len == plain_len && !memcmp(none_blob, plain, plain_len),
                  "a base matching nothing changed the file (%zu bytes, %zu without a base)",
                  none_len, plain_len);
        ptwm_free(none_blob);
        ptwm_source_close(none);
    }
    printf("with the base %zu bytes, without %zu\n", len, plain_len);
    CHECK(len * 2 < plain_len);
    /* Per tensor: never larger than without the base beyond the hashes; the
     * weights coded against it, the optimizer state not; "e" has no base
     * tensor of its shape in "reshaped" but does in the base. */
    for (i = 0; i < ptwm_reader_count(r); i++) {
        ptwm_tensor_info a, b;
        ptwm_reader_tensor(r, i, &a, &err);
        ptwm_reader_tensor(plain_r, i, &b, &err);
        CHECK_MSG(a.coded_bytes <= b.coded_bytes, "%s: %llu bytes with the base, %llu without",
                  a.name, (unsigned long long)a.coded_bytes, (unsigned long long)b.coded_bytes);
        /* the optimizer state is written as without a base: no chunk gained */
        CHECK(ptwm_reader_tensor_base(r, i, h, &nbased) == (strcmp(a.name, "adam.m") != 0));
        if (!strcmp(a.name, "layer.w")) CHECK(nbased == 5);
        CHECK(ptwm_reader_tensor_base(plain_r, i, h, &nbased) == 0);
    }

    test_hostile_table(blob, len, st);

    /* No base: every tensor that needs it fails, naming it and the hash. */
    CHECK(ptwm_reader_find(r, "layer.w", &idx, &err) == PTWM_OK);
    ptwm_reader_tensor_base(r, idx, h, NULL);
    snprintf(msg, sizeof(msg),
             "tensor 'layer.w' chunk 0 of 5: coded against a base tensor of XXH3-128 %s, and no "
             "base was given",
             ptwm_hex128(h, hex));
    check_fails(r, "layer.w", PTWM_ERR_BASE_MISSING, msg);
    check_fails(r, "layer.u", PTWM_ERR_BASE_MISSING, "tensor 'layer.u'");
    check_one(r, "adam.m", tuned.m, sizeof(tuned.m)); /* needs no base */

    /* A safetensors base and a .ptwm base: byte for byte, and by range. */
    CHECK(ptwm_reader_set_base(r, st, &err) == PTWM_OK);
    check_decodes(r, &tuned, "safetensors base");
    CHECK(ptwm_reader_set_base(r, pt, &err) == PTWM_OK);
    check_decodes(r, &tuned, ".ptwm base");
    {
        /* One chunk in the middle, alone (random access reads one base chunk). */
        uint8_t part[1000];
        CHECK(ptwm_reader_find(r, "layer.w", &idx, &err) == PTWM_OK);
        CHECK(ptwm_reader_decode_range(r, idx, CHUNK + 100, part, sizeof(part), &err) == PTWM_OK);
        CHECK(memcmp(part, (const uint8_t *)tuned.w + CHUNK + 100, sizeof(part)) == 0);
    }

    /* A different base: the .ptwm's recorded hash tells before any chunk is
     * read; a safetensors base by the chunk's CRC. */
    CHECK(ptwm_reader_set_base(r, src_other, &err) == PTWM_OK);
    check_fails(r, "layer.w", PTWM_ERR_BASE_HASH, "a different base");
    check_fails(r, "layer.f", PTWM_ERR_BASE_HASH, "holds one of XXH3-128");
    n = descs(&other, d, 0, 0);
    CHECK(ptwm_st_write(tu_tmp_path("other.safetensors"), d, n, NULL, 0, &err) == PTWM_OK);
    {
        ptwm_source *o = open_src(tu_tmp_path("other.safetensors"));
        CHECK(ptwm_reader_set_base(r, o, &err) == PTWM_OK);
        check_fails(r, "layer.w", PTWM_ERR_BASE_CRC, "this chunk was coded against CRC32");
        ptwm_reader_set_base(r, NULL, &err);
        ptwm_source_close(o);
    }
    /* A base without the tensor, or with it in another shape. */
    CHECK(ptwm_reader_set_base(r, src_lack, &err) == PTWM_OK);
    check_fails(r, "layer.u", PTWM_ERR_BASE_MISMATCH, "has no tensor of this name");
    check_one(r, "layer.w", tuned.w, sizeof(tuned.w));
    CHECK(ptwm_reader_set_base(r, src_reshaped, &err) == PTWM_OK);
    check_fails(r, "e", PTWM_ERR_BASE_MISMATCH, "holds one of another dtype or shape");

    /* A damaged base: a safetensors base with one byte changed fails that
     * chunk's base CRC; a .ptwm base fails its own payload CRC. */
    {
        size_t flen;
        uint8_t *f = tu_read_file(tu_tmp_path("base.safetensors"), &flen);
        f[flen - sizeof(base.e) - sizeof(base.m) - sizeof(base.u) - 10] ^= 1;
        tu_write_file(tu_tmp_path("damaged.safetensors"), f, flen);
        free(f);
        f = tu_read_file(tu_tmp_path("base.ptwm"), &flen);
        f[200] ^= 1; /* inside layer.w's first payload */
        tu_write_file(tu_tmp_path("damaged.ptwm"), f, flen);
        free(f);
        src_damaged = open_src(tu_tmp_path("damaged.safetensors"));
        pt_damaged = open_src(tu_tmp_path("damaged.ptwm"));
        CHECK(ptwm_reader_set_base(r, src_damaged, &err) == PTWM_OK);
        check_fails(r, "layer.f", PTWM_ERR_BASE_CRC, "chunk 4 of 5: the base");
        check_one(r, "layer.w", tuned.w, sizeof(tuned.w)); /* its base bytes are intact */
        CHECK(ptwm_reader_set_base(r, pt_damaged, &err) == PTWM_OK);
        check_fails(r, "layer.w", PTWM_ERR_CRC, "its base");
        ptwm_reader_set_base(r, NULL, &err);
        ptwm_source_close(src_damaged);
        ptwm_source_close(pt_damaged);
    }

    ptwm_reader_close(r);
    ptwm_reader_close(plain_r);
    ptwm_free(blob);
    ptwm_free(plain);
    ptwm_source_close(st);
    ptwm_source_close(pt);
    ptwm_source_close(src_other);
    ptwm_source_close(src_lack);
    ptwm_source_close(src_reshaped);
    return tu_finish("test_base");
}
