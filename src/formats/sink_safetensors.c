/* The safetensors sink (sink.h). A file that reproduces a recorded source
 * is rebuilt byte for byte: the recorded header as it was, then each tensor
 * at the place that header gives it (the header parser proves the tensors
 * tile the data region). Otherwise a fresh header is built from the tensors
 * and metadata. Tensors of .ptwm files are decoded by one stream's threads
 * straight into the output file (a ring of chunks across every file of the
 * conversion: memory does not grow with the model, a small file's last
 * chunks decode beside the next one's first); the stream checks each
 * payload hash as its tensor's chunks retire, and a file that fails is
 * never committed. Other inputs are read and written here. Each file is
 * committed (fsync, rename) on a committer thread while the next files are
 * written; the sink's close waits for every commit. */
#include <stdio.h>
#include <stdlib.h>
#include "context.h"
#include "fileio.h"
#include "fstream.h"
#include "outdir.h"
#include "safetensors.h"
#include "sink.h"

#define COPY_CHUNK ((size_t)1 << 20)

typedef struct st_sink {
    ptwm_fstream *out;          /* opened for the first file with .ptwm inputs */
    ptwm_ctx *commits;          /* the files' committer */
    int threads;
    ptwm_conv_progress *p;
    uint8_t *buf;               /* copies of inputs that do not decode into the stream */
} st_sink;

static ptwm_error progress_sink(void *ctx, const uint8_t *p, size_t n, ptwm_err *err) {
    (void)p;
    (void)err;
    ptwm_conv_progress_add((ptwm_conv_progress *)ctx, n);
    return PTWM_OK;
}

static ptwm_error st_open(const ptwm_conv_opts *o, void **out, ptwm_err *err) {
    st_sink *s = (st_sink *)ptwm_calloc(1, sizeof *s);
    ptwm_error rc;
    if (!s) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    /* (its thread is started by the first commit) */
    if ((rc = ptwm_ctx_create(&s->commits, err))) {
        ptwm_free(s);
        return rc;
    }
    s->p = o->progress && o->progress->fn ? o->progress : NULL;
    s->threads = o->cp.threads;
    *out = s;
    return PTWM_OK;
}

static ptwm_error st_close(void *h, ptwm_err *err) {
    st_sink *s = (st_sink *)h;
    ptwm_error rc = s->out ? ptwm_fstream_close(s->out, err) : PTWM_OK, r2;
    /* Every file committed (or failed) before the directory is. */
    if ((r2 = ptwm_ctx_commits_done(s->commits, rc ? NULL : err)) && !rc) rc = r2;
    ptwm_ctx_free(s->commits);
    ptwm_free(s->buf);
    ptwm_free(s);
    return rc;
}

/* Hand whole file *f to the committer, unless an earlier commit failed
 * (then that failure, naming its file, is this file's too). */
static ptwm_error commit_file(ptwm_ctx *commits, ptwm_atomic_file *f, ptwm_err *err) {
    ptwm_error rc = ptwm_ctx_commit_failed(commits, err);
    return rc ? rc : ptwm_ctx_commit_later(commits, f, err);
}

/* An output file in the stream: committed when its last chunk is in and
 * every hash has matched, discarded otherwise. Its fsync runs on the
 * committer, not on the thread that retires chunks: a directory's shards
 * otherwise waited, each in turn, for the one before to reach the disk
 * (docs/SCALING.md, "Sharded directories"). A commit that fails is the
 * next file's failure, or the close's. */
typedef struct out_file {
    ptwm_atomic_file f;
    ptwm_ctx *commits;
} out_file;

static ptwm_error out_done(void *ctx, ptwm_error rc, ptwm_err *err) {
    out_file *o = (out_file *)ctx;
    if (!rc) rc = commit_file(o->commits, &o->f, err);
    ptwm_atomic_abort(&o->f);
    ptwm_free(o);
    return rc;
}

/* Open output file `path` under a temporary name and write its header
 * (le64 length, then json). */
static ptwm_error out_open(const char *path, const void *json, size_t len, ptwm_atomic_file *f,
                           ptwm_err *err) {
    uint8_t le[8];
    ptwm_error rc;
    ptwm_store_le64(le, len);
    f->fd = -1;
    if ((rc = ptwm_atomic_open(path, f, err)) ||
        (rc = ptwm_write_full(f->fd, le, sizeof le, path, err)) ||
        (rc = ptwm_write_full(f->fd, json, len, path, err)))
        ptwm_atomic_abort(f);
    return rc;
}

