/* A safetensors file as a source (source_impl.h): the reader's own calls,
 * read in the caller's mode (mmap or pread). */
#include "outdir.h"
#include "source_impl.h"

static ptwm_error st_open(const char *path, ptwm_open_mode mode, void **out, ptwm_err *err) {
    ptwm_st *st = NULL;
    ptwm_error rc = ptwm_st_open(path, mode, &st, err);
    *out = st;
    return rc;
}
static void st_close(void *h) { ptwm_st_close((ptwm_st *)h); }
static size_t st_count(const void *h) { return ptwm_st_count((const ptwm_st *)h); }
static ptwm_error st_tensor(const void *h, size_t index, ptwm_tensor_info *out, ptwm_err *err) {
    return ptwm_st_tensor((const ptwm_st *)h, index, out, err);
}
static ptwm_error st_find(const void *h, const char *name, size_t *index, ptwm_err *err) {
    return ptwm_st_find((const ptwm_st *)h, name, index, err);
}
static ptwm_error st_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                          ptwm_err *err) {
    return ptwm_st_read((const ptwm_st *)h, index, offset, dst, len, err);
}
static size_t st_metadata_count(const void *h) {
    return ptwm_st_metadata_count((const ptwm_st *)h);
}
static ptwm_kv st_metadata(const void *h, size_t i) {
    return ptwm_st_metadata((const ptwm_st *)h, i);
}
static uint64_t st_file_size(const void *h) { return ptwm_st_file_size((const ptwm_st *)h); }
static ptwm_error st_record(const void *h, const char *label, ptwm_file_record *out,
                            ptwm_err *err) {
    const ptwm_st *st = (const ptwm_st *)h;
    (void)label;
    (void)err;
    out->json = (const char *)ptwm_st_header(st, &out->len);
    out->name = ptwm_base_name(ptwm_st_path(st));
    out->size = ptwm_st_file_size(st);
    return PTWM_OK;
}

const ptwm_source_ops ptwm_source_st_ops = {
    PTWM_SOURCE_SAFETENSORS, st_open, st_close, st_count, st_tensor, st_find, st_read,
    NULL /* read_many: one read per tensor */, st_metadata_count, st_metadata, st_file_size,
    NULL /* set_threads: nothing decodes */, NULL /* set_base: no bases */,
    NULL /* tensor_hash: none recorded */, st_record, NULL /* stream_into: read and written */,
    1 /* read_concurrent: pread, or a copy from a mapping */};
