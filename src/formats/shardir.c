/* Sharded checkpoint directories, both formats: an index
 * (model.safetensors.index.json or model.ptwm.index.json, read by index.c)
 * plus the shards it lists, or a lone model.safetensors / model.ptwm. Each
 * shard is opened as a source of its format (source_impl.h) and every read
 * goes to the shard holding the tensor.
 *
 * The weight_map is authoritative and must agree with the shards exactly:
 *  - a shard name is a plain file name (index.c: not empty, no '/' or '\',
 *    no ".."; a .ptwm index also needs the .ptwm suffix);
 *  - every listed shard exists; every mapped tensor is in its shard; no
 *    tensor is in two shards; a shard tensor missing from the weight_map is
 *    an error (PTWM_ERR_INDEX), not silently loaded or dropped;
 *  - metadata.total_size (required in a .ptwm index, optional in a Hugging
 *    Face one) equals the tensors' bytes, and a .ptwm index's
 *    compressed_total_size the shard files' bytes.
 * A directory that passes is self-consistent, so a lookup by name cannot
 * silently pick the wrong copy. Safetensors shards are visited in name order
 * (model-00001... first), .ptwm shards in the index's order; the formats keep
 * their own messages. */
#include <stdlib.h>
#include "fileio.h"
#include "index.h"
#include "nametab.h"
#include "ptdir_files.h"
#include "shardir.h"
#include "source_impl.h"

/* What differs between the two kinds of directory. */
typedef struct dir_kind {
    const ptwm_source_ops *shard;
    const char *label;            /* the directory in lookup messages */
    const char *index_name, *single_name;
    ptwm_index_kind index_kind;
    int ptwm;                     /* .ptwm: its messages, shards in index order, index kept */
} dir_kind;

static const dir_kind ST_DIR = {&ptwm_source_st_ops, "checkpoint directory",
                                "model.safetensors.index.json", "model.safetensors",
                                PTWM_INDEX_SAFETENSORS, 0};
static const dir_kind PT_DIR = {&ptwm_source_ptwm_ops, ".ptwm directory", PTWM_INDEX_NAME,
                                PTWM_SINGLE_NAME, PTWM_INDEX_PTWM, 1};

typedef struct dir_entry {
    const char *name;             /* the shard's own string */
    size_t local;                 /* index within the shard */
    uint32_t shard;
} dir_entry;

struct ptwm_shardir {
    const dir_kind *k;
    ptwm_index *index;            /* .ptwm kind only; NULL for a lone model.ptwm */
    void **shards;
    char **shard_names;
    size_t nshards;
    dir_entry *t;
    size_t n;
    ptwm_nametab by_name;         /* over t */
    uint64_t total_size, compressed_total_size;
    char *path;                   /* the directory */
    ptwm_files files;             /* .ptwm kind: its file record, if has_files */
    int has_files;
};

void ptwm_shardir_close(ptwm_shardir *d) {
    size_t i;
    if (!d) return;
    for (i = 0; i < d->nshards; i++) {
        if (d->shards[i]) d->k->shard->close(d->shards[i]);
        ptwm_free(d->shard_names[i]);
    }
    ptwm_free(d->shards);
    ptwm_free(d->shard_names);
    ptwm_free(d->t);
    ptwm_nametab_free(&d->by_name);
    ptwm_index_free(d->index);
    ptwm_files_free(&d->files);
    ptwm_free(d->path);
    ptwm_free(d);
}

/* ---- the name table ------------------------------------------------------ */

static const char *entry_name(const void *owner, size_t i) {
    return ((const ptwm_shardir *)owner)->t[i].name;
}

/* The index of the tensor called `name`, or SIZE_MAX. */
static size_t find_name(const ptwm_shardir *d, const char *name) {
    return ptwm_nametab_lookup(&d->by_name, d, entry_name, name);
}

/* ---- opening ------------------------------------------------------------- */

static ptwm_error no_memory(const char *dir, ptwm_err *err) {
    return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory opening '%s'", dir);
}

/* Open the shards `names` (their order is the directory's); `listed_in`
 * names the index (or the lone file) in messages. */
