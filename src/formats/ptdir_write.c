/* Writing a sharded .ptwm checkpoint from a safetensors file or a Hugging Face
 * checkpoint directory.
 *
 * One output shard is in flight at a time and its tensors are pulled chunk by
 * chunk from the source (pread mode, so nothing of the model is mapped), so
 * memory is the container writer's window of chunks, whatever the model size.
 * By default each input file becomes one .ptwm shard that records the file's
 * header and name, and the Hugging Face index is kept in our index's metadata:
 * decompression then rebuilds every file byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include "common.h"
#include "container_read.h"
#include "fileio.h"
#include "outdir.h"
#include "ptdir_parts.h"

typedef struct ck_read {
    const ptwm_st *st;
    size_t local;
} ck_read;

/* The writer reports raw bytes coded within its own file; add the shards before. */
typedef struct shard_progress {
    ptwm_ck_progress *p;
    uint64_t base;
} shard_progress;

static void on_shard_progress(void *ctx, uint64_t done, uint64_t total) {
    shard_progress *sp = (shard_progress *)ctx;
    (void)total;
    if (sp->base + done > sp->p->done) ptwm_ck_progress_add(sp->p, sp->base + done - sp->p->done);
}

static size_t src_nshards(const ptwm_ck_src *s) { return s->single ? 1 : ptwm_stdir_shard_count(s->dir); }
static const ptwm_st *src_shard(const ptwm_ck_src *s, size_t i) {
    return s->single ? s->single : ptwm_stdir_shard(s->dir, i);
}

void ptwm_ck_progress_add(ptwm_ck_progress *p, uint64_t bytes) {
    p->done += bytes;
    if (p->fn) p->fn(p->ctx, p->done, p->total);
}

void ptwm_ck_src_close(ptwm_ck_src *s) {
    ptwm_st_close(s->single);
    ptwm_stdir_close(s->dir);
    ptwm_free(s->hf_index);
}

/* A source that fails as safetensors but opens as .ptwm: say what it is. */
static int already_ptwm(const char *path) {
    ptwm_ptdir *d = NULL;
    ptwm_reader *r = NULL;
    int yes = ptwm_is_dir(path) ? ptwm_ptdir_open(path, &d, NULL) == PTWM_OK
                                : ptwm_reader_open(path, &r, NULL) == PTWM_OK;
    ptwm_ptdir_close(d);
    ptwm_reader_close(r);
    return yes;
}

ptwm_error ptwm_ck_src_open(ptwm_ck_src *s, const char *path, ptwm_err *err) {
    ptwm_error rc;
    size_t i, n;
    memset(s, 0, sizeof *s);
    s->path = path;
    if (ptwm_is_dir(path)) {
        char *ipath = ptwm_path_join(path, PTWM_ST_INDEX_NAME);
        if (!ipath) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        rc = ptwm_stdir_open(path, PTWM_OPEN_PREAD, &s->dir, err);
        if (rc == PTWM_OK && ptwm_file_exists(ipath))
            rc = ptwm_read_small_file(ipath, (uint64_t)256 << 20, &s->hf_index, &s->hf_index_len,
                                      err);
        ptwm_free(ipath);
    } else {
        rc = ptwm_st_open(path, PTWM_OPEN_PREAD, &s->single, err);
    }
    if (rc) return already_ptwm(path) ? ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                                                  "'%s' is already a .ptwm checkpoint "
                                                  "(decompress it instead)", path)
                                      : rc;
    n = src_nshards(s);
    for (i = 0; i < n; i++) {
        const ptwm_st *st = src_shard(s, i);
        size_t j, m = ptwm_st_count(st);
        for (j = 0; j < m; j++) {
            ptwm_tensor_info info;
            ptwm_st_tensor(st, j, &info, NULL);
            s->total += info.nbytes;   /* bounded by the files' sizes: cannot wrap */
        }
    }
    return PTWM_OK;
}

static ptwm_error read_chunk(void *ctx, uint64_t offset, void *dst, size_t len, ptwm_err *err) {
    ck_read *r = (ck_read *)ctx;
    return ptwm_st_read(r->st, r->local, offset, dst, len, err);
}

/* The safetensors header is borrowed by the writer (the source stays open
 * until the shard is finished): no copy of a header that may be 100 MB. */