/* Start output file `path` in the stream, which owns it from here (out_done). */
static ptwm_error out_begin(st_sink *s, const char *path, const void *json, size_t len, int *fd,
                            ptwm_err *err) {
    out_file *o = (out_file *)ptwm_calloc(1, sizeof *o);
    ptwm_error rc;
    if (!o) return ptwm_fail(err, PTWM_ERR_NOMEM, "'%s': out of memory", path);
    if (!s->out && (rc = ptwm_fstream_open(s->threads, s->p ? progress_sink : NULL, s->p, &s->out,
                                           err))) {
        ptwm_free(o);
        return rc;
    }
    o->commits = s->commits;
    if ((rc = out_open(path, json, len, &o->f, err))) {
        ptwm_free(o);
        return rc;
    }
    *fd = o->f.fd;
    return ptwm_fstream_begin(s->out, o->f.fd, o->f.final_path, out_done, o, err);
}

/* Tensors local[0..n) of `in`, tensor i at offs[i] of the file. */
static ptwm_error put_run(st_sink *s, const ptwm_conv_in *in, const size_t *local, size_t n,
                          const uint64_t *offs, int fd, const char *path, ptwm_err *err) {
    size_t i;
    ptwm_error rc = PTWM_OK;
    if (in->ops->stream_into) return in->ops->stream_into(in->h, s->out, local, n, offs, err);
    for (i = 0; i < n && !rc; i++) {
        ptwm_tensor_info info;
        uint64_t off;
        in->ops->tensor(in->h, local[i], &info, NULL);
        if (!info.data && !s->buf && !(s->buf = (uint8_t *)ptwm_malloc(COPY_CHUNK)))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        for (off = 0; off < info.nbytes && !rc; off += COPY_CHUNK) {
            size_t len = (size_t)PTWM_MIN((uint64_t)COPY_CHUNK, info.nbytes - off);
            const uint8_t *p = info.data ? (const uint8_t *)info.data + off : s->buf;
            if (!info.data) rc = in->ops->read(in->h, local[i], off, s->buf, len, err);
            if (!rc) rc = ptwm_pwrite_full(fd, p, len, offs[i] + off, path, err);
            if (!rc && s->p) ptwm_conv_progress_add(s->p, len);
        }
    }
    return rc;
}

/* Every run of tensors from one input file. */
static ptwm_error put_runs(st_sink *s, const ptwm_conv_file *f, const size_t *local,
                           const uint32_t *in, const uint64_t *offs, size_t n, int fd,
                           ptwm_err *err) {
    size_t i, j;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < n && !rc; i = j) {
        for (j = i + 1; j < n && in[j] == in[i]; j++) continue;
        rc = put_run(s, &f->src->in[in[i]], local + i, j - i, offs + i, fd, f->path, err);
    }
    return rc;
}

/* Output file f: header json, then tensor i (local[i] of input in[i]) at
 * offs[i]. Through the stream when an input decodes into it; else written
 * here and committed. */
static ptwm_error write_file(st_sink *s, const ptwm_conv_file *f, const void *json, size_t len,
                             const size_t *local, const uint32_t *in, const uint64_t *offs,
                             size_t n, ptwm_err *err) {
    ptwm_atomic_file af;
    size_t i;
    int fd = -1, streamed = 0;
    ptwm_error rc, r2;
    for (i = 0; i < n; i++) streamed |= f->src->in[in[i]].ops->stream_into != NULL;
    if (streamed) {
        if ((rc = out_begin(s, f->path, json, len, &fd, err))) return rc;
        rc = put_runs(s, f, local, in, offs, n, fd, err);
        r2 = ptwm_fstream_end(s->out, rc ? NULL : err);
        return rc ? rc : r2;
    }
    if ((rc = out_open(f->path, json, len, &af, err))) return rc;
    rc = put_runs(s, f, local, in, offs, n, af.fd, err);
    if (!rc) rc = commit_file(s->commits, &af, err);
    ptwm_atomic_abort(&af);
    return rc;
}

static int same_shape(const ptwm_tensor_info *a, const ptwm_st_entry *e) {
    uint32_t d;
    if (a->dtype != e->dtype || a->ndim != e->ndim) return 0;
    for (d = 0; d < e->ndim; d++)
        if (a->shape[d] != e->shape[d]) return 0;
    return 1;
}

/* The input's index of the recorded header's tensor i (in data order): the
 * writers add a file's tensors in that order, so it is normally i itself,
 * found without a lookup by name per tensor. */
