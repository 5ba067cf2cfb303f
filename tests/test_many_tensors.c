/* A safetensors file of 100000 small tensors: the header parser keeps no
 * JSON tree of the whole header (jansson's live bytes stay at one entry's
 * worth), names are found through the hash table, a duplicate name far
 * apart is still rejected, and compress -> .ptwm -> rebuilt safetensors is
 * byte-exact. Memory and time figures belong to bench/bench_many_tensors.sh,
 * not here. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define N 100000

/* jansson's allocations, counted: live bytes and their peak. Each block
 * carries its size in a 16-byte prefix. */
static size_t live, peak;

static void *count_malloc(size_t n) {
    unsigned char *p = malloc(n + 16);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    live += n;
    if (live > peak) peak = live;
    return p + 16;
}

static void count_free(void *q) {
    size_t n;
    if (!q) return;
    memcpy(&n, (unsigned char *)q - 16, sizeof n);
    live -= n;
    free((unsigned char *)q - 16);
}

/* A header of N tensors, tensor i named like an expert weight; `dup`: the
 * last tensor takes the first one's name. Returns the whole file image. */
static uint8_t *make_file(int dup, size_t *len_out) {
    static const char *const dtypes[] = {"BF16", "F32", "U8", "I64"};
    static const unsigned sizes[] = {2, 4, 1, 8};
    size_t cap = (size_t)N * 128 + 256, len = 8, i;
    uint64_t pos = 0, data, seed = 7;
    char *h = malloc(cap);
    uint8_t *img;
    if (!h) return NULL;
    len += (size_t)sprintf(h + len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (i = 0; i < N; i++) {
        unsigned d = (unsigned)(i % 4), dim = (unsigned)(i % 3) + 1;
        size_t name = dup && i == N - 1 ? 0 : i;
        len += (size_t)sprintf(h + len,
                               ",\"layers.%zu.experts.%zu.up_proj\":{\"dtype\":\"%s\",\"shape\":[%u],"
                               "\"data_offsets\":[%llu,%llu]}",
                               name / 64, name % 64, dtypes[d], dim, (unsigned long long)pos,
                               (unsigned long long)(pos + dim * sizes[d]));
        pos += dim * sizes[d];
    }
    len += (size_t)sprintf(h + len, "}");
    data = len;
    img = realloc(h, len + pos);
    if (!img) {
        free(h);
        return NULL;
    }
    for (i = 0; i < 8; i++) img[i] = (uint8_t)((uint64_t)(len - 8) >> (8 * i));
    for (i = 0; i < pos; i++) img[data + i] = (uint8_t)tu_rand(&seed);
    *len_out = len + pos;
    return img;
}

static void test_parse_and_find(const uint8_t *img, size_t len) {
    ptwm_st *st = NULL;
    ptwm_err err;
    size_t i, idx = 0;
    char name[64];
    int found = 0;
    memset(&err, 0, sizeof err);
    live = peak = 0;
    json_set_alloc_funcs(count_malloc, count_free);
    CHECK_ERR(ptwm_st_open_memory(img, len, "many.safetensors", &st, &err), &err, PTWM_OK, NULL);
    /* A tree of the whole header would be about 100 MB here; one entry is
     * a few hundred bytes. */
    CHECK_MSG(peak < 64 * 1024, "jansson held %zu bytes at once", peak);
    CHECK_MSG(live == 0, "jansson holds %zu bytes after the open", live);
    CHECK(ptwm_st_count(st) == N);
    for (i = 0; i < N; i += 997) {
        ptwm_tensor_info info;
        snprintf(name, sizeof name, "layers.%zu.experts.%zu.up_proj", i / 64, i % 64);
        if (ptwm_st_find(st, name, &idx, NULL) != PTWM_OK || ptwm_st_tensor(st, idx, &info, NULL) != PTWM_OK)
            continue;
        found += strcmp(info.name, name) == 0 && info.ndim == 1 && info.shape[0] == i % 3 + 1;
    }
    CHECK(found == (N + 996) / 997);
    CHECK(ptwm_st_find(st, "layers.0.experts.0.down_proj", &idx, NULL) == PTWM_ERR_NOT_FOUND);
    CHECK(strcmp(ptwm_st_metadata_get(st, "format"), "pt") == 0);
    ptwm_st_close(st);
    json_set_alloc_funcs(malloc, free);   /* after the close: it may free jansson's blocks */
}

static void test_duplicate_far_apart(void) {
    size_t len = 0;
    uint8_t *img = make_file(1, &len);
    ptwm_st *st = NULL;
    ptwm_err err;
    CHECK(img != NULL);
    if (!img) return;
    memset(&err, 0, sizeof err);
    CHECK_ERR(ptwm_st_open_memory(img, len, "dup.safetensors", &st, &err), &err, PTWM_ERR_DUPLICATE,
              "tensor 'layers.0.experts.0.up_proj' appears twice");
    CHECK(st == NULL);
    free(img);
}

static void test_round_trip(const uint8_t *img, size_t len) {
    char src[1024], dst[1024], back[1024];
    ptwm_reader *r = NULL;
    ptwm_err err;
    uint8_t *got;
    size_t got_len = 0;
    memset(&err, 0, sizeof err);
    snprintf(src, sizeof src, "%s/many.safetensors", tu_tmpdir());
    snprintf(dst, sizeof dst, "%s/many.ptwm", tu_tmpdir());
    snprintf(back, sizeof back, "%s/back.safetensors", tu_tmpdir());
    CHECK(tu_write_file(src, img, len) == 0);
    CHECK_ERR(ptwm_compress_safetensors(src, dst, NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_reader_open(dst, &r, &err), &err, PTWM_OK, NULL);
    if (!r) return;
    CHECK(ptwm_reader_count(r) == N);
    CHECK_ERR(ptwm_reader_write_safetensors(r, back, &err), &err, PTWM_OK, NULL);
    ptwm_reader_close(r);
    got = tu_read_file(back, &got_len);
    CHECK(got != NULL && got_len == len && memcmp(got, img, len) == 0);
    free(got);
}

int main(void) {
    size_t len = 0;
    uint8_t *img = make_file(0, &len);
    CHECK(img != NULL);
    if (img) {
        test_parse_and_find(img, len);
        test_round_trip(img, len);
    }
    free(img);
    test_duplicate_far_apart();
    return tu_finish("test_many_tensors");
}
