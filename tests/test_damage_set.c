/* A damage set over a small real-weights .ptwm (a cut of the repository's
 * sample, written with plane CRCs and payload hashes, with CRCs only, and
 * with neither): bit flips in every region (head, payloads, the chunk and
 * plane headers at the start of payloads, table, footer), truncations,
 * appended bytes, zeroed ranges and swapped chunks, each copy decoded by every
 * path that hands back whole tensors: the reader's decode of every tensor,
 * the safetensors rebuild, checkpoint decompression and a layout load. Every
 * decode must fail or give exactly the original bytes: no silent wrong output,
 * and no crash (the sanitizer build runs this too). Deterministic: a fixed
 * seed. */
#include "testutil.h"
#include "image.h"
#include "reader.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXT 256

enum { P_DECODE, P_REBUILD, P_DECOMPRESS, P_LAYOUT, NPATHS };
static const char *const path_names[NPATHS] = {"reader decode", "safetensors rebuild",
                                               "checkpoint decompress", "layout load"};

typedef struct outcome {
    unsigned error, exact, wrong;
} outcome;

static char src_path[1200], src_name[64] = "subset.safetensors";
static uint8_t *src_bytes;       /* the source file: what a rebuild must give */
static size_t src_len, nt;
static const char *names[MAXT];
static uint64_t shapes[MAXT][8];
static ptwm_layout_entry layout[MAXT];
static float *ref_floats;        /* the layout load of the source */
static uint64_t nfloats;
static uint8_t *ref_tensor[MAXT];
static size_t ref_size[MAXT];
static outcome out[NPATHS];
static unsigned copies;

static void count(int path, ptwm_error rc, int same, const char *what) {
    if (rc) {
        out[path].error++;
    } else if (same) {
        out[path].exact++;
    } else {
        out[path].wrong++;
        fprintf(stderr, "%s: %s handed back wrong bytes without an error\n", what, path_names[path]);
    }
}

static int file_is(const char *path, const uint8_t *want, size_t len) {
    size_t n = 0;
    uint8_t *got = tu_read_file(path, &n);
    int same = got && n == len && memcmp(got, want, len) == 0;
    free(got);
    return same;
}

static ptwm_error load_floats(const char *path, float *dst, ptwm_err *err) {
    ptwm_source *s = NULL;
    ptwm_error rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, err);
    if (!rc) rc = ptwm_load_layout(s, layout, nt, PTWM_CONVERT_FLOAT, dst, nfloats, err);
    ptwm_source_close(s);
    return rc;
}

/* Decode one damaged copy by every path and count the outcomes. */
static void try_copy(const tu_image *im, const char *what) {
    const char *file = tu_tmp_path("damaged.ptwm"), *st = tu_tmp_path("rebuilt.safetensors");
    const char *dir = tu_tmp_path("decompressed");
    char restored[1300];
    ptwm_reader *r = NULL;
    ptwm_err err;
    ptwm_error rc;
    void *dsts[MAXT];
    size_t idx[MAXT], i;
    float *f = (float *)malloc((size_t)nfloats * sizeof(float));
    int same;
    copies++;
    /* The reader, in memory: every tensor in one call. */
    for (i = 0; i < nt; i++) {
        idx[i] = i;
        dsts[i] = malloc(ref_size[i] + 1);
    }
    rc = ptwm_reader_open_memory(im->p, im->len, "damaged.ptwm", &r, &err);
    if (!rc && ptwm_reader_count(r) != nt) rc = PTWM_ERR_MISMATCH;   /* cannot happen: table CRC */
    if (!rc) rc = ptwm_reader_decode_many(r, idx, dsts, ref_size, nt, &err);
    for (i = 0, same = 1; !rc && i < nt; i++) same &= memcmp(dsts[i], ref_tensor[i], ref_size[i]) == 0;
    count(P_DECODE, rc, same, what);
    ptwm_reader_close(r);
    r = NULL;
    for (i = 0; i < nt; i++) free(dsts[i]);
    /* The file paths. */
    CHECK(tu_write_file(file, im->p, im->len) == 0);
    rc = ptwm_reader_open(file, &r, &err);
    if (!rc) rc = ptwm_reader_write_safetensors(r, st, &err);
    count(P_REBUILD, rc, !rc && file_is(st, src_bytes, src_len), what);
    if (rc) CHECK_MSG(access(st, F_OK) != 0, "%s: a failed rebuild left its output", what);
    unlink(st);
    ptwm_reader_close(r);
    rc = ptwm_decompress_checkpoint(file, dir, NULL, &err);
    snprintf(restored, sizeof(restored), "%s/%s", dir, src_name);
    count(P_DECOMPRESS, rc, !rc && file_is(restored, src_bytes, src_len), what);
    if (rc) CHECK_MSG(access(dir, F_OK) != 0, "%s: a failed decompression left its output", what);
    unlink(restored);
    rmdir(dir);
    rc = load_floats(file, f, &err);
    count(P_LAYOUT, rc, !rc && memcmp(f, ref_floats, (size_t)nfloats * sizeof(float)) == 0, what);
    free(f);
}

