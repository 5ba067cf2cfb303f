/* One handle over every kind of weights file or directory. Each kind
 * implements the source interface (source_impl.h) beside its reader, which
 * parses its header or index once at open; the source only forwards to it,
 * so loads of many layouts from one source never parse anything again. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "container_format.h"
#include "fileio.h"
#include "source_impl.h"

struct ptwm_source {
    const ptwm_source_ops *ops;
    void *h;                    /* the kind's own handle */
    char *path;
};

const ptwm_source_ops *ptwm_source_ops_of(ptwm_source_kind kind) {
    switch (kind) {
    case PTWM_SOURCE_SAFETENSORS: return &ptwm_source_st_ops;
    case PTWM_SOURCE_SAFETENSORS_DIR: return &ptwm_source_stdir_ops;
    case PTWM_SOURCE_PTWM: return &ptwm_source_ptwm_ops;
    case PTWM_SOURCE_PTWM_DIR: return &ptwm_source_ptdir_ops;
    case PTWM_SOURCE_RAW_F32: return &ptwm_source_raw_ops;
    default: return NULL;
    }
}

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
    ptwm_free(p);
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
    s = (ptwm_source *)ptwm_calloc(1, sizeof(*s));
    plen = strlen(path);
    if (s) s->path = (char *)ptwm_malloc(plen + 1);
    if (!s || !s->path) {
        ptwm_free(s);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "source '%s': out of memory", path);
    }
    memcpy(s->path, path, plen + 1);
    s->ops = ptwm_source_ops_of(kind);
    rc = s->ops ? s->ops->open(path, mode, &s->h, err)
                : ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source '%s': unknown kind %d", path,
                            (int)kind);
    if (rc) {
        ptwm_source_close(s);
        return rc;
    }
    *out = s;
    return PTWM_OK;
}

void ptwm_source_close(ptwm_source *s) {
    if (!s) return;
    if (s->h) s->ops->close(s->h);
    ptwm_free(s->path);
    ptwm_free(s);
}

void *ptwm_source_impl(const ptwm_source *s, const ptwm_source_ops **ops) {
    *ops = s->ops;
    return s->h;
}

ptwm_source_kind ptwm_source_get_kind(const ptwm_source *s) { return s->ops->kind; }

const char *ptwm_source_path(const ptwm_source *s) { return s->path; }

void ptwm_source_set_threads(ptwm_source *s, int threads) {
    if (s->ops->set_threads) s->ops->set_threads(s->h, threads);
}

/* Bases (docs/DELTA.md): kinds without a set_base slot hold no tensor coded
 * against a base. */
ptwm_error ptwm_source_set_base(ptwm_source *s, ptwm_source *base, ptwm_err *err) {
    if (!s) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_source_set_base: NULL source");
    return s->ops->set_base ? s->ops->set_base(s->h, base, err) : PTWM_OK;
}

int ptwm_source_tensor_hash(const ptwm_source *s, size_t index, uint8_t hash[16]) {
    return s->ops->tensor_hash ? s->ops->tensor_hash(s->h, index, hash) : 0;
}

size_t ptwm_source_count(const ptwm_source *s) { return s->ops->count(s->h); }

ptwm_error ptwm_source_tensor(const ptwm_source *s, size_t index, ptwm_tensor_info *out,
                              ptwm_err *err) {
    return s->ops->tensor(s->h, index, out, err);
}

ptwm_error ptwm_source_find(const ptwm_source *s, const char *name, size_t *index, ptwm_err *err) {
    if (s->ops->find(s->h, name, index, NULL))
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "tensor '%s' not in %s '%s'", name,
                         ptwm_source_kind_name(s->ops->kind), s->path);
    return PTWM_OK;
}

ptwm_error ptwm_source_read(ptwm_source *s, size_t index, uint64_t offset, void *dst, size_t len,
                            ptwm_err *err) {
    return s->ops->read(s->h, index, offset, dst, len, err);
}

ptwm_error ptwm_source_read_many(ptwm_source *s, const size_t *indices, void *const *dsts,
                                 const size_t *sizes, size_t n, ptwm_err *err) {
    size_t i;
    ptwm_tensor_info info;
    ptwm_error rc;
    if (!s || (n && (!indices || !dsts || !sizes)))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source: NULL handle or list");
    if (s->ops->read_many) return s->ops->read_many(s->h, indices, dsts, sizes, n, err);
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

size_t ptwm_source_metadata_count(const ptwm_source *s) {
    return s->ops->metadata_count ? s->ops->metadata_count(s->h) : 0;
}

ptwm_kv ptwm_source_metadata(const ptwm_source *s, size_t i) {
    ptwm_kv none = {NULL, NULL};
    return s->ops->metadata ? s->ops->metadata(s->h, i) : none;
}

/* Files hold a handful of metadata keys: a search is enough. */
const char *ptwm_source_metadata_get(const ptwm_source *s, const char *key) {
    size_t i, n = key ? ptwm_source_metadata_count(s) : 0;
    for (i = 0; i < n; i++) {
        ptwm_kv kv = ptwm_source_metadata(s, i);
        if (kv.key && strcmp(kv.key, key) == 0) return kv.value;
    }
    return NULL;
}
