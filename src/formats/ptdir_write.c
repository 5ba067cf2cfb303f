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
#include <sys/stat.h>
#include "common.h"
#include "container_read.h"
#include "fileio.h"
#include "outdir.h"
#include "ptdir_internal.h"

typedef struct ck_src {
    const char *path;
    ptwm_st *single;          /* a lone .safetensors file */
    ptwm_stdir *dir;          /* or a checkpoint directory */
    char *hf_index;           /* model.safetensors.index.json bytes, if the directory has one */
    size_t hf_index_len;
    uint64_t total;
} ck_src;

typedef struct ck_item {
    const ptwm_st *st;
    size_t local;
} ck_item;

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

static size_t src_nshards(const ck_src *s) { return s->single ? 1 : ptwm_stdir_shard_count(s->dir); }
static const ptwm_st *src_shard(const ck_src *s, size_t i) {
    return s->single ? s->single : ptwm_stdir_shard(s->dir, i);
}

void ptwm_ck_progress_add(ptwm_ck_progress *p, uint64_t bytes) {
    p->done += bytes;
    if (p->fn) p->fn(p->ctx, p->done, p->total);
}

static void src_close(ck_src *s) {
    ptwm_st_close(s->single);
    ptwm_stdir_close(s->dir);
    free(s->hf_index);
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

static ptwm_error src_open(ck_src *s, const char *path, ptwm_err *err) {
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
        free(ipath);
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
            ptwm_st_tensor(st, j, &info);
            s->total += info.nbytes;   /* bounded by the files' sizes: cannot wrap */
        }
    }
    return PTWM_OK;
}

static ptwm_error read_chunk(void *ctx, uint64_t offset, void *dst, size_t len, ptwm_err *err) {
    ck_read *r = (ck_read *)ctx;
    return ptwm_st_read(r->st, r->local, offset, dst, len, err);
}

/* The safetensors header, borrowed by the writer (the source stays open until
 * the shard is finished): no copy of a header that may be 100 MB. */
static ptwm_error record_source(ptwm_writer *w, const ptwm_st *st, ptwm_err *err) {
    size_t len;
    const char *json = (const char *)ptwm_st_header(st, &len);
    ptwm_error rc = ptwm_writer_borrow_source_json(w, json, len, ptwm_base_name(ptwm_st_path(st)), err);
    /* The rebuild checks it writes exactly the source's bytes. */
    if (!rc) ptwm_writer_set_source_size(w, ptwm_st_file_size(st));
    return rc;
}

static ptwm_error record_metadata(ptwm_writer *w, const ptwm_st *st, ptwm_err *err) {
    size_t i, n = ptwm_st_metadata_count(st);
    ptwm_kv *kv;
    ptwm_error rc;
    if (n == 0) return PTWM_OK;
    kv = (ptwm_kv *)ptwm_calloc(n, sizeof *kv);
    if (!kv) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++) kv[i] = ptwm_st_metadata(st, i);
    rc = ptwm_writer_set_metadata(w, kv, n, err);
    free(kv);
    return rc;
}

/* One .ptwm shard from `items`; `source` (may be NULL) is recorded for a
 * byte-exact restore. *file_size receives the shard's size on disk. */