ptwm_error ptwm_ck_record_source(ptwm_writer *w, const ptwm_st *st, ptwm_err *err) {
    size_t len;
    const char *json = (const char *)ptwm_st_header(st, &len);
    ptwm_error rc = ptwm_writer_borrow_source_json(w, json, len, ptwm_base_name(ptwm_st_path(st)), err);
    /* The rebuild checks it writes exactly the source's bytes. */
    if (!rc) ptwm_writer_set_source_size(w, ptwm_st_file_size(st));
    return rc;
}

ptwm_error ptwm_ck_record_metadata(ptwm_writer *w, const ptwm_st *st, ptwm_err *err) {
    size_t i, n = ptwm_st_metadata_count(st);
    ptwm_kv *kv;
    ptwm_error rc;
    if (n == 0) return PTWM_OK;
    kv = (ptwm_kv *)ptwm_calloc(n, sizeof *kv);
    if (!kv) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++) kv[i] = ptwm_st_metadata(st, i);
    rc = ptwm_writer_set_metadata(w, kv, n, err);
    ptwm_free(kv);
    return rc;
}

ptwm_error ptwm_ck_add_tensor(ptwm_writer *w, const ptwm_st *st, size_t local, ptwm_err *err) {
    ptwm_tensor_info info;
    ptwm_tensor_desc desc;
    ck_read r;
    ptwm_error rc = ptwm_st_tensor(st, local, &info, err);
    if (rc) return rc;
    desc = ptwm_desc_of(&info, NULL);
    r.st = st;
    r.local = local;
    return ptwm_writer_add_stream(w, &desc, NULL, read_chunk, &r, err);
}

/* One .ptwm shard from `items` (raw tensor bytes in all); `source` (may be
 * NULL) is recorded for a byte-exact restore. *file_size receives the
 * shard's size on disk. */
static ptwm_error write_shard(const char *path, const ptwm_cparams *cp, const ptwm_ck_item *items,
                              size_t n, uint64_t raw, const ptwm_st *source, ptwm_ck_progress *p,
                              uint64_t *file_size, ptwm_err *err) {
    ptwm_writer *w = NULL;
    size_t i;
    ptwm_cparams params = *cp;
    shard_progress sp;
    ptwm_error rc;
    sp.p = p;
    sp.base = p->done;
    params.progress = p->fn ? on_shard_progress : NULL;
    params.progress_ctx = &sp;
    if ((rc = ptwm_writer_open_file(path, &params, &w, err))) return rc;
    if (source) rc = ptwm_ck_record_source(w, source, err);
    if (!rc && n) rc = ptwm_ck_record_metadata(w, source ? source : items[0].st, err);
    for (i = 0; i < n && !rc; i++) {
        rc = ptwm_ck_add_tensor(w, items[i].st, items[i].local, err);
        if (rc) ptwm_err_prefix(err, "'%s'", ptwm_st_path(items[i].st));
    }
    if (rc) {
        ptwm_writer_free(w);
        return rc;
    }
    if ((rc = ptwm_writer_finish_later(w, file_size, err)) != PTWM_OK) return rc;
    if (sp.base + raw > p->done) ptwm_ck_progress_add(p, sp.base + raw - p->done);
    return PTWM_OK;
}

void ptwm_ck_plan_free(ptwm_ck_plan *p) {
    ptwm_free(p->items);
    ptwm_free(p->shard_of);
    ptwm_free(p->start);
    ptwm_free(p->raw);
    memset(p, 0, sizeof *p);
}

/* Where each shard's tensors begin (greedy packing keeps them contiguous in
 * source order) and the raw bytes of each shard. */
static ptwm_error plan_spans(ptwm_ck_plan *p, const uint64_t *sizes, ptwm_err *err) {
    size_t i, k = 0;
    p->start = (size_t *)ptwm_calloc(p->nshards + 1, sizeof *p->start);
    p->raw = (uint64_t *)ptwm_calloc(p->nshards + 1, sizeof *p->raw);
    if (!p->start || !p->raw) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory planning shards");
    for (i = 0; i < p->n; i++) {
        while (k < p->shard_of[i]) p->start[++k] = i;
        p->raw[k] += sizes[i];
    }
    while (k < p->nshards) p->start[++k] = p->n;
    return PTWM_OK;
}

/* The shard plan: shard_of[i] for every tensor in source order. By default the
 * source files themselves; with max_shard_size, greedy packing by raw bytes. */
