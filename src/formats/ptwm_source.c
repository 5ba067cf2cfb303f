/* A .ptwm file as a source (source_impl.h): the container reader's calls.
 * Reads decode only the chunks they touch; read_many decodes whole tensors
 * with their chunks sharing the threads, checking every payload hash. */
#include "fstream.h"
#include "reader.h"
#include "source_impl.h"

static ptwm_error pt_open(const char *path, ptwm_open_mode mode, void **out, ptwm_err *err) {
    ptwm_reader *r = NULL;
    ptwm_error rc = ptwm_reader_open(path, &r, err);
    (void)mode;
    *out = r;
    return rc;
}
static void pt_close(void *h) { ptwm_reader_close((ptwm_reader *)h); }
static size_t pt_count(const void *h) { return ptwm_reader_count((const ptwm_reader *)h); }
static ptwm_error pt_tensor(const void *h, size_t index, ptwm_tensor_info *out, ptwm_err *err) {
    return ptwm_reader_tensor((const ptwm_reader *)h, index, out, err);
}
static ptwm_error pt_find(const void *h, const char *name, size_t *index, ptwm_err *err) {
    return ptwm_reader_find((const ptwm_reader *)h, name, index, err);
}
static ptwm_error pt_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                          ptwm_err *err) {
    return ptwm_reader_decode_range((ptwm_reader *)h, index, offset, dst, len, err);
}
static ptwm_error pt_read_many(void *h, const size_t *indices, void *const *dsts,
                               const size_t *sizes, size_t n, ptwm_err *err) {
    return ptwm_reader_decode_many((ptwm_reader *)h, indices, dsts, sizes, n, err);
}
static size_t pt_metadata_count(const void *h) {
    return ptwm_reader_metadata_count((const ptwm_reader *)h);
}
static ptwm_kv pt_metadata(const void *h, size_t i) {
    return ptwm_reader_metadata((const ptwm_reader *)h, i);
}
static uint64_t pt_file_size(const void *h) {
    return ptwm_reader_file_size((const ptwm_reader *)h);
}
static void pt_set_threads(void *h, int threads) {
    ptwm_reader_set_threads((ptwm_reader *)h, threads);
}
static ptwm_error pt_set_base(void *h, ptwm_source *base, ptwm_err *err) {
    return ptwm_reader_set_base((ptwm_reader *)h, base, err);
}
/* The recorded header is stored with its 8-byte length, which must be its
 * own. */
static ptwm_error pt_record(const void *h, const char *label, ptwm_file_record *out,
                            ptwm_err *err) {
    const ptwm_reader *r = (const ptwm_reader *)h;
    size_t hlen = 0;
    const uint8_t *hdr = (const uint8_t *)ptwm_reader_source_header(r, &hlen);
    memset(out, 0, sizeof *out);
    if (!hdr) return PTWM_OK;
    if (hlen < 8 || ptwm_load_le64(hdr) != hlen - 8)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "shard '%s': recorded source header of %zu bytes does not start with "
                         "its own length", label, hlen);
    out->json = (const char *)hdr + 8;
    out->len = hlen - 8;
    out->name = ptwm_reader_source_name(r);
    out->size = ptwm_reader_source_file_size(r);
    return PTWM_OK;
}
static ptwm_error pt_stream_into(void *h, struct ptwm_fstream *s, const size_t *indices, size_t n,
                                 const uint64_t *offs, ptwm_err *err) {
    return ptwm_fstream_add(s, (ptwm_reader *)h, indices, n, offs, err);
}
static int pt_tensor_hash(const void *h, size_t index, uint8_t hash[16]) {
    return ptwm_reader_tensor_hash((const ptwm_reader *)h, index, hash);
}

const ptwm_source_ops ptwm_source_ptwm_ops = {
    PTWM_SOURCE_PTWM, pt_open,           pt_close,    pt_count,     pt_tensor,     pt_find,
    pt_read,          pt_read_many,      pt_metadata_count, pt_metadata, pt_file_size,
    pt_set_threads,   pt_set_base,       pt_tensor_hash,    pt_record,   pt_stream_into,
    0 /* read_concurrent: decodes through the reader's context */};
