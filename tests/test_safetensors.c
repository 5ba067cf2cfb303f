/* Safetensors reader and writer: corpus round trips (byte-identical), every
 * dtype, scalars and zero-size tensors, metadata escaping, writer input
 * validation, accessor bounds, atomic replacement. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common.h"
#include "testutil.h"

static void check_same_tensors(const ptwm_st *a, const ptwm_st *b) {
    size_t i, n = ptwm_st_count(a);
    CHECK(ptwm_st_count(b) == n);
    for (i = 0; i < n && i < ptwm_st_count(b); i++) {
        ptwm_tensor_info x, y;
        CHECK(ptwm_st_tensor(a, i, &x, NULL) == PTWM_OK);
        CHECK(ptwm_st_tensor(b, i, &y, NULL) == PTWM_OK);
        CHECK(strcmp(x.name, y.name) == 0);
        CHECK(x.dtype == y.dtype && x.ndim == y.ndim && x.nbytes == y.nbytes);
        CHECK(memcmp(x.shape, y.shape, x.ndim * sizeof(uint64_t)) == 0);
        if (x.data && y.data) CHECK(memcmp(x.data, y.data, x.nbytes) == 0);
    }
}

/* Open a corpus file both ways, compare, write it back, compare bytes. */
static void corpus_round_trip(const char *name) {
    const char *path = tu_corpus_path(name);
    ptwm_st *m = NULL, *p = NULL, *back = NULL;
    ptwm_err err = {0};
    ptwm_tensor_desc *desc;
    ptwm_kv *meta;
    size_t i, n, nm, orig_len = 0, back_len = 0, hlen, bhlen;
    uint8_t *orig, *copy, *tmp;
    void *hdr = NULL;
    char out[1024];

    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_MMAP, &m, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_PREAD, &p, &err), &err, PTWM_OK, NULL);
    if (!m || !p) goto done;
    n = ptwm_st_count(m);
    CHECK(n > 0);
    check_same_tensors(m, p);
    nm = ptwm_st_metadata_count(m);
    CHECK(nm == ptwm_st_metadata_count(p));

    desc = calloc(n + 1, sizeof(*desc));
    meta = calloc(nm + 1, sizeof(*meta));
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t, tp;
        size_t idx = (size_t)-1;
        CHECK(ptwm_st_tensor(m, i, &t, NULL) == PTWM_OK);
        CHECK(ptwm_st_tensor(p, i, &tp, NULL) == PTWM_OK);
        CHECK(t.data != NULL && tp.data == NULL);
        CHECK(ptwm_st_find(m, t.name, &idx, NULL) == PTWM_OK && idx == i);
        if (i) CHECK(ptwm_st_file_offset(m, i) == ptwm_st_file_offset(m, i - 1) + desc[i - 1].nbytes);
        /* pread mode returns the same bytes as the mapping */
        tmp = malloc(t.nbytes + 1);
        CHECK_ERR(ptwm_st_read(p, i, 0, tmp, (size_t)t.nbytes, &err), &err, PTWM_OK, NULL);
        CHECK(memcmp(tmp, t.data, t.nbytes) == 0);
        free(tmp);
        desc[i].name = t.name;
        desc[i].dtype = t.dtype;
        desc[i].ndim = t.ndim;
        desc[i].shape = t.shape;
        desc[i].data = t.data;
        desc[i].nbytes = t.nbytes;
    }
    for (i = 0; i < nm; i++) meta[i] = ptwm_st_metadata(m, i);

    /* build_header reproduces the stored header exactly */
    CHECK_ERR(ptwm_st_build_header(desc, n, meta, nm, &hdr, &hlen, &err), &err, PTWM_OK, NULL);
    {
        size_t stored_len;
        const void *stored = ptwm_st_header(m, &stored_len);
        CHECK(hlen == stored_len + 8);
        CHECK(hdr && hlen == stored_len + 8 && memcmp((uint8_t *)hdr + 8, stored, stored_len) == 0);
    }
    free(hdr);

    snprintf(out, sizeof(out), "%s/%s", tu_tmpdir(), name);
    CHECK_ERR(ptwm_st_write(out, desc, n, meta, nm, &err), &err, PTWM_OK, NULL);
    orig = tu_read_file(path, &orig_len);
    copy = tu_read_file(out, &back_len);
    CHECK_MSG(orig && copy && orig_len == back_len && memcmp(orig, copy, orig_len) == 0,
              "%s: written copy differs from the original", name);
    free(orig);
    free(copy);

    CHECK_ERR(ptwm_st_open(out, PTWM_OPEN_MMAP, &back, &err), &err, PTWM_OK, NULL);
    if (back) {
        check_same_tensors(m, back);
        CHECK(ptwm_st_metadata_count(back) == nm);
        for (i = 0; i < nm; i++)
            CHECK(strcmp(ptwm_st_metadata(back, i).value, meta[i].value) == 0);
        ptwm_st_header(back, &bhlen);
        CHECK(bhlen % 8 == 0);
    }
    free(desc);
    free(meta);
    remove(out);
