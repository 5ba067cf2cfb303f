/* Tensors in the caller's memory as a source (source_impl.h): what a
 * directory or training checkpoint is saved from. Each tensor's info carries
 * its bytes (info.data), so sinks write them without a copy. */
#include "source_impl.h"

static const ptwm_memory_source *mem(const void *h) { return (const ptwm_memory_source *)h; }

static void mem_close(void *h) { (void)h; }
static size_t mem_count(const void *h) { return mem(h)->n; }
static ptwm_error mem_tensor(const void *h, size_t index, ptwm_tensor_info *out, ptwm_err *err) {
    const ptwm_tensor_desc *d;
    if (index >= mem(h)->n)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor index %zu of %zu", index, mem(h)->n);
    d = &mem(h)->t[index];
    memset(out, 0, sizeof *out);
    out->name = d->name;
    out->dtype = d->dtype;
    out->ndim = d->ndim;
    out->shape = d->shape;
    out->nbytes = d->nbytes;
    out->coded_bytes = d->nbytes;
    out->data = d->data;
    return PTWM_OK;
}
static ptwm_error mem_find(const void *h, const char *name, size_t *index, ptwm_err *err) {
    size_t i;
    (void)err;
    for (i = 0; i < mem(h)->n; i++)
        if (!strcmp(mem(h)->t[i].name, name)) {
            *index = i;
            return PTWM_OK;
        }
    return PTWM_ERR_NOT_FOUND;
}
static ptwm_error mem_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                           ptwm_err *err) {
    const ptwm_tensor_desc *d = &mem(h)->t[index];
    if (offset > d->nbytes || len > d->nbytes - offset)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': bytes %llu..%llu of %llu",
                         d->name, (unsigned long long)offset,
                         (unsigned long long)(offset + len), (unsigned long long)d->nbytes);
    memcpy(dst, (const uint8_t *)d->data + offset, len);
    return PTWM_OK;
}
static size_t mem_metadata_count(const void *h) { return mem(h)->nmeta; }
static ptwm_kv mem_metadata(const void *h, size_t i) {
    static const ptwm_kv none = {NULL, NULL};
    return i < mem(h)->nmeta ? mem(h)->meta[i] : none;
}
static uint64_t mem_file_size(const void *h) { (void)h; return 0; }

const ptwm_source_ops ptwm_source_memory_ops = {
    PTWM_SOURCE_AUTO /* no file kind */, NULL /* open: wrapped, never opened by path */,
    mem_close, mem_count, mem_tensor, mem_find, mem_read, NULL /* read_many */,
    mem_metadata_count, mem_metadata, mem_file_size, NULL /* set_threads */,
    NULL /* set_base */, NULL /* tensor_hash */, NULL /* record: none */,
    NULL /* stream_into: written from memory */, 1 /* read_concurrent: a copy */};
