/* The .ptwm sink (sink.h): each output file is a container writer pulling
 * its tensors chunk by chunk from their input files (memory is the writers'
 * window of chunks, whatever the model size). The writers share one
 * context: its threads code across files, and a finished file's last chunks
 * and commit overlap the next file. A file that reproduces a
 * safetensors file records its header, name and size, so decompression
 * rebuilds it byte for byte; a directory keeps the source's Hugging Face
 * index in its own index's metadata. One context serves every file. */
#include <stdlib.h>
#include "fileio.h"
#include "hash.h"
#include "sink.h"
#include "write_later.h"
#include "writer.h"

typedef struct pt_sink {
    ptwm_cparams cp;
    ptwm_conv_progress *p;
    uint64_t base;              /* progress before the current file */
    ptwm_ctx *own_ctx;          /* when the caller gave none */
} pt_sink;

/* The writer reports raw bytes coded within its own file; add the files before. */
static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    pt_sink *s = (pt_sink *)ctx;
    (void)total;
    if (s->base + done > s->p->done) ptwm_conv_progress_add(s->p, s->base + done - s->p->done);
}

static ptwm_error pt_open(const ptwm_conv_opts *o, void **out, ptwm_err *err) {
    pt_sink *s = (pt_sink *)ptwm_calloc(1, sizeof *s);
    ptwm_error rc;
    if (!s) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    s->cp = o->cp;
    s->p = o->progress;
    if (s->p && s->p->fn) {
        s->cp.progress = on_progress;
        s->cp.progress_ctx = s;
    } else {
        s->cp.progress = NULL;
    }
    /* One context for every file: each writer reuses the work memory of the
     * one before. */
    if (!o->cp.ctx) {
        if ((rc = ptwm_ctx_create(&s->own_ctx, err))) {
            ptwm_free(s);
            return rc;
        }
        s->cp.ctx = s->own_ctx;
    }
    *out = s;
    return PTWM_OK;
}

/* Every file is in place once its commit is done. */
static ptwm_error pt_close(void *h, ptwm_err *err) {
    pt_sink *s = (pt_sink *)h;
    ptwm_error rc = ptwm_ctx_commit_wait(s->cp.ctx, err);
    ptwm_ctx_free(s->own_ctx);
    ptwm_free(s);
    return rc;
}

typedef struct pull {
    const ptwm_conv_in *in;
    size_t local;
} pull;

static ptwm_error read_chunk(void *ctx, uint64_t offset, void *dst, size_t len, ptwm_err *err) {
    pull *r = (pull *)ctx;
    return r->in->ops->read(r->in->h, r->local, offset, dst, len, err);
}

static ptwm_error put_metadata(ptwm_writer *w, const ptwm_conv_file *f, ptwm_err *err) {
    ptwm_kv *kv = NULL;
    size_t n = 0;
    ptwm_error rc = ptwm_conv_metadata(f, &kv, &n, err);
    if (!rc && n) rc = ptwm_writer_set_metadata(w, kv, n, err);
    ptwm_free(kv);
    return rc;
}

/* The record is borrowed by the writer (the input stays open until the file
 * is finished): no copy of a header that may be 100 MB. */
static ptwm_error put_record(ptwm_writer *w, const ptwm_file_record *rec, ptwm_err *err) {
    ptwm_error rc = ptwm_writer_borrow_source_json(w, rec->json, rec->len, rec->name, err);
    /* The rebuild checks it writes exactly the source's bytes. */
    if (!rc) ptwm_writer_set_source_size(w, rec->size);
    return rc;
}

static ptwm_error pt_file(void *h, const ptwm_conv_file *f, uint64_t *size, ptwm_err *err) {
    pt_sink *s = (pt_sink *)h;
    ptwm_writer *w = NULL;
    uint64_t raw = 0;
    size_t i;
    ptwm_error rc;
    s->base = s->p ? s->p->done : 0;
    if ((rc = ptwm_writer_open_file(f->path, &s->cp, &w, err))) return rc;
    if (f->exact) rc = put_record(w, &f->exact->rec, err);
    if (!rc) rc = put_metadata(w, f, err);
    for (i = 0; i < f->n && !rc; i++) {
        pull r;
        ptwm_tensor_desc desc = ptwm_desc_of(&f->items[i].info, NULL);
        r.in = &f->src->in[f->items[i].in];
        r.local = f->items[i].local;
        raw += desc.nbytes;
        if (r.in->ops->read_concurrent)
            rc = ptwm_writer_add_pulled(w, &desc, NULL, r.in->ops->read, r.in->h, r.local, err);
        else
            rc = ptwm_writer_add_stream(w, &desc, NULL, read_chunk, &r, err);
        if (rc) ptwm_err_prefix(err, "'%s'", r.in->label);
    }
    if (rc) {
        ptwm_writer_free(w);
        return rc;
    }
    /* Its last chunks code while the next file fills, and it is committed on
     * the context's committer thread (pt_close waits for every commit). */
    if ((rc = ptwm_writer_finish_later(w, size, err))) return rc;
    if (s->p && s->base + raw > s->p->done) ptwm_conv_progress_add(s->p, s->base + raw - s->p->done);
    return PTWM_OK;
}

static int pt_with_index(const ptwm_conv_src *s, size_t nfiles, int exact) {
    /* Always for a directory that had a Hugging Face index, so it comes back. */
    return nfiles > 1 || (exact && s->index_text);
}

/* The file record (every other file and the index), then the index: the
 * directory is whole once its index is there. A lone file with nothing
 * beside it needs neither. */
static ptwm_error pt_index(const ptwm_conv_src *s, const ptwm_conv_plan *p, const uint64_t *sizes,
                           ptwm_files *others, const char *dir, ptwm_err *err) {
    ptwm_index *idx = NULL;
    char *text = NULL, *path = NULL;
    size_t len = 0;
    uint8_t h[16];
    ptwm_error rc;
    if (!p->with_index) return others->n ? ptwm_files_write(others, dir, err) : PTWM_OK;
    rc = ptwm_conv_index_build(PTWM_INDEX_PTWM, s, p, sizes, PTWM_INDEX_NAME, &idx, err);
    if (!rc)
        rc = ptwm_index_set_meta(idx, PTWM_META_FILE_RECORD, PTWM_FILES_NAME,
                                 strlen(PTWM_FILES_NAME), err);
    if (!rc) rc = ptwm_index_text(idx, PTWM_INDEX_NAME, &text, &len, err);
    if (!rc) {
        ptwm_xxh128_oneshot(text, len, h);
        rc = ptwm_files_add(others, PTWM_INDEX_NAME, len, h, err);
    }
    if (!rc) rc = ptwm_files_write(others, dir, err);
    if (!rc && !(path = ptwm_path_join(dir, PTWM_INDEX_NAME)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_write_small_file(path, text, len, NULL, err);
    ptwm_free(path);
    ptwm_free(text);
    ptwm_index_free(idx);
    return rc;
}

const ptwm_sink_ops ptwm_sink_ptwm_ops = {"ptwm",  PTWM_SINGLE_NAME, "compress",   0,
                                          pt_open, pt_file,          pt_close,     pt_with_index,
                                          pt_index};
