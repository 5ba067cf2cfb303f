/* Hugging Face checkpoint directories: model.safetensors.index.json plus
 * shards, or a lone model.safetensors.
 *
 * Index rules (the weight_map is authoritative, and must agree with the
 * shards exactly):
 *  - the index is a JSON object with an object "weight_map" of tensor ->
 *    shard file name, and optionally "metadata" with an integer
 *    "total_size"; other keys are ignored (Hugging Face adds some over time);
 *  - a shard name is a plain file name: not empty, no '/' or '\', no "..";
 *  - every listed shard exists; every mapped tensor is in its shard; no
 *    tensor is in two shards; a shard tensor missing from the weight_map is
 *    an error (PTWM_ERR_INDEX), not silently loaded or dropped;
 *  - metadata.total_size, when present, equals the sum of the tensors'
 *    bytes (PTWM_ERR_INDEX naming both numbers otherwise).
 * Shards are visited in name order (model-00001... first). The index itself
 * is read and written by index.c, which also reads model.ptwm.index.json. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fileio.h"
#include "index.h"
#include "safetensors.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

typedef struct stdir_tensor {
    uint32_t shard;
    size_t index;       /* within the shard */
    const char *name;
} stdir_tensor;

struct ptwm_stdir {
    size_t nshards;
    ptwm_st **shards;
    size_t n;
    stdir_tensor *t;
    const stdir_tensor **by_name;
};

void ptwm_stdir_close(ptwm_stdir *d) {
    size_t i;
    if (!d) return;
    for (i = 0; i < d->nshards; i++) ptwm_st_close(d->shards[i]);
    free(d->shards);
    free(d->t);
    free(d->by_name);
    free(d);
}

static int cmp_tensor_name(const void *a, const void *b) {
    const stdir_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Open the listed shards (names sorted, unique) and gather their tensors. */
static ptwm_error open_shards(ptwm_stdir *d, const char *dir, const char *const *names,
                              size_t nnames, ptwm_open_mode mode, const char *index_path,
                              ptwm_err *err) {
    size_t i, j, total = 0;
    ptwm_error rc;
    d->shards = ptwm_calloc(nnames + 1, sizeof(*d->shards));
    if (!d->shards) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory opening '%s'", dir);
    for (i = 0; i < nnames; i++) {
        char *path = ptwm_path_join(dir, names[i]);
        if (!path) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory opening '%s'", dir);
        if (!ptwm_file_exists(path)) {
            rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                           "index '%s' lists shard '%s', which does not exist", index_path,
                           names[i]);
            free(path);
            return rc;
        }
        rc = ptwm_st_open(path, mode, &d->shards[i], err);
        free(path);
        if (rc) return rc;
        d->nshards++;
        total += ptwm_st_count(d->shards[i]);
    }
    d->t = ptwm_calloc(total + 1, sizeof(*d->t));
    d->by_name = ptwm_calloc(total + 1, sizeof(*d->by_name));
    if (!d->t || !d->by_name) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory opening '%s'", dir);
    for (i = 0; i < d->nshards; i++) {
        for (j = 0; j < ptwm_st_count(d->shards[i]); j++) {
            ptwm_tensor_info info;
            ptwm_st_tensor(d->shards[i], j, &info, NULL);
            d->t[d->n].shard = (uint32_t)i;
            d->t[d->n].index = j;
            d->t[d->n].name = info.name;
            d->by_name[d->n] = &d->t[d->n];
            d->n++;
        }
    }
    if (d->n > 1) qsort(d->by_name, d->n, sizeof(*d->by_name), cmp_tensor_name);
    for (i = 1; i < d->n; i++) {
        const stdir_tensor *a = d->by_name[i - 1], *b = d->by_name[i];
        if (strcmp(a->name, b->name) == 0)
            return ptwm_fail(err, PTWM_ERR_DUPLICATE, "directory '%s': tensor '%s' is in shard '%s' and in shard '%s'",
                             dir, a->name, names[a->shard], names[b->shard]);
    }
    return PTWM_OK;
}

/* The index must agree with the shards just opened. */
static ptwm_error check_index(ptwm_stdir *d, const ptwm_index *idx, const char *const *names,
                              const char *index_path, ptwm_err *err) {
    const char *tensor, *shard;
    size_t i, pos;
    uint64_t sum = 0;
    for (i = 0; ptwm_index_entry(idx, i, &tensor, &shard, NULL) == PTWM_OK; i++) {
        const char *const *hit = bsearch(&shard, names, d->nshards, sizeof(*names), cmp_cstr);
        if (ptwm_st_find(d->shards[hit - names], tensor, NULL, NULL) != PTWM_OK)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "index '%s': tensor '%s' is mapped to shard '%s', which lacks it",
                             index_path, tensor, shard);
    }
    for (i = 0; i < d->n; i++) {
        const char *held = names[d->t[i].shard];
        ptwm_tensor_info info;
        if (ptwm_index_find(idx, d->t[i].name, &pos, NULL) != PTWM_OK)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "index '%s': shard '%s' holds tensor '%s', which the weight_map does "
                             "not list",
                             index_path, held, d->t[i].name);
        ptwm_index_entry(idx, pos, NULL, &shard, NULL);
        if (strcmp(shard, held) != 0)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "index '%s': tensor '%s' is mapped to shard '%s' but found in '%s'",
                             index_path, d->t[i].name, shard, held);
        ptwm_st_tensor(d->shards[d->t[i].shard], d->t[i].index, &info, NULL);
        if (ptwm_add_overflow(sum, info.nbytes, &sum))
            return ptwm_fail(err, PTWM_ERR_INDEX, "index '%s': total size overflows", index_path);
    }
    if (ptwm_index_has_total(idx) && ptwm_index_total_size(idx) != sum)
        return ptwm_fail(err, PTWM_ERR_INDEX,
                         "index '%s': metadata.total_size is %lld but the shards hold %llu bytes "
                         "of tensors",
                         index_path, (long long)ptwm_index_total_size(idx),
                         (unsigned long long)sum);
    return PTWM_OK;
}

