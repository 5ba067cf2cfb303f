/* Decompressing a .ptwm file or sharded .ptwm directory back to safetensors.
 *
 * Shards that recorded their source file are rebuilt byte for byte: the
 * recorded header is written as it was, then each tensor's bytes in the order
 * that header lays them out (the header parser proves they tile the data
 * region, so each tensor's place in the file is known). Otherwise, or when
 * asked to re-shard, fresh Hugging Face shards and index are written. The
 * decoding threads write each chunk at its place in the file as they finish
 * it (a ring of chunks: memory does not grow with the model), and the reader
 * checks each tensor's payload hash as its chunks retire in order; a file
 * that fails is never committed. */
#include <stdio.h>
#include <stdlib.h>
#include <jansson.h>
#include "common.h"
#include "container_read.h"
#include "fileio.h"
#include "outdir.h"
#include "ptdir_internal.h"
#include "safetensors.h"

typedef struct dsrc {
    const char *path;
    ptwm_ptdir *dir;
    ptwm_reader *single;
    uint64_t total;
    int threads;
    /* Every output file goes through one stream: one ring of chunks and one
     * set of threads across the shards, so a small shard's last chunks
     * decode beside the next one's first and no thread waits at a shard's
     * end (its fsync and rename happen while the next shard decodes). */
    ptwm_fstream *out;
} dsrc;

static size_t d_nshards(const dsrc *s) { return s->single ? 1 : ptwm_ptdir_shard_count(s->dir); }
static ptwm_reader *d_shard(const dsrc *s, size_t i) {
    return s->single ? s->single : ptwm_ptdir_shard(s->dir, i);
}

static ptwm_error progress_sink(void *ctx, const uint8_t *p, size_t n, ptwm_err *err) {
    (void)p;
    (void)err;
    ptwm_ck_progress_add((ptwm_ck_progress *)ctx, n);
    return PTWM_OK;
}

/* An output file in the stream: committed when its last chunk is in and
 * every hash has matched, discarded otherwise. */
typedef struct out_file {
    ptwm_atomic_file f;
} out_file;

static ptwm_error out_done(void *ctx, ptwm_error rc, ptwm_err *err) {
    out_file *o = (out_file *)ctx;
    if (!rc) rc = ptwm_atomic_commit(&o->f, err);
    ptwm_atomic_abort(&o->f);
    free(o);
    return rc;
}

/* Start output file `path` with its header; the stream owns it from here
 * (out_done). */
static ptwm_error out_begin(dsrc *s, const char *path, const void *hdr, size_t hlen,
                            ptwm_err *err) {
    out_file *o = (out_file *)ptwm_calloc(1, sizeof *o);
    ptwm_error rc;
    if (!o) return ptwm_fail(err, PTWM_ERR_NOMEM, "'%s': out of memory", path);
    o->f.fd = -1;
    if ((rc = ptwm_atomic_open(path, &o->f, err)) ||
        (rc = ptwm_write_full(o->f.fd, hdr, hlen, path, err))) {
        ptwm_atomic_abort(&o->f);
        free(o);
        return rc;
    }
    return ptwm_fstream_begin(s->out, o->f.fd, o->f.final_path, out_done, o, err);
}

static int same_shape(const ptwm_tensor_info *a, const ptwm_st_entry *e) {
    uint32_t d;
    if (a->dtype != e->dtype || a->ndim != e->ndim) return 0;
    for (d = 0; d < e->ndim; d++)
        if (a->shape[d] != e->shape[d]) return 0;
    return 1;
}

/* The shard's index of the recorded header's tensor i (in data order): the
 * writers add a file's tensors in that order, so it is normally i itself,
 * found without a lookup by name per tensor. */
static ptwm_error shard_index(ptwm_reader *r, size_t i, const char *name, size_t *local) {
    ptwm_tensor_info info;
    if (ptwm_reader_tensor(r, i, &info) == PTWM_OK && strcmp(info.name, name) == 0) {
        *local = i;
        return PTWM_OK;
    }
    return ptwm_reader_find(r, name, local);
}

