/* A source as the base of .ptwm readers and writers (docs/DELTA.md). The
 * container reads a base through a table it defines (container_base.h) and
 * never calls a source; here a ptwm_source fills that table in, and the
 * public calls that take a source as a base (ptwm_reader_set_base, and
 * ptwm_cparams.base for the writer's opens and one-call forms) hand it to
 * the container's. */
#include "options.h"
#include "reader.h"
#include "source_impl.h"
#include "writer.h"

static ptwm_error base_find(void *h, const char *name, size_t *index) {
    return ptwm_source_find((const ptwm_source *)h, name, index, NULL);
}
static ptwm_error base_tensor(void *h, size_t index, ptwm_tensor_info *out) {
    return ptwm_source_tensor((const ptwm_source *)h, index, out, NULL);
}
static int base_tensor_hash(void *h, size_t index, uint8_t hash[16]) {
    return ptwm_source_tensor_hash((const ptwm_source *)h, index, hash);
}
static ptwm_error base_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                            ptwm_err *err) {
    return ptwm_source_read((ptwm_source *)h, index, offset, dst, len, err);
}
static const char *base_label(void *h) { return ptwm_source_path((const ptwm_source *)h); }

static const ptwm_base_ops source_base_ops = {base_find, base_tensor, base_tensor_hash, base_read,
                                              base_label};

/* The table over s (NULL: no base). A .ptwm base decodes with its reader's
 * state, one range at a time, on the thread that asks (no pool inside a
 * pool): serial; safetensors kinds read with pread, from any thread at
 * once. */
static ptwm_base base_of(ptwm_source *s) {
    ptwm_base b = {NULL, NULL, 0};
    if (!s) return b;
    b.ops = &source_base_ops;
    b.h = s;
    b.serial = ptwm_source_get_kind(s) == PTWM_SOURCE_PTWM ||
               ptwm_source_get_kind(s) == PTWM_SOURCE_PTWM_DIR;
    return b;
}

ptwm_error ptwm_reader_set_base(ptwm_reader *r, ptwm_source *base, ptwm_err *err) {
    ptwm_base b = base_of(base);
    ptwm_error rc;
    if (!r) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_reader_set_base: NULL reader");
    if ((rc = ptwm_reader_use_base(r, &b, err))) return rc;
    /* A serial base decodes on the thread that reads it. */
    if (b.serial) ptwm_source_set_threads(base, 1);
    return PTWM_OK;
}

/* The caller's params read by their size (options.h) before any field is
 * used, and the base they name. */
static ptwm_error params_base(const ptwm_cparams *params, ptwm_cparams *given, ptwm_base *b,
                              const char *where, ptwm_err *err) {
    ptwm_error rc = ptwm_cparams_read(params, given, where, err);
    *b = base_of(rc ? NULL : given->base);
    return rc;
}

ptwm_error ptwm_writer_open_file(const char *path, const ptwm_cparams *params, ptwm_writer **out,
                                 ptwm_err *err) {
    ptwm_cparams given;
    ptwm_base b;
    ptwm_error rc;
    if ((rc = params_base(params, &given, &b, "ptwm_writer_open_file", err))) return rc;
    return ptwm_writer_open_file_base(path, &given, &b, out, err);
}

ptwm_error ptwm_writer_open_memory(const ptwm_cparams *params, ptwm_writer **out, ptwm_err *err) {
    ptwm_cparams given;
    ptwm_base b;
    ptwm_error rc;
    if ((rc = params_base(params, &given, &b, "ptwm_writer_open_memory", err))) return rc;
    return ptwm_writer_open_memory_base(&given, &b, out, err);
}

ptwm_error ptwm_compress_blob(const ptwm_tensor_desc *tensors, size_t n,
                              const ptwm_chain_list *chains, const ptwm_cparams *params, void **out,
                              size_t *len, ptwm_err *err) {
    ptwm_cparams given;
    ptwm_base b;
    ptwm_error rc;
    if ((rc = params_base(params, &given, &b, "ptwm_compress_blob", err))) return rc;
    return ptwm_compress_blob_base(tensors, n, chains, &given, &b, out, len, err);
}

ptwm_error ptwm_compress_into(const ptwm_tensor_desc *tensors, size_t n,
                              const ptwm_chain_list *chains, const ptwm_cparams *params, void *dst,
                              size_t cap, size_t *len, ptwm_err *err) {
    ptwm_cparams given;
    ptwm_base b;
    ptwm_error rc;
    if ((rc = params_base(params, &given, &b, "ptwm_compress_into", err))) return rc;
    return ptwm_compress_into_base(tensors, n, chains, &given, &b, dst, cap, len, err);
}

ptwm_error ptwm_compress_file(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                              const ptwm_chain_list *chains, const ptwm_cparams *params,
                              ptwm_err *err) {
    ptwm_cparams given;
    ptwm_base b;
    ptwm_error rc;
    if ((rc = params_base(params, &given, &b, "ptwm_compress_file", err))) return rc;
    return ptwm_compress_file_base(path, tensors, n, chains, &given, &b, err);
}