static void flip(const tu_image *good, uint64_t at, unsigned bit, const char *region) {
    tu_image im = tu_image_copy(good);
    char what[160];
    im.p[at] ^= (uint8_t)(1u << bit);
    snprintf(what, sizeof(what), "bit %u of byte %llu (%s)", bit, (unsigned long long)at, region);
    try_copy(&im, what);
    free(im.p);
}

static uint64_t pick(uint64_t *seed, uint64_t lo, uint64_t hi) {   /* in [lo, hi) */
    return lo + tu_rand(seed) % (hi - lo);
}

static void damage_set(const tu_image *good, uint64_t *seed) {
    uint64_t toff = tu_image_table_offset(good), len = good->len, a, b;
    uint32_t coded;
    ptwm_reader *r = NULL;
    ptwm_err err;
    unsigned i;
    char what[160];
    CHECK(ptwm_reader_open_memory(good->p, good->len, "good", &r, &err) == PTWM_OK);
    for (i = 0; i < 4; i++) flip(good, pick(seed, 0, 16), (unsigned)pick(seed, 0, 8), "head");
    for (i = 0; i < 12; i++) flip(good, pick(seed, 16, toff), (unsigned)pick(seed, 0, 8), "payload");
    for (i = 0; r && i < 8; i++) {
        /* The first bytes of a chunk: its flags, plane count and plane headers. */
        size_t t = (size_t)pick(seed, 0, nt);
        uint64_t nk = 0, off = 0;
        ptwm_reader_chunk_info(r, t, 0, NULL, NULL, NULL, &nk);
        if (!nk) continue;
        ptwm_reader_chunk_info(r, t, pick(seed, 0, nk), &off, &coded, NULL, NULL);
        flip(good, off + pick(seed, 0, PTWM_MIN(coded, 12)), (unsigned)pick(seed, 0, 8), "chunk header");
    }
    for (i = 0; i < 8; i++) flip(good, pick(seed, toff, len - 48), (unsigned)pick(seed, 0, 8), "table");
    for (i = 0; i < 4; i++) flip(good, pick(seed, len - 48, len), (unsigned)pick(seed, 0, 8), "footer");
    {
        /* Truncations. */
        uint64_t cuts[5];
        cuts[0] = len - 1;
        cuts[1] = len - 48;
        cuts[2] = toff;
        cuts[3] = pick(seed, 16, toff);
        cuts[4] = 10;
        for (i = 0; i < 5; i++) {
            tu_image im = tu_image_copy(good);
            im.len = (size_t)cuts[i];
            snprintf(what, sizeof(what), "cut to %llu bytes", (unsigned long long)cuts[i]);
            try_copy(&im, what);
            free(im.p);
        }
    }
    {
        /* Appended bytes: one zero, one random, 64 random, the footer again. */
        static const size_t extra[4] = {1, 1, 64, 48};
        for (i = 0; i < 4; i++) {
            tu_image im;
            size_t k;
            im.len = good->len + extra[i];
            im.p = (uint8_t *)malloc(im.len);
            memcpy(im.p, good->p, good->len);
            for (k = 0; k < extra[i]; k++)
                im.p[good->len + k] = i == 0 ? 0 : i == 3 ? good->p[good->len - 48 + k] : (uint8_t)tu_rand(seed);
            snprintf(what, sizeof(what), "%zu bytes appended", extra[i]);
            try_copy(&im, what);
            free(im.p);
        }
    }
    for (i = 0; i < 5; i++) {
        /* Zeroed ranges: in the payloads, the table, and across the two. */
        tu_image im = tu_image_copy(good);
        uint64_t n = pick(seed, 1, 300), at = i < 3 ? pick(seed, 16, toff - n) : i == 3 ? pick(seed, toff, len - 48 - n)
                                                                                       : toff - n / 2;
        memset(im.p + at, 0, (size_t)n);
        snprintf(what, sizeof(what), "%llu bytes zeroed at %llu", (unsigned long long)n, (unsigned long long)at);
        try_copy(&im, what);
        free(im.p);
    }
    for (i = 0; i < 3; i++) {
        tu_image im;
        if (!tu_image_equal_chunks(good, i * 3, &a, &b, &coded)) break;
        im = tu_image_copy(good);
        tu_image_swap(&im, a, b, coded);
        snprintf(what, sizeof(what), "chunks at %llu and %llu (%u bytes) swapped", (unsigned long long)a,
                 (unsigned long long)b, coded);
        try_copy(&im, what);
        free(im.p);
    }
    ptwm_reader_close(r);
}