/* Rebuild the recorded source file of shard reader `r` at `path`. */
static ptwm_error restore_file(dsrc *s, ptwm_reader *r, const char *shard, const char *path,
                               ptwm_err *err) {
    size_t hlen = 0, i;
    const uint8_t *hdr = (const uint8_t *)ptwm_reader_source_header(r, &hlen);
    ptwm_st_parsed parsed;
    size_t *local = NULL;
    uint64_t *offs = NULL;
    ptwm_error rc, r2;
    memset(&parsed, 0, sizeof parsed);
    if (!hdr || hlen < 8 || ptwm_load_le64(hdr) != hlen - 8)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "shard '%s': recorded source header of %zu bytes does not start with "
                         "its own length", shard, hlen);
    if ((rc = ptwm_st_parse_header((const char *)hdr + 8, hlen - 8, shard, &parsed, err)))
        return rc;
    if (parsed.n != ptwm_reader_count(r)) {
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                       "shard '%s': recorded source header lists %zu tensors, the shard holds %zu",
                       shard, parsed.n, ptwm_reader_count(r));
        goto done;
    }
    local = (size_t *)ptwm_calloc(parsed.n + 1, sizeof *local);
    offs = (uint64_t *)ptwm_calloc(parsed.n + 1, sizeof *offs);
    if (!local || !offs) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "shard '%s': out of memory for %zu tensors", shard,
                       parsed.n);
        goto done;
    }
    /* Check every tensor before writing anything. */
    for (i = 0; i < parsed.n; i++) {
        const ptwm_st_entry *e = &parsed.t[i];
        ptwm_tensor_info info;
        if (shard_index(r, i, e->name, &local[i]) != PTWM_OK) {
            rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                           "shard '%s': tensor '%s' of the recorded header is not in the shard",
                           shard, e->name);
            goto done;
        }
        ptwm_reader_tensor(r, local[i], &info);
        offs[i] = hlen + e->begin;
        if (!same_shape(&info, e) || info.nbytes != e->end - e->begin) {
            rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                           "shard '%s': tensor '%s': %s of %llu bytes in the shard, %s of %llu "
                           "in the recorded header",
                           shard, e->name, ptwm_dtype_name(info.dtype),
                           (unsigned long long)info.nbytes, ptwm_dtype_name(e->dtype),
                           (unsigned long long)(e->end - e->begin));
            goto done;
        }
    }
    if (!(rc = out_begin(s, path, hdr, hlen, err))) {
        rc = ptwm_fstream_add(s->out, r, local, parsed.n, offs, err);
        r2 = ptwm_fstream_end(s->out, rc ? NULL : err);
        if (!rc) rc = r2;
    }
done:
    free(local);
    free(offs);
    ptwm_st_parsed_free(&parsed);
    return rc;
}

static int can_restore(const dsrc *s) {
    size_t i, j, n = d_nshards(s);
    for (i = 0; i < n; i++) {
        const char *name = ptwm_reader_source_name(d_shard(s, i));
        size_t hlen;
        if (!ptwm_reader_source_header(d_shard(s, i), &hlen) || !ptwm_plain_name(name)) return 0;
        for (j = 0; j < i; j++)
            if (!strcmp(name, ptwm_reader_source_name(d_shard(s, j)))) return 0;
    }
    return 1;
}

static const char *shard_label(const dsrc *s, size_t i) {
    return s->single ? s->path : ptwm_ptdir_shard_name(s->dir, i);
}

static ptwm_error restore_all(dsrc *s, const ptwm_stage *stage, ptwm_err *err) {
    size_t i, n = d_nshards(s);
    const ptwm_index *idx = s->dir ? ptwm_ptdir_index(s->dir) : NULL;
    const char *iname = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX_NAME, NULL);
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < n && !rc; i++) {
        ptwm_reader *r = d_shard(s, i);
        char *path;
        if (iname && !strcmp(iname, ptwm_reader_source_name(r)))
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "'%s': shard '%s' restores to '%s', the name of the source index",
                             s->path, shard_label(s, i), iname);
        path = ptwm_stage_path(stage, ptwm_reader_source_name(r));
        rc = path ? restore_file(s, r, shard_label(s, i), path, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        free(path);
    }
    if (!rc && iname) {
        size_t len = 0;
        const char *text = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX, &len);
        char *path;
        if (!text || !ptwm_plain_name(iname))
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "'%s': %s names source index '%s' but is missing its text or the "
                             "name is not a plain file name", s->path, PTWM_INDEX_NAME, iname);
        if (!(path = ptwm_stage_path(stage, iname)))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        rc = ptwm_write_small_file(path, text, len, NULL, err);
        free(path);
    }
    return rc;
}

typedef struct fresh_tensor {
    ptwm_reader *r;         /* the directory's reader: metadata and tensor info */
    size_t shard;
    size_t local;
    ptwm_tensor_info info;
} fresh_tensor;