/* Shards are opened in name order (model-00001... first). */
static ptwm_error open_index(ptwm_stdir *d, const char *dir, const char *index_path,
                             ptwm_open_mode mode, ptwm_err *err) {
    ptwm_index *idx = NULL;
    const char **names = NULL;
    size_t i, nnames;
    ptwm_error rc = ptwm_index_read_kind(index_path, PTWM_INDEX_SAFETENSORS, &idx, err);
    if (rc) return rc;
    nnames = ptwm_index_shard_count(idx);
    names = ptwm_calloc(nnames + 1, sizeof(*names));
    if (!names) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory reading '%s'", index_path);
    } else {
        for (i = 0; i < nnames; i++) names[i] = ptwm_index_shard(idx, i);
        if (nnames > 1) qsort(names, nnames, sizeof(*names), cmp_cstr);
        rc = open_shards(d, dir, names, nnames, mode, index_path, err);
        if (!rc) rc = check_index(d, idx, names, index_path, err);
    }
    free(names);
    ptwm_index_free(idx);
    return rc;
}

ptwm_error ptwm_stdir_open(const char *dir, ptwm_open_mode mode, ptwm_stdir **out, ptwm_err *err) {
    ptwm_stdir *d;
    char *index_path, *single;
    ptwm_error rc;
    int found;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_open: out is NULL");
    *out = NULL;
    if (!dir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_open: dir is NULL");
    if (!ptwm_is_dir(dir))
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "'%s' is not a directory", dir);
    d = ptwm_calloc(1, sizeof(*d));
    index_path = ptwm_path_join(dir, INDEX_NAME);
    single = ptwm_path_join(dir, SINGLE_NAME);
    if (!d || !index_path || !single) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory opening '%s'", dir);
    } else if ((rc = ptwm_find_file(index_path, &found, err)) != PTWM_OK || found) {
        if (!rc) rc = open_index(d, dir, index_path, mode, err);
    } else if ((rc = ptwm_find_file(single, &found, err)) != PTWM_OK || found) {
        const char *names[1] = {SINGLE_NAME};
        if (!rc) rc = open_shards(d, dir, names, 1, mode, single, err);
    } else {
        rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                       "directory '%s' has neither " INDEX_NAME " nor " SINGLE_NAME, dir);
    }
    free(index_path);
    free(single);
    if (rc) {
        ptwm_stdir_close(d);
        return rc;
    }
    *out = d;
    return PTWM_OK;
}

size_t ptwm_stdir_count(const ptwm_stdir *d) { return d ? d->n : 0; }

ptwm_error ptwm_stdir_tensor(const ptwm_stdir *d, size_t index, ptwm_tensor_info *out,
                             ptwm_err *err) {
    if (!d) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_tensor: NULL directory");
    if (index >= d->n) return ptwm_fail_index(err, "checkpoint directory", index, d->n);
    return ptwm_st_tensor(d->shards[d->t[index].shard], d->t[index].index, out, err);
}

ptwm_error ptwm_stdir_find(const ptwm_stdir *d, const char *name, size_t *index, ptwm_err *err) {
    stdir_tensor key;
    const stdir_tensor *kp = &key, *const *hit;
    if (!d || !name) return ptwm_fail_name(err, "checkpoint directory", name);
    key.name = name;
    hit = bsearch(&kp, d->by_name, d->n, sizeof(*d->by_name), cmp_tensor_name);
    if (!hit) return ptwm_fail_name(err, "checkpoint directory", name);
    if (index) *index = (size_t)(*hit - d->t);
    return PTWM_OK;
}

ptwm_error ptwm_stdir_read(const ptwm_stdir *d, size_t index, uint64_t offset, void *dst,
                           size_t len, ptwm_err *err) {
    if (!d || index >= d->n)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_stdir_read: tensor index %zu out of range",
                         index);
    return ptwm_st_read(d->shards[d->t[index].shard], d->t[index].index, offset, dst, len, err);
}

size_t ptwm_stdir_shard_count(const ptwm_stdir *d) { return d ? d->nshards : 0; }

const ptwm_st *ptwm_stdir_shard(const ptwm_stdir *d, size_t i) {
    return d && i < d->nshards ? d->shards[i] : NULL;
}

size_t ptwm_stdir_shard_of(const ptwm_stdir *d, size_t index) {
    return d && index < d->n ? d->t[index].shard : 0;
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
    free(names);
    free(path);
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
    free(hdr);
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
        free(path);
        path = ptwm_path_join(dir, SINGLE_NAME);
        rc = path ? ptwm_st_write(path, tensors, n, meta, nmeta, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory writing '%s'", dir);
        free(path);
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
        free(path);
        first = end;
    }
    if (!rc) rc = write_index(dir, tensors, n, shard_of, nshards, err);
out:
    free(sizes);
    free(shard_of);
    return rc;
}
