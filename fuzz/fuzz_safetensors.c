/* libFuzzer harness over the safetensors reader (open from memory).
 *
 * For every accepted input it asserts, trapping otherwise:
 *  - tensors in file order tile the data region exactly: each starts where
 *    the previous ended, the first at 8 + header length, the last ending at
 *    the end of the buffer; each [offset, offset + nbytes) lies inside it
 *    and its zero-copy pointer points there;
 *  - nbytes agrees with dtype and shape; lookup by name finds each tensor;
 *  - the writer accepts what the reader accepted, and the file it builds
 *    (fresh header + the same data region) reads back with the same tensors
 *    in the same order;
 *  - on every input, accepted or not, the header parses to the same result
 *    with plain entries scanned without jansson and with every entry through
 *    jansson (ptwm_st_set_plain): the same error code and message, or the
 *    same tensors and metadata. */
#include <stdlib.h>
#include <string.h>
#include "ptwm.h"
#include "safetensors.h"

#define REQUIRE(c)                    \
    do {                              \
        if (!(c)) __builtin_trap();   \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rebuild(const ptwm_st *st, uint64_t data_start, const uint8_t *region,
                          uint64_t region_len) {
    size_t n = ptwm_st_count(st), nm = ptwm_st_metadata_count(st), i;
    ptwm_tensor_desc *d = calloc(n + 1, sizeof(*d));
    ptwm_kv *meta = calloc(nm + 1, sizeof(*meta));
    void *hdr = NULL;
    size_t hlen = 0;
    uint8_t *img;
    ptwm_st *back = NULL;
    REQUIRE(d && meta);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        REQUIRE(ptwm_st_tensor(st, i, &t, NULL) == PTWM_OK);
        d[i] = (ptwm_tensor_desc){t.name, t.dtype, t.ndim, t.shape, t.data, t.nbytes};
    }
    for (i = 0; i < nm; i++) meta[i] = ptwm_st_metadata(st, i);
    REQUIRE(ptwm_st_build_header(d, n, meta, nm, &hdr, &hlen, NULL) == PTWM_OK);
    img = malloc(hlen + region_len + 1);
    REQUIRE(img);
    memcpy(img, hdr, hlen);
    if (region_len) memcpy(img + hlen, region, region_len);
    REQUIRE(ptwm_st_open_memory(img, hlen + region_len, "rebuilt", &back, NULL) == PTWM_OK);
    REQUIRE(ptwm_st_count(back) == n && ptwm_st_metadata_count(back) == nm);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        REQUIRE(ptwm_st_tensor(back, i, &t, NULL) == PTWM_OK);
        REQUIRE(strcmp(t.name, d[i].name) == 0 && t.nbytes == d[i].nbytes);
        /* same place in the data region, so the same bytes */
        REQUIRE(ptwm_st_file_offset(back, i) - hlen == ptwm_st_file_offset(st, i) - data_start);
    }
    ptwm_st_close(back);
    free(img);
    ptwm_free(hdr);
    free(d);
    free(meta);
}

/* The two paths of the header parser agree on the JSON after the 8-byte
 * length (as much of it as the input holds). */
static void check_plain_path(const uint8_t *data, size_t size) {
    ptwm_st_parsed a, b;
    ptwm_err ea, eb;
    ptwm_error ra, rb;
    uint64_t n = 0;
    size_t i;
    int k;
    if (size < 8) return;
    for (k = 7; k >= 0; k--) n = n << 8 | data[k];
    if (n > size - 8) n = size - 8;
    ptwm_st_set_plain(1);
    ra = ptwm_st_parse_header((const char *)data + 8, (size_t)n, "fuzz", &a, &ea);
    ptwm_st_set_plain(0);
    rb = ptwm_st_parse_header((const char *)data + 8, (size_t)n, "fuzz", &b, &eb);
    ptwm_st_set_plain(1);
    REQUIRE(ra == rb);
    if (ra) REQUIRE(strcmp(ea.message, eb.message) == 0);
    if (!ra) {
        REQUIRE(a.n == b.n && a.nmeta == b.nmeta && a.data_len == b.data_len);
        for (i = 0; i < a.n; i++) {
            const ptwm_st_entry *x = &a.t[i], *y = &b.t[i];
            REQUIRE(strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim);
            REQUIRE(x->begin == y->begin && x->end == y->end && x->order == y->order);
            REQUIRE(memcmp(x->shape, y->shape, x->ndim * sizeof(uint64_t)) == 0);
        }
        for (i = 0; i < a.nmeta; i++)
            REQUIRE(strcmp(a.meta[i].key, b.meta[i].key) == 0 &&
                    strcmp(a.meta[i].value, b.meta[i].value) == 0);
    }
    ptwm_st_parsed_free(&a);
    ptwm_st_parsed_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ptwm_st *st = NULL;
    ptwm_err err;
    size_t hlen = 0, n, i, idx;
    uint64_t pos;
    ptwm_error rc;
    check_plain_path(data, size);
    rc = ptwm_st_open_memory(data, size, "fuzz", &st, &err);
    if (rc != PTWM_OK) {
        REQUIRE(st == NULL && err.code == rc && err.message[0] != 0);
        return 0;
    }
    REQUIRE(ptwm_st_header(st, &hlen) == (const void *)(data + 8));
    REQUIRE(hlen <= PTWM_ST_MAX_HEADER && 8 + (uint64_t)hlen <= size);
    REQUIRE(ptwm_st_file_size(st) == size);
    pos = 8 + (uint64_t)hlen;
    n = ptwm_st_count(st);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        uint64_t off = ptwm_st_file_offset(st, i), nbytes = 0;
        REQUIRE(ptwm_st_tensor(st, i, &t, NULL) == PTWM_OK);
        REQUIRE(off == pos);                                   /* tiles: no hole, no overlap */
        REQUIRE(off <= size && t.nbytes <= size - off);       /* inside the buffer */
        REQUIRE(t.data == (const void *)(data + off));
        REQUIRE(t.coded_bytes == t.nbytes);
        REQUIRE(ptwm_tensor_nbytes(t.dtype, t.shape, t.ndim, &nbytes, NULL) == PTWM_OK);
        REQUIRE(nbytes == t.nbytes);
        REQUIRE(ptwm_st_find(st, t.name, &idx, NULL) == PTWM_OK && idx == i);
        pos += t.nbytes;
    }
    REQUIRE(pos == size); /* the data region ends exactly at the end */
    check_rebuild(st, 8 + (uint64_t)hlen, data + 8 + hlen, size - 8 - hlen);
    ptwm_st_close(st);
    return 0;
}
