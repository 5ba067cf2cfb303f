#include "image.h"
#include "container_format.h"
#include "entropy.h"
#include "hash.h"
#include "reader.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tu_image tu_image_copy(const tu_image *a) {
    tu_image b;
    b.p = (uint8_t *)malloc(a->len ? a->len : 1);
    b.len = a->len;
    memcpy(b.p, a->p, a->len);
    return b;
}

uint64_t tu_image_table_offset(const tu_image *im) {
    return ptwm_load_le64(im->p + im->len - PTWM_FMT_FOOT_SIZE + PTWM_FOOT_TABLE_OFFSET);
}

void tu_image_reseal(tu_image *im) {
    uint8_t *foot = im->p + im->len - PTWM_FMT_FOOT_SIZE;
    uint64_t off = ptwm_load_le64(foot + PTWM_FOOT_TABLE_OFFSET);
    uint64_t size = ptwm_load_le64(foot + PTWM_FOOT_TABLE_SIZE);
    ptwm_store_le32(foot + PTWM_FOOT_TABLE_CRC, ptwm_crc32(0, im->p + off, (size_t)size));
    ptwm_store_le32(foot + PTWM_FOOT_CRC, ptwm_crc32(0, foot, PTWM_FOOT_CRC));
}

tu_image tu_image_plain(tu_image packed) {
    uint8_t *foot = packed.p + packed.len - PTWM_FMT_FOOT_SIZE;
    uint64_t off = ptwm_load_le64(foot + PTWM_FOOT_TABLE_OFFSET);
    uint64_t size = ptwm_load_le64(foot + PTWM_FOOT_TABLE_SIZE), raw;
    tu_image im = {NULL, 0};
    CHECK_MSG(packed.p[off] == PTWM_SEC_PACKED, "writer left the table unpacked (id %u)", packed.p[off]);
    if (packed.p[off] != PTWM_SEC_PACKED) return packed;
    raw = ptwm_load_le64(packed.p + off + PTWM_FMT_SECTION_HEAD);
    im.len = (size_t)(off + raw) + PTWM_FMT_FOOT_SIZE;
    im.p = (uint8_t *)malloc(im.len);
    memcpy(im.p, packed.p, (size_t)off);
    CHECK(ptwm_zstd_decode(NULL, packed.p + off + PTWM_FMT_SECTION_HEAD + 8, (size_t)size - PTWM_FMT_SECTION_HEAD - 8,
                           im.p + off, (size_t)raw) == PTWM_OK);
    memcpy(im.p + off + raw, foot, PTWM_FMT_FOOT_SIZE);
    foot = im.p + im.len - PTWM_FMT_FOOT_SIZE;
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_SIZE, raw);
    ptwm_store_le64(foot + PTWM_FOOT_FILE_SIZE, im.len);
    tu_image_reseal(&im);
    free(packed.p);
    return im;
}

size_t tu_image_find(const tu_image *im, const void *pat, size_t n) {
    size_t i, start = (size_t)tu_image_table_offset(im);
    for (i = start; i + n <= im->len; i++)
        if (memcmp(im->p + i, pat, n) == 0) return i;
    return 0;
}

void tu_image_chunk_at(const tu_image *im, size_t t, uint64_t k, uint64_t *off, uint32_t *coded) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    CHECK(ptwm_reader_open_memory(im->p, im->len, "x", &r, &err) == PTWM_OK);
    CHECK(ptwm_reader_chunk_info(r, t, k, off, coded, NULL, NULL) == PTWM_OK);
    ptwm_reader_close(r);
}

int tu_image_equal_chunks(const tu_image *im, size_t which, uint64_t *a, uint64_t *b, uint32_t *coded) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    uint64_t *off = NULL;
    uint32_t *len = NULL;
    size_t n = 0, cap = 0, t, i, j, seen = 0;
    int found = 0;
    if (ptwm_reader_open_memory(im->p, im->len, "x", &r, &err) != PTWM_OK) return 0;
    for (t = 0; t < ptwm_reader_count(r); t++) {
        uint64_t k, nk = 0;
        ptwm_reader_chunk_info(r, t, 0, NULL, NULL, NULL, &nk);
        for (k = 0; k < nk; k++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                off = (uint64_t *)realloc(off, cap * sizeof(*off));
                len = (uint32_t *)realloc(len, cap * sizeof(*len));
            }
            ptwm_reader_chunk_info(r, t, k, &off[n], &len[n], NULL, NULL);
            n++;
        }
    }
    for (i = 0; i < n && !found; i++)
        for (j = i + 1; j < n && !found; j++)
            if (len[i] == len[j] && off[i] != off[j] && memcmp(im->p + off[i], im->p + off[j], len[i]) != 0 &&
                seen++ == which) {
                *a = off[i];
                *b = off[j];
                *coded = len[i];
                found = 1;
            }
    free(off);
    free(len);
    ptwm_reader_close(r);
    return found;
}

void tu_image_swap(tu_image *im, uint64_t a, uint64_t b, uint32_t n) {
    uint32_t i;
    for (i = 0; i < n; i++) {
        uint8_t x = im->p[a + i];
        im->p[a + i] = im->p[b + i];
        im->p[b + i] = x;
    }
}

const char *tu_sample_path(void) {
    static char buf[1200];
    const char *src = getenv("PTWM_SOURCE_DIR");
    snprintf(buf, sizeof(buf), "%s/samples/posenet.bf16.safetensors", src ? src : "..");
    return buf;
}

size_t tu_sample_subset(const char *dst, uint64_t max_bytes) {
    ptwm_st *st = NULL;
    ptwm_err err;
    ptwm_tensor_desc d[256];
    void *data[256];
    size_t n = 0, i, ok;
    uint64_t total = 0;
    if (ptwm_st_open(tu_sample_path(), PTWM_OPEN_PREAD, &st, &err) != PTWM_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 0;
    }
    for (i = 0; i < ptwm_st_count(st) && n < 256; i++) {
        ptwm_tensor_info info;
        ptwm_st_tensor(st, i, &info, NULL);
        if (n && total + info.nbytes > max_bytes) break;
        data[n] = malloc(info.nbytes ? (size_t)info.nbytes : 1);
        if (ptwm_st_read(st, i, 0, data[n], (size_t)info.nbytes, &err) != PTWM_OK) {
            free(data[n]);
            break;
        }
        d[n].name = info.name;
        d[n].dtype = info.dtype;
        d[n].ndim = info.ndim;
        d[n].shape = info.shape;
        d[n].data = data[n];
        d[n].nbytes = info.nbytes;
        total += info.nbytes;
        n++;
    }
    ok = n && ptwm_st_write(dst, d, n, NULL, 0, &err) == PTWM_OK;
    for (i = 0; i < n; i++) free(data[i]);
    ptwm_st_close(st);
    return ok ? n : 0;
}
