/* The input side of a conversion (sink.h): a file or sharded directory of
 * either format as its input files, each with the safetensors file it
 * reproduces, and the Hugging Face index the source holds or recorded. */
#include <stdlib.h>
#include "fileio.h"
#include "index.h"
#include "outdir.h"
#include "ptdir_files.h"
#include "shardir.h"
#include "sink.h"

void ptwm_conv_progress_add(ptwm_conv_progress *p, uint64_t bytes) {
    p->done += bytes;
    if (p->fn) p->fn(p->ctx, p->done, p->total);
}

void ptwm_conv_src_close(ptwm_conv_src *s) {
    ptwm_source_close(s->opened);
    ptwm_link_rule_free(&s->links);
    ptwm_free(s->in);
    ptwm_free(s->index_name);
    ptwm_free(s->index_text);
    memset(s, 0, sizeof *s);
}

static ptwm_error dup_text(const char *text, size_t len, char **out, ptwm_err *err) {
    if (!(*out = (char *)ptwm_malloc(len + 1))) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    memcpy(*out, text, len);
    (*out)[len] = 0;
    return PTWM_OK;
}

/* What copying the other files needs: the source, its file record (a .ptwm
 * directory's, or NULL) and which of its entries were met, and the record
 * being made for the output (NULL: none). */
typedef struct conv_copy {
    const ptwm_conv_src *s;
    const ptwm_files *rec;
    uint8_t *seen;
    ptwm_files *out;
} conv_copy;

/* The Hugging Face index: a safetensors directory's own file, or the one a
 * .ptwm directory's index recorded (its text is checked where it is used). */
static ptwm_error find_index(ptwm_conv_src *s, ptwm_err *err) {
    ptwm_error rc = PTWM_OK;
    if (s->kind == PTWM_SOURCE_SAFETENSORS_DIR) {
        char *ipath = ptwm_path_join(s->path, PTWM_ST_INDEX_NAME);
        if (!ipath) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        if (ptwm_file_exists(ipath)) {
            rc = ptwm_read_small_file(ipath, (uint64_t)256 << 20, &s->index_text, &s->index_len,
                                      err);
            if (!rc) rc = dup_text(PTWM_ST_INDEX_NAME, strlen(PTWM_ST_INDEX_NAME), &s->index_name, err);
        }
        ptwm_free(ipath);
    } else if (s->kind == PTWM_SOURCE_PTWM_DIR) {
        const ptwm_index *idx = ptwm_shardir_index((const ptwm_shardir *)s->dir);
        const char *name = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX_NAME, NULL);
        size_t len = 0;
        const char *text = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX, &len);
        if (name) rc = dup_text(name, strlen(name), &s->index_name, err);
        if (!rc && text) rc = dup_text(text, len, &s->index_text, err);
        s->index_len = text ? len : 0;
    }
    return rc;
}

