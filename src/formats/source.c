/* One handle over every kind of weights file. Each kind's reader parses its
 * header or index once at open; the source only forwards to it, so loads of
 * many layouts from one source never parse anything again. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "container_format.h"
#include "container_read.h"
#include "fileio.h"

struct ptwm_source {
    ptwm_source_kind kind;
    char *path;
    ptwm_st *st;
    ptwm_stdir *stdir;
    ptwm_reader *rd;
    ptwm_ptdir *ptdir;
    /* RAW_F32: the open file and its one tensor */
    int fd;
    uint64_t raw_shape[1];
    uint64_t raw_bytes;
};

const char *ptwm_source_kind_name(ptwm_source_kind kind) {
    switch (kind) {
    case PTWM_SOURCE_AUTO: return "auto";
    case PTWM_SOURCE_SAFETENSORS: return "safetensors";
    case PTWM_SOURCE_SAFETENSORS_DIR: return "safetensors-dir";
    case PTWM_SOURCE_PTWM: return "ptwm";
    case PTWM_SOURCE_PTWM_DIR: return "ptwm-dir";
    case PTWM_SOURCE_RAW_F32: return "raw-f32";
    }
    return "unknown";
}

/* Whether dir/name is there, as a file or as something unusable (a link to
 * itself, no permission), whose opener then reports the real error. */
static int dir_has(const char *dir, const char *name) {
    char *p = ptwm_path_join(dir, name);
    int yes = p && ptwm_file_state(p) != ENOENT;
    free(p);
    return yes;
}

/* The kind of `path` when the caller left it to us. */
static ptwm_error detect_kind(const char *path, ptwm_source_kind *kind, ptwm_err *err) {
    uint8_t head[PTWM_FMT_MAGIC_LEN];
    uint64_t size;
    int fd;
    ptwm_error rc;
    if (ptwm_is_dir(path)) {
        if (dir_has(path, "model.ptwm.index.json") || dir_has(path, "model.ptwm")) {
            *kind = PTWM_SOURCE_PTWM_DIR;
        } else if (dir_has(path, "model.safetensors.index.json") ||
                   dir_has(path, "model.safetensors")) {
            *kind = PTWM_SOURCE_SAFETENSORS_DIR;
        } else {
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                             "directory '%s' holds none of model.ptwm.index.json, model.ptwm, "
                             "model.safetensors.index.json, model.safetensors",
                             path);
        }
        return PTWM_OK;
    }
    rc = ptwm_open_read(path, &fd, &size, err);
    if (rc) return rc;
    *kind = PTWM_SOURCE_SAFETENSORS;
    if (size >= PTWM_FMT_MAGIC_LEN) {
        rc = ptwm_pread_full(fd, head, sizeof(head), 0, path, err);
        if (!rc && memcmp(head, PTWM_FMT_MAGIC, PTWM_FMT_MAGIC_LEN) == 0)
            *kind = PTWM_SOURCE_PTWM;
    }
    close(fd);
    return rc;
}

static ptwm_error open_raw(ptwm_source *s, ptwm_err *err) {
    ptwm_error rc = ptwm_open_read(s->path, &s->fd, &s->raw_bytes, err);
    if (rc) return rc;
    if (s->raw_bytes % 4 != 0)
        return ptwm_fail(err, PTWM_ERR_SHAPE,
                         "file '%s' has %llu bytes, not a whole number of F32 values", s->path,
                         (unsigned long long)s->raw_bytes);
    s->raw_shape[0] = s->raw_bytes / 4;
    return PTWM_OK;
}

ptwm_error ptwm_source_open(const char *path, ptwm_source_kind kind, ptwm_source **out,
                            ptwm_err *err) {
    /* pread, not a mapping: a file truncated while open is then an error
     * naming both sizes, where touching a mapped page past the new end would
     * be SIGBUS. */
    return ptwm_source_open_mode(path, kind, PTWM_OPEN_PREAD, out, err);
}