static ptwm_error open_shards(ptwm_shardir *d, const char *dir, const char *const *names,
                              size_t nnames, ptwm_open_mode mode, const char *listed_in,
                              ptwm_err *err) {
    size_t i;
    d->shards = (void **)ptwm_calloc(nnames + 1, sizeof(*d->shards));
    d->shard_names = (char **)ptwm_calloc(nnames + 1, sizeof(*d->shard_names));
    if (!d->shards || !d->shard_names) return no_memory(dir, err);
    for (i = 0; i < nnames; i++) {
        char *path = ptwm_path_join(dir, names[i]);
        ptwm_error rc;
        d->shard_names[i] = path ? ptwm_strdup(names[i]) : NULL;
        if (!d->shard_names[i]) {
            ptwm_free(path);
            return no_memory(dir, err);
        }
        d->nshards++;
        if (!ptwm_file_exists(path))
            rc = d->k->ptwm ? ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                                        "directory '%s': shard '%s' listed in %s is missing", dir,
                                        names[i], PTWM_INDEX_NAME)
                            : ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                                        "index '%s' lists shard '%s', which does not exist",
                                        listed_in, names[i]);
        else
            rc = d->k->shard->open(path, mode, &d->shards[i], err);
        ptwm_free(path);
        if (rc) return rc;
    }
    return PTWM_OK;
}

/* Every shard's tensors, shard by shard, into the table and the name table;
 * a name seen twice is PTWM_ERR_DUPLICATE naming both shards. */
static ptwm_error collect_tensors(ptwm_shardir *d, const char *dir, ptwm_err *err) {
    const ptwm_source_ops *ops = d->k->shard;
    size_t s, i, total = 0;
    for (s = 0; s < d->nshards; s++) total += ops->count(d->shards[s]);
    if (total >= (size_t)1 << 30)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "directory '%s': %zu tensors, over %zu", dir, total,
                         ((size_t)1 << 30) - 1);
    d->t = (dir_entry *)ptwm_calloc(total + 1, sizeof(*d->t));
    if (!d->t || !ptwm_nametab_reserve(&d->by_name, total)) return no_memory(dir, err);
    for (s = 0; s < d->nshards; s++) {
        size_t n = ops->count(d->shards[s]);
        if (ptwm_add_overflow(d->compressed_total_size, ops->file_size(d->shards[s]),
                              &d->compressed_total_size))
            return ptwm_fail(err, PTWM_ERR_INDEX, "directory '%s': shard sizes overflow", dir);
        for (i = 0; i < n; i++) {
            ptwm_tensor_info info;
            uint64_t *slot;
            uint32_t h;
            ptwm_error rc = ops->tensor(d->shards[s], i, &info, NULL);
            if (rc)
                return ptwm_fail(err, rc, "directory '%s': shard '%s': tensor %zu unreadable", dir,
                                 d->shard_names[s], i);
            h = ptwm_name_hash(info.name, strlen(info.name));
            slot = ptwm_nametab_find(&d->by_name, d, entry_name, info.name, h);
            if (*slot) {
                const char *first = d->shard_names[d->t[ptwm_nametab_index(*slot)].shard];
                return d->k->ptwm ? ptwm_fail(err, PTWM_ERR_DUPLICATE,
                                              "directory '%s': tensor '%s' is in both shard '%s' "
                                              "and shard '%s'",
                                              dir, info.name, first, d->shard_names[s])
                                  : ptwm_fail(err, PTWM_ERR_DUPLICATE,
                                              "directory '%s': tensor '%s' is in shard '%s' and "
                                              "in shard '%s'",
                                              dir, info.name, first, d->shard_names[s]);
            }
            if (ptwm_add_overflow(d->total_size, info.nbytes, &d->total_size))
                return ptwm_fail(err, PTWM_ERR_INDEX, "directory '%s': tensor sizes overflow", dir);
            d->t[d->n].name = info.name;
            d->t[d->n].local = i;
            d->t[d->n].shard = (uint32_t)s;
            ptwm_nametab_put(slot, h, d->n++);
        }
    }
    return PTWM_OK;
}

/* The weight_map must list every tensor in the shard holding it, and nothing
 * else; the totals must equal the sums. */