/* The reference: the source's tensors, its bytes and its layout load. */
static int setup(void) {
    ptwm_source *s = NULL;
    ptwm_err err;
    size_t i;
    snprintf(src_path, sizeof(src_path), "%s/%s", tu_tmpdir(), src_name);
    nt = tu_sample_subset(src_path, 128 << 10);
    CHECK_MSG(nt > 3, "cannot cut a subset of %s", tu_sample_path());
    if (nt <= 3 || nt > MAXT) return 0;
    src_bytes = tu_read_file(src_path, &src_len);
    CHECK(ptwm_source_open(src_path, PTWM_SOURCE_AUTO, &s, &err) == PTWM_OK);
    if (!s) return 0;
    for (i = 0; i < nt; i++) {
        ptwm_tensor_info info;
        uint32_t d;
        ptwm_source_tensor(s, i, &info, NULL);
        names[i] = strdup(info.name);
        for (d = 0; d < info.ndim && d < 8; d++) shapes[i][d] = info.shape[d];
        layout[i].name = names[i];
        layout[i].ndim = info.ndim;
        layout[i].shape = shapes[i];
        ref_size[i] = (size_t)info.nbytes;
        ref_tensor[i] = (uint8_t *)malloc(ref_size[i] + 1);
        CHECK(ptwm_source_read(s, i, 0, ref_tensor[i], ref_size[i], &err) == PTWM_OK);
        nfloats += info.nbytes / 2;   /* BF16 */
    }
    ptwm_source_close(s);
    ref_floats = (float *)malloc((size_t)nfloats * sizeof(float));
    CHECK(load_floats(src_path, ref_floats, &err) == PTWM_OK);
    return 1;
}

int main(void) {
    static const struct {
        int crc, hash;
        const char *label;
    } variants[3] = {{1, 1, "plane CRCs and hashes"}, {1, 0, "plane CRCs only"}, {0, 0, "neither"}};
    uint64_t seed = 20261201;
    size_t i, v;
    if (!setup()) return tu_finish("damage_set");
    for (v = 0; v < 3; v++) {
        ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
        ptwm_err err;
        const char *path = tu_tmp_path("good.ptwm");
        tu_image good;
        unsigned before = copies;
        p.chunk_size = 4096;
        p.no_plane_crc = !variants[v].crc;
        p.no_payload_hash = !variants[v].hash;
        CHECK_MSG(ptwm_compress_safetensors(src_path, path, &p, &err) == PTWM_OK, "%s", err.message);
        good.p = tu_read_file(path, &good.len);
        if (!good.p) continue;
        try_copy(&good, "undamaged");   /* the paths work: every one gives the exact bytes */
        for (i = 0; i < NPATHS; i++) CHECK_MSG(out[i].exact == v + 1, "%s: undamaged copy", path_names[i]);
        copies--;
        damage_set(&good, &seed);
        printf("%s: %u damaged copies\n", variants[v].label, copies - before);
        free(good.p);
    }
    printf("damage set: %u damaged copies of a %zu-tensor real-weights file\n", copies, nt);
    for (i = 0; i < NPATHS; i++) {
        printf("  %-22s %u errors, %u exact (undamaged or harmless), %u silently wrong\n", path_names[i],
               out[i].error, out[i].exact - 3, out[i].wrong);
        CHECK_MSG(out[i].wrong == 0, "%s: %u silent wrong outputs", path_names[i], out[i].wrong);
    }
    CHECK_MSG(copies >= 100, "only %u damaged copies", copies);
    for (i = 0; i < nt; i++) {
        free((void *)names[i]);
        free(ref_tensor[i]);
    }
    free(ref_floats);
    free(src_bytes);
    return tu_finish("damage_set");
}