static ptwm_error write_shard(const char *path, const ptwm_cparams *cp, const ck_item *items,
                              size_t n, const ptwm_st *source, ptwm_ck_progress *p,
                              uint64_t *file_size, ptwm_err *err) {
    ptwm_writer *w = NULL;
    struct stat sb;
    size_t i;
    uint64_t raw = 0;
    ptwm_cparams params = *cp;
    shard_progress sp;
    ptwm_error rc;
    sp.p = p;
    sp.base = p->done;
    params.progress = p->fn ? on_shard_progress : NULL;
    params.progress_ctx = &sp;
    if ((rc = ptwm_writer_open_file(path, &params, &w, err))) return rc;
    if (source) rc = record_source(w, source, err);
    if (!rc && n) rc = record_metadata(w, source ? source : items[0].st, err);
    for (i = 0; i < n && !rc; i++) {
        ptwm_tensor_info info;
        ptwm_tensor_desc desc;
        ck_read r;
        ptwm_st_tensor(items[i].st, items[i].local, &info);
        desc.name = info.name;
        desc.dtype = info.dtype;
        desc.ndim = info.ndim;
        desc.shape = info.shape;
        desc.data = NULL;
        desc.nbytes = info.nbytes;
        r.st = items[i].st;
        r.local = items[i].local;
        raw += info.nbytes;
        rc = ptwm_writer_add_stream(w, &desc, NULL, read_chunk, &r, err);
        if (rc) ptwm_err_prefix(err, "'%s'", ptwm_st_path(items[i].st));
    }
    if (rc) {
        ptwm_writer_free(w);
        return rc;
    }
    if ((rc = ptwm_writer_finish(w, err)) != PTWM_OK) return rc;
    if (sp.base + raw > p->done) ptwm_ck_progress_add(p, sp.base + raw - p->done);
    if (stat(path, &sb) != 0) return ptwm_fail(err, PTWM_ERR_IO, "'%s': stat failed", path);
    *file_size = (uint64_t)sb.st_size;
    return PTWM_OK;
}

/* The shard plan: shard_of[i] for every tensor in source order. By default the
 * source files themselves; with max_shard_size, greedy packing by raw bytes. */
static ptwm_error plan(const ck_src *s, uint64_t max_shard_size, ck_item **items_out,
                       size_t **shard_of_out, size_t *n_out, size_t *nshards, ptwm_err *err) {
    size_t ns = src_nshards(s), i, n = 0, k = 0;
    ck_item *items;
    size_t *shard_of;
    uint64_t *sizes;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < ns; i++) n += ptwm_st_count(src_shard(s, i));
    items = (ck_item *)ptwm_calloc(n + 1, sizeof *items);
    shard_of = (size_t *)ptwm_calloc(n + 1, sizeof *shard_of);
    sizes = (uint64_t *)ptwm_calloc(n + 1, sizeof *sizes);
    if (!items || !shard_of || !sizes) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory planning %zu tensors", n);
        goto done;
    }
    for (i = 0; i < ns; i++) {
        const ptwm_st *st = src_shard(s, i);
        size_t j, m = ptwm_st_count(st);
        for (j = 0; j < m; j++, k++) {
            ptwm_tensor_info info;
            ptwm_st_tensor(st, j, &info);
            items[k].st = st;
            items[k].local = j;
            sizes[k] = info.nbytes;
            shard_of[k] = i;
        }
    }
    if (max_shard_size)
        rc = ptwm_plan_shards(sizes, n, max_shard_size, shard_of, nshards, err);
    else
        *nshards = ns;
done:
    free(sizes);
    if (rc) {
        free(items);
        free(shard_of);
        return rc;
    }
    *items_out = items;
    *shard_of_out = shard_of;
    *n_out = n;
    return PTWM_OK;
}

typedef struct skip_ctx {
    const ck_src *s;
} skip_ctx;

/* Files the conversion itself accounts for: the shards and the index. */
static int skip_source_file(void *ctx, const char *name) {
    const ck_src *s = ((skip_ctx *)ctx)->s;
    size_t i, n = src_nshards(s);
    if (!strcmp(name, PTWM_ST_INDEX_NAME)) return 1;
    for (i = 0; i < n; i++)
        if (!strcmp(name, ptwm_base_name(ptwm_st_path(src_shard(s, i))))) return 1;
    return 0;
}