done:
    ptwm_st_close(m);
    ptwm_st_close(p);
    ptwm_st_close(back);
}

/* Every dtype, a scalar, zero-size tensors, sub-byte dtypes, escaped strings. */
static void synthetic_round_trip(void) {
    static uint8_t bytes[4096];
    uint64_t shapes[PTWM_DTYPE_COUNT][2];
    ptwm_tensor_desc d[PTWM_DTYPE_COUNT + 4];
    char names[PTWM_DTYPE_COUNT][32];
    uint64_t zero_shape[2] = {0, 7}, f4_shape[1] = {6}, f6_shape[1] = {4};
    ptwm_kv meta[3] = {{"format", "pt"},
                       {"quote\"back\\slash", "line\nfeed\ttab\001ctl \xc3\xa9t\xc3\xa9 /"},
                       {"", "empty key"}};
    ptwm_st *st = NULL, *st2 = NULL;
    ptwm_err err = {0};
    size_t n = 0, i, idx;
    uint64_t off = 0;
    char path[1024];
    unsigned k;

    for (i = 0; i < sizeof(bytes); i++) bytes[i] = (uint8_t)(i * 131 + 7);
    for (k = 0; k < PTWM_DTYPE_COUNT; k++) {
        unsigned bits = ptwm_dtype_bits((ptwm_dtype)k);
        snprintf(names[k], sizeof(names[k]), "t.%s", ptwm_dtype_name((ptwm_dtype)k));
        shapes[k][0] = 3;
        shapes[k][1] = 8; /* 24 elements: whole bytes for 4- and 6-bit dtypes */
        d[n].name = names[k];
        d[n].dtype = (ptwm_dtype)k;
        d[n].ndim = 2;
        d[n].shape = shapes[k];
        d[n].nbytes = 24ull * bits / 8;
        d[n].data = bytes + off % 64;
        off += d[n].nbytes;
        n++;
    }
    /* scalar, empty-named tensor, two zero-size tensors, F4 and F6 vectors */
    d[n++] = (ptwm_tensor_desc){"scalar", PTWM_DTYPE_F64, 0, NULL, bytes, 8};
    d[n++] = (ptwm_tensor_desc){"", PTWM_DTYPE_F4, 1, f4_shape, bytes, 3};
    d[n++] = (ptwm_tensor_desc){"empty.a", PTWM_DTYPE_F32, 2, zero_shape, NULL, 0};
    d[n++] = (ptwm_tensor_desc){"empty.b", PTWM_DTYPE_F6_E2M3, 1, f6_shape, bytes, 3};
    snprintf(path, sizeof(path), "%s/synthetic.safetensors", tu_tmpdir());
    CHECK_ERR(ptwm_st_write(path, d, n, meta, 3, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_MMAP, &st, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_PREAD, &st2, &err), &err, PTWM_OK, NULL);
    if (!st || !st2) goto done;
    check_same_tensors(st, st2);
    CHECK(ptwm_st_count(st) == n);
    for (i = 0; i < n && i < ptwm_st_count(st); i++) {
        ptwm_tensor_info t;
        CHECK(ptwm_st_tensor(st, i, &t, NULL) == PTWM_OK);
        /* file order is the order given */
        CHECK_MSG(strcmp(t.name, d[i].name) == 0, "tensor %zu is '%s', expected '%s'", i, t.name,
                  d[i].name);
        CHECK(t.dtype == d[i].dtype && t.ndim == d[i].ndim && t.nbytes == d[i].nbytes);
        CHECK(t.nbytes == 0 || memcmp(t.data, d[i].data, t.nbytes) == 0);
        CHECK(ptwm_st_find(st, d[i].name, &idx, NULL) == PTWM_OK && idx == i);
    }
    CHECK(ptwm_st_metadata_count(st) == 3);
    for (i = 0; i < 3; i++) {
        CHECK(strcmp(ptwm_st_metadata(st, i).key, meta[i].key) == 0);
        CHECK(strcmp(ptwm_st_metadata_get(st, meta[i].key), meta[i].value) == 0);
    }
    CHECK(ptwm_st_metadata_get(st, "absent") == NULL);
    CHECK(ptwm_st_metadata(st, 3).key == NULL);
    /* serde_json-style escapes in the stored header */
    {
        size_t hl;
        const char *h = ptwm_st_header(st, &hl);
        CHECK(hl % 8 == 0 && h[0] == '{');
        CHECK(memmem(h, hl, "\"quote\\\"back\\\\slash\"", 20) != NULL);
        CHECK(memmem(h, hl, "line\\nfeed\\ttab\\u0001ctl", 24) != NULL);
        CHECK(memcmp(h, "{\"__metadata__\":{\"format\":\"pt\"", 30) == 0);
    }

    /* accessor bounds */
    {
        ptwm_tensor_info t;
        uint8_t buf[16];
        CHECK(ptwm_st_tensor(st, n, &t, NULL) == PTWM_ERR_INVALID_ARG);
        CHECK(ptwm_st_find(st, "nope", &idx, NULL) == PTWM_ERR_NOT_FOUND);
        CHECK(ptwm_st_file_offset(st, n) == 0);
        CHECK_ERR(ptwm_st_read(st, n, 0, buf, 1, &err), &err, PTWM_ERR_INVALID_ARG, "out of range");
        CHECK_ERR(ptwm_st_read(st2, 0, 1, buf, (size_t)d[0].nbytes, &err), &err,
                  PTWM_ERR_INVALID_ARG, "runs past");
        CHECK_ERR(ptwm_st_read(st2, 0, UINT64_MAX, buf, 2, &err), &err, PTWM_ERR_INVALID_ARG,
                  "runs past");
        CHECK_ERR(ptwm_st_read(st2, 0, 2, buf, 3, &err), &err, PTWM_OK, NULL);
        CHECK(memcmp(buf, (const uint8_t *)d[0].data + 2, 3) == 0);
        CHECK(ptwm_st_count(NULL) == 0);
        ptwm_st_close(NULL);
    }
done:
    ptwm_st_close(st);
    ptwm_st_close(st2);
}