/* Hugging Face's own index over the fresh shards. */
static ptwm_error write_hf_index(const char *path, const fresh_tensor *t, const size_t *shard_of,
                                 size_t n, size_t nshards, uint64_t total, ptwm_err *err) {
    const char **names = (const char **)ptwm_calloc(n + 1, sizeof *names);
    size_t i;
    ptwm_error rc;
    if (!names) return ptwm_fail(err, PTWM_ERR_NOMEM, "'%s': out of memory", path);
    for (i = 0; i < n; i++) names[i] = t[i].info.name;
    rc = ptwm_hf_index_write(path, names, shard_of, n, nshards, total, err);
    free(names);
    return rc;
}

static const uint8_t header_only = 0;

static ptwm_error write_fresh_shard(dsrc *s, const char *path, const fresh_tensor *t, size_t n,
                                    ptwm_err *err) {
    ptwm_tensor_desc *descs = (ptwm_tensor_desc *)ptwm_calloc(n + 1, sizeof *descs);
    size_t *local = (size_t *)ptwm_calloc(n + 1, sizeof *local);
    uint64_t *offs = (uint64_t *)ptwm_calloc(n + 1, sizeof *offs);
    ptwm_kv *meta = NULL;
    size_t i, j, nmeta = 0, hlen = 0;
    void *hdr = NULL;
    ptwm_error rc, r2;
    if (!descs || !local || !offs) {
        free(descs);
        free(local);
        free(offs);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    for (i = 0; i < n; i++) {
        descs[i].name = t[i].info.name;
        descs[i].dtype = t[i].info.dtype;
        descs[i].ndim = t[i].info.ndim;
        descs[i].shape = t[i].info.shape;
        descs[i].nbytes = t[i].info.nbytes;
        /* The header builder wants a data pointer but reads only the sizes;
         * the bytes are streamed after it. */
        descs[i].data = &header_only;
    }
    if (n) {
        nmeta = ptwm_reader_metadata_count(t[0].r);
        meta = (ptwm_kv *)ptwm_calloc(nmeta + 1, sizeof *meta);
        if (!meta) {
            free(descs);
            free(local);
            free(offs);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        }
        for (i = 0; i < nmeta; i++) meta[i] = ptwm_reader_metadata(t[0].r, i);
    }
    rc = ptwm_st_build_header(descs, n, meta, nmeta, &hdr, &hlen, err);
    free(descs);
    free(meta);
    if (rc) {
        free(local);
        free(offs);
        ptwm_err_prefix(err, "'%s'", path);
        return rc;
    }
    for (i = 0; i < n; i++) {
        local[i] = t[i].local;
        offs[i] = (i ? offs[i - 1] + t[i - 1].info.nbytes : hlen);
    }
    rc = out_begin(s, path, hdr, hlen, err);
    free(hdr);
    if (!rc) {
        /* One addition per run of tensors from one .ptwm shard. */
        for (i = 0; i < n && !rc; i = j) {
            for (j = i + 1; j < n && t[j].shard == t[i].shard; j++) continue;
            rc = ptwm_fstream_add(s->out, t[i].r, local + i, j - i, offs + i, err);
        }
        r2 = ptwm_fstream_end(s->out, rc ? NULL : err);
        if (!rc) rc = r2;
    }
    free(local);
    free(offs);
    return rc;
}

/* Fresh Hugging Face shards: the .ptwm shards' grouping, or a new plan. */
static ptwm_error reshard_all(dsrc *s, const ptwm_stage *stage, uint64_t max_shard_size,
                              ptwm_err *err) {
    size_t ns = d_nshards(s), n = 0, i, j, k = 0, nshards = 0;
    fresh_tensor *t;
    size_t *shard_of;
    uint64_t *sizes;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < ns; i++) n += ptwm_reader_count(d_shard(s, i));
    t = (fresh_tensor *)ptwm_calloc(n + 1, sizeof *t);
    shard_of = (size_t *)ptwm_calloc(n + 1, sizeof *shard_of);
    sizes = (uint64_t *)ptwm_calloc(n + 1, sizeof *sizes);
    if (!t || !shard_of || !sizes) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu tensors", n);
        goto done;
    }
    for (i = 0; i < ns; i++) {
        ptwm_reader *r = d_shard(s, i);
        for (j = 0; j < ptwm_reader_count(r); j++, k++) {
            t[k].r = r;
            t[k].shard = i;
            t[k].local = j;
            ptwm_reader_tensor(r, j, &t[k].info);
            sizes[k] = t[k].info.nbytes;
            shard_of[k] = i;
        }
    }
    if (max_shard_size)
        rc = ptwm_plan_shards(sizes, n, max_shard_size, shard_of, &nshards, err);
    else
        nshards = ns;
    if (nshards == 0) nshards = 1;
    for (k = 0, i = 0; k < nshards && !rc; k++) {
        char name[64], *path;
        size_t first = i;
        while (i < n && shard_of[i] == k) i++;
        if (nshards == 1)
            snprintf(name, sizeof name, "model.safetensors");
        else if (ptwm_shard_filename(k + 1, nshards, "safetensors", name, sizeof name))
            rc = ptwm_fail(err, PTWM_ERR_INVALID_ARG, "cannot name shard %zu of %zu", k + 1, nshards);
        if (rc) break;
        if (!(path = ptwm_stage_path(stage, name))) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            break;
        }
        rc = write_fresh_shard(s, path, t + first, i - first, err);
        free(path);
    }
    if (!rc && nshards > 1) {
        char *path = ptwm_stage_path(stage, PTWM_ST_INDEX_NAME);
        rc = path ? write_hf_index(path, t, shard_of, n, nshards, s->total, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        free(path);
    }
done:
    free(t);
    free(shard_of);
    free(sizes);
    return rc;
}

