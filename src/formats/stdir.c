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

ptwm_error ptwm_hf_index_write(const char *path, const char *const *tensor_names,
                               const size_t *shard_of, size_t n, size_t nshards, uint64_t total,
                               ptwm_err *err) {
    ptwm_index *idx = NULL;
    size_t i;
    ptwm_error rc = ptwm_index_new(PTWM_INDEX_SAFETENSORS, &idx, err);
    if (!rc && total > INT64_MAX)
        rc = ptwm_fail(err, PTWM_ERR_INVALID_ARG, "index '%s': totals exceed 2^63-1", path);
    for (i = 0; i < n && !rc; i++) {
        char shard[64];
        rc = ptwm_shard_filename(shard_of[i] + 1, nshards, "safetensors", shard, sizeof shard, NULL);
        if (!rc) rc = ptwm_index_add(idx, tensor_names[i], shard, err);
        else ptwm_fail(err, rc, "index '%s': shard %zu of %zu", path, shard_of[i] + 1, nshards);
    }
    if (!rc) {
        ptwm_index_set_totals(idx, total, 0);
        rc = ptwm_index_write(idx, path, err);
    }
    ptwm_index_free(idx);
    return rc;
}

/* The index of a sharded write: every tensor's shard and the byte total. */
static ptwm_error write_index(const char *dir, const ptwm_tensor_desc *tensors, size_t n,
                              const size_t *shard_of, size_t nshards, ptwm_err *err) {
    const char **names = ptwm_calloc(n + 1, sizeof(*names));
    char *path = ptwm_path_join(dir, INDEX_NAME);
    uint64_t total = 0;
    size_t i;
    ptwm_error rc;
    if (!names || !path) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory writing '%s'", dir);
    } else {
        for (i = 0; i < n; i++) {
            names[i] = tensors[i].name;
            total += tensors[i].nbytes; /* the header builder checked the sum stays below 2^63 */
        }
        rc = ptwm_hf_index_write(path, names, shard_of, n, nshards, total, err);
    }
    ptwm_free(names);
    ptwm_free(path);
    return rc;
}

ptwm_error ptwm_stdir_write(const char *dir, const ptwm_tensor_desc *tensors, size_t n,
                            const ptwm_kv *meta, size_t nmeta, uint64_t max_shard_size,
                            ptwm_err *err) {
    uint64_t *sizes = NULL;
    size_t *shard_of = NULL, nshards = 0, i, first = 0, k;
    void *hdr = NULL;
    size_t hlen;
    ptwm_error rc;
    char *path;
    if (!dir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_write: dir is NULL");
    /* Validate the whole set once (names unique across shards, sizes agree). */
    rc = ptwm_st_build_header(tensors, n, meta, nmeta, &hdr, &hlen, err);
    ptwm_free(hdr);
    if (rc) {
        ptwm_err_prefix(err, "writing '%s'", dir);
        return rc;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ptwm_fail(err, PTWM_ERR_IO, "cannot create directory '%s': %s", dir, strerror(errno));
    if (!ptwm_is_dir(dir)) return ptwm_fail(err, PTWM_ERR_IO, "'%s' is not a directory", dir);
    sizes = ptwm_calloc(n + 1, sizeof(*sizes));
    shard_of = ptwm_calloc(n + 1, sizeof(*shard_of));
    if (!sizes || !shard_of) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory writing '%s'", dir);
        goto out;
    }
    for (i = 0; i < n; i++) sizes[i] = tensors[i].nbytes;
    rc = ptwm_plan_shards(sizes, n, max_shard_size, shard_of, &nshards, err);
    if (rc) goto out;
    if (nshards <= 1) {
        /* One file, no index; an index left from an earlier write would
         * shadow it, so it goes. */
        path = ptwm_path_join(dir, INDEX_NAME);
        if (path && ptwm_file_exists(path)) unlink(path);
        ptwm_free(path);
        path = ptwm_path_join(dir, SINGLE_NAME);
        rc = path ? ptwm_st_write(path, tensors, n, meta, nmeta, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory writing '%s'", dir);
        ptwm_free(path);
        goto out;
    }
    /* Greedy packing keeps each shard's tensors contiguous in input order. */
    for (k = 0; k < nshards && !rc; k++) {
        size_t end = first;
        char name[64];
        while (end < n && shard_of[end] == k) end++;
        ptwm_shard_filename(k + 1, nshards, "safetensors", name, sizeof(name), NULL);
        path = ptwm_path_join(dir, name);
        rc = path ? ptwm_st_write(path, tensors + first, end - first, meta, nmeta, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory writing '%s'", dir);
        ptwm_free(path);
        first = end;
    }
    if (!rc) rc = write_index(dir, tensors, n, shard_of, nshards, err);
out:
    ptwm_free(sizes);
    ptwm_free(shard_of);
    return rc;
}