/* What the writer must refuse, each with its own message. */
static void writer_rejects(void) {
    static const uint8_t data[64];
    uint64_t s35[2] = {3, 5}, s3[1] = {3};
    ptwm_tensor_desc ok = {"w", PTWM_DTYPE_F32, 2, s35, data, 60};
    ptwm_tensor_desc t[2];
    ptwm_kv meta[2] = {{"a", "1"}, {"a", "2"}};
    ptwm_err err = {0};
    char path[1024];
    void *hdr = NULL;
    size_t hl;

    snprintf(path, sizeof(path), "%s/rejected.safetensors", tu_tmpdir());
    t[0] = ok;
    t[1] = ok;
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_DUPLICATE,
              "tensor name 'w' is given twice");
    t[1].name = "v";
    t[1].nbytes = 64;
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_INVALID_ARG,
              "tensor 'v': 64 bytes given, shape [3, 5] of F32 needs 60");
    t[1] = (ptwm_tensor_desc){"__metadata__", PTWM_DTYPE_U8, 1, s3, data, 3};
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_INVALID_ARG,
              "may not be named '__metadata__'");
    t[1] = (ptwm_tensor_desc){"bad\xff", PTWM_DTYPE_U8, 1, s3, data, 3};
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_INVALID_ARG,
              "not valid UTF-8");
    t[1] = (ptwm_tensor_desc){"odd", PTWM_DTYPE_F4, 1, s3, data, 1};
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_SHAPE,
              "tensor 'odd': shape [3] of F4 is 12 bits, not a whole number of bytes");
    t[1] = (ptwm_tensor_desc){"null", PTWM_DTYPE_U8, 1, s3, NULL, 3};
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_INVALID_ARG,
              "tensor 'null': data is NULL");
    /* a header alone needs no data (containers stream the bytes themselves) */
    CHECK_ERR(ptwm_st_build_header(t, 2, NULL, 0, &hdr, &hl, &err), &err, PTWM_OK, NULL);
    free(hdr);
    hdr = NULL;
    t[1] = (ptwm_tensor_desc){"dt", (ptwm_dtype)99, 1, s3, data, 3};
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_ERR_DTYPE, "tensor 'dt'");
    CHECK_ERR(ptwm_st_write(path, &ok, 1, meta, 2, &err), &err, PTWM_ERR_DUPLICATE,
              "metadata key 'a' is given twice");
    CHECK_ERR(ptwm_st_build_header(&ok, 1, NULL, 0, NULL, &hl, &err), &err, PTWM_ERR_INVALID_ARG,
              NULL);
    CHECK(ptwm_st_write(NULL, &ok, 1, NULL, 0, &err) == PTWM_ERR_INVALID_ARG);
    CHECK(access(path, F_OK) != 0); /* nothing written by a refused call */
    /* no tensors at all: a valid, empty file */
    CHECK_ERR(ptwm_st_build_header(NULL, 0, NULL, 0, &hdr, &hl, &err), &err, PTWM_OK, NULL);
    CHECK(hl == 16 && hdr && memcmp((char *)hdr + 8, "{}      ", 8) == 0);
    if (hdr) {
        ptwm_st *st = NULL;
        CHECK_ERR(ptwm_st_open_memory(hdr, hl, "empty", &st, &err), &err, PTWM_OK, NULL);
        CHECK(ptwm_st_count(st) == 0);
        ptwm_st_close(st);
    }
    free(hdr);
}