static ptwm_error check_index(const ptwm_shardir *d, const ptwm_index *idx, const char *dir,
                              const char *index_path, ptwm_err *err) {
    const char *tensor, *shard;
    size_t i;
    int pt = d->k->ptwm;
    for (i = 0; ptwm_index_entry(idx, i, &tensor, &shard, NULL) == PTWM_OK; i++) {
        size_t at = find_name(d, tensor);
        const char *held = at != SIZE_MAX ? d->shard_names[d->t[at].shard] : NULL;
        if (held && strcmp(held, shard) == 0) continue;
        if (!pt)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "index '%s': tensor '%s' is mapped to shard '%s', which lacks it",
                             index_path, tensor, shard);
        if (!held)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "directory '%s': %s lists tensor '%s' in shard '%s', which lacks it",
                             dir, PTWM_INDEX_NAME, tensor, shard);
        return ptwm_fail(err, PTWM_ERR_INDEX,
                         "directory '%s': %s lists tensor '%s' in shard '%s', which lacks it "
                         "(it is in shard '%s')",
                         dir, PTWM_INDEX_NAME, tensor, shard, held);
    }
    for (i = 0; i < d->n; i++) {
        const char *held = d->shard_names[d->t[i].shard];
        if (ptwm_index_find(idx, d->t[i].name, NULL, NULL) == PTWM_OK) continue;
        return pt ? ptwm_fail(err, PTWM_ERR_INDEX,
                              "directory '%s': tensor '%s' of shard '%s' is not in %s's weight_map",
                              dir, d->t[i].name, held, PTWM_INDEX_NAME)
                  : ptwm_fail(err, PTWM_ERR_INDEX,
                              "index '%s': shard '%s' holds tensor '%s', which the weight_map "
                              "does not list",
                              index_path, held, d->t[i].name);
    }
    if (ptwm_index_has_total(idx) && ptwm_index_total_size(idx) != d->total_size)
        return pt ? ptwm_fail(err, PTWM_ERR_INDEX,
                              "directory '%s': %s says total_size %llu, the shards' tensors hold "
                              "%llu bytes",
                              dir, PTWM_INDEX_NAME,
                              (unsigned long long)ptwm_index_total_size(idx),
                              (unsigned long long)d->total_size)
                  : ptwm_fail(err, PTWM_ERR_INDEX,
                              "index '%s': metadata.total_size is %lld but the shards hold %llu "
                              "bytes of tensors",
                              index_path, (long long)ptwm_index_total_size(idx),
                              (unsigned long long)d->total_size);
    if (pt && ptwm_index_compressed_total_size(idx) != d->compressed_total_size)
        return ptwm_fail(err, PTWM_ERR_INDEX,
                         "directory '%s': %s says compressed_total_size %llu, the shard files "
                         "hold %llu bytes",
                         dir, PTWM_INDEX_NAME,
                         (unsigned long long)ptwm_index_compressed_total_size(idx),
                         (unsigned long long)d->compressed_total_size);
    return PTWM_OK;
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static ptwm_error open_index(ptwm_shardir *d, const char *dir, const char *index_path,
                             ptwm_open_mode mode, ptwm_err *err) {
    ptwm_index *idx = NULL;
    const char **names = NULL;
    size_t i, nnames;
    ptwm_error rc = ptwm_index_read_checked(index_path, d->k->index_kind,
                                            d->has_files ? &d->files : NULL, &idx, err);
    if (rc) return rc;
    nnames = ptwm_index_shard_count(idx);
    names = (const char **)ptwm_calloc(nnames + 1, sizeof(*names));
    if (!names) {
        rc = no_memory(dir, err);
    } else {
        for (i = 0; i < nnames; i++) names[i] = ptwm_index_shard(idx, i);
        if (!d->k->ptwm && nnames > 1) qsort(names, nnames, sizeof(*names), cmp_cstr);
        rc = open_shards(d, dir, names, nnames, mode, index_path, err);
        if (!rc) rc = collect_tensors(d, dir, err);
        if (!rc) rc = check_index(d, idx, dir, index_path, err);
    }
    ptwm_free(names);
    if (d->k->ptwm) d->index = idx;   /* ptwm_ptdir_index hands it out */
    else ptwm_index_free(idx);
    return rc;
}

/* A .ptwm directory's file record, read first: the index is checked against
 * it, and an index it lists must be there. */
static ptwm_error read_record(ptwm_shardir *d, const char *dir, const char *index_path,
                              ptwm_err *err) {
    ptwm_error rc;
    if (!d->k->ptwm) return PTWM_OK;
    if ((rc = ptwm_files_read(dir, &d->files, &d->has_files, err))) return rc;
    if (d->has_files && ptwm_files_find(&d->files, d->k->index_name) &&
        !ptwm_file_exists(index_path))
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                         "directory '%s': %s is missing, its file record (%s) lists it", dir,
                         d->k->index_name, PTWM_FILES_NAME);
    return PTWM_OK;
}