ptwm_error ptwm_source_open_mode(const char *path, ptwm_source_kind kind, ptwm_open_mode mode,
                                 ptwm_source **out, ptwm_err *err) {
    ptwm_source *s;
    ptwm_error rc;
    size_t plen;
    if (!out || !path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source: NULL path or output");
    *out = NULL;
    if (kind == PTWM_SOURCE_AUTO) {
        rc = detect_kind(path, &kind, err);
        if (rc) return rc;
    }
    s = (ptwm_source *)calloc(1, sizeof(*s));
    plen = strlen(path);
    if (s) s->path = (char *)malloc(plen + 1);
    if (!s || !s->path) {
        free(s);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "source '%s': out of memory", path);
    }
    memcpy(s->path, path, plen + 1);
    s->kind = kind;
    s->fd = -1;
    switch (kind) {
    case PTWM_SOURCE_SAFETENSORS: rc = ptwm_st_open(path, mode, &s->st, err); break;
    case PTWM_SOURCE_SAFETENSORS_DIR:
        rc = ptwm_stdir_open(path, mode, &s->stdir, err);
        break;
    case PTWM_SOURCE_PTWM: rc = ptwm_reader_open(path, &s->rd, err); break;
    case PTWM_SOURCE_PTWM_DIR: rc = ptwm_ptdir_open(path, &s->ptdir, err); break;
    case PTWM_SOURCE_RAW_F32: rc = open_raw(s, err); break;
    default:
        rc = ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source '%s': unknown kind %d", path, (int)kind);
        break;
    }
    if (rc) {
        ptwm_source_close(s);
        return rc;
    }
    *out = s;
    return PTWM_OK;
}

void ptwm_source_close(ptwm_source *s) {
    if (!s) return;
    ptwm_st_close(s->st);
    ptwm_stdir_close(s->stdir);
    ptwm_reader_close(s->rd);
    ptwm_ptdir_close(s->ptdir);
    if (s->fd >= 0) close(s->fd);
    free(s->path);
    free(s);
}

ptwm_source_kind ptwm_source_get_kind(const ptwm_source *s) { return s->kind; }

const char *ptwm_source_path(const ptwm_source *s) { return s->path; }

void ptwm_source_set_threads(ptwm_source *s, int threads) {
    if (s->rd) ptwm_reader_set_threads(s->rd, threads);
    if (s->ptdir) ptwm_ptdir_set_threads(s->ptdir, threads);
}

/* Bases (docs/DELTA.md): forwarded to the .ptwm readers; other kinds hold
 * no tensor coded against a base. */
ptwm_error ptwm_source_set_base(ptwm_source *s, ptwm_source *base, ptwm_err *err) {
    size_t i;
    ptwm_error rc = PTWM_OK;
    if (!s) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_source_set_base: NULL source");
    if (s->rd) return ptwm_reader_set_base(s->rd, base, err);
    for (i = 0; s->ptdir && !rc && i < ptwm_ptdir_shard_count(s->ptdir); i++)
        rc = ptwm_reader_set_base(ptwm_ptdir_shard(s->ptdir, i), base, err);
    return rc;
}

int ptwm_source_tensor_hash(const ptwm_source *s, size_t index, uint8_t hash[16]) {
    size_t local, shard;
    if (s->rd) return ptwm_reader_tensor_hash(s->rd, index, hash);
    if (!s->ptdir || (shard = ptwm_ptdir_shard_of(s->ptdir, index, &local)) == (size_t)-1) return 0;
    return ptwm_reader_tensor_hash(ptwm_ptdir_shard(s->ptdir, shard), local, hash);
}

size_t ptwm_source_count(const ptwm_source *s) {
    switch (s->kind) {
    case PTWM_SOURCE_SAFETENSORS: return ptwm_st_count(s->st);
    case PTWM_SOURCE_SAFETENSORS_DIR: return ptwm_stdir_count(s->stdir);
    case PTWM_SOURCE_PTWM: return ptwm_reader_count(s->rd);
    case PTWM_SOURCE_PTWM_DIR: return ptwm_ptdir_count(s->ptdir);
    default: return 1;
    }
}

