/* Hugging Face checkpoint directories: model.safetensors.index.json plus
 * shards, or a lone model.safetensors. Reading is the directory layer's
 * (shardir.c, which states the index rules); ptwm_stdir_* wrap it. Writing
 * is here: shards and an index as transformers writes them (index.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fileio.h"
#include "index.h"
#include "safetensors.h"
#include "shardir.h"
#include "sink.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

/* A ptwm_stdir is a ptwm_shardir of the safetensors kind. */
static ptwm_shardir *dir_of(const ptwm_stdir *d) { return (ptwm_shardir *)d; }

ptwm_error ptwm_stdir_open(const char *dir, ptwm_open_mode mode, ptwm_stdir **out, ptwm_err *err) {
    ptwm_shardir *d;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_open: out is NULL");
    *out = NULL;
    if (!dir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_open: dir is NULL");
    rc = ptwm_shardir_open(dir, PTWM_SOURCE_SAFETENSORS_DIR, mode, &d, err);
    *out = (ptwm_stdir *)d;
    return rc;
}

void ptwm_stdir_close(ptwm_stdir *d) { ptwm_shardir_close(dir_of(d)); }

size_t ptwm_stdir_count(const ptwm_stdir *d) { return ptwm_source_stdir_ops.count(d); }

ptwm_error ptwm_stdir_tensor(const ptwm_stdir *d, size_t index, ptwm_tensor_info *out,
                             ptwm_err *err) {
    if (!d) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_tensor: NULL directory");
    return ptwm_source_stdir_ops.tensor(d, index, out, err);
}

ptwm_error ptwm_stdir_find(const ptwm_stdir *d, const char *name, size_t *index, ptwm_err *err) {
    if (!d) return ptwm_fail_name(err, "checkpoint directory", name);
    return ptwm_source_stdir_ops.find(d, name, index, err);
}

ptwm_error ptwm_stdir_read(const ptwm_stdir *d, size_t index, uint64_t offset, void *dst,
                           size_t len, ptwm_err *err) {
    if (index >= ptwm_stdir_count(d))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_read: tensor index %zu out of range",
                         index);
    return ptwm_source_stdir_ops.read(dir_of(d), index, offset, dst, len, err);
}

size_t ptwm_stdir_shard_count(const ptwm_stdir *d) { return ptwm_shardir_shard_count(dir_of(d)); }

const ptwm_st *ptwm_stdir_shard(const ptwm_stdir *d, size_t i) {
    return (const ptwm_st *)ptwm_shardir_shard(dir_of(d), i);
}

size_t ptwm_stdir_shard_of(const ptwm_stdir *d, size_t index) {
    return index < ptwm_stdir_count(d) ? ptwm_shardir_shard_of(dir_of(d), index, NULL) : 0;
}

/* ---- writing ---------------------------------------------------------- */

/* Through the conversion path: the tensors as a memory source, written by
 * the safetensors sink as one file or shards plus an index. */
ptwm_error ptwm_stdir_write(const char *dir, const ptwm_tensor_desc *tensors, size_t n,
                            const ptwm_kv *meta, size_t nmeta, uint64_t max_shard_size,
                            ptwm_err *err) {
    ptwm_memory_source m = {tensors, n, meta, nmeta};
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    ptwm_conv_progress pr;
    ptwm_conv_src s;
    ptwm_conv_opts o;
    int indexed = 0;
    void *hdr = NULL;
    size_t hlen;
    char *ipath;
    ptwm_error rc;
    if (!dir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_write: dir is NULL");
    if (!max_shard_size)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "writing '%s': maximum shard size must be positive", dir);
    /* Validate the whole set once (names unique across shards, sizes agree). */
    if ((rc = ptwm_st_check_data(dir, tensors, n, err))) return rc;
    rc = ptwm_st_build_header(tensors, n, meta, nmeta, &hdr, &hlen, err);
    ptwm_free(hdr);
    if (rc) {
        ptwm_err_prefix(err, "writing '%s'", dir);
        return rc;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ptwm_fail(err, PTWM_ERR_IO, "cannot create directory '%s': %s", dir, strerror(errno));
    if (!ptwm_is_dir(dir)) return ptwm_fail(err, PTWM_ERR_IO, "'%s' is not a directory", dir);
    cp.threads = 1;   /* nothing decodes: the tensors are in memory */
    ptwm_conv_opts_from(&cp, &pr, &o);
    if ((rc = ptwm_conv_src_wrap(&s, &ptwm_source_memory_ops, &m, dir, err)) == PTWM_OK)
        rc = ptwm_conv_run(&s, &ptwm_sink_safetensors_ops, &o, max_shard_size, dir, 0, &indexed,
                           err);
    /* One file: an index left from an earlier write would shadow it. */
    if (!rc && !indexed && (ipath = ptwm_path_join(dir, INDEX_NAME))) {
        if (ptwm_file_exists(ipath)) unlink(ipath);
        ptwm_free(ipath);
    }
    ptwm_conv_src_close(&s);
    return rc;
}