static ptwm_error input_index(const ptwm_conv_in *in, size_t i, const char *name, size_t *local) {
    ptwm_tensor_info info;
    if (in->ops->tensor(in->h, i, &info, NULL) == PTWM_OK && strcmp(info.name, name) == 0) {
        *local = i;
        return PTWM_OK;
    }
    return in->ops->find(in->h, name, local, NULL);
}

/* Where each tensor of the recorded header lies, checked against the input
 * before anything is written. */
static ptwm_error map_record(const ptwm_conv_in *in, const ptwm_st_parsed *parsed, size_t *local,
                             uint64_t *offs, ptwm_err *err) {
    const char *shard = in->label;
    uint64_t at = 8 + (uint64_t)in->rec.len, end = at;
    size_t i;
    for (i = 0; i < parsed->n; i++) {
        const ptwm_st_entry *e = &parsed->t[i];
        ptwm_tensor_info info;
        if (input_index(in, i, e->name, &local[i]) != PTWM_OK)
            return ptwm_fail(err, PTWM_ERR_MISMATCH,
                             "shard '%s': tensor '%s' of the recorded header is not in the shard",
                             shard, e->name);
        in->ops->tensor(in->h, local[i], &info, NULL);
        offs[i] = at + e->begin;
        if (!same_shape(&info, e) || info.nbytes != e->end - e->begin)
            return ptwm_fail(err, PTWM_ERR_MISMATCH,
                             "shard '%s': tensor '%s': %s of %llu bytes in the shard, %s of %llu "
                             "in the recorded header",
                             shard, e->name, ptwm_dtype_name(info.dtype),
                             (unsigned long long)info.nbytes, ptwm_dtype_name(e->dtype),
                             (unsigned long long)(e->end - e->begin));
        if (at + e->end > end) end = at + e->end;
    }
    /* 0: not recorded (directories written before the size was), when the
     * source is the header and the tensors it tiles. */
    if (in->rec.size != 0 && in->rec.size != end)
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "shard '%s': source was %llu bytes, header and tensors make %llu", shard,
                         (unsigned long long)in->rec.size, (unsigned long long)end);
    return PTWM_OK;
}

/* Rebuild the file input `in` records. */
static ptwm_error write_recorded(st_sink *s, const ptwm_conv_file *f, ptwm_err *err) {
    const ptwm_conv_in *in = f->exact;
    ptwm_st_parsed parsed;
    size_t *local = NULL, i, count = in->ops->count(in->h);
    uint32_t *ins = NULL;
    uint64_t *offs = NULL;
    ptwm_error rc;
    memset(&parsed, 0, sizeof parsed);
    if ((rc = ptwm_st_parse_header(in->rec.json, in->rec.len, in->label, &parsed, err))) return rc;
    if (parsed.n != count) {
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                       "shard '%s': recorded source header lists %zu tensors, the shard holds %zu",
                       in->label, parsed.n, count);
        goto done;
    }
    local = (size_t *)ptwm_calloc(parsed.n + 1, sizeof *local);
    ins = (uint32_t *)ptwm_calloc(parsed.n + 1, sizeof *ins);
    offs = (uint64_t *)ptwm_calloc(parsed.n + 1, sizeof *offs);
    if (!local || !ins || !offs) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "shard '%s': out of memory for %zu tensors", in->label,
                       parsed.n);
        goto done;
    }
    for (i = 0; i < parsed.n; i++) ins[i] = (uint32_t)(in - f->src->in);
    if (!(rc = map_record(in, &parsed, local, offs, err)))
        rc = write_file(s, f, in->rec.json, in->rec.len, local, ins, offs, parsed.n, err);
done:
    ptwm_free(local);
    ptwm_free(ins);
    ptwm_free(offs);
    ptwm_st_parsed_free(&parsed);
    return rc;
}

static const uint8_t header_only = 0;

/* A fresh header from the tensors and the metadata of the file's first input. */
static ptwm_error fresh_header(const ptwm_conv_file *f, void **hdr, size_t *len, ptwm_err *err) {
    ptwm_tensor_desc *d = (ptwm_tensor_desc *)ptwm_calloc(f->n + 1, sizeof *d);
    ptwm_kv *meta = NULL;
    size_t i, nmeta = 0;
    ptwm_error rc = d ? ptwm_conv_metadata(f, &meta, &nmeta, err)
                      : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) {
        /* The header builder wants a data pointer but reads only the sizes. */
        for (i = 0; i < f->n; i++) d[i] = ptwm_desc_of(&f->items[i].info, &header_only);
        rc = ptwm_st_build_header(d, f->n, meta, nmeta, hdr, len, err);
        if (rc) ptwm_err_prefix(err, "'%s'", f->path);
    }
    ptwm_free(d);
    ptwm_free(meta);
    return rc;
}