/* Replacing a file that is open (mapped) leaves the reader on the old bytes. */
static void atomic_replace(void) {
    static const uint8_t a[4] = {1, 2, 3, 4}, b[4] = {9, 9, 9, 9};
    uint64_t s4[1] = {4};
    ptwm_tensor_desc t = {"x", PTWM_DTYPE_U8, 1, s4, a, 4};
    ptwm_st *old = NULL, *fresh = NULL;
    ptwm_tensor_info ti;
    ptwm_err err = {0};
    char path[1024];
    snprintf(path, sizeof(path), "%s/replace.safetensors", tu_tmpdir());
    CHECK_ERR(ptwm_st_write(path, &t, 1, NULL, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_MMAP, &old, &err), &err, PTWM_OK, NULL);
    t.data = b;
    CHECK_ERR(ptwm_st_write(path, &t, 1, NULL, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_MMAP, &fresh, &err), &err, PTWM_OK, NULL);
    if (old && fresh) {
        CHECK(ptwm_st_tensor(old, 0, &ti, NULL) == PTWM_OK && memcmp(ti.data, a, 4) == 0);
        CHECK(ptwm_st_tensor(fresh, 0, &ti, NULL) == PTWM_OK && memcmp(ti.data, b, 4) == 0);
    }
    ptwm_st_close(old);
    ptwm_st_close(fresh);
}

/* Hand-made headers the reader must accept: JSON whitespace around the
 * object, header order differing from offset order, zero-size tensors
 * sharing an offset, a scalar. */
static void accepted_layouts(void) {
    static const char json[] =
        " \r\n\t{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
        "\"z2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
        "\"z1\":{\"dtype\":\"BF16\",\"shape\":[5,0],\"data_offsets\":[4,4]},"
        "\"z0\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[6,6]}} \n";
    static const char *order[] = {"a", "z2", "z1", "b", "z0"};
    uint8_t img[1024];
    size_t jl = sizeof(json) - 1, i;
    ptwm_st *st = NULL;
    ptwm_err err = {0};
    ptwm_store_le64(img, jl);
    memcpy(img + 8, json, jl);
    memcpy(img + 8 + jl, "\x01\x02\x03\x04\x05\x06", 6);
    CHECK_ERR(ptwm_st_open_memory(img, 8 + jl + 6, "layout", &st, &err), &err, PTWM_OK, NULL);
    if (!st) return;
    CHECK(ptwm_st_count(st) == 5);
    for (i = 0; i < 5; i++) {
        ptwm_tensor_info t;
        CHECK(ptwm_st_tensor(st, i, &t, NULL) == PTWM_OK);
        CHECK_MSG(strcmp(t.name, order[i]) == 0, "file order %zu: '%s', expected '%s'", i, t.name,
                  order[i]);
    }
    ptwm_st_close(st);
}

