/* A sharded .ptwm directory: model.ptwm.index.json plus the shards it lists,
 * or a lone model.ptwm (read_sharded_ptwm).
 *
 * Opening checks the index against the shards both ways: every tensor the
 * weight_map lists must be in the shard it names, every tensor of a shard must
 * be listed (for that shard), no tensor may be in two shards, and the totals
 * must equal the sums. A checkpoint that passes is self-consistent, so a later
 * lookup by name cannot silently pick the wrong copy. */
#include <stdio.h>
#include <stdlib.h>
#include "common.h"
#include "fileio.h"

typedef struct ptdir_tensor {
    size_t shard, local;
} ptdir_tensor;

struct ptwm_ptdir {
    ptwm_index *index;        /* NULL for a lone model.ptwm */
    ptwm_index *names;        /* every tensor -> its shard, in ptdir order (the lookup table) */
    ptwm_reader **shards;
    char **shard_names;
    size_t nshards;
    ptdir_tensor *t;
    size_t n;
    uint64_t total_size, compressed_total_size;
};

void ptwm_ptdir_close(ptwm_ptdir *d) {
    size_t i;
    if (!d) return;
    for (i = 0; i < d->nshards; i++) {
        ptwm_reader_close(d->shards[i]);
        free(d->shard_names[i]);
    }
    free(d->shards);
    free(d->shard_names);
    free(d->t);
    ptwm_index_free(d->index);
    ptwm_index_free(d->names);
    free(d);
}

static ptwm_error open_shard(ptwm_ptdir *d, const char *dir, const char *name, ptwm_err *err) {
    char *path = ptwm_path_join(dir, name);
    ptwm_error rc;
    size_t i = d->nshards;
    if (!path) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    d->shard_names[i] = strdup(name);
    if (!d->shard_names[i]) {
        free(path);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    d->nshards++;
    if (!ptwm_file_exists(path)) {
        rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                       "directory '%s': shard '%s' listed in %s is missing", dir, name,
                       PTWM_INDEX_NAME);
        free(path);
        return rc;
    }
    rc = ptwm_reader_open(path, &d->shards[i], err);
    free(path);
    return rc;
}

/* Union of the shards' tensors; a name seen twice is PTWM_ERR_DUPLICATE. */
static ptwm_error collect_tensors(ptwm_ptdir *d, const char *dir, ptwm_err *err) {
    size_t s, i, total = 0;
    ptwm_error rc;
    for (s = 0; s < d->nshards; s++) total += ptwm_reader_count(d->shards[s]);
    d->t = (ptdir_tensor *)ptwm_calloc(total ? total : 1, sizeof *d->t);
    if (!d->t) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if ((rc = ptwm_index_create(0, 0, &d->names, err)) != PTWM_OK) return rc;
    for (s = 0; s < d->nshards; s++) {
        size_t n = ptwm_reader_count(d->shards[s]);
        uint64_t fsize = ptwm_reader_file_size(d->shards[s]);
        if (ptwm_add_overflow(d->compressed_total_size, fsize, &d->compressed_total_size))
            return ptwm_fail(err, PTWM_ERR_INDEX, "directory '%s': shard sizes overflow", dir);
        for (i = 0; i < n; i++) {
            ptwm_tensor_info info;
            size_t prev;
            if ((rc = ptwm_reader_tensor(d->shards[s], i, &info, NULL)) != PTWM_OK)
                return ptwm_fail(err, rc, "directory '%s': shard '%s': tensor %zu unreadable", dir,
                                 d->shard_names[s], i);
            if (ptwm_index_find(d->names, info.name, &prev, NULL) == PTWM_OK)
                return ptwm_fail(err, PTWM_ERR_DUPLICATE,
                                 "directory '%s': tensor '%s' is in both shard '%s' and shard '%s'",
                                 dir, info.name, d->shard_names[d->t[prev].shard],
                                 d->shard_names[s]);
            if ((rc = ptwm_index_add(d->names, info.name, d->shard_names[s], err)) != PTWM_OK)
                return rc;
            if (ptwm_add_overflow(d->total_size, info.nbytes, &d->total_size))
                return ptwm_fail(err, PTWM_ERR_INDEX, "directory '%s': tensor sizes overflow", dir);
            d->t[d->n].shard = s;
            d->t[d->n].local = i;
            d->n++;
        }
    }
    return PTWM_OK;
}

