/* Safetensors reader: open (mmap, pread or memory), validate through
 * safetensors_header.c, then answer lookups. Every open validates the whole
 * header and the exact file size; there is no unvalidated state. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "container_format.h"
#include "fileio.h"
#include "safetensors.h"

struct ptwm_st {
    char *label;                /* path, memory label, or "<memory>" */
    ptwm_open_mode mode;
    ptwm_map map;               /* PTWM_OPEN_MMAP */
    int fd;                     /* PTWM_OPEN_PREAD, else -1 */
    const uint8_t *base;        /* whole image (mmap, memory); NULL in pread mode */
    uint64_t size;
    char *header_copy;          /* pread mode: the header JSON */
    const char *header;
    size_t header_len;
    uint64_t data_start;        /* 8 + header_len */
    ptwm_st_parsed p;           /* entries, names and the name hash table */
};

static ptwm_st *st_new(const char *label, ptwm_err *err) {
    ptwm_st *st = ptwm_calloc(1, sizeof(*st));
    const char *l = label ? label : "<memory>";
    if (st) st->label = ptwm_malloc(strlen(l) + 1);
    if (!st || !st->label) {
        ptwm_free(st);
        ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory opening '%s'", l);
        return NULL;
    }
    memcpy(st->label, l, strlen(l) + 1);
    st->fd = -1;
    return st;
}

/* Header JSON is in st->header; parse and check the size. */
static ptwm_error st_finish(ptwm_st *st, ptwm_err *err) {
    ptwm_error rc = ptwm_st_parse_header(st->header, st->header_len, st->label, &st->p, err);
    if (rc) return rc;
    rc = ptwm_st_check_size(&st->p, st->header_len, st->size, st->label, err);
    if (rc) return rc;
    st->data_start = 8 + (uint64_t)st->header_len;
    return PTWM_OK;
}

/* A file whose first 8 bytes are half or more the .ptwm magic, or whose name
 * ends in .ptwm, and which is no safetensors file either, is most likely a
 * .ptwm file with a damaged magic: say so (with the bytes) rather than
 * report its magic as an absurd safetensors header length. */
static ptwm_error check_not_ptwm(const uint8_t *head, uint64_t size, const char *label,
                                 ptwm_error rc, ptwm_err *err) {
    const uint8_t *magic = (const uint8_t *)PTWM_FMT_MAGIC;
    size_t i, same = 0, n = strlen(label);
    char have[8 * 3 + 1], want[8 * 3 + 1], why[PTWM_ERR_MESSAGE_MAX];
    if (size < PTWM_FMT_MAGIC_LEN) return rc;
    for (i = 0; i < 8; i++) same += head[i] == magic[i];
    if (same < 4 && (n < 5 || strcmp(label + n - 5, ".ptwm") != 0)) return rc;
    for (i = 0; i < 8; i++) {
        snprintf(have + 3 * i, 4, i < 7 ? "%02X " : "%02X", head[i]);
        snprintf(want + 3 * i, 4, i < 7 ? "%02X " : "%02X", magic[i]);
    }
    snprintf(why, sizeof why, "%s", err ? err->message : "");
    return ptwm_fail(err, PTWM_ERR_BAD_MAGIC,
                     "file '%s': bad magic %s, a .ptwm file starts %s (damaged?); read as "
                     "safetensors: %s", label, have, want, why);
}

/* Whole image in memory (mapped or caller's buffer). */
static ptwm_error st_from_image(ptwm_st *st, ptwm_err *err) {
    uint64_t hlen;
    ptwm_error rc = ptwm_st_check_prefix(st->base, st->size, st->label, &hlen, err);
    if (rc) return check_not_ptwm(st->base, st->size, st->label, rc, err);
    st->header = (const char *)st->base + 8;
    st->header_len = (size_t)hlen;
    return st_finish(st, err);
}

static ptwm_error st_from_fd(ptwm_st *st, ptwm_err *err) {
    uint8_t prefix[8] = {0};
    uint64_t hlen;
    ptwm_error rc;
    if (st->size >= 8) {
        rc = ptwm_pread_full(st->fd, prefix, 8, 0, st->label, err);
        if (rc) return rc;
    }
    rc = ptwm_st_check_prefix(prefix, st->size, st->label, &hlen, err);
    if (rc) return check_not_ptwm(prefix, st->size, st->label, rc, err);
    st->header_copy = ptwm_malloc(hlen + 1);
    if (!st->header_copy)
        return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory for a %llu-byte header",
                         st->label, (unsigned long long)hlen);
    rc = ptwm_pread_full(st->fd, st->header_copy, (size_t)hlen, 8, st->label, err);
    if (rc) return rc;
    st->header = st->header_copy;
    st->header_len = (size_t)hlen;
    return st_finish(st, err);
}