static ptwm_error write_all(const ck_src *s, const ptwm_stage *stage,
                            const ptwm_checkpoint_options *o, ptwm_err *err) {
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    ptwm_ck_progress p;
    ck_item *items = NULL;
    size_t *shard_of = NULL, n = 0, nshards = 0, k, i = 0;
    ptwm_index *idx = NULL;
    uint64_t coded_total = 0;
    int exact = o->max_shard_size == 0;
    /* An index whenever there is more than one shard, and always for a directory
     * that had a Hugging Face index, so that index comes back. */
    int with_index;
    ptwm_error rc;
    cp.method = o->method ? o->method : PTWM_METHOD_MICROSCALE;
    cp.threads = o->threads;
    cp.chunk_size = o->chunk_size;
    p.fn = o->progress;
    p.ctx = o->progress_ctx;
    p.done = 0;
    p.total = s->total;
    if ((rc = plan(s, o->max_shard_size, &items, &shard_of, &n, &nshards, err))) return rc;
    with_index = nshards > 1 || (exact && s->hf_index);
    if (nshards == 0) nshards = 1;   /* no tensors: still one (empty) model.ptwm */
    if (with_index && (rc = ptwm_index_create(s->total, 0, &idx, err))) goto done;
    if (idx && exact && s->hf_index)
        rc = ptwm_index_set_meta(idx, PTWM_META_SOURCE_INDEX_NAME, PTWM_ST_INDEX_NAME,
                                 strlen(PTWM_ST_INDEX_NAME), err);
    if (!rc && idx && exact && s->hf_index)
        rc = ptwm_index_set_meta(idx, PTWM_META_SOURCE_INDEX, s->hf_index, s->hf_index_len, err);
    for (k = 0; k < nshards && !rc; k++) {
        char name[64], *path;
        size_t first = i;
        uint64_t fsize = 0;
        while (i < n && shard_of[i] == k) i++;
        if (with_index)
            rc = ptwm_shard_filename(k + 1, nshards, "ptwm", name, sizeof name);
        else
            snprintf(name, sizeof name, "%s", PTWM_SINGLE_NAME);
        if (rc) {
            rc = ptwm_fail(err, rc, "cannot name shard %zu of %zu", k + 1, nshards);
            break;
        }
        if (!(path = ptwm_stage_path(stage, name))) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            break;
        }
        rc = write_shard(path, &cp, items + first, i - first, exact ? src_shard(s, k) : NULL, &p,
                         &fsize, err);
        free(path);
        coded_total += fsize;
        for (; first < i && !rc && idx; first++) {
            ptwm_tensor_info info;
            ptwm_st_tensor(items[first].st, items[first].local, &info);
            rc = ptwm_index_add(idx, info.name, name, err);
        }
    }
    if (!rc && s->dir) {
        skip_ctx sc;
        sc.s = s;
        rc = ptwm_copy_other_files(s->path, stage->tmp_path, skip_source_file, &sc, err);
    }
    /* The index last: a directory is only whole once it is there. */
    if (!rc && idx) {
        char *ipath = ptwm_stage_path(stage, PTWM_INDEX_NAME);
        ptwm_index_set_totals(idx, s->total, coded_total);
        rc = ipath ? ptwm_index_write(idx, ipath, err)
                   : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        free(ipath);
    }
done:
    ptwm_index_free(idx);
    free(items);
    free(shard_of);
    return rc;
}

ptwm_error ptwm_compress_checkpoint(const char *src, const char *outdir,
                                    const ptwm_checkpoint_options *opt, ptwm_err *err) {
    ptwm_checkpoint_options defaults = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_stage stage;
    ck_src s;
    ptwm_error rc;
    if (!src || !outdir)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_compress_checkpoint: NULL path");
    if (!opt) opt = &defaults;
    if ((rc = src_open(&s, src, err))) {
        src_close(&s);
        return rc;
    }
    rc = ptwm_stage_begin(outdir, src, opt->force, &stage, err);
    if (!rc) rc = write_all(&s, &stage, opt, err);
    if (!rc) rc = ptwm_stage_commit(&stage, err);
    ptwm_stage_abort(&stage);
    src_close(&s);
    return rc;
}