ptwm_error ptwm_source_tensor(const ptwm_source *s, size_t index, ptwm_tensor_info *out,
                              ptwm_err *err) {
    switch (s->kind) {
    case PTWM_SOURCE_SAFETENSORS: return ptwm_st_tensor(s->st, index, out, err);
    case PTWM_SOURCE_SAFETENSORS_DIR: return ptwm_stdir_tensor(s->stdir, index, out, err);
    case PTWM_SOURCE_PTWM: return ptwm_reader_tensor(s->rd, index, out, err);
    case PTWM_SOURCE_PTWM_DIR: return ptwm_ptdir_tensor(s->ptdir, index, out, err);
    default:
        if (index != 0) return ptwm_fail_index(err, s->path, index, 1);
        memset(out, 0, sizeof(*out));
        out->name = "";
        out->dtype = PTWM_DTYPE_F32;
        out->ndim = 1;
        out->shape = s->raw_shape;
        out->nbytes = s->raw_bytes;
        out->coded_bytes = s->raw_bytes;
        return PTWM_OK;
    }
}

ptwm_error ptwm_source_find(const ptwm_source *s, const char *name, size_t *index, ptwm_err *err) {
    ptwm_error rc;
    switch (s->kind) {
    case PTWM_SOURCE_SAFETENSORS: rc = ptwm_st_find(s->st, name, index, NULL); break;
    case PTWM_SOURCE_SAFETENSORS_DIR: rc = ptwm_stdir_find(s->stdir, name, index, NULL); break;
    case PTWM_SOURCE_PTWM: rc = ptwm_reader_find(s->rd, name, index, NULL); break;
    case PTWM_SOURCE_PTWM_DIR: rc = ptwm_ptdir_find(s->ptdir, name, index, NULL); break;
    default:
        rc = name[0] == 0 ? PTWM_OK : PTWM_ERR_NOT_FOUND;
        *index = 0;
        break;
    }
    if (rc)
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "tensor '%s' not in %s '%s'", name,
                         ptwm_source_kind_name(s->kind), s->path);
    return PTWM_OK;
}

ptwm_error ptwm_source_read(ptwm_source *s, size_t index, uint64_t offset, void *dst, size_t len,
                            ptwm_err *err) {
    switch (s->kind) {
    case PTWM_SOURCE_SAFETENSORS: return ptwm_st_read(s->st, index, offset, dst, len, err);
    case PTWM_SOURCE_SAFETENSORS_DIR:
        return ptwm_stdir_read(s->stdir, index, offset, dst, len, err);
    case PTWM_SOURCE_PTWM: return ptwm_reader_decode_range(s->rd, index, offset, dst, len, err);
    case PTWM_SOURCE_PTWM_DIR:
        return ptwm_ptdir_decode_range(s->ptdir, index, offset, dst, len, err);
    default: {
        uint64_t end;
        ptwm_error rc;
        if (index != 0 || ptwm_add_overflow(offset, len, &end) || end > s->raw_bytes)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                             "file '%s': bytes [%llu, +%zu) outside its %llu bytes", s->path,
                             (unsigned long long)offset, len, (unsigned long long)s->raw_bytes);
        rc = ptwm_pread_full(s->fd, dst, len, offset, s->path, err);
        return rc == PTWM_ERR_TRUNCATED ? ptwm_fail_shrunk(err, s->fd, s->path, s->raw_bytes)
                                        : rc;
    }
    }
}

/* A sharded directory: each shard's tensors in one decode_many call, in list order. */
static ptwm_error ptdir_read_many(ptwm_ptdir *d, const size_t *indices, void *const *dsts,
                                  const size_t *sizes, size_t n, ptwm_err *err) {
    size_t *loc = (size_t *)ptwm_malloc((uint64_t)n * 2 * sizeof(size_t) + 1);
    void **dst = (void **)ptwm_malloc((uint64_t)n * sizeof(void *) + 1);
    size_t *len = loc + n, shard, i, m;
    ptwm_error rc = PTWM_OK;
    if (!loc || !dst) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu tensors", n);
    for (i = 0; !rc && i < n; i++)   /* an index no shard holds */
        if (indices[i] >= ptwm_ptdir_count(d))
            rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", indices[i],
                           ptwm_ptdir_count(d));
    for (shard = 0; !rc && shard < ptwm_ptdir_shard_count(d); shard++) {
        for (i = m = 0; i < n; i++) {
            size_t local;
            if (ptwm_ptdir_shard_of(d, indices[i], &local) != shard) continue;
            loc[m] = local;
            dst[m] = dsts[i];
            len[m++] = sizes[i];
        }
        if (m) rc = ptwm_reader_decode_many(ptwm_ptdir_shard(d, shard), loc, dst, len, m, err);
    }
    free(loc);
    free(dst);
    return rc;
}