ptwm_error ptwm_ck_plan_make(const ptwm_ck_src *s, uint64_t max_shard_size, ptwm_ck_plan *p,
                             ptwm_err *err) {
    size_t ns = src_nshards(s), i, n = 0, k = 0;
    uint64_t *sizes;
    ptwm_error rc = PTWM_OK;
    memset(p, 0, sizeof *p);
    for (i = 0; i < ns; i++) n += ptwm_st_count(src_shard(s, i));
    p->items = (ptwm_ck_item *)ptwm_calloc(n + 1, sizeof *p->items);
    p->shard_of = (size_t *)ptwm_calloc(n + 1, sizeof *p->shard_of);
    sizes = (uint64_t *)ptwm_calloc(n + 1, sizeof *sizes);
    if (!p->items || !p->shard_of || !sizes) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory planning %zu tensors", n);
        goto done;
    }
    p->n = n;
    for (i = 0; i < ns; i++) {
        const ptwm_st *st = src_shard(s, i);
        size_t j, m = ptwm_st_count(st);
        for (j = 0; j < m; j++, k++) {
            ptwm_tensor_info info;
            ptwm_st_tensor(st, j, &info, NULL);
            p->items[k].st = st;
            p->items[k].local = j;
            sizes[k] = info.nbytes;
            p->shard_of[k] = i;
        }
    }
    p->exact = max_shard_size == 0;
    if (max_shard_size)
        rc = ptwm_plan_shards(sizes, n, max_shard_size, p->shard_of, &p->nshards, err);
    else
        p->nshards = ns;
    /* An index whenever there is more than one shard, and always for a directory
     * that had a Hugging Face index, so that index comes back. */
    p->with_index = p->nshards > 1 || (p->exact && s->hf_index);
    if (p->nshards == 0) p->nshards = 1;   /* no tensors: still one (empty) model.ptwm */
    if (!rc) rc = plan_spans(p, sizes, err);
done:
    ptwm_free(sizes);
    if (rc) ptwm_ck_plan_free(p);
    return rc;
}

ptwm_error ptwm_ck_shard_name(const ptwm_ck_plan *p, size_t k, char name[64], ptwm_err *err) {
    ptwm_error rc;
    if (!p->with_index) {
        snprintf(name, 64, "%s", PTWM_SINGLE_NAME);
        return PTWM_OK;
    }
    rc = ptwm_shard_filename(k + 1, p->nshards, "ptwm", name, 64, NULL);
    return rc ? ptwm_fail(err, rc, "cannot name shard %zu of %zu", k + 1, p->nshards) : PTWM_OK;
}

ptwm_error ptwm_ck_write_shards(const ptwm_ck_src *s, const ptwm_ck_plan *pl,
                                const ptwm_checkpoint_options *o, const char *dir,
                                const uint8_t *wanted, uint64_t *coded, ptwm_err *err) {
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    ptwm_ck_progress p;
    size_t k;
    ptwm_error rc;
    cp.method = o->method;
    cp.threads = o->threads;
    cp.chunk_size = o->chunk_size;
    cp.base = o->base;
    /* One context for every shard: each shard's writer reuses the work
     * memory of the one before. */
    if ((rc = ptwm_ctx_create(&cp.ctx, err))) return rc;
    p.fn = o->progress;
    p.ctx = o->progress_ctx;
    p.done = 0;
    p.total = 0;
    for (k = 0; k < pl->nshards; k++)
        if (!wanted || wanted[k]) p.total += pl->raw[k];
    for (k = 0; k < pl->nshards && !rc; k++) {
        char name[64], *path;
        size_t first = pl->start[k];
        if (wanted && !wanted[k]) continue;
        if ((rc = ptwm_ck_shard_name(pl, k, name, err))) break;
        if (!(path = ptwm_path_join(dir, name))) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            break;
        }
        rc = write_shard(path, &cp, pl->items + first, pl->start[k + 1] - first, pl->raw[k],
                         pl->exact ? src_shard(s, k) : NULL, &p, &coded[k], err);
        ptwm_free(path);
    }
    if (!rc) rc = ptwm_ctx_commit_wait(cp.ctx, err);
    ptwm_ctx_free(cp.ctx);
    return rc;
}