static ptwm_error open_dir(ptwm_shardir *d, const char *dir, ptwm_open_mode mode, ptwm_err *err) {
    char *index_path = ptwm_path_join(dir, d->k->index_name);
    char *single = ptwm_path_join(dir, d->k->single_name);
    ptwm_error rc;
    int found;
    if (!index_path || !single) {
        rc = no_memory(dir, err);
    } else if ((rc = read_record(d, dir, index_path, err)) != PTWM_OK) {
        /* reported */
    } else if ((rc = ptwm_find_file(index_path, &found, err)) != PTWM_OK || found) {
        if (!rc) rc = open_index(d, dir, index_path, mode, err);
    } else if ((rc = ptwm_find_file(single, &found, err)) != PTWM_OK || found) {
        if (!rc) rc = open_shards(d, dir, &d->k->single_name, 1, mode, single, err);
        if (!rc) rc = collect_tensors(d, dir, err);
    } else if (d->k->ptwm) {
        rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND, "directory '%s': neither %s nor %s exists", dir,
                       d->k->index_name, d->k->single_name);
    } else {
        rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND, "directory '%s' has neither %s nor %s", dir,
                       d->k->index_name, d->k->single_name);
    }
    ptwm_free(index_path);
    ptwm_free(single);
    return rc;
}

ptwm_error ptwm_shardir_open(const char *dir, ptwm_source_kind kind, ptwm_open_mode mode,
                             ptwm_shardir **out, ptwm_err *err) {
    ptwm_shardir *d;
    ptwm_error rc;
    *out = NULL;
    if (kind != PTWM_SOURCE_SAFETENSORS_DIR && kind != PTWM_SOURCE_PTWM_DIR)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "directory '%s': kind %d is no directory",
                         dir, (int)kind);
    if (!ptwm_is_dir(dir))
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "'%s' is not a directory", dir);
    d = (ptwm_shardir *)ptwm_calloc(1, sizeof(*d));
    if (!d) return no_memory(dir, err);
    d->k = kind == PTWM_SOURCE_PTWM_DIR ? &PT_DIR : &ST_DIR;
    d->path = ptwm_strdup(dir);
    rc = d->path ? open_dir(d, dir, mode, err) : no_memory(dir, err);
    if (rc) {
        ptwm_shardir_close(d);
        return rc;
    }
    *out = d;
    return PTWM_OK;
}

/* ---- what only a directory has ------------------------------------------ */

size_t ptwm_shardir_shard_count(const ptwm_shardir *d) { return d ? d->nshards : 0; }
const ptwm_source_ops *ptwm_shardir_shard_ops(const ptwm_shardir *d) { return d->k->shard; }

void *ptwm_shardir_shard(const ptwm_shardir *d, size_t i) {
    return d && i < d->nshards ? d->shards[i] : NULL;
}
const char *ptwm_shardir_shard_name(const ptwm_shardir *d, size_t i) {
    return d && i < d->nshards ? d->shard_names[i] : NULL;
}
const ptwm_index *ptwm_shardir_index(const ptwm_shardir *d) { return d ? d->index : NULL; }
const ptwm_files *ptwm_shardir_files(const ptwm_shardir *d) {
    return d && d->has_files ? &d->files : NULL;
}
const char *ptwm_shardir_path(const ptwm_shardir *d) { return d ? d->path : NULL; }
uint64_t ptwm_shardir_total_size(const ptwm_shardir *d) { return d ? d->total_size : 0; }
uint64_t ptwm_shardir_compressed_total_size(const ptwm_shardir *d) {
    return d ? d->compressed_total_size : 0;
}

size_t ptwm_shardir_shard_of(const ptwm_shardir *d, size_t index, size_t *local) {
    if (!d || index >= d->n) return (size_t)-1;
    if (local) *local = d->t[index].local;
    return d->t[index].shard;
}

/* ---- the directory as a source ------------------------------------------- */

static ptwm_error open_as(ptwm_source_kind kind, const char *path, ptwm_open_mode mode,
                          void **out, ptwm_err *err) {
    ptwm_shardir *d = NULL;
    ptwm_error rc = ptwm_shardir_open(path, kind, mode, &d, err);
    *out = d;
    return rc;
}
static ptwm_error stdir_open(const char *path, ptwm_open_mode mode, void **out, ptwm_err *err) {
    return open_as(PTWM_SOURCE_SAFETENSORS_DIR, path, mode, out, err);
}
static ptwm_error ptdir_open(const char *path, ptwm_open_mode mode, void **out, ptwm_err *err) {
    return open_as(PTWM_SOURCE_PTWM_DIR, path, mode, out, err);
}
static void dir_close(void *h) { ptwm_shardir_close((ptwm_shardir *)h); }

static size_t dir_count(const void *h) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    return d ? d->n : 0;
}

static ptwm_error dir_tensor(const void *h, size_t index, ptwm_tensor_info *out, ptwm_err *err) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    if (index >= d->n) return ptwm_fail_index(err, d->k->label, index, d->n);
    return d->k->shard->tensor(d->shards[d->t[index].shard], d->t[index].local, out, err);
}

