/* A raw little-endian F32 file as a source (source_impl.h): one F32 tensor
 * named "" of shape [size / 4], read with pread; no metadata. */
#include <stdlib.h>
#include <unistd.h>
#include "fileio.h"
#include "source_impl.h"

typedef struct raw_src {
    char *path;
    int fd;
    uint64_t shape[1];
    uint64_t bytes;
} raw_src;

static void raw_close(void *h) {
    raw_src *r = (raw_src *)h;
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    ptwm_free(r->path);
    ptwm_free(r);
}

static ptwm_error raw_open(const char *path, ptwm_open_mode mode, void **out, ptwm_err *err) {
    raw_src *r = (raw_src *)ptwm_calloc(1, sizeof(*r));
    ptwm_error rc;
    (void)mode;
    *out = NULL;
    if (r) r->path = (char *)ptwm_malloc(strlen(path) + 1);
    if (!r || !r->path) {
        ptwm_free(r);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "source '%s': out of memory", path);
    }
    memcpy(r->path, path, strlen(path) + 1);
    r->fd = -1;
    rc = ptwm_open_read(path, &r->fd, &r->bytes, err);
    if (!rc && r->bytes % 4 != 0)
        rc = ptwm_fail(err, PTWM_ERR_SHAPE,
                       "file '%s' has %llu bytes, not a whole number of F32 values", path,
                       (unsigned long long)r->bytes);
    if (rc) {
        raw_close(r);
        return rc;
    }
    r->shape[0] = r->bytes / 4;
    *out = r;
    return PTWM_OK;
}

static size_t raw_count(const void *h) {
    (void)h;
    return 1;
}

static ptwm_error raw_tensor(const void *h, size_t index, ptwm_tensor_info *out, ptwm_err *err) {
    const raw_src *r = (const raw_src *)h;
    if (index != 0) return ptwm_fail_index(err, r->path, index, 1);
    memset(out, 0, sizeof(*out));
    out->name = "";
    out->dtype = PTWM_DTYPE_F32;
    out->ndim = 1;
    out->shape = r->shape;
    out->nbytes = r->bytes;
    out->coded_bytes = r->bytes;
    return PTWM_OK;
}

static ptwm_error raw_find(const void *h, const char *name, size_t *index, ptwm_err *err) {
    (void)h;
    (void)err;
    if (index) *index = 0;
    return name[0] == 0 ? PTWM_OK : PTWM_ERR_NOT_FOUND;
}

static ptwm_error raw_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                           ptwm_err *err) {
    const raw_src *r = (const raw_src *)h;
    uint64_t end;
    ptwm_error rc;
    if (index != 0 || ptwm_add_overflow(offset, len, &end) || end > r->bytes)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "file '%s': bytes [%llu, +%zu) outside its %llu bytes", r->path,
                         (unsigned long long)offset, len, (unsigned long long)r->bytes);
    rc = ptwm_pread_full(r->fd, dst, len, offset, r->path, err);
    return rc == PTWM_ERR_TRUNCATED ? ptwm_fail_shrunk(err, r->fd, r->path, r->bytes) : rc;
}

static uint64_t raw_file_size(const void *h) { return ((const raw_src *)h)->bytes; }

const ptwm_source_ops ptwm_source_raw_ops = {
    PTWM_SOURCE_RAW_F32, raw_open, raw_close, raw_count, raw_tensor, raw_find, raw_read,
    NULL /* read_many */, NULL /* metadata: none */, NULL, raw_file_size,
    NULL /* set_threads */, NULL /* set_base */, NULL /* tensor_hash */,
    NULL /* record: none */, NULL /* stream_into: read and written */, 1 /* read_concurrent: pread */};