static int skip_ptwm_file(void *ctx, const char *name) {
    const dsrc *s = (const dsrc *)ctx;
    size_t i, n = d_nshards(s);
    if (!strcmp(name, PTWM_INDEX_NAME)) return 1;
    for (i = 0; i < n; i++)
        if (!strcmp(name, ptwm_ptdir_shard_name(s->dir, i))) return 1;
    return 0;
}

static ptwm_error dsrc_open(dsrc *s, const char *path, int threads, ptwm_err *err) {
    size_t i, j;
    ptwm_error rc;
    memset(s, 0, sizeof *s);
    s->path = path;
    s->threads = threads;
    if (ptwm_is_dir(path)) {
        rc = ptwm_ptdir_open(path, &s->dir, err);
    } else {
        rc = ptwm_reader_open(path, &s->single, err);
        if (!rc) ptwm_reader_set_threads(s->single, threads);
    }
    if (rc) return rc;
    for (i = 0; i < d_nshards(s); i++) {
        ptwm_reader *r = d_shard(s, i);
        for (j = 0; j < ptwm_reader_count(r); j++) {
            ptwm_tensor_info info;
            ptwm_reader_tensor(r, j, &info);
            if (ptwm_add_overflow(s->total, info.nbytes, &s->total))
                return ptwm_fail(err, PTWM_ERR_CORRUPT, "'%s': tensor sizes overflow", path);
        }
    }
    return PTWM_OK;
}

ptwm_error ptwm_decompress_checkpoint(const char *src, const char *outdir,
                                      const ptwm_checkpoint_options *opt, ptwm_err *err) {
    ptwm_checkpoint_options defaults = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_stage stage;
    ptwm_ck_progress p;
    dsrc s;
    ptwm_error rc, r2;
    if (!src || !outdir)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_decompress_checkpoint: NULL path");
    if (!opt) opt = &defaults;
    memset(&stage, 0, sizeof stage);
    rc = dsrc_open(&s, src, opt->threads, err);
    if (!rc) rc = ptwm_stage_begin(outdir, src, opt->force, &stage, err);
    p.fn = opt->progress;
    p.ctx = opt->progress_ctx;
    p.done = 0;
    p.total = s.total;
    if (!rc) rc = ptwm_fstream_open(s.threads, progress_sink, &p, &s.out, err);
    if (!rc) {
        if (opt->max_shard_size == 0 && can_restore(&s))
            rc = restore_all(&s, &stage, err);
        else
            rc = reshard_all(&s, &stage, opt->max_shard_size, err);
        /* Every file committed or discarded before the directory is. */
        r2 = ptwm_fstream_close(s.out, rc ? NULL : err);
        if (!rc) rc = r2;
    }
    if (!rc && s.dir) rc = ptwm_copy_other_files(src, stage.tmp_path, skip_ptwm_file, &s, err);
    if (!rc) rc = ptwm_stage_commit(&stage, err);
    ptwm_stage_abort(&stage);
    ptwm_ptdir_close(s.dir);
    ptwm_reader_close(s.single);
    return rc;
}
