/* ptwm_source_metadata_count / ptwm_source_metadata: every metadata entry of
 * each kind of source, in file order, and {NULL, NULL} past the end, and
 * ptwm_source_metadata_get by key (NULL for an absent or NULL key): a
 * safetensors file, a .ptwm file, and a directory of each holding one. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static const ptwm_kv META[] = {{"format", "pt"}, {"tied", "lm_head.weight"}, {"z", ""}};
#define NMETA (sizeof META / sizeof META[0])

static void check_source(const char *path, ptwm_source_kind want_kind) {
    ptwm_source *s = NULL;
    ptwm_err err = {0};
    size_t i;
    ptwm_kv kv;
    CHECK_ERR(ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    if (!s) return;
    CHECK(ptwm_source_get_kind(s) == want_kind);
    CHECK_MSG(ptwm_source_metadata_count(s) == NMETA, "%s: %zu entries", path,
              ptwm_source_metadata_count(s));
    for (i = 0; i < NMETA; i++) {
        kv = ptwm_source_metadata(s, i);
        CHECK_MSG(kv.key && kv.value && strcmp(kv.key, META[i].key) == 0 &&
                      strcmp(kv.value, META[i].value) == 0,
                  "%s: entry %zu", path, i);
    }
    kv = ptwm_source_metadata(s, NMETA);
    CHECK(kv.key == NULL && kv.value == NULL);
    /* lookup by key: a value, NULL when absent, NULL for no key at all */
    CHECK_MSG(ptwm_source_metadata_get(s, "tied") &&
                  strcmp(ptwm_source_metadata_get(s, "tied"), "lm_head.weight") == 0,
              "%s: metadata_get", path);
    CHECK(ptwm_source_metadata_get(s, "absent") == NULL);
    CHECK(ptwm_source_metadata_get(s, NULL) == NULL);
    ptwm_source_close(s);
}

int main(void) {
    static const float w[6] = {0.5f, -1.0f, 2.0f, 0.0f, -0.0f, 3.25f};
    const uint64_t shape[2] = {2, 3};
    const ptwm_tensor_desc desc = {"w", PTWM_DTYPE_F32, 2, shape, w, sizeof w};
    ptwm_cparams params = PTWM_CPARAMS_DEFAULT;
    ptwm_writer *wr = NULL;
    ptwm_source *s = NULL;
    ptwm_err err = {0};
    char st[1200], pt[1200], stdir[1200], ptdir[1200], path[1300];

    snprintf(st, sizeof st, "%s/m.safetensors", tu_tmpdir());
    snprintf(pt, sizeof pt, "%s/m.ptwm", tu_tmpdir());
    snprintf(stdir, sizeof stdir, "%s/stdir", tu_tmpdir());
    snprintf(ptdir, sizeof ptdir, "%s/ptdir", tu_tmpdir());
    CHECK(mkdir(stdir, 0777) == 0 && mkdir(ptdir, 0777) == 0);

    CHECK_ERR(ptwm_st_write(st, &desc, 1, META, NMETA, &err), &err, PTWM_OK, NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", stdir);
    CHECK_ERR(ptwm_st_write(path, &desc, 1, META, NMETA, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_file(pt, &params, &wr, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_set_metadata(wr, META, NMETA, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_add(wr, &desc, NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_finish(wr, &err), &err, PTWM_OK, NULL);
    snprintf(path, sizeof path, "%s/model.ptwm", ptdir);
    CHECK(rename(pt, path) == 0);

    check_source(st, PTWM_SOURCE_SAFETENSORS);
    check_source(stdir, PTWM_SOURCE_SAFETENSORS_DIR);
    check_source(path, PTWM_SOURCE_PTWM);
    check_source(ptdir, PTWM_SOURCE_PTWM_DIR);

    /* A raw file has no metadata. */
    CHECK_ERR(ptwm_source_open(st, PTWM_SOURCE_RAW_F32, &s, &err), &err, PTWM_OK, NULL);
    if (s) {
        CHECK(ptwm_source_metadata_count(s) == 0);
        CHECK(ptwm_source_metadata(s, 0).key == NULL);
        ptwm_source_close(s);
    }
    return tu_finish("test_source_metadata");
}
