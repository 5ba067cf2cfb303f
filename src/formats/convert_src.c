/* The input side of a conversion (sink.h): a file or sharded directory of
 * either format as its input files, each with the safetensors file it
 * reproduces, and the Hugging Face index the source holds or recorded. */
#include <stdlib.h>
#include "fileio.h"
#include "index.h"
#include "outdir.h"
#include "shardir.h"
#include "sink.h"

void ptwm_conv_progress_add(ptwm_conv_progress *p, uint64_t bytes) {
    p->done += bytes;
    if (p->fn) p->fn(p->ctx, p->done, p->total);
}

void ptwm_conv_src_close(ptwm_conv_src *s) {
    ptwm_source_close(s->opened);
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

/* Files the conversion itself accounts for: the source's shards and index. */
static int skip_source_file(void *ctx, const char *name) {
    const ptwm_conv_src *s = (const ptwm_conv_src *)ctx;
    size_t i;
    const char *iname = s->kind == PTWM_SOURCE_PTWM_DIR ? PTWM_INDEX_NAME : PTWM_ST_INDEX_NAME;
    if (!strcmp(name, iname)) return 1;
    for (i = 0; i < s->nin; i++)
        if (!strcmp(name, ptwm_shardir_shard_name((const ptwm_shardir *)s->dir, i))) return 1;
    return 0;
}

ptwm_error ptwm_conv_copy_other_files(const ptwm_conv_src *s, const char *dir, ptwm_err *err) {
    if (!s->dir) return PTWM_OK;
    return ptwm_copy_other_files(s->path, dir, skip_source_file, (void *)s, err);
}