/* The weight_map and the shards must agree entry for entry, and the totals. */
static ptwm_error check_index(const ptwm_ptdir *d, const char *dir, ptwm_err *err) {
    size_t i, n = ptwm_index_count(d->index);
    for (i = 0; i < n; i++) {
        const char *tensor, *shard;
        size_t pos;
        ptwm_index_entry(d->index, i, &tensor, &shard, NULL);
        if (ptwm_index_find(d->names, tensor, &pos, NULL) != PTWM_OK)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "directory '%s': %s lists tensor '%s' in shard '%s', which lacks it",
                             dir, PTWM_INDEX_NAME, tensor, shard);
        if (strcmp(d->shard_names[d->t[pos].shard], shard) != 0)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "directory '%s': %s lists tensor '%s' in shard '%s', which lacks it "
                             "(it is in shard '%s')",
                             dir, PTWM_INDEX_NAME, tensor, shard, d->shard_names[d->t[pos].shard]);
    }
    for (i = 0; i < d->n; i++) {
        const char *tensor;
        ptwm_index_entry(d->names, i, &tensor, NULL, NULL);
        if (ptwm_index_find(d->index, tensor, NULL, NULL) != PTWM_OK)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "directory '%s': tensor '%s' of shard '%s' is not in %s's weight_map",
                             dir, tensor, d->shard_names[d->t[i].shard], PTWM_INDEX_NAME);
    }
    if (ptwm_index_total_size(d->index) != d->total_size)
        return ptwm_fail(err, PTWM_ERR_INDEX,
                         "directory '%s': %s says total_size %llu, the shards' tensors hold %llu "
                         "bytes",
                         dir, PTWM_INDEX_NAME,
                         (unsigned long long)ptwm_index_total_size(d->index),
                         (unsigned long long)d->total_size);
    if (ptwm_index_compressed_total_size(d->index) != d->compressed_total_size)
        return ptwm_fail(err, PTWM_ERR_INDEX,
                         "directory '%s': %s says compressed_total_size %llu, the shard files "
                         "hold %llu bytes",
                         dir, PTWM_INDEX_NAME,
                         (unsigned long long)ptwm_index_compressed_total_size(d->index),
                         (unsigned long long)d->compressed_total_size);
    return PTWM_OK;
}

static ptwm_error open_dir(ptwm_ptdir *d, const char *dir, ptwm_err *err) {
    char *index_path = ptwm_path_join(dir, PTWM_INDEX_NAME);
    ptwm_error rc;
    size_t i, n;
    int found;
    if (!index_path) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if ((rc = ptwm_find_file(index_path, &found, err)) != PTWM_OK) {
        free(index_path);
        return rc;
    }
    if (!found) {
        char *single;
        free(index_path);
        d->shards = (ptwm_reader **)calloc(1, sizeof *d->shards);
        d->shard_names = (char **)calloc(1, sizeof *d->shard_names);
        single = ptwm_path_join(dir, PTWM_SINGLE_NAME);
        if (!d->shards || !d->shard_names || !single) {
            free(single);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        }
        rc = ptwm_find_file(single, &found, err);
        free(single);
        if (rc != PTWM_OK) return rc;
        if (!found)
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "directory '%s': neither %s nor %s exists",
                             dir, PTWM_INDEX_NAME, PTWM_SINGLE_NAME);
        if ((rc = open_shard(d, dir, PTWM_SINGLE_NAME, err)) != PTWM_OK) return rc;
        return collect_tensors(d, dir, err);
    }
    rc = ptwm_index_read(index_path, &d->index, err);
    free(index_path);
    if (rc != PTWM_OK) return rc;
    n = ptwm_index_shard_count(d->index);
    d->shards = (ptwm_reader **)ptwm_calloc(n ? n : 1, sizeof *d->shards);
    d->shard_names = (char **)ptwm_calloc(n ? n : 1, sizeof *d->shard_names);
    if (!d->shards || !d->shard_names) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++)
        if ((rc = open_shard(d, dir, ptwm_index_shard(d->index, i), err)) != PTWM_OK) return rc;
    if ((rc = collect_tensors(d, dir, err)) != PTWM_OK) return rc;
    return check_index(d, dir, err);
}

