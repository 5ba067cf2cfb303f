/* One source interface over every kind: the same tensors written as a
 * safetensors file, a sharded safetensors directory, a .ptwm file and a
 * sharded .ptwm directory (and one of them read as raw F32) answer count,
 * tensor, find, read and read_many alike through ptwm_source_*; a lookup that
 * fails names the tensor, the kind and the path; each kind's table
 * (source_impl.h) says its kind; and both directory kinds name themselves in
 * their own lookup messages; a safetensors directory reads its shards in the
 * mode it was opened in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source_impl.h"
#include "testutil.h"

#define NT 5
#define LEN 700

static float data[NT][LEN];
static char names[NT][8];

/* Every tensor of `path` equals the one of that name written, whole and in part. */
static void check_kind(const char *path, ptwm_source_kind kind) {
    ptwm_source *s = NULL;
    ptwm_err err = {0};
    size_t i, at, idx[NT], sizes[NT];
    void *dsts[NT];
    static float got[NT][LEN];
    ptwm_tensor_info info;
    char want[1400];
    CHECK_ERR(ptwm_source_open(path, kind, &s, &err), &err, PTWM_OK, NULL);
    if (!s) return;
    ptwm_source_set_threads(s, 2);
    CHECK(ptwm_source_get_kind(s) == kind && ptwm_source_count(s) == NT);
    memset(got, 0, sizeof got);
    for (i = 0; i < ptwm_source_count(s) && i < NT; i++) {
        ptwm_tensor_info t;
        size_t j;
        CHECK_ERR(ptwm_source_tensor(s, i, &t, &err), &err, PTWM_OK, NULL);
        j = (size_t)(t.name[1] - '0');
        CHECK_MSG(j < NT && strcmp(t.name, names[j]) == 0 && t.dtype == PTWM_DTYPE_F32 &&
                      t.ndim == 1 && t.shape[0] == LEN && t.nbytes == sizeof data[j],
                  "%s: tensor %zu", path, i);
        if (j >= NT) continue;
        CHECK(ptwm_source_find(s, names[j], &at, &err) == PTWM_OK && at == i);
        /* a piece from the middle, then the whole tensor from byte 0 */
        CHECK_ERR(ptwm_source_read(s, i, 40, got[j], 400, &err), &err, PTWM_OK, NULL);
        CHECK_MSG(memcmp(got[j], (const char *)data[j] + 40, 400) == 0, "%s: %s part", path,
                  names[j]);
        CHECK_ERR(ptwm_source_read(s, i, 0, got[j], sizeof got[j], &err), &err, PTWM_OK, NULL);
        CHECK_MSG(memcmp(got[j], data[j], sizeof data[j]) == 0, "%s: %s", path, names[j]);
        idx[NT - 1 - j] = i;   /* read_many below in the reverse order of names */
        dsts[NT - 1 - j] = got[j];
        sizes[NT - 1 - j] = sizeof got[j];
    }
    memset(got, 0, sizeof got);
    CHECK_ERR(ptwm_source_read_many(s, idx, dsts, sizes, NT, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(memcmp(got, data, sizeof data) == 0, "%s: read_many", path);
    snprintf(want, sizeof want, "tensor 'absent' not in %s '%s'", ptwm_source_kind_name(kind),
             path);
    CHECK_ERR(ptwm_source_find(s, "absent", &at, &err), &err, PTWM_ERR_NOT_FOUND, want);
    CHECK_ERR(ptwm_source_tensor(s, NT, &info, &err), &err, PTWM_ERR_INVALID_ARG,
              "tensor index 5 out of range (5 tensors)");
    ptwm_source_close(s);
}

int main(void) {
    ptwm_tensor_desc desc[NT];
    uint64_t shape[1] = {LEN};
    ptwm_cparams params = PTWM_CPARAMS_DEFAULT;
    ptwm_checkpoint_options opt = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_source_kind k;
    ptwm_source *s = NULL;
    ptwm_stdir *sd = NULL;
    ptwm_ptdir *pd = NULL;
    ptwm_err err = {0};
    uint64_t seed = 11;
    size_t i, j;
    char st[1200], pt[1200], stdir[1200], ptdir[1200];

    for (i = 0; i < NT; i++) {
        for (j = 0; j < LEN; j++)
            data[i][j] = (float)((int)(tu_rand(&seed) % 4001) - 2000) / 1013.0f;
        snprintf(names[i], sizeof names[i], "t%zu", i);
        desc[i] = (ptwm_tensor_desc){names[i], PTWM_DTYPE_F32, 1, shape, data[i], sizeof data[i]};
    }
    snprintf(st, sizeof st, "%s/m.safetensors", tu_tmpdir());
    snprintf(pt, sizeof pt, "%s/m.ptwm", tu_tmpdir());
    snprintf(stdir, sizeof stdir, "%s/stdir", tu_tmpdir());
    snprintf(ptdir, sizeof ptdir, "%s/ptdir", tu_tmpdir());
    CHECK_ERR(ptwm_st_write(st, desc, NT, NULL, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_compress_file(pt, desc, NT, NULL, &params, &err), &err, PTWM_OK, NULL);
    /* two tensors a shard: three shards of each format */
    CHECK_ERR(ptwm_stdir_write(stdir, desc, NT, NULL, 0, 2 * sizeof data[0], &err), &err, PTWM_OK,
              NULL);
    opt.max_shard_size = 2 * sizeof data[0];
    CHECK_ERR(ptwm_compress_checkpoint(st, ptdir, &opt, &err), &err, PTWM_OK, NULL);

    check_kind(st, PTWM_SOURCE_SAFETENSORS);
    check_kind(stdir, PTWM_SOURCE_SAFETENSORS_DIR);
    check_kind(pt, PTWM_SOURCE_PTWM);
    check_kind(ptdir, PTWM_SOURCE_PTWM_DIR);

    /* A safetensors directory opened in MMAP mode maps its shards: tensors
     * are handed out zero-copy, where PREAD mode gives no data pointer. */
    CHECK_ERR(ptwm_source_open_mode(stdir, PTWM_SOURCE_AUTO, PTWM_OPEN_MMAP, &s, &err), &err,
              PTWM_OK, NULL);
    for (i = 0; s && i < ptwm_source_count(s); i++) {
        ptwm_tensor_info t;
        CHECK(ptwm_source_tensor(s, i, &t, NULL) == PTWM_OK && t.data != NULL &&
              memcmp(t.data, data[t.name[1] - '0'], sizeof data[0]) == 0);
    }
    ptwm_source_close(s);
    CHECK_ERR(ptwm_source_open(stdir, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    if (s) {
        ptwm_tensor_info t;
        CHECK(ptwm_source_tensor(s, 0, &t, NULL) == PTWM_OK && t.data == NULL);
        ptwm_source_close(s);
    }

    /* A raw file: one F32 tensor "" of the whole file. */
    CHECK_ERR(ptwm_source_open(st, PTWM_SOURCE_RAW_F32, &s, &err), &err, PTWM_OK, NULL);
    if (s) {
        CHECK(ptwm_source_count(s) == 1 && ptwm_source_find(s, "", &i, NULL) == PTWM_OK && i == 0);
        CHECK_ERR(ptwm_source_find(s, "t0", &i, &err), &err, PTWM_ERR_NOT_FOUND,
                  "tensor 't0' not in raw-f32 '");
        ptwm_source_close(s);
    }

    for (k = PTWM_SOURCE_SAFETENSORS; k <= PTWM_SOURCE_RAW_F32; k++)
        CHECK_MSG(ptwm_source_ops_of(k) && ptwm_source_ops_of(k)->kind == k, "kind %d", (int)k);
    CHECK(ptwm_source_ops_of(PTWM_SOURCE_AUTO) == NULL);

    /* The directory readers' own lookups name the kind of directory. */
    CHECK_ERR(ptwm_stdir_open(stdir, PTWM_OPEN_PREAD, &sd, &err), &err, PTWM_OK, NULL);
    CHECK(ptwm_stdir_shard_count(sd) == 3);
    CHECK_ERR(ptwm_stdir_find(sd, "absent", &i, &err), &err, PTWM_ERR_NOT_FOUND,
              "checkpoint directory: no tensor 'absent'");
    ptwm_stdir_close(sd);
    CHECK_ERR(ptwm_ptdir_open(ptdir, &pd, &err), &err, PTWM_OK, NULL);
    CHECK(ptwm_ptdir_shard_count(pd) == 3);
    CHECK_ERR(ptwm_ptdir_find(pd, "absent", &i, &err), &err, PTWM_ERR_NOT_FOUND,
              ".ptwm directory: no tensor 'absent'");
    ptwm_ptdir_close(pd);
    return tu_finish("test_source_kinds");
}