ptwm_error ptwm_source_read_many(ptwm_source *s, const size_t *indices, void *const *dsts,
                                 const size_t *sizes, size_t n, ptwm_err *err) {
    size_t i;
    ptwm_tensor_info info;
    ptwm_error rc;
    if (!s || (n && (!indices || !dsts || !sizes)))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source: NULL handle or list");
    if (s->kind == PTWM_SOURCE_PTWM)
        return ptwm_reader_decode_many(s->rd, indices, dsts, sizes, n, err);
    if (s->kind == PTWM_SOURCE_PTWM_DIR)
        return ptdir_read_many(s->ptdir, indices, dsts, sizes, n, err);
    for (i = 0; i < n; i++) {
        if (ptwm_source_tensor(s, indices[i], &info, NULL))
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu) in '%s'",
                             indices[i], ptwm_source_count(s), s->path);
        if (sizes[i] != info.nbytes || (!dsts[i] && sizes[i]))
            return ptwm_fail(err, PTWM_ERR_DST_SIZE, "tensor '%s' has %llu bytes, buffer %zu",
                             info.name, (unsigned long long)info.nbytes, sizes[i]);
        if ((rc = ptwm_source_read(s, indices[i], 0, dsts[i], sizes[i], err))) return rc;
    }
    return PTWM_OK;
}

/* .ptwm metadata has no keyed lookup, so search it; it holds a handful of keys. */
static const char *reader_meta(const ptwm_reader *r, const char *key) {
    size_t i, n = r ? ptwm_reader_metadata_count(r) : 0;
    for (i = 0; i < n; i++) {
        ptwm_kv kv = ptwm_reader_metadata(r, i);
        if (kv.key && strcmp(kv.key, key) == 0) return kv.value;
    }
    return NULL;
}

const char *ptwm_source_metadata_get(const ptwm_source *s, const char *key) {
    switch (s->kind) {
    case PTWM_SOURCE_SAFETENSORS: return ptwm_st_metadata_get(s->st, key);
    case PTWM_SOURCE_SAFETENSORS_DIR:
        return ptwm_stdir_shard_count(s->stdir)
                   ? ptwm_st_metadata_get(ptwm_stdir_shard(s->stdir, 0), key)
                   : NULL;
    case PTWM_SOURCE_PTWM: return reader_meta(s->rd, key);
    case PTWM_SOURCE_PTWM_DIR:
        return ptwm_ptdir_shard_count(s->ptdir) ? reader_meta(ptwm_ptdir_shard(s->ptdir, 0), key)
                                                : NULL;
    default: return NULL;
    }
}

/* The safetensors file or .ptwm reader whose metadata the source reports
 * (for directories the first shard's); both NULL for raw files. */
static void meta_holder(const ptwm_source *s, const ptwm_st **st, const ptwm_reader **rd) {
    *st = NULL;
    *rd = NULL;
    switch (s->kind) {
    case PTWM_SOURCE_SAFETENSORS: *st = s->st; break;
    case PTWM_SOURCE_SAFETENSORS_DIR:
        if (ptwm_stdir_shard_count(s->stdir)) *st = ptwm_stdir_shard(s->stdir, 0);
        break;
    case PTWM_SOURCE_PTWM: *rd = s->rd; break;
    case PTWM_SOURCE_PTWM_DIR:
        if (ptwm_ptdir_shard_count(s->ptdir)) *rd = ptwm_ptdir_shard(s->ptdir, 0);
        break;
    default: break;
    }
}

size_t ptwm_source_metadata_count(const ptwm_source *s) {
    const ptwm_st *st;
    const ptwm_reader *rd;
    meta_holder(s, &st, &rd);
    return st ? ptwm_st_metadata_count(st) : rd ? ptwm_reader_metadata_count(rd) : 0;
}

ptwm_kv ptwm_source_metadata(const ptwm_source *s, size_t i) {
    const ptwm_st *st;
    const ptwm_reader *rd;
    ptwm_kv none = {NULL, NULL};
    meta_holder(s, &st, &rd);
    return st ? ptwm_st_metadata(st, i) : rd ? ptwm_reader_metadata(rd, i) : none;
}
