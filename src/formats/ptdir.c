/* A sharded .ptwm directory: model.ptwm.index.json plus the shards it lists,
 * or a lone model.ptwm (read_sharded_ptwm). The directory layer (shardir.c)
 * opens and checks it; ptwm_ptdir_* wrap it. */
#include "options.h"
#include "safetensors.h"
#include "shardir.h"
#include "sink.h"

/* A ptwm_ptdir is a ptwm_shardir of the .ptwm kind. */
static ptwm_shardir *dir_of(const ptwm_ptdir *d) { return (ptwm_shardir *)d; }

ptwm_error ptwm_ptdir_open(const char *dir, ptwm_ptdir **out, ptwm_err *err) {
    ptwm_shardir *d;
    ptwm_error rc;
    if (!dir || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_open: NULL argument");
    rc = ptwm_shardir_open(dir, PTWM_SOURCE_PTWM_DIR, PTWM_OPEN_PREAD, &d, err);
    *out = (ptwm_ptdir *)d;
    return rc;
}

void ptwm_ptdir_close(ptwm_ptdir *d) { ptwm_shardir_close(dir_of(d)); }
void ptwm_ptdir_set_threads(ptwm_ptdir *d, int threads) {
    ptwm_source_ptdir_ops.set_threads(dir_of(d), threads);
}
size_t ptwm_ptdir_count(const ptwm_ptdir *d) { return ptwm_source_ptdir_ops.count(d); }
size_t ptwm_ptdir_shard_count(const ptwm_ptdir *d) { return ptwm_shardir_shard_count(dir_of(d)); }
ptwm_reader *ptwm_ptdir_shard(const ptwm_ptdir *d, size_t i) {
    return (ptwm_reader *)ptwm_shardir_shard(dir_of(d), i);
}
const char *ptwm_ptdir_shard_name(const ptwm_ptdir *d, size_t i) {
    return ptwm_shardir_shard_name(dir_of(d), i);
}
const ptwm_index *ptwm_ptdir_index(const ptwm_ptdir *d) { return ptwm_shardir_index(dir_of(d)); }
uint64_t ptwm_ptdir_total_size(const ptwm_ptdir *d) { return ptwm_shardir_total_size(dir_of(d)); }
uint64_t ptwm_ptdir_compressed_total_size(const ptwm_ptdir *d) {
    return ptwm_shardir_compressed_total_size(dir_of(d));
}
size_t ptwm_ptdir_shard_of(const ptwm_ptdir *d, size_t index, size_t *local) {
    return ptwm_shardir_shard_of(dir_of(d), index, local);
}

ptwm_error ptwm_ptdir_tensor(const ptwm_ptdir *d, size_t index, ptwm_tensor_info *out,
                             ptwm_err *err) {
    if (!d || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_tensor: NULL argument");
    return ptwm_source_ptdir_ops.tensor(d, index, out, err);
}

ptwm_error ptwm_ptdir_find(const ptwm_ptdir *d, const char *name, size_t *index, ptwm_err *err) {
    if (!d) return ptwm_fail_name(err, ".ptwm directory", name);
    return ptwm_source_ptdir_ops.find(d, name, index, err);
}

ptwm_error ptwm_ptdir_decode_range(ptwm_ptdir *d, size_t index, uint64_t offset, void *dst,
                                   size_t len, ptwm_err *err) {
    if (index >= ptwm_ptdir_count(d))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor index %zu out of range (%zu tensors)",
                         index, ptwm_ptdir_count(d));
    return ptwm_source_ptdir_ops.read(d, index, offset, dst, len, err);
}

/* Through the conversion path: the tensors as a memory source, written by
 * the .ptwm sink into a staged directory. */
ptwm_error ptwm_ptdir_write(const char *dir, const ptwm_tensor_desc *tensors, size_t n,
                            const ptwm_kv *meta, size_t nmeta, uint64_t max_shard_size,
                            const ptwm_cparams *params, int force, ptwm_err *err) {
    ptwm_memory_source m = {tensors, n, meta, nmeta};
    ptwm_cparams cp;
    ptwm_conv_progress pr;
    ptwm_conv_opts o;
    ptwm_conv_src s;
    ptwm_error rc;
    if (!dir || (n && !tensors))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_write: NULL argument");
    if ((rc = ptwm_cparams_read(params, &cp, "ptwm_ptdir_write", err))) return rc;
    if (!max_shard_size)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "writing '%s': maximum shard size must be positive", dir);
    /* A tensor without a name is refused by the writer that takes it. */
    if ((rc = ptwm_st_check_data(dir, tensors, n, err))) return rc;
    ptwm_conv_opts_from(&cp, &pr, &o);
    if ((rc = ptwm_conv_src_wrap(&s, &ptwm_source_memory_ops, &m, dir, err)) == PTWM_OK)
        rc = ptwm_conv_staged(&s, &ptwm_sink_ptwm_ops, &o, max_shard_size, dir, NULL, force, err);
    ptwm_conv_src_close(&s);
    return rc;
}