ptwm_error ptwm_ptdir_open(const char *dir, ptwm_ptdir **out, ptwm_err *err) {
    ptwm_ptdir *d;
    ptwm_error rc;
    if (!dir || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_open: NULL argument");
    *out = NULL;
    if (!ptwm_is_dir(dir))
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "'%s' is not a directory", dir);
    d = (ptwm_ptdir *)calloc(1, sizeof *d);
    if (!d) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    rc = open_dir(d, dir, err);
    if (rc != PTWM_OK) {
        ptwm_ptdir_close(d);
        return rc;
    }
    *out = d;
    return PTWM_OK;
}

void ptwm_ptdir_set_threads(ptwm_ptdir *d, int threads) {
    size_t i;
    if (!d) return;
    for (i = 0; i < d->nshards; i++) ptwm_reader_set_threads(d->shards[i], threads);
}

size_t ptwm_ptdir_count(const ptwm_ptdir *d) { return d ? d->n : 0; }
size_t ptwm_ptdir_shard_count(const ptwm_ptdir *d) { return d ? d->nshards : 0; }
ptwm_reader *ptwm_ptdir_shard(const ptwm_ptdir *d, size_t i) {
    return d && i < d->nshards ? d->shards[i] : NULL;
}
const char *ptwm_ptdir_shard_name(const ptwm_ptdir *d, size_t i) {
    return d && i < d->nshards ? d->shard_names[i] : NULL;
}
const ptwm_index *ptwm_ptdir_index(const ptwm_ptdir *d) { return d ? d->index : NULL; }
uint64_t ptwm_ptdir_total_size(const ptwm_ptdir *d) { return d ? d->total_size : 0; }
uint64_t ptwm_ptdir_compressed_total_size(const ptwm_ptdir *d) {
    return d ? d->compressed_total_size : 0;
}

size_t ptwm_ptdir_shard_of(const ptwm_ptdir *d, size_t index, size_t *local) {
    if (!d || index >= d->n) return (size_t)-1;
    if (local) *local = d->t[index].local;
    return d->t[index].shard;
}

ptwm_error ptwm_ptdir_tensor(const ptwm_ptdir *d, size_t index, ptwm_tensor_info *out,
                             ptwm_err *err) {
    if (!d || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_tensor: NULL argument");
    if (index >= d->n) return ptwm_fail_index(err, ".ptwm directory", index, d->n);
    return ptwm_reader_tensor(d->shards[d->t[index].shard], d->t[index].local, out, err);
}

ptwm_error ptwm_ptdir_find(const ptwm_ptdir *d, const char *name, size_t *index, ptwm_err *err) {
    if (!d || !name) return ptwm_fail_name(err, ".ptwm directory", name);
    return ptwm_index_find(d->names, name, index, err);
}

ptwm_error ptwm_ptdir_decode_range(ptwm_ptdir *d, size_t index, uint64_t offset, void *dst,
                                   size_t len, ptwm_err *err) {
    if (!d || index >= d->n)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor index %zu out of range (%zu tensors)",
                         index, d ? d->n : 0);
    return ptwm_reader_decode_range(d->shards[d->t[index].shard], d->t[index].local, offset, dst,
                                    len, err);
}