ptwm_error ptwm_ck_write_index(const ptwm_ck_src *s, const ptwm_ck_plan *pl,
                               const uint64_t *coded, const char *dir, ptwm_err *err) {
    ptwm_index *idx = NULL;
    uint64_t coded_total = 0;
    size_t i, k;
    char *ipath;
    ptwm_error rc;
    if (!pl->with_index) return PTWM_OK;
    if ((rc = ptwm_index_create(s->total, 0, &idx, err))) return rc;
    if (pl->exact && s->hf_index)
        rc = ptwm_index_set_meta(idx, PTWM_META_SOURCE_INDEX_NAME, PTWM_ST_INDEX_NAME,
                                 strlen(PTWM_ST_INDEX_NAME), err);
    if (!rc && pl->exact && s->hf_index)
        rc = ptwm_index_set_meta(idx, PTWM_META_SOURCE_INDEX, s->hf_index, s->hf_index_len, err);
    for (k = 0; k < pl->nshards && !rc; k++) {
        char name[64];
        coded_total += coded[k];
        if ((rc = ptwm_ck_shard_name(pl, k, name, err))) break;
        for (i = pl->start[k]; i < pl->start[k + 1] && !rc; i++) {
            ptwm_tensor_info info;
            ptwm_st_tensor(pl->items[i].st, pl->items[i].local, &info, NULL);
            rc = ptwm_index_add(idx, info.name, name, err);
        }
    }
    if (!rc) {
        ptwm_index_set_totals(idx, s->total, coded_total);
        ipath = ptwm_path_join(dir, PTWM_INDEX_NAME);
        rc = ipath ? ptwm_index_write(idx, ipath, err)
                   : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        ptwm_free(ipath);
    }
    ptwm_index_free(idx);
    return rc;
}

typedef struct skip_ctx {
    const ptwm_ck_src *s;
} skip_ctx;

/* Files the conversion itself accounts for: the shards and the index. */
static int skip_source_file(void *ctx, const char *name) {
    const ptwm_ck_src *s = ((skip_ctx *)ctx)->s;
    size_t i, n = src_nshards(s);
    if (!strcmp(name, PTWM_ST_INDEX_NAME)) return 1;
    for (i = 0; i < n; i++)
        if (!strcmp(name, ptwm_base_name(ptwm_st_path(src_shard(s, i))))) return 1;
    return 0;
}

ptwm_error ptwm_ck_copy_other_files(const ptwm_ck_src *s, const char *dir, ptwm_err *err) {
    skip_ctx sc;
    if (!s->dir) return PTWM_OK;
    sc.s = s;
    return ptwm_copy_other_files(s->path, dir, skip_source_file, &sc, err);
}

static ptwm_error write_all(const ptwm_ck_src *s, const ptwm_stage *stage,
                            const ptwm_checkpoint_options *o, ptwm_err *err) {
    ptwm_ck_plan pl;
    uint64_t *coded;
    ptwm_error rc = ptwm_ck_plan_make(s, o->max_shard_size, &pl, err);
    if (rc) return rc;
    coded = (uint64_t *)ptwm_calloc(pl.nshards + 1, sizeof *coded);
    if (!coded) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_ck_write_shards(s, &pl, o, stage->tmp_path, NULL, coded, err);
    if (!rc) rc = ptwm_ck_copy_other_files(s, stage->tmp_path, err);
    /* The index last: a directory is only whole once it is there. */
    if (!rc) rc = ptwm_ck_write_index(s, &pl, coded, stage->tmp_path, err);
    ptwm_free(coded);
    ptwm_ck_plan_free(&pl);
    return rc;
}

ptwm_error ptwm_compress_checkpoint(const char *src, const char *outdir,
                                    const ptwm_checkpoint_options *opt, ptwm_err *err) {
    ptwm_checkpoint_options defaults = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_stage stage;
    ptwm_ck_src s;
    ptwm_error rc;
    if (!src || !outdir)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_compress_checkpoint: NULL path");
    if (!opt) opt = &defaults;
    if ((rc = ptwm_parts_check(opt, err))) return rc;
    if ((rc = ptwm_ck_src_open(&s, src, err))) {
        ptwm_ck_src_close(&s);
        return rc;
    }
    if (opt->parts) {
        rc = ptwm_parts_compress(&s, outdir, opt, err);
        ptwm_ck_src_close(&s);
        return rc;
    }
    rc = ptwm_stage_begin(outdir, src, opt->force, &stage, err);
    if (!rc) rc = write_all(&s, &stage, opt, err);
    if (!rc) rc = ptwm_stage_commit(&stage, err);
    ptwm_stage_abort(&stage);
    ptwm_ck_src_close(&s);
    return rc;
}
