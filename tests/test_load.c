/* Layout loads: values equal to the file's bytes (F32 copied, BF16/F16
 * widened), identical arrays from every source kind, layer-by-layer loads
 * equal to the whole load, JSON layouts, and each layout error with its
 * message. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

static float *load_all(ptwm_source *s, ptwm_layout *l, uint64_t *count) {
    size_t n;
    const ptwm_layout_entry *e = ptwm_layout_entries(l, &n);
    ptwm_err err;
    float *a;
    ptwm_error rc = ptwm_layout_elements(e, n, count, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    a = (float *)malloc(*count * 4 + 4);
    if (!a) return NULL;
    rc = ptwm_load_layout(s, e, n, PTWM_CONVERT_FLOAT, a, *count, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    return a;
}

/* Every element of a loaded array against the source's raw bytes, converted
 * here one value at a time. */
static void check_values(ptwm_source *s, ptwm_layout *l, const float *a) {
    size_t n, i, bad = 0;
    uint64_t pos = 0, k;
    const ptwm_layout_entry *e = ptwm_layout_entries(l, &n);
    for (i = 0; i < n; i++) {
        size_t idx;
        ptwm_tensor_info ti;
        ptwm_err err;
        uint8_t *raw;
        ptwm_error rc = ptwm_source_find(s, e[i].name, &idx, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        ptwm_source_tensor(s, idx, &ti, NULL);
        raw = (uint8_t *)malloc(ti.nbytes + 1);
        rc = ptwm_source_read(s, idx, 0, raw, (size_t)ti.nbytes, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        for (k = 0; k < ti.nbytes / (ptwm_dtype_bits(ti.dtype) / 8); k++) {
            uint32_t got, want;
            memcpy(&got, &a[pos + k], 4);
            if (ti.dtype == PTWM_DTYPE_F32) {
                memcpy(&want, raw + 4 * k, 4);
            } else {
                uint16_t h;
                float f;
                memcpy(&h, raw + 2 * k, 2);
                if (ti.dtype == PTWM_DTYPE_BF16) ptwm_bf16_to_f32(&h, &f, 1);
                else ptwm_f16_to_f32(&h, &f, 1);
                memcpy(&want, &f, 4);
            }
            if (got != want) bad++;
        }
        pos += ti.nbytes / (ptwm_dtype_bits(ti.dtype) / 8);
        free(raw);
    }
    CHECK_MSG(bad == 0, "%zu values differ from the file's bytes in %s", bad, ptwm_source_path(s));
}

static float *load_path(const char *path, ptwm_source_kind kind, ptwm_layout *l,
                        ptwm_source_kind expect, uint64_t *count) {
    ptwm_source *s = NULL;
    ptwm_err err;
    float *a;
    ptwm_error rc = ptwm_source_open(path, kind, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return NULL;
    CHECK_MSG(ptwm_source_get_kind(s) == expect, "%s opened as %s", path,
              ptwm_source_kind_name(ptwm_source_get_kind(s)));
    ptwm_source_set_threads(s, 2);
    a = load_all(s, l, count);
    ptwm_source_close(s);
    return a;
}

static void test_layers(const char *path);

/* The same corpus file through every source kind: identical arrays. */
static void test_kinds(const char *name) {
    char stdir[600], ptfile[600], ptdir[600];
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    ptwm_error rc;
    uint64_t n0 = 0, n1 = 0;
    float *ref, *got;
    const char *path = tu_corpus_path(name);

    rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    CHECK(ptwm_source_get_kind(s) == PTWM_SOURCE_SAFETENSORS);
    rc = ptwm_layout_from_source(s, &l, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    /* load in name order, not file order, so order really comes from the layout */
    ptwm_layout_sort_by_name(l);
    ref = load_all(s, l, &n0);
    check_values(s, l, ref);
    ptwm_source_close(s);

    /* Hugging Face directory, several shards */
    snprintf(stdir, sizeof(stdir), "%s/%s.hf", tu_tmpdir(), name);
    {
        ptwm_st *st = NULL;
        ptwm_tensor_desc *d;
        size_t i, cnt;
        rc = ptwm_st_open(path, PTWM_OPEN_MMAP, &st, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        cnt = ptwm_st_count(st);
        d = (ptwm_tensor_desc *)calloc(cnt, sizeof(*d));
        for (i = 0; i < cnt; i++) {
            ptwm_tensor_info ti;
            ptwm_st_tensor(st, i, &ti, NULL);
            d[i].name = ti.name;
            d[i].dtype = ti.dtype;
            d[i].ndim = ti.ndim;
            d[i].shape = ti.shape;
            d[i].data = ti.data;
            d[i].nbytes = ti.nbytes;
        }
        rc = ptwm_stdir_write(stdir, d, cnt, NULL, 0, ptwm_st_file_size(st) / 3, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        free(d);
        ptwm_st_close(st);
    }
    got = load_path(stdir, PTWM_SOURCE_AUTO, l, PTWM_SOURCE_SAFETENSORS_DIR, &n1);
    CHECK(got && n1 == n0 && memcmp(got, ref, n0 * 4) == 0);
    free(got);

    /* one .ptwm file */
    snprintf(ptfile, sizeof(ptfile), "%s/%s.ptwm", tu_tmpdir(), name);
    {
        ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
        cp.threads = 2;
        cp.chunk_size = 64 << 10;  /* many chunks per tensor: loads cross chunk edges */
        rc = ptwm_compress_safetensors(path, ptfile, &cp, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
    }
    got = load_path(ptfile, PTWM_SOURCE_AUTO, l, PTWM_SOURCE_PTWM, &n1);
    CHECK(got && n1 == n0 && memcmp(got, ref, n0 * 4) == 0);
    free(got);
    test_layers(ptfile);  /* per-layer loads decode only their own chunks */

    /* a sharded .ptwm directory */
    snprintf(ptdir, sizeof(ptdir), "%s/%s.ptdir", tu_tmpdir(), name);
    {
        ptwm_checkpoint_options opt = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
        opt.threads = 2;
        opt.max_shard_size = n0;  /* about 4 shards for F32, 2 for 16-bit dtypes */
        rc = ptwm_compress_checkpoint(stdir, ptdir, &opt, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
    }
    got = load_path(ptdir, PTWM_SOURCE_AUTO, l, PTWM_SOURCE_PTWM_DIR, &n1);
    CHECK(got && n1 == n0 && memcmp(got, ref, n0 * 4) == 0);
    free(got);

    free(ref);
    ptwm_layout_free(l);
}

/* Per-layer loads (groups of a name-sorted layout) equal slices of the whole. */
static void test_layers(const char *path) {
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    ptwm_error rc;
    uint64_t total = 0, pos = 0;
    size_t n, start, end, layers = 0;
    const ptwm_layout_entry *e;
    float *whole;

    rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    ptwm_layout_from_source(s, &l, &err);
    ptwm_layout_sort_by_name(l);
    e = ptwm_layout_entries(l, &n);
    whole = load_all(s, l, &total);
    for (start = 0; start < n; start = end) {
        uint64_t cnt;
        float *part;
        end = ptwm_layout_group_end(e, n, start, 0);
        CHECK(end > start);
        if (end <= start) break;
        ptwm_layout_elements(e + start, end - start, &cnt, &err);
        part = (float *)malloc(cnt * 4 + 4);
        rc = ptwm_load_layout(s, e + start, end - start, PTWM_CONVERT_FLOAT, part, cnt, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        CHECK(memcmp(part, whole + pos, cnt * 4) == 0);
        pos += cnt;
        layers++;
        free(part);
    }
    CHECK(pos == total);
    CHECK_MSG(layers > 1 && layers < n, "%zu layers from %zu tensors", layers, n);
    /* a piece of one tensor, across a 16 MiB-piece-free boundary */
    if (n) {
        uint64_t cnt = 1;
        uint32_t d;
        float *buf;
        for (d = 0; d < e[n - 1].ndim; d++) cnt *= e[n - 1].shape[d];
        buf = (float *)malloc(cnt * 4 + 4);
        rc = ptwm_load_tensor_part(s, &e[n - 1], PTWM_CONVERT_FLOAT, cnt / 3, buf, cnt - cnt / 3,
                                   &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        CHECK(memcmp(buf, whole + total - (cnt - cnt / 3), (cnt - cnt / 3) * 4) == 0);
        rc = ptwm_load_tensor_part(s, &e[n - 1], PTWM_CONVERT_FLOAT, cnt / 3, buf, cnt, &err);
        CHECK_ERR(rc, &err, PTWM_ERR_INVALID_ARG, "outside its");
        free(buf);
    }
    free(whole);
    ptwm_layout_free(l);
    ptwm_source_close(s);
}

static void test_errors(void) {
    ptwm_source *s = NULL;
    ptwm_err err;
    ptwm_error rc;
    float buf[64];
    static const uint64_t sh_ok[] = {3, 3, 1, 32}, sh_bad[] = {32, 1, 3, 3}, sh_bias[] = {32};
    ptwm_layout_entry e[2];
    const char *w = "StatefulPartitionedCall/model_1/conv2d_1/Conv2D_weights";
    const char *b = "StatefulPartitionedCall/model_1/conv2d_1/Conv2D_bn_offset";
    float *big = (float *)malloc(400 * 4);

    rc = ptwm_source_open(tu_corpus_path("emotion.f32.safetensors"), PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    e[0].name = w;
    e[0].ndim = 4;
    e[0].shape = sh_ok;
    e[1].name = b;
    e[1].ndim = 1;
    e[1].shape = sh_bias;
    rc = ptwm_load_layout(s, e, 2, PTWM_CONVERT_FLOAT, big, 320, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    rc = ptwm_load_layout(s, e, 2, PTWM_CONVERT_FLOAT, big, 319, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "layout needs 320 floats, array has 319");
    rc = ptwm_load_layout(s, e, 2, PTWM_CONVERT_FLOAT, big, 321, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "layout needs 320 floats, array has 321");
    e[0].shape = sh_bad;
    rc = ptwm_load_layout(s, e, 2, PTWM_CONVERT_FLOAT, big, 320, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH,
              "tensor 'StatefulPartitionedCall/model_1/conv2d_1/Conv2D_weights': shape [3, 3, 1, 32] in");
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "layout expects [32, 1, 3, 3]");
    e[0].ndim = 3;
    e[0].shape = sh_ok;
    rc = ptwm_load_layout(s, e, 1, PTWM_CONVERT_FLOAT, big, 9, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "shape [3, 3, 1, 32] in");
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "layout expects [3, 3, 1]");
    e[0].ndim = 4;
    e[1].name = "fc.w";
    rc = ptwm_load_layout(s, e, 2, PTWM_CONVERT_FLOAT, big, 320, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_NOT_FOUND, "tensor 'fc.w' not in safetensors '");
    ptwm_source_close(s);

    /* dtypes: U8 needs PTWM_CONVERT_INT; F64 needs F64_ROUND */
    rc = ptwm_source_open(tu_corpus_path("handtrack.u8.safetensors"), PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (!rc) {
        ptwm_tensor_info ti;
        ptwm_layout_entry one;
        uint8_t raw[64];
        size_t i, idx = 0;
        for (i = 0; i < ptwm_source_count(s); i++) {
            ptwm_source_tensor(s, i, &ti, NULL);
            if (ti.dtype == PTWM_DTYPE_U8 && ti.nbytes <= 64 && ti.nbytes > 0) break;
        }
        CHECK(i < ptwm_source_count(s));
        if (i < ptwm_source_count(s)) {
            idx = i;
            one.name = ti.name;
            one.ndim = ti.ndim;
            one.shape = ti.shape;
            rc = ptwm_load_layout(s, &one, 1, PTWM_CONVERT_FLOAT, buf, ti.nbytes, &err);
            CHECK_ERR(rc, &err, PTWM_ERR_DTYPE, "dtype U8 in");
            CHECK_ERR(rc, &err, PTWM_ERR_DTYPE, "without PTWM_CONVERT_INT");
            rc = ptwm_load_layout(s, &one, 1, PTWM_CONVERT_F64_ROUND, buf, ti.nbytes, &err);
            CHECK_ERR(rc, &err, PTWM_ERR_DTYPE, "without PTWM_CONVERT_INT");
            rc = ptwm_load_layout(s, &one, 1, PTWM_CONVERT_INT, buf, ti.nbytes, &err);
            CHECK_ERR(rc, &err, PTWM_OK, NULL);
            ptwm_source_read(s, idx, 0, raw, (size_t)ti.nbytes, &err);
            for (i = 0; i < ti.nbytes; i++)
                if (buf[i] != (float)raw[i]) break;
            CHECK(i == ti.nbytes);
        }
        ptwm_source_close(s);
    }
    {
        char path[600];
        static const uint64_t sh4[] = {4};
        static const double dv[4] = {1.0, -2.5, 1e300, 0.1};
        static const int32_t iv[4] = {-7, 0, 16777217, 2147483647};
        static const uint16_t hv[4] = {0x3c00, 0x0001, 0x7c00, 0xfe01};
        ptwm_tensor_desc d[3] = {{"d", PTWM_DTYPE_F64, 1, sh4, dv, 32},
                                 {"i", PTWM_DTYPE_I32, 1, sh4, iv, 16},
                                 {"h", PTWM_DTYPE_F16, 1, sh4, hv, 8}};
        ptwm_layout_entry le[3] = {{"d", 1, sh4}, {"i", 1, sh4}, {"h", 1, sh4}};
        uint32_t bits;
        snprintf(path, sizeof(path), "%s/dtypes.safetensors", tu_tmpdir());
        rc = ptwm_st_write(path, d, 3, NULL, 0, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        if (!rc) {
            rc = ptwm_load_layout(s, le, 1, PTWM_CONVERT_FLOAT, buf, 4, &err);
            CHECK_ERR(rc, &err, PTWM_ERR_DTYPE, "tensor 'd': dtype F64 in");
            CHECK_ERR(rc, &err, PTWM_ERR_DTYPE, "without PTWM_CONVERT_F64_ROUND");
            rc = ptwm_load_layout(s, le, 2, PTWM_CONVERT_F64_ROUND, buf, 8, &err);
            CHECK_ERR(rc, &err, PTWM_ERR_DTYPE, "tensor 'i': dtype I32");
            rc = ptwm_load_layout(s, le, 3, PTWM_CONVERT_INT, buf, 12, &err);
            CHECK_ERR(rc, &err, PTWM_OK, NULL);
            CHECK(buf[0] == 1.0f && buf[1] == -2.5f && buf[2] == (float)1e300 && buf[3] == 0.1f);
            CHECK(buf[4] == -7.0f && buf[5] == 0.0f && buf[6] == 16777216.0f &&
                  buf[7] == 2147483648.0f);
            CHECK(buf[8] == 1.0f && buf[9] == 0x1p-24f && buf[10] == (float)1e300);
            memcpy(&bits, &buf[11], 4);
            CHECK(bits == 0xffc02000u);  /* F16 NaN: sign, quiet bit and payload kept */
            ptwm_source_close(s);
        }
    }
    free(big);
}

static void put_le64(uint8_t *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static ptwm_error parse_json(const char *text, const char *label, ptwm_layout **out,
                             ptwm_err *err) {
    return ptwm_layout_parse_json(text, strlen(text), label, out, err);
}

/* PREAD-mode sources load the same values as mapped ones, and a 16-bit
 * tensor at an odd file offset (an unpadded header) loads through the
 * staging path with the same values. */
static void test_pread_and_misaligned(void) {
    const char *name = tu_corpus_path("handlandmark-full.f16.safetensors");
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    ptwm_error rc;
    uint64_t n0 = 0, n1 = 0;
    float *a, *b;
    char path[600];
    uint8_t file[256];
    static const char hdr[] = "{\"x\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                              "\"y\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[6,10]}}";
    static const uint16_t vals[5] = {0x3c00, 0x7c01, 0x0001, 0x3f80, 0xc000};
    size_t hl = strlen(hdr);
    float got[5];
    uint32_t bits[5];
    static const uint64_t sh3[] = {3}, sh2[] = {2};
    ptwm_layout_entry le[2] = {{"x", 1, sh3}, {"y", 1, sh2}};

    rc = ptwm_source_open(name, PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    ptwm_layout_from_source(s, &l, &err);
    a = load_all(s, l, &n0);
    ptwm_source_close(s);
    rc = ptwm_source_open_mode(name, PTWM_SOURCE_AUTO, PTWM_OPEN_PREAD, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (!rc) {
        b = load_all(s, l, &n1);
        CHECK(a && b && n0 == n1 && memcmp(a, b, n0 * 4) == 0);
        free(b);
        ptwm_source_close(s);
    }
    free(a);
    ptwm_layout_free(l);

    CHECK(hl % 2 == 1);  /* 8 + odd length: the data starts at an odd offset */
    put_le64(file, hl);
    memcpy(file + 8, hdr, hl);
    memcpy(file + 8 + hl, vals, sizeof(vals));
    snprintf(path, sizeof(path), "%s/odd.safetensors", tu_tmpdir());
    CHECK(tu_write_file(path, file, 8 + hl + sizeof(vals)) == 0);
    rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    rc = ptwm_load_layout(s, le, 2, PTWM_CONVERT_FLOAT, got, 5, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    memcpy(bits, got, sizeof(bits));
    CHECK(bits[0] == 0x3f800000u && bits[1] == 0x7f802000u && bits[2] == 0x33800000u);
    CHECK(bits[3] == 0x3f800000u && bits[4] == 0xc0000000u);
    ptwm_source_close(s);
}

/* A PREAD source whose file shrinks after it opened: the load fails with
 * PTWM_ERR_TRUNCATED and a message of the form "tensor 'w': file 'x': ..."
 * (one separator, not "tensor 'w': : "). */
static void test_truncated_source_message(void) {
    static const uint8_t bytes[16] = {0};
    static const uint64_t sh[] = {4};
    ptwm_tensor_desc t = {"w", PTWM_DTYPE_F32, 1, sh, bytes, 16};
    ptwm_layout_entry le = {"w", 1, sh};
    ptwm_source *s = NULL;
    ptwm_err err;
    float got[4];
    char path[600];
    ptwm_error rc;
    snprintf(path, sizeof(path), "%s/shrinks.safetensors", tu_tmpdir());
    CHECK_ERR(ptwm_st_write(path, &t, 1, NULL, 0, &err), &err, PTWM_OK, NULL);
    rc = ptwm_source_open_mode(path, PTWM_SOURCE_AUTO, PTWM_OPEN_PREAD, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    CHECK(truncate(path, 8) == 0);
    rc = ptwm_load_layout(s, &le, 1, PTWM_CONVERT_FLOAT, got, 4, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_TRUNCATED, "tensor 'w': ");
    CHECK_MSG(strstr(err.message, ": : ") == NULL, "doubled separator: %s", err.message);
    ptwm_source_close(s);
}

/* Layer keys: depth 0 is the name up to its last separator, depth k its first
 * k components. */
static void test_groups(void) {
    static const uint64_t one[] = {1};
    static const ptwm_layout_entry e[] = {
        {"model.embed_tokens.weight", 1, one},      {"model.layers.0.mlp.down_proj.weight", 1, one},
        {"model.layers.0.mlp.up_proj.weight", 1, one}, {"model.layers.0.self_attn.q_proj.weight", 1, one},
        {"model.layers.1.mlp.down_proj.weight", 1, one}, {"model.layers.10.mlp.up_proj.weight", 1, one},
        {"model.norm.weight", 1, one},              {"lm_head", 1, one}};
    size_t n = sizeof(e) / sizeof(e[0]);
    CHECK(ptwm_layout_group_end(e, n, 0, 3) == 1);
    CHECK(ptwm_layout_group_end(e, n, 1, 3) == 4);   /* model.layers.0 */
    CHECK(ptwm_layout_group_end(e, n, 4, 3) == 5);   /* model.layers.1, not .10 */
    CHECK(ptwm_layout_group_end(e, n, 5, 3) == 6);
    CHECK(ptwm_layout_group_end(e, n, 1, 4) == 3);   /* model.layers.0.mlp */
    CHECK(ptwm_layout_group_end(e, n, 1, 0) == 2);   /* up to the last '.': one tensor each */
    CHECK(ptwm_layout_group_end(e, n, 6, 3) == 7);   /* fewer components: the whole name */
    CHECK(ptwm_layout_group_end(e, n, 7, 0) == 8);
    CHECK(ptwm_layout_group_end(e, n, 8, 0) == 8);
}

static void test_raw_and_json(void) {
    char path[600], dir[600];
    float vals[100], got[100];
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    ptwm_error rc;
    size_t i, n;
    const ptwm_layout_entry *e;
    static const char good[] = "[{\"name\": \"a\", \"shape\": [6, 10]}, "
                               "{\"name\": \"b\", \"shape\": [4, 10]}]";

    for (i = 0; i < 100; i++) vals[i] = (float)i / 7.0f;
    snprintf(path, sizeof(path), "%s/params.f32", tu_tmpdir());
    CHECK(tu_write_file(path, vals, sizeof(vals)) == 0);
    /* auto never takes a raw file for one: it is not valid safetensors */
    rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err);
    CHECK(rc != PTWM_OK);
    rc = ptwm_source_open(path, PTWM_SOURCE_RAW_F32, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (!rc) {
        rc = ptwm_layout_parse_json(good, strlen(good), "good", &l, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        e = ptwm_layout_entries(l, &n);
        CHECK(n == 2 && e[0].ndim == 2 && e[0].shape[0] == 6 && e[1].shape[1] == 10);
        /* a raw file is the layout's tensors back to back; names are not in it */
        rc = ptwm_load_layout(s, e, n, PTWM_CONVERT_FLOAT, got, 100, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        CHECK(memcmp(got, vals, sizeof(vals)) == 0);
        rc = ptwm_load_layout(s, e, 1, PTWM_CONVERT_FLOAT, got, 60, &err);
        CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "has 400 bytes, layout needs 240 (60 floats)");
        {
            /* the one tensor "" takes any shape of as many values */
            static const uint64_t sh[] = {25, 4};
            ptwm_layout_entry whole = {"", 2, sh};
            memset(got, 0, sizeof(got));
            rc = ptwm_load_tensor_part(s, &whole, PTWM_CONVERT_FLOAT, 10, got, 90, &err);
            CHECK_ERR(rc, &err, PTWM_OK, NULL);
            CHECK(memcmp(got, vals + 10, 90 * 4) == 0);
        }
        ptwm_layout_free(l);
        ptwm_source_close(s);
    }
    tu_write_file(path, vals, 399);
    rc = ptwm_source_open(path, PTWM_SOURCE_RAW_F32, &s, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_SHAPE, "has 399 bytes, not a whole number of F32 values");

    rc = parse_json("[{\"name\": \"a\"}]", "x.json", &l, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_SCHEMA, "layout 'x.json': entry 0 needs");
    rc = parse_json("[{\"name\": \"a\", \"shape\": [2, -1]}]", "x.json", &l, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_SCHEMA, "tensor 'a': dimension 1 is not a non-negative integer, got -1");
    rc = parse_json("[{\"name\": \"a\", \"shape\": [], \"dtype\": \"F32\"}]",
                                "x.json", &l, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_SCHEMA, "unknown key 'dtype'");
    rc = parse_json("{\"name\": 1}", "x.json", &l, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_SCHEMA, "not a JSON list");
    rc = parse_json("[{", "x.json", &l, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_JSON, "layout 'x.json'");
    rc = parse_json("[{\"name\": \"a\", \"shape\": [4294967296, 4294967296]}]", "x.json", &l, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_SHAPE, "overflows");

    snprintf(dir, sizeof(dir), "%s/emptydir", tu_tmpdir());
    CHECK(system("true") == 0);
    {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
        CHECK(system(cmd) == 0);
    }
    rc = ptwm_source_open(dir, PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_NOT_FOUND, "holds none of model.ptwm.index.json");
}

/* ptwm export: a BF16 file's tensors in a chosen order as raw F32 equal the
 * layout load; --dtype bf16 gives back the file's own BF16 bytes. */
static void test_export(void) {
    const char *bin = getenv("PTWM_BIN");
    char layout_path[600], out[600], out16[600], cmd[3000];
    static const char layout_json[] =
        "[{\"name\": \"StatefulPartitionedCall/model_1/conv2d_2/Conv2D_weights\", "
        "\"shape\": [3, 3, 32, 64]},\n"
        " {\"name\": \"StatefulPartitionedCall/model_1/conv2d_1/Conv2D_bn_offset\", \"shape\": [32]}]";
    const char *src = tu_corpus_path("emotion.bf16.safetensors");
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    size_t n, len = 0, len16 = 0;
    const ptwm_layout_entry *e;
    float want[18464];
    uint16_t want16[18464];
    uint8_t *got, *got16;
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    if (!bin) return;
    snprintf(layout_path, sizeof(layout_path), "%s/export.json", tu_tmpdir());
    snprintf(out, sizeof(out), "%s/export.f32", tu_tmpdir());
    snprintf(out16, sizeof(out16), "%s/export.bf16", tu_tmpdir());
    CHECK(tu_write_file(layout_path, layout_json, strlen(layout_json)) == 0);
    snprintf(cmd, sizeof(cmd), "'%s' export '%s' --layout '%s' -o '%s' > /dev/null", bin, src,
             layout_path, out);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof(cmd), "'%s' export '%s' --layout '%s' -o '%s' --dtype bf16 > /dev/null",
             bin, src, layout_path, out16);
    CHECK(system(cmd) == 0);
    /* an existing output is kept unless --force */
    snprintf(cmd, sizeof(cmd), "'%s' export '%s' --layout '%s' -o '%s' 2> /dev/null", bin, src,
             layout_path, out);
    CHECK(system(cmd) != 0);
    CHECK(ptwm_source_open(src, PTWM_SOURCE_AUTO, &s, &err) == PTWM_OK);
    CHECK(ptwm_layout_parse_json(layout_json, strlen(layout_json), "export", &l, &err) == PTWM_OK);
    if (!s || !l) return;
    e = ptwm_layout_entries(l, &n);
    CHECK_ERR(ptwm_load_layout(s, e, n, PTWM_CONVERT_FLOAT, want, 18464, &err), &err, PTWM_OK, NULL);
    ptwm_f32_to_bf16(want, want16, 18464);
    got = tu_read_file(out, &len);
    got16 = tu_read_file(out16, &len16);
    CHECK(got && len == sizeof(want) && memcmp(got, want, len) == 0);
    CHECK(got16 && len16 == sizeof(want16) && memcmp(got16, want16, len16) == 0);
    free(got);
    free(got16);
    ptwm_layout_free(l);
    ptwm_source_close(s);
}

int main(void) {
    static const char *const kinds[] = {"emotion.f32.safetensors", "emotion.bf16.safetensors",
                                        "handlandmark-full.f16.safetensors"};
    size_t i;
    CHECK(tu_corpus_dir() != NULL);
    if (!tu_corpus_dir()) return tu_finish("test_load");
    test_errors();
    test_raw_and_json();
    test_layers(tu_corpus_path("emotion.f32.safetensors"));
    test_layers(tu_corpus_path("handlandmark-full.f16.safetensors"));
    test_groups();
    test_pread_and_misaligned();
    test_truncated_source_message();
    test_export();
    for (i = 0; i < 3; i++) test_kinds(kinds[i]);
    return tu_finish("test_load");
}