ptwm_error ptwm_st_open(const char *path, ptwm_open_mode mode, ptwm_st **out, ptwm_err *err) {
    ptwm_st *st;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_open: out is NULL");
    *out = NULL;
    if (!path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_open: path is NULL");
    if (mode != PTWM_OPEN_MMAP && mode != PTWM_OPEN_PREAD)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_open: unknown mode %d", (int)mode);
    st = st_new(path, err);
    if (!st) return PTWM_ERR_NOMEM;
    st->mode = mode;
    if (mode == PTWM_OPEN_MMAP) {
        rc = ptwm_map_file(path, &st->map, err);
        if (!rc) {
            st->base = st->map.data;
            st->size = st->map.size;
            rc = st_from_image(st, err);
        }
    } else {
        rc = ptwm_open_read(path, &st->fd, &st->size, err);
        if (!rc) rc = st_from_fd(st, err);
    }
    if (rc) {
        ptwm_st_close(st);
        return rc;
    }
    *out = st;
    return PTWM_OK;
}

ptwm_error ptwm_st_open_memory(const void *buf, size_t size, const char *label, ptwm_st **out,
                               ptwm_err *err) {
    ptwm_st *st;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_open_memory: out is NULL");
    *out = NULL;
    if (!buf && size)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_open_memory: buffer is NULL");
    st = st_new(label, err);
    if (!st) return PTWM_ERR_NOMEM;
    st->mode = PTWM_OPEN_MMAP;
    st->base = buf;
    st->size = size;
    rc = st_from_image(st, err);
    if (rc) {
        ptwm_st_close(st);
        return rc;
    }
    *out = st;
    return PTWM_OK;
}

void ptwm_st_close(ptwm_st *st) {
    if (!st) return;
    ptwm_st_parsed_free(&st->p);
    ptwm_free(st->header_copy);
    if (st->fd >= 0) close(st->fd);
    ptwm_unmap(&st->map);
    ptwm_free(st->label);
    ptwm_free(st);
}

size_t ptwm_st_count(const ptwm_st *st) { return st ? st->p.n : 0; }

ptwm_error ptwm_st_tensor(const ptwm_st *st, size_t index, ptwm_tensor_info *out,
                          ptwm_err *err) {
    const ptwm_st_entry *e;
    if (!st || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_tensor: NULL argument");
    if (index >= st->p.n) return ptwm_fail_index(err, st->label, index, st->p.n);
    e = &st->p.t[index];
    out->name = e->name;
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    out->shape = e->shape;
    out->nbytes = e->end - e->begin;
    out->coded_bytes = out->nbytes;
    out->data = st->base ? st->base + st->data_start + e->begin : NULL;
    return PTWM_OK;
}

ptwm_error ptwm_st_find(const ptwm_st *st, const char *name, size_t *index, ptwm_err *err) {
    ptrdiff_t i;
    if (!st || !name) return ptwm_fail_name(err, st ? st->label : "ptwm_st_find", name);
    i = ptwm_st_parsed_find(&st->p, name);
    if (i < 0) return ptwm_fail_name(err, st->label, name);
    if (index) *index = (size_t)i;
    return PTWM_OK;
}

ptwm_error ptwm_st_read(const ptwm_st *st, size_t index, uint64_t offset, void *dst, size_t len,
                        ptwm_err *err) {
    const ptwm_st_entry *e;
    uint64_t end;
    ptwm_error rc;
    if (!st || index >= st->p.n)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_read: tensor index %zu out of range (%zu tensors)",
                         index, st ? st->p.n : 0);
    e = &st->p.t[index];
    if (ptwm_add_overflow(offset, len, &end) || end > e->end - e->begin)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "file '%s': tensor '%s': read of %zu bytes at offset %llu runs past its "
                         "%llu bytes",
                         st->label, e->name, len, (unsigned long long)offset,
                         (unsigned long long)(e->end - e->begin));
    if (len == 0) return PTWM_OK;
    if (!dst) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_read: dst is NULL");
    if (st->base) {
        memcpy(dst, st->base + st->data_start + e->begin + offset, len);
        return PTWM_OK;
    }
    rc = ptwm_pread_full(st->fd, dst, len, st->data_start + e->begin + offset, st->label, err);
    /* The size was checked at open: a short read means the file shrank since. */
    if (rc == PTWM_ERR_TRUNCATED) {
        ptwm_fail_shrunk(err, st->fd, st->label, st->size);
        ptwm_err_prefix(err, "tensor '%s'", e->name);
    }
    return rc;
}

uint64_t ptwm_st_file_offset(const ptwm_st *st, size_t index) {
    if (!st || index >= st->p.n) return 0;
    return st->data_start + st->p.t[index].begin;
}

size_t ptwm_st_metadata_count(const ptwm_st *st) { return st ? st->p.nmeta : 0; }

ptwm_kv ptwm_st_metadata(const ptwm_st *st, size_t i) {
    ptwm_kv none = {NULL, NULL};
    if (!st || i >= st->p.nmeta) return none;
    return st->p.meta[i];
}

const char *ptwm_st_metadata_get(const ptwm_st *st, const char *key) {
    size_t i;
    if (!st || !key) return NULL;
    for (i = 0; i < st->p.nmeta; i++)
        if (strcmp(st->p.meta[i].key, key) == 0) return st->p.meta[i].value;
    return NULL;
}

const void *ptwm_st_header(const ptwm_st *st, size_t *len) {
    if (!st) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = st->header_len;
    return st->header;
}

uint64_t ptwm_st_file_size(const ptwm_st *st) { return st ? st->size : 0; }

const char *ptwm_st_path(const ptwm_st *st) { return st ? st->label : NULL; }