static ptwm_error dir_find(const void *h, const char *name, size_t *index, ptwm_err *err) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    size_t at = name ? find_name(d, name) : SIZE_MAX;
    if (at == SIZE_MAX) return ptwm_fail_name(err, d->k->label, name);
    if (index) *index = at;
    return PTWM_OK;
}

static ptwm_error dir_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                           ptwm_err *err) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    if (index >= d->n) return ptwm_fail_index(err, d->k->label, index, d->n);
    return d->k->shard->read(d->shards[d->t[index].shard], d->t[index].local, offset, dst, len,
                             err);
}

static void dir_set_threads(void *h, int threads) {
    ptwm_shardir *d = (ptwm_shardir *)h;
    size_t i;
    if (!d || !d->k->shard->set_threads) return;
    for (i = 0; i < d->nshards; i++) d->k->shard->set_threads(d->shards[i], threads);
}

static ptwm_error dir_set_base(void *h, ptwm_source *base, ptwm_err *err) {
    ptwm_shardir *d = (ptwm_shardir *)h;
    size_t i;
    ptwm_error rc = PTWM_OK;
    for (i = 0; d->k->shard->set_base && !rc && i < d->nshards; i++)
        rc = d->k->shard->set_base(d->shards[i], base, err);
    return rc;
}

static int dir_tensor_hash(const void *h, size_t index, uint8_t hash[16]) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    if (index >= d->n || !d->k->shard->tensor_hash) return 0;
    return d->k->shard->tensor_hash(d->shards[d->t[index].shard], d->t[index].local, hash);
}

/* Each shard's tensors in one read_many call (in list order), so their
 * chunks share the decoding threads shard by shard. */
static ptwm_error dir_read_many(void *h, const size_t *indices, void *const *dsts,
                                const size_t *sizes, size_t n, ptwm_err *err) {
    ptwm_shardir *d = (ptwm_shardir *)h;
    size_t *loc = (size_t *)ptwm_malloc((uint64_t)n * 2 * sizeof(size_t) + 1);
    void **dst = (void **)ptwm_malloc((uint64_t)n * sizeof(void *) + 1);
    size_t *len = loc + n, shard, i, m;
    ptwm_error rc = PTWM_OK;
    if (!loc || !dst) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu tensors", n);
    for (i = 0; !rc && i < n; i++)   /* an index no shard holds */
        if (indices[i] >= d->n)
            rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", indices[i], d->n);
    for (shard = 0; !rc && shard < d->nshards; shard++) {
        for (i = m = 0; i < n; i++) {
            const dir_entry *t = &d->t[indices[i]];
            if (t->shard != shard) continue;
            loc[m] = t->local;
            dst[m] = dsts[i];
            len[m++] = sizes[i];
        }
        if (m) rc = d->k->shard->read_many(d->shards[shard], loc, dst, len, m, err);
    }
    ptwm_free(loc);
    ptwm_free(dst);
    return rc;
}

/* Metadata: the first shard's (shards of one checkpoint carry the same). */
static size_t dir_metadata_count(const void *h) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    return d->nshards && d->k->shard->metadata_count
               ? d->k->shard->metadata_count(d->shards[0])
               : 0;
}
static ptwm_kv dir_metadata(const void *h, size_t i) {
    const ptwm_shardir *d = (const ptwm_shardir *)h;
    ptwm_kv none = {NULL, NULL};
    return d->nshards && d->k->shard->metadata ? d->k->shard->metadata(d->shards[0], i) : none;
}
static uint64_t dir_file_size(const void *h) {
    return ptwm_shardir_compressed_total_size((const ptwm_shardir *)h);
}

const ptwm_source_ops ptwm_source_stdir_ops = {
    PTWM_SOURCE_SAFETENSORS_DIR, stdir_open, dir_close, dir_count, dir_tensor, dir_find, dir_read,
    NULL /* read_many: safetensors reads are copies, one per tensor */, dir_metadata_count,
    dir_metadata, dir_file_size, dir_set_threads, dir_set_base, dir_tensor_hash,
    NULL /* record: per shard */, NULL /* stream_into: per shard */, 0 /* read_concurrent: its shards are */};
const ptwm_source_ops ptwm_source_ptdir_ops = {
    PTWM_SOURCE_PTWM_DIR, ptdir_open, dir_close, dir_count, dir_tensor, dir_find, dir_read,
    dir_read_many, dir_metadata_count, dir_metadata, dir_file_size, dir_set_threads, dir_set_base,
    dir_tensor_hash, NULL /* record: per shard */, NULL /* stream_into: per shard */,
    0 /* read_concurrent: decodes */};
