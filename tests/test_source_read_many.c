/* ptwm_source_read_many: whole tensors, in any order, from every kind of
 * source (a safetensors file, a .ptwm file, a sharded .ptwm directory whose
 * tensors span several shards), equal to the bytes written; a buffer of the
 * wrong size is PTWM_ERR_DST_SIZE naming the tensor, an index past the end
 * PTWM_ERR_NOT_FOUND, and a damaged .ptwm payload a CRC or hash error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NT 6
#define LEN 3000

static float data[NT][LEN];

static void read_all(const char *path, ptwm_source_kind want_kind) {
    static float got[NT][LEN];
    size_t idx[NT], sizes[NT], i, j;
    void *dsts[NT];
    ptwm_source *s = NULL;
    ptwm_err err = {0};
    char want[128];
    CHECK_ERR(ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    if (!s) return;
    CHECK(ptwm_source_get_kind(s) == want_kind && ptwm_source_count(s) == NT);
    memset(got, 0, sizeof got);
    for (i = 0; i < NT; i++) {   /* reverse order: the list order is the caller's */
        ptwm_tensor_info info;
        size_t k = NT - 1 - i;
        CHECK_ERR(ptwm_source_tensor(s, k, &info, NULL), NULL, PTWM_OK, NULL);
        j = (size_t)(info.name[1] - '0');
        idx[i] = k;
        dsts[i] = got[j];
        sizes[i] = sizeof got[j];
    }
    CHECK_ERR(ptwm_source_read_many(s, idx, dsts, sizes, NT, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(memcmp(got, data, sizeof data) == 0, "%s: bytes differ", path);
    sizes[2] -= 4;
    snprintf(want, sizeof want, "has %zu bytes, buffer %zu", sizeof got[0], sizes[2]);
    CHECK_ERR(ptwm_source_read_many(s, idx, dsts, sizes, NT, &err), &err, PTWM_ERR_DST_SIZE,
              want);
    sizes[2] += 4;
    idx[4] = NT;
    CHECK_ERR(ptwm_source_read_many(s, idx, dsts, sizes, NT, &err), &err, PTWM_ERR_NOT_FOUND,
              "no tensor 6");
    CHECK_ERR(ptwm_source_read_many(s, idx, dsts, sizes, 0, &err), &err, PTWM_OK, NULL);
    ptwm_source_close(s);
}

int main(void) {
    ptwm_tensor_desc desc[NT];
    uint64_t shape[1] = {LEN};
    char names[NT][4], st[1200], pt[1200], dir[1200];
    ptwm_cparams params = PTWM_CPARAMS_DEFAULT;
    ptwm_checkpoint_options opt = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_source *s = NULL;
    ptwm_err err = {0};
    uint64_t seed = 7;
    size_t i, j, len, idx[NT], sizes[NT];
    void *dsts[NT];
    uint8_t *file;

    for (i = 0; i < NT; i++) {
        for (j = 0; j < LEN; j++)
            data[i][j] = (float)((int)(tu_rand(&seed) % 2001) - 1000) / 997.0f;
        snprintf(names[i], sizeof names[i], "t%zu", i);
        desc[i] = (ptwm_tensor_desc){names[i], PTWM_DTYPE_F32, 1, shape, data[i], sizeof data[i]};
    }
    snprintf(st, sizeof st, "%s/m.safetensors", tu_tmpdir());
    snprintf(pt, sizeof pt, "%s/m.ptwm", tu_tmpdir());
    snprintf(dir, sizeof dir, "%s/sharded", tu_tmpdir());
    CHECK_ERR(ptwm_st_write(st, desc, NT, NULL, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_compress_file(pt, desc, NT, NULL, &params, &err), &err, PTWM_OK, NULL);
    opt.max_shard_size = 2 * sizeof data[0];
    CHECK_ERR(ptwm_compress_checkpoint(st, dir, &opt, &err), &err, PTWM_OK, NULL);

    {
        char shard[1300];
        FILE *f;
        snprintf(shard, sizeof shard, "%s/model-00003-of-00003.ptwm", dir);
        f = fopen(shard, "rb");
        CHECK_MSG(f != NULL, "%s: expected three shards", dir);
        if (f) fclose(f);
    }
    read_all(st, PTWM_SOURCE_SAFETENSORS);
    read_all(pt, PTWM_SOURCE_PTWM);
    read_all(dir, PTWM_SOURCE_PTWM_DIR);

    /* Damage the middle of the .ptwm's payloads: the tensor it hits fails its check. */
    file = tu_read_file(pt, &len);
    CHECK(file != NULL);
    if (file) {
        file[len / 2] ^= 0x20;
        CHECK(tu_write_file(pt, file, len) == 0);
        free(file);
        CHECK_ERR(ptwm_source_open(pt, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
        for (i = 0; i < NT; i++) {
            idx[i] = i;
            dsts[i] = data[i];
            sizes[i] = sizeof data[i];
        }
        if (s) {
            ptwm_error rc = ptwm_source_read_many(s, idx, dsts, sizes, NT, &err);
            CHECK_MSG(rc == PTWM_ERR_CRC || rc == PTWM_ERR_HASH || rc == PTWM_ERR_CORRUPT,
                      "damaged file gave %s", ptwm_error_name(rc));
            CHECK(strstr(err.message, "tensor 't") != NULL);
            ptwm_source_close(s);
        }
    }
    return tu_finish("test_source_read_many");
}