/* A file truncated after a PREAD open: reads past the new end fail with
 * PTWM_ERR_TRUNCATED naming the tensor and both sizes ("file X is N bytes,
 * expected M"), never a crash; reads
 * before it still work. (MMAP mode would raise SIGBUS: see ptwm_open_mode.) */
static void truncated_after_open(void) {
    uint8_t a[64], b[64], got[64];
    uint64_t shape[1] = {64};
    ptwm_tensor_desc t[2] = {{"first", PTWM_DTYPE_U8, 1, shape, a, 64},
                             {"second", PTWM_DTYPE_U8, 1, shape, b, 64}};
    ptwm_st *st = NULL;
    ptwm_source *src = NULL;
    ptwm_err err = {0};
    char path[1024];
    size_t i, idx = 0;
    uint64_t full;
    for (i = 0; i < 64; i++) a[i] = (uint8_t)i, b[i] = (uint8_t)(255 - i);
    snprintf(path, sizeof path, "%s/shrinks.safetensors", tu_tmpdir());
    CHECK_ERR(ptwm_st_write(path, t, 2, NULL, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_PREAD, &st, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_source_open_mode(path, PTWM_SOURCE_SAFETENSORS, PTWM_OPEN_PREAD, &src, &err),
              &err, PTWM_OK, NULL);
    if (!st || !src) goto done;
    full = ptwm_st_file_size(st);
    CHECK(truncate(path, (off_t)(full - 32)) == 0);
    CHECK(ptwm_st_find(st, "second", &idx, NULL) == PTWM_OK);
    CHECK_ERR(ptwm_st_read(st, idx, 0, got, 64, &err), &err, PTWM_ERR_TRUNCATED,
              "tensor 'second': file '");
    CHECK(strstr(err.message, "shrinks.safetensors' is 224 bytes, expected 256") != NULL);
    CHECK_ERR(ptwm_st_read(st, idx, 0, got, 32, &err), &err, PTWM_OK, NULL);
    CHECK(memcmp(got, b, 32) == 0);
    CHECK(ptwm_source_find(src, "second", &idx, &err) == PTWM_OK);
    CHECK_ERR(ptwm_source_read(src, idx, 0, got, 64, &err), &err, PTWM_ERR_TRUNCATED, "second");
    /* The next open sees the new size and says so. */
    ptwm_st_close(st);
    st = NULL;
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_PREAD, &st, &err), &err, PTWM_ERR_TRUNCATED,
              "truncated?");
done:
    ptwm_st_close(st);
    ptwm_source_close(src);
}

/* Opening a FIFO (or any file that is not a regular file) fails at once
 * with a clear message instead of waiting for a writer that never comes. */
static void fifo_refused(void) {
    ptwm_st *st = NULL;
    ptwm_err err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/weights.fifo", tu_tmpdir());
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_PREAD, &st, &err), &err, PTWM_ERR_IO,
              "not a regular file");
    CHECK_ERR(ptwm_st_open(path, PTWM_OPEN_MMAP, &st, &err), &err, PTWM_ERR_IO,
              "not a regular file");
    CHECK(st == NULL);
    unlink(path);
}

int main(void) {
    const char *const *files = tu_corpus_files();
    size_t i;
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus directory not found (set PTWM_CORPUS)");
    if (tu_corpus_dir())
        for (i = 0; files[i]; i++) corpus_round_trip(files[i]);
    synthetic_round_trip();
    writer_rejects();
    atomic_replace();
    accepted_layouts();
    truncated_after_open();
    fifo_refused();
    return tu_finish("test_safetensors");
}