static ptwm_error write_fresh(st_sink *s, const ptwm_conv_file *f, ptwm_err *err) {
    size_t *local = (size_t *)ptwm_calloc(f->n + 1, sizeof *local);
    uint32_t *ins = (uint32_t *)ptwm_calloc(f->n + 1, sizeof *ins);
    uint64_t *offs = (uint64_t *)ptwm_calloc(f->n + 1, sizeof *offs);
    void *hdr = NULL;
    size_t i, hlen = 0;
    ptwm_error rc = !local || !ins || !offs ? ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory")
                                            : fresh_header(f, &hdr, &hlen, err);
    /* The builder's header starts with its 8-byte length. */
    for (i = 0; !rc && i < f->n; i++) {
        local[i] = f->items[i].local;
        ins[i] = f->items[i].in;
        offs[i] = i ? offs[i - 1] + f->items[i - 1].info.nbytes : hlen;
    }
    if (!rc) rc = write_file(s, f, (const uint8_t *)hdr + 8, hlen - 8, local, ins, offs, f->n, err);
    ptwm_free(hdr);
    ptwm_free(local);
    ptwm_free(ins);
    ptwm_free(offs);
    return rc;
}

static ptwm_error st_file(void *h, const ptwm_conv_file *f, uint64_t *size, ptwm_err *err) {
    size_t i;
    *size = f->exact ? 8 + f->exact->rec.len : 0;
    for (i = 0; i < f->n; i++) *size += f->items[i].info.nbytes;
    return f->exact ? write_recorded((st_sink *)h, f, err) : write_fresh((st_sink *)h, f, err);
}

static int st_with_index(const ptwm_conv_src *s, size_t nfiles, int exact) {
    return exact ? s->index_name != NULL : nfiles > 1;
}

/* The Hugging Face index a .ptwm directory recorded maps every tensor to the
 * restored file that holds it and lists nothing else: a damaged or hand-made
 * one (a shard such as "../x.safetensors", a tensor sent to the wrong shard)
 * is refused rather than written out. */
static ptwm_error check_source_index(const ptwm_conv_src *s, const ptwm_conv_plan *p,
                                     ptwm_err *err) {
    ptwm_index *kept = NULL, *restored = NULL;
    char label[512];
    ptwm_error rc;
    snprintf(label, sizeof label, "%s: %s kept in %s", s->path, s->index_name, PTWM_INDEX_NAME);
    rc = ptwm_index_parse_kind(s->index_text, s->index_len, label, PTWM_INDEX_SAFETENSORS, &kept,
                               err);
    if (!rc) rc = ptwm_conv_index_build(PTWM_INDEX_SAFETENSORS, s, p, NULL, label, &restored, err);
    if (!rc) rc = ptwm_index_check_map(restored, kept, label, err);
    ptwm_index_free(kept);
    ptwm_index_free(restored);
    return rc;
}

/* The source's own index as it was, or Hugging Face's index over fresh shards. */
static ptwm_error st_index(const ptwm_conv_src *s, const ptwm_conv_plan *p, const uint64_t *sizes,
                           ptwm_files *others, const char *dir, ptwm_err *err) {
    char *path;
    ptwm_error rc;
    (void)others;
    if (!p->with_index) return PTWM_OK;
    if (p->exact) {
        if (!s->index_text || !ptwm_plain_name(s->index_name))
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "'%s': %s names source index '%s' but is missing its text or the "
                             "name is not a plain file name", s->path, PTWM_INDEX_NAME, s->index_name);
        if ((rc = check_source_index(s, p, err))) return rc;
        if (!(path = ptwm_path_join(dir, s->index_name)))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        rc = ptwm_write_small_file(path, s->index_text, s->index_len, NULL, err);
        ptwm_free(path);
        return rc;
    }
    return ptwm_conv_index(PTWM_INDEX_SAFETENSORS, s, p, sizes, dir, PTWM_ST_INDEX_NAME, err);
}

const ptwm_sink_ops ptwm_sink_safetensors_ops = {
    "safetensors", "model.safetensors", "decompress", 1,       st_open,
    st_file,       st_close,            st_with_index, st_index};