/* Every input file, its record, and the tensor bytes in all. */
static ptwm_error list_inputs(ptwm_conv_src *s, const ptwm_source_ops *ops, ptwm_err *err) {
    const ptwm_shardir *d = (const ptwm_shardir *)s->dir;
    size_t i, j;
    ptwm_error rc = PTWM_OK;
    s->nin = d ? ptwm_shardir_shard_count(d) : 1;
    if (!(s->in = (ptwm_conv_in *)ptwm_calloc(s->nin + 1, sizeof *s->in)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < s->nin && !rc; i++) {
        ptwm_conv_in *in = &s->in[i];
        in->ops = ops;
        in->h = d ? ptwm_shardir_shard(d, i) : s->single;
        in->label = d ? ptwm_shardir_shard_name(d, i) : s->path;
        in->path = s->path;
        if (ops->record) rc = ops->record(in->h, in->label, &in->rec, err);
        for (j = 0; !rc && j < ops->count(in->h); j++) {
            ptwm_tensor_info info;
            ops->tensor(in->h, j, &info, NULL);
            if (ptwm_add_overflow(s->total, info.nbytes, &s->total))
                rc = ptwm_fail(err, PTWM_ERR_CORRUPT, "'%s': tensor sizes overflow", s->path);
        }
    }
    return rc;
}

ptwm_error ptwm_conv_src_open(ptwm_conv_src *s, const char *path, ptwm_source_kind family,
                              ptwm_err *err) {
    const ptwm_source_ops *ops;
    void *h;
    ptwm_error rc;
    memset(s, 0, sizeof *s);
    s->path = path;
    if (ptwm_is_dir(path))
        s->kind = family == PTWM_SOURCE_PTWM ? PTWM_SOURCE_PTWM_DIR : PTWM_SOURCE_SAFETENSORS_DIR;
    else
        s->kind = family;
    if ((rc = ptwm_source_open_mode(path, s->kind, PTWM_OPEN_PREAD, &s->opened, err))) return rc;
    h = ptwm_source_impl(s->opened, &ops);
    if (s->kind == family) {
        s->single = h;
    } else {
        s->dir = h;
        ops = ptwm_shardir_shard_ops((const ptwm_shardir *)h);
    }
    if (!(rc = list_inputs(s, ops, err))) rc = find_index(s, err);
    return rc;
}

ptwm_error ptwm_conv_src_wrap(ptwm_conv_src *s, const ptwm_source_ops *ops, void *h,
                              const char *path, ptwm_err *err) {
    memset(s, 0, sizeof *s);
    s->path = path;
    s->kind = ops->kind;
    s->single = h;
    return list_inputs(s, ops, err);
}

/* A directory source's files are read through links only where the rule
 * allows: its index, its file record and every shard, here; its other files
 * as they are copied. */
ptwm_error ptwm_conv_src_check_links(ptwm_conv_src *s, int follow, ptwm_err *err) {
    static const char *const own[] = {PTWM_INDEX_NAME, PTWM_FILES_NAME, PTWM_ST_INDEX_NAME};
    const ptwm_shardir *d = (const ptwm_shardir *)s->dir;
    size_t i, n = d ? ptwm_shardir_shard_count(d) : 0;
    ptwm_error rc;
    if (!d) return PTWM_OK;
    if ((rc = ptwm_link_rule_init(&s->links, s->path, follow, err))) return rc;
    s->has_links = 1;
    for (i = 0; !rc && i < n + PTWM_ARRAY_LEN(own); i++) {
        char *path = ptwm_path_join(s->path, i < n ? ptwm_shardir_shard_name(d, i) : own[i - n]);
        rc = path ? ptwm_link_check(&s->links, path, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        ptwm_free(path);
    }
    return rc;
}

/* Files the conversion itself accounts for: the source's shards, index and
 * file record. */
static int skip_source_file(void *ctx, const char *name) {
    const ptwm_conv_src *s = ((const conv_copy *)ctx)->s;
    size_t i;
    const char *iname = s->kind == PTWM_SOURCE_PTWM_DIR ? PTWM_INDEX_NAME : PTWM_ST_INDEX_NAME;
    if (!strcmp(name, iname)) return 1;
    if (s->kind == PTWM_SOURCE_PTWM_DIR && !strcmp(name, PTWM_FILES_NAME)) return 1;
    for (i = 0; i < s->nin; i++)
        if (!strcmp(name, ptwm_shardir_shard_name((const ptwm_shardir *)s->dir, i))) return 1;
    return 0;
}

/* A copied file: checked against the source's file record (a file it does
 * not list is copied as it is, as from a directory without a record), and
 * recorded for the output's. */
static ptwm_error on_copied(void *ctx, const char *name, uint64_t size, const uint8_t hash[16],
                            ptwm_err *err) {
    conv_copy *c = (conv_copy *)ctx;
    const ptwm_files_entry *e = c->rec ? ptwm_files_find(c->rec, name) : NULL;
    ptwm_error rc;
    if (e && (rc = ptwm_files_check(c->rec, c->s->path, name, size, hash, err))) return rc;
    if (e) c->seen[e - c->rec->e] = 1;
    if (c->out && (!strcmp(name, PTWM_INDEX_NAME) || !strcmp(name, PTWM_FILES_NAME)))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "source directory '%s' holds '%s', the name of a .ptwm directory's own "
                         "file: rename or remove it",
                         c->s->path, name);
    return c->out ? ptwm_files_add(c->out, name, size, hash, err) : PTWM_OK;
}

ptwm_error ptwm_conv_copy_other_files(const ptwm_conv_src *s, const char *dir, ptwm_files *out,
                                      ptwm_err *err) {
    ptwm_copy_opts o;
    conv_copy c;
    size_t i;
    ptwm_error rc;
    if (!s->dir) return PTWM_OK;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.out = out;
    if (s->kind == PTWM_SOURCE_PTWM_DIR) c.rec = ptwm_shardir_files((const ptwm_shardir *)s->dir);
    if (c.rec && !(c.seen = (uint8_t *)ptwm_calloc(c.rec->n + 1, 1)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    o.skip = skip_source_file;
    o.copied = on_copied;
    o.ctx = &c;
    o.links = s->has_links ? &s->links : NULL;
    rc = ptwm_copy_other_files(s->path, dir, &o, err);
    /* The index was checked when the directory opened; every other file the
     * record lists must have been met. */
    for (i = 0; !rc && c.rec && i < c.rec->n; i++)
        if (!c.seen[i] && strcmp(c.rec->e[i].name, PTWM_INDEX_NAME) != 0)
            rc = ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                           "directory '%s': file '%s' of its file record (%s) is missing",
                           s->path, c.rec->e[i].name, PTWM_FILES_NAME);
    ptwm_free(c.seen);
    return rc;
}
