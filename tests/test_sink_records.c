/* The safetensors sink refuses to rebuild a file whose recorded header
 * disagrees with the .ptwm it comes from, naming the shard, the tensor and
 * both numbers, and writes nothing: a header listing fewer tensors than the
 * shard holds, a tensor the shard does not hold, a tensor of another dtype
 * or size, a recorded file size the header and tensors do not make; and in
 * a directory, a shard that would restore over the source index's name, or
 * an index naming a source index without its text. A header recorded in
 * another tensor order than the table still rebuilds byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "writer.h"
#include "testutil.h"

#define N 3
static float data[N][500];
static const char *const names[N] = {"a.weight", "b.weight", "c.bias"};
static uint64_t shapes[N][1] = {{500}, {500}, {500}};

static ptwm_tensor_desc desc(size_t i) {
    ptwm_tensor_desc d = {names[i], PTWM_DTYPE_F32, 1, shapes[i], data[i], sizeof data[i]};
    return d;
}

/* A .ptwm of the N tensors recording the header of `rec` (n of them) under
 * `name`, with the recorded file size `size` (0: the header's own). */
static void write_ptwm(const char *path, const ptwm_tensor_desc *rec, size_t n, const char *name,
                       uint64_t size) {
    ptwm_writer *w = NULL;
    ptwm_err err = {0};
    void *hdr = NULL;
    size_t hlen = 0, i;
    CHECK_ERR(ptwm_st_build_header(rec, n, NULL, 0, &hdr, &hlen, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_file(path, NULL, &w, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_set_source_header(w, hdr, hlen, name, &err), &err, PTWM_OK, NULL);
    if (size) ptwm_writer_set_source_size(w, size);
    for (i = 0; i < N; i++) {
        ptwm_tensor_desc d = desc(i);
        CHECK_ERR(ptwm_writer_add(w, &d, NULL, &err), &err, PTWM_OK, NULL);
    }
    CHECK_ERR(ptwm_writer_finish(w, &err), &err, PTWM_OK, NULL);
    ptwm_free(hdr);
}

/* Rebuilding `ptwm` fails with `code` and `text`, and leaves no file. */
static void rebuild_fails(const char *ptwm, ptwm_error code, const char *text) {
    ptwm_reader *r = NULL;
    ptwm_err err = {0};
    const char *out = tu_tmp_path("rebuilt.safetensors");
    CHECK_ERR(ptwm_reader_open(ptwm, &r, &err), &err, PTWM_OK, NULL);
    if (!r) return;
    CHECK_ERR(ptwm_reader_write_safetensors(r, out, &err), &err, code, text);
    CHECK_MSG(access(out, F_OK) != 0 && tu_count_prefixed("rebuilt.safetensors") == 0,
              "%s: output left behind", text);
    ptwm_reader_close(r);
}

static void files(void) {
    ptwm_tensor_desc d[N], other[N];
    char *p = strdup(tu_tmp_path("m.ptwm"));
    uint64_t wrong[1] = {250};
    ptwm_reader *r = NULL;
    ptwm_err err = {0};
    size_t i;
    for (i = 0; i < N; i++) d[i] = other[i] = desc(i);

    write_ptwm(p, d, N - 1, "m.safetensors", 0);
    rebuild_fails(p, PTWM_ERR_MISMATCH, "recorded source header lists 2 tensors, the shard holds 3");

    other[1].name = "b.renamed";
    write_ptwm(p, other, N, "m.safetensors", 0);
    rebuild_fails(p, PTWM_ERR_MISMATCH, "tensor 'b.renamed' of the recorded header is not in the shard");

    other[1] = desc(1);
    other[2].dtype = PTWM_DTYPE_I32;
    write_ptwm(p, other, N, "m.safetensors", 0);
    rebuild_fails(p, PTWM_ERR_MISMATCH,
                  "tensor 'c.bias': F32 of 2000 bytes in the shard, I32 of 2000 in the recorded header");

    other[2] = desc(2);
    other[2].shape = wrong;
    other[2].nbytes = 1000;
    write_ptwm(p, other, N, "m.safetensors", 0);
    rebuild_fails(p, PTWM_ERR_MISMATCH, "F32 of 2000 bytes in the shard, F32 of 1000 in the recorded header");

    write_ptwm(p, d, N, "m.safetensors", 123);
    rebuild_fails(p, PTWM_ERR_MISMATCH, "source was 123 bytes, header and tensors make");

    /* Another order than the table: the header's order, byte for byte. */
    other[0] = desc(2);
    other[2] = desc(0);
    write_ptwm(p, other, N, "m.safetensors", 0);
    CHECK_ERR(ptwm_st_write(tu_tmp_path("want.safetensors"), other, N, NULL, 0, &err), &err,
              PTWM_OK, NULL);
    CHECK_ERR(ptwm_reader_open(p, &r, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_reader_write_safetensors(r, tu_tmp_path("got.safetensors"), &err), &err,
              PTWM_OK, NULL);
    ptwm_reader_close(r);
    CHECK(tu_files_equal(tu_tmp_path("want.safetensors"), tu_tmp_path("got.safetensors")));
    free(p);
}

/* A directory of one shard with index metadata naming a source index. */
static void write_dir(const char *dir, const char *recorded_name, int with_text) {
    ptwm_tensor_desc d[N];
    ptwm_index *idx = NULL;
    ptwm_err err = {0};
    char path[1100];
    const char *text = "{\"metadata\": {}, \"weight_map\": {}}";
    size_t i;
    struct stat sb;
    for (i = 0; i < N; i++) d[i] = desc(i);
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(path, sizeof path, "%s/model-00001-of-00001.ptwm", dir);
    write_ptwm(path, d, N, recorded_name, 0);
    CHECK(stat(path, &sb) == 0);
    CHECK_ERR(ptwm_index_create(3 * sizeof data[0], (uint64_t)sb.st_size, &idx, &err), &err,
              PTWM_OK, NULL);
    CHECK_ERR(ptwm_index_set_meta(idx, "source_index_name", "model.safetensors.index.json", 28,
                                  &err), &err, PTWM_OK, NULL);
    if (with_text)
        CHECK_ERR(ptwm_index_set_meta(idx, "source_index", text, strlen(text), &err), &err,
                  PTWM_OK, NULL);
    for (i = 0; i < N; i++)
        CHECK_ERR(ptwm_index_add(idx, names[i], "model-00001-of-00001.ptwm", &err), &err, PTWM_OK,
                  NULL);
    snprintf(path, sizeof path, "%s/model.ptwm.index.json", dir);
    CHECK_ERR(ptwm_index_write(idx, path, &err), &err, PTWM_OK, NULL);
    ptwm_index_free(idx);
}

static void directories(void) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err = {0};
    char *dir = strdup(tu_tmp_path("over"));
    write_dir(dir, "model.safetensors.index.json", 1);
    CHECK_ERR(ptwm_decompress_checkpoint(dir, tu_tmp_path("out1"), &o, &err), &err,
              PTWM_ERR_SCHEMA,
              "restores to 'model.safetensors.index.json', the name of the source index");
    CHECK(tu_count_prefixed("out1") == 0);
    free(dir);
    dir = strdup(tu_tmp_path("notext"));
    write_dir(dir, "model-00001-of-00001.safetensors", 0);
    CHECK_ERR(ptwm_decompress_checkpoint(dir, tu_tmp_path("out2"), &o, &err), &err,
              PTWM_ERR_SCHEMA, "names source index 'model.safetensors.index.json' but is missing its text");
    CHECK(tu_count_prefixed("out2") == 0);
    free(dir);
}

int main(void) {
    size_t i, j;
    for (i = 0; i < N; i++)
        for (j = 0; j < 500; j++) data[i][j] = (float)(i + 1) * 0.001f * (float)j;
    files();
    directories();
    return tu_finish("sink_records");
}
