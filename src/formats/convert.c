/* The one conversion path (sink.h): plan the output files, write them
 * through one sink state, then the index and the source's other files.
 * Compressing and decompressing files and directories, whole or in parts
 * (ptdir_parts.c), all run through here. */
#include <stdio.h>
#include <stdlib.h>
#include "fileio.h"
#include "index.h"
#include "options.h"
#include "outdir.h"
#include "ptdir_parts.h"
#include "reader.h"
#include "sink.h"
#include "threads.h"

void ptwm_conv_plan_free(ptwm_conv_plan *p) {
    size_t k;
    for (k = 0; p->names && k < p->nfiles; k++) ptwm_free(p->names[k]);
    ptwm_free(p->names);
    ptwm_free(p->items);
    ptwm_free(p->shard_of);
    ptwm_free(p->start);
    ptwm_free(p->raw);
    memset(p, 0, sizeof *p);
}

/* Whether the plan is exact: every input file records the file it
 * reproduces. A sink that names files after their records (unless the
 * caller names the one output file: `named`) needs plain, distinct names:
 * records without names (writers before names were recorded) make a fresh
 * plan, as they always did; a name that is not plain or comes twice is
 * refused, not replaced by another, which would not be the original. */
static ptwm_error exact_plan(const ptwm_conv_src *s, const ptwm_sink_ops *sink, int named,
                             int *exact, ptwm_err *err) {
    size_t i, j;
    *exact = s->nin > 0;
    for (i = 0; i < s->nin; i++) *exact &= s->in[i].rec.json != NULL;
    if (!*exact || !sink->record_names || named) return PTWM_OK;
    for (i = 0; i < s->nin; i++)
        if (!s->in[i].rec.name || !s->in[i].rec.name[0]) *exact = 0;
    for (i = 0; *exact && i < s->nin; i++) {
        const char *name = s->in[i].rec.name;
        if (!ptwm_plain_name(name))
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "'%s': shard '%s' records its source file as '%s', which is not a "
                             "plain file name; it is not restored under another name (a maximum "
                             "shard size writes fresh shards instead)",
                             s->path, s->in[i].label, name);
        for (j = 0; j < i; j++)
            if (!strcmp(name, s->in[j].rec.name))
                return ptwm_fail(err, PTWM_ERR_SCHEMA,
                                 "'%s': shards '%s' and '%s' both record source file '%s'",
                                 s->path, s->in[j].label, s->in[i].label, name);
    }
    return PTWM_OK;
}

static ptwm_error list_items(const ptwm_conv_src *s, ptwm_conv_plan *p, uint64_t **sizes,
                             ptwm_err *err) {
    size_t i, j, k = 0;
    for (i = 0; i < s->nin; i++) p->n += s->in[i].ops->count(s->in[i].h);
    p->items = (ptwm_conv_item *)ptwm_calloc(p->n + 1, sizeof *p->items);
    p->shard_of = (size_t *)ptwm_calloc(p->n + 1, sizeof *p->shard_of);
    *sizes = (uint64_t *)ptwm_calloc(p->n + 1, sizeof **sizes);
    if (!p->items || !p->shard_of || !*sizes)
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory planning %zu tensors", p->n);
    for (i = 0; i < s->nin; i++) {
        const ptwm_conv_in *in = &s->in[i];
        for (j = 0; j < in->ops->count(in->h); j++, k++) {
            p->items[k].in = (uint32_t)i;
            p->items[k].local = j;
            in->ops->tensor(in->h, j, &p->items[k].info, NULL);
            (*sizes)[k] = p->items[k].info.nbytes;
            p->shard_of[k] = i;
        }
    }
    return PTWM_OK;
}

/* Where each file's tensors begin, their bytes, and the file names. */
static ptwm_error plan_files(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                             ptwm_conv_plan *p, ptwm_err *err) {
    size_t i, k = 0;
    p->start = (size_t *)ptwm_calloc(p->nfiles + 1, sizeof *p->start);
    p->raw = (uint64_t *)ptwm_calloc(p->nfiles + 1, sizeof *p->raw);
    p->names = (char **)ptwm_calloc(p->nfiles + 1, sizeof *p->names);
    if (!p->start || !p->raw || !p->names)
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory planning %zu files", p->nfiles);
    for (i = 0; i < p->n; i++) {
        while (k < p->shard_of[i]) p->start[++k] = i;
        p->raw[k] += p->items[i].info.nbytes;
    }
    while (k < p->nfiles) p->start[++k] = p->n;
    for (k = 0; k < p->nfiles; k++) {
        char name[64];
        if (p->exact && sink->record_names) {
            p->names[k] = ptwm_strdup(s->in[k].rec.name);
        } else if (p->with_index) {
            if (ptwm_shard_filename(k + 1, p->nfiles, sink->ext, name, sizeof name, NULL))
                return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "cannot name shard %zu of %zu", k + 1,
                                 p->nfiles);
            p->names[k] = ptwm_strdup(name);
        } else {
            p->names[k] = ptwm_strdup(sink->single_name);
        }
        if (!p->names[k]) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    return PTWM_OK;
}

/* A file named after its record must not take the place of the index. */
static ptwm_error check_names(const ptwm_conv_src *s, const ptwm_conv_plan *p, ptwm_err *err) {
    size_t k;
    for (k = 0; p->with_index && s->index_name && k < p->nfiles; k++)
        if (!strcmp(p->names[k], s->index_name))
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "'%s': shard '%s' restores to '%s', the name of the source index",
                             s->path, s->in[k].label, s->index_name);
    return PTWM_OK;
}

static ptwm_error plan_make(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                            uint64_t max_shard_size, int named, ptwm_conv_plan *p, ptwm_err *err) {
    uint64_t *sizes = NULL;
    ptwm_error rc;
    memset(p, 0, sizeof *p);
    rc = list_items(s, p, &sizes, err);
    if (!rc && max_shard_size == 0) rc = exact_plan(s, sink, named, &p->exact, err);
    if (!rc && max_shard_size)
        rc = ptwm_plan_shards(sizes, p->n, max_shard_size, p->shard_of, &p->nfiles, err);
    else
        p->nfiles = s->nin;
    if (p->nfiles == 0) p->nfiles = 1;   /* no tensors: still one (empty) file */
    p->with_index = sink->with_index(s, p->nfiles, p->exact);
    if (!rc) rc = plan_files(s, sink, p, err);
    if (!rc) rc = check_names(s, p, err);
    ptwm_free(sizes);
    if (rc) ptwm_conv_plan_free(p);
    return rc;
}

ptwm_error ptwm_conv_plan_make(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                               uint64_t max_shard_size, ptwm_conv_plan *p, ptwm_err *err) {
    return plan_make(s, sink, max_shard_size, 0, p, err);
}

ptwm_error ptwm_conv_index_build(ptwm_index_kind kind, const ptwm_conv_src *s,
                                 const ptwm_conv_plan *p, const uint64_t *sizes, const char *name,
                                 ptwm_index **out, ptwm_err *err) {
    ptwm_index *idx = NULL;
    uint64_t coded = 0;
    size_t i, k;
    ptwm_error rc = s->total > INT64_MAX
                        ? ptwm_fail(err, PTWM_ERR_INVALID_ARG, "index '%s': totals exceed 2^63-1", name)
                        : ptwm_index_new(kind, &idx, err);
    /* A .ptwm directory keeps the Hugging Face index it reproduces. */
    if (!rc && kind == PTWM_INDEX_PTWM && p->exact && s->index_text) {
        const char *iname = s->index_name ? s->index_name : PTWM_ST_INDEX_NAME;
        rc = ptwm_index_set_meta(idx, PTWM_META_SOURCE_INDEX_NAME, iname, strlen(iname), err);
        if (!rc) rc = ptwm_index_set_meta(idx, PTWM_META_SOURCE_INDEX, s->index_text, s->index_len, err);
    }
    for (k = 0; k < p->nfiles && !rc; k++) {
        coded += sizes ? sizes[k] : 0;
        for (i = p->start[k]; i < p->start[k + 1] && !rc; i++)
            rc = ptwm_index_add(idx, p->items[i].info.name, p->names[k], err);
    }
    if (!rc) ptwm_index_set_totals(idx, s->total, kind == PTWM_INDEX_PTWM ? coded : 0);
    if (rc) ptwm_index_free(idx);
    *out = rc ? NULL : idx;
    return rc;
}

ptwm_error ptwm_conv_index(ptwm_index_kind kind, const ptwm_conv_src *s, const ptwm_conv_plan *p,
                           const uint64_t *sizes, const char *dir, const char *name,
                           ptwm_err *err) {
    ptwm_index *idx = NULL;
    char *path = NULL;
    ptwm_error rc = ptwm_conv_index_build(kind, s, p, sizes, name, &idx, err);
    if (!rc && !(path = ptwm_path_join(dir, name)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_index_write(idx, path, err);
    ptwm_free(path);
    ptwm_index_free(idx);
    return rc;
}

ptwm_error ptwm_conv_metadata(const ptwm_conv_file *f, ptwm_kv **kv, size_t *n, ptwm_err *err) {
    const ptwm_conv_in *in = f->exact;
    size_t i;
    if (!in && f->n) in = &f->src->in[f->items[0].in];
    if (!in && f->src->nin == 1) in = &f->src->in[0];   /* an empty file of a lone input */
    *n = in && in->ops->metadata_count ? in->ops->metadata_count(in->h) : 0;
    if (!(*kv = (ptwm_kv *)ptwm_calloc(*n + 1, sizeof **kv)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < *n; i++) (*kv)[i] = in->ops->metadata(in->h, i);
    return PTWM_OK;
}

void ptwm_conv_opts_from(const ptwm_cparams *cp, ptwm_conv_progress *p, ptwm_conv_opts *out) {
    static const ptwm_cparams defaults = PTWM_CPARAMS_DEFAULT;
    memset(out, 0, sizeof *out);
    memset(p, 0, sizeof *p);
    out->cp = cp ? *cp : defaults;
    out->progress = p;
    p->fn = out->cp.progress;
    p->ctx = out->cp.progress_ctx;
    p->total = out->cp.progress_total;
}

void ptwm_conv_opts_of(const ptwm_checkpoint_options *o, ptwm_conv_progress *p,
                       ptwm_conv_opts *out) {
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    cp.method = o->method;
    cp.threads = o->threads;
    cp.chunk_size = o->chunk_size;
    cp.base = o->base;
    cp.format_version = o->format_version;
    cp.progress = o->progress;
    cp.progress_ctx = o->progress_ctx;
    ptwm_conv_opts_from(&cp, p, out);
}

int ptwm_conv_auto_threads(uint64_t raw, int restore) {
    uint64_t n = 1 + raw / PTWM_CONV_BYTES_A_THREAD;
    unsigned cores = ptwm_threads_resolve(0);
    if (n > cores) n = cores;
    /* One decoding thread hands its writes to a writing thread of its own
     * (read_io.c); two decoding threads write themselves, and on two cores
     * restored 0.80-0.86x as fast (docs/SCALING.md, "Fresh memory"). */
    return restore && n == 2 ? 1 : (int)n;
}

ptwm_error ptwm_conv_write(const ptwm_conv_src *s, const ptwm_conv_plan *p,
                           const ptwm_sink_ops *sink, const ptwm_conv_opts *o, const char *dir,
                           const uint8_t *wanted, uint64_t *sizes, ptwm_err *err) {
    void *state = NULL;
    size_t k;
    ptwm_error rc, r2;
    uint64_t raw = 0;
    ptwm_conv_opts given = *o;
    for (k = 0; k < p->nfiles; k++)
        if (!wanted || wanted[k]) raw += p->raw[k];
    if (o->progress && !o->progress->total) o->progress->total = raw;
    if (!given.cp.threads)
        given.cp.threads = ptwm_conv_auto_threads(raw, sink == &ptwm_sink_safetensors_ops);
    o = &given;
    if ((rc = sink->open(o, &state, err))) return rc;
    for (k = 0; k < p->nfiles && !rc; k++) {
        ptwm_conv_file f;
        char *path;
        if (wanted && !wanted[k]) continue;
        if (!(path = dir ? ptwm_path_join(dir, p->names[k]) : ptwm_strdup(p->names[k]))) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            break;
        }
        f.path = path;
        f.src = s;
        f.items = p->items + p->start[k];
        f.n = p->start[k + 1] - p->start[k];
        f.exact = p->exact ? &s->in[k] : NULL;
        rc = sink->file(state, &f, &sizes[k], err);
        ptwm_free(path);
    }
    r2 = sink->close(state, rc ? NULL : err);
    return rc ? rc : r2;
}

ptwm_error ptwm_conv_run(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                         const ptwm_conv_opts *o, uint64_t max_shard_size, const char *dir,
                         int others, int *with_index, ptwm_err *err) {
    ptwm_conv_plan p;
    ptwm_files copied;
    uint64_t *sizes = NULL;
    ptwm_error rc = ptwm_conv_plan_make(s, sink, max_shard_size, &p, err);
    if (rc) return rc;
    memset(&copied, 0, sizeof copied);
    if (with_index) *with_index = p.with_index;
    if (!(sizes = (uint64_t *)ptwm_calloc(p.nfiles + 1, sizeof *sizes)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_conv_write(s, &p, sink, o, dir, NULL, sizes, err);
    if (!rc && others) rc = ptwm_conv_copy_other_files(s, dir, &copied, err);
    /* The index last: a directory is only whole once it is there. */
    if (!rc) rc = sink->index(s, &p, sizes, &copied, dir, err);
    ptwm_files_free(&copied);
    ptwm_free(sizes);
    ptwm_conv_plan_free(&p);
    return rc;
}

ptwm_error ptwm_conv_staged(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                            const ptwm_conv_opts *o, uint64_t max_shard_size, const char *outdir,
                            const char *src, int force, ptwm_err *err) {
    ptwm_stage stage;
    ptwm_error rc = ptwm_stage_begin(outdir, src, force, &stage, err);
    if (rc) return rc;
    rc = ptwm_conv_run(s, sink, o, max_shard_size, stage.tmp_path, 1, NULL, err);
    if (!rc) rc = ptwm_stage_commit(&stage, err);
    ptwm_stage_abort(&stage);
    return rc;
}

/* A source that fails as safetensors but opens as .ptwm: say what it is. */
static int already_ptwm(const char *path) {
    ptwm_conv_src s;
    int yes = ptwm_conv_src_open(&s, path, PTWM_SOURCE_PTWM, NULL) == PTWM_OK;
    ptwm_conv_src_close(&s);
    return yes;
}

/* Compressing a .ptwm source re-codes it (against a new base, or whole
 * against none when its own base is given); without either there is nothing
 * to do. The sink keeps the safetensors files it records. */
static ptwm_error recode_open(ptwm_conv_src *s, const char *src,
                              const ptwm_checkpoint_options *opt, ptwm_err *err) {
    if (!opt->base && !opt->src_base)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "'%s' is already a .ptwm checkpoint (decompress it instead, or give "
                         "a base to re-code it against)", src);
    if (opt->parts)
        return ptwm_fail(err, PTWM_ERR_UNSUPPORTED,
                         "'%s': re-coding a .ptwm checkpoint in parts is not supported", src);
    ptwm_conv_src_close(s);   /* what the safetensors attempt left open */
    return ptwm_conv_src_open(s, src, PTWM_SOURCE_PTWM, err);
}

static ptwm_error convert_checkpoint(const char *src, const char *outdir,
                                     const ptwm_checkpoint_options *opt,
                                     ptwm_source_kind family, const ptwm_sink_ops *sink,
                                     const char *fn, ptwm_err *err) {
    ptwm_checkpoint_options given;
    ptwm_conv_src s;
    ptwm_error rc;
    int recoding = 0;
    if (!src || !outdir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: NULL path", fn);
    if ((rc = ptwm_checkpoint_options_read(opt, &given, fn, err))) return rc;
    opt = &given;
    if ((rc = ptwm_parts_check(opt, err))) return rc;
    rc = ptwm_conv_src_open(&s, src, family, err);
    if (rc && family == PTWM_SOURCE_SAFETENSORS && already_ptwm(src)) {
        rc = recode_open(&s, src, opt, err);
        recoding = 1;
    }
    if (!rc) rc = ptwm_conv_src_check_links(&s, opt->follow_symlinks, err);
    /* Tensors coded against a base decode with it (docs/DELTA.md): the
     * source's own base when it is re-coded, else the decompressed files'. */
    if (!rc && recoding) {
        if (opt->src_base) rc = ptwm_source_set_base(s.opened, opt->src_base, err);
    } else if (!rc && opt->base) {
        rc = ptwm_source_set_base(s.opened, opt->base, err);
    }
    if (!rc && opt->parts) {
        rc = ptwm_parts_convert(&s, sink, outdir, opt, err);
    } else if (!rc) {
        ptwm_conv_progress pr;
        ptwm_conv_opts co;
        ptwm_conv_opts_of(opt, &pr, &co);
        rc = ptwm_conv_staged(&s, sink, &co, opt->max_shard_size, outdir, src, opt->force, err);
    }
    ptwm_conv_src_close(&s);
    return rc;
}

ptwm_error ptwm_compress_checkpoint(const char *src, const char *outdir,
                                    const ptwm_checkpoint_options *opt, ptwm_err *err) {
    return convert_checkpoint(src, outdir, opt, PTWM_SOURCE_SAFETENSORS, &ptwm_sink_ptwm_ops,
                              "ptwm_compress_checkpoint", err);
}

ptwm_error ptwm_decompress_checkpoint(const char *src, const char *outdir,
                                      const ptwm_checkpoint_options *opt, ptwm_err *err) {
    return convert_checkpoint(src, outdir, opt, PTWM_SOURCE_PTWM, &ptwm_sink_safetensors_ops,
                              "ptwm_decompress_checkpoint", err);
}

ptwm_error ptwm_conv_file_write(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                               const ptwm_conv_opts *o, const char *dst, ptwm_err *err) {
    ptwm_conv_plan p;
    uint64_t size = 0;
    char *name;
    /* The caller names the file, not the plan. */
    ptwm_error rc = plan_make(s, sink, 0, 1, &p, err);
    if (rc) return rc;
    if (!(name = ptwm_strdup(dst))) {
        ptwm_conv_plan_free(&p);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    ptwm_free(p.names[0]);
    p.names[0] = name;
    rc = ptwm_conv_write(s, &p, sink, o, NULL, NULL, &size, err);
    ptwm_conv_plan_free(&p);
    return rc;
}

ptwm_error ptwm_compress_safetensors(const char *src_path, const char *dst_path,
                                     const ptwm_cparams *params, ptwm_err *err) {
    ptwm_cparams cp;
    ptwm_conv_progress pr;
    ptwm_conv_opts o;
    ptwm_conv_src s;
    ptwm_error rc;
    if (!src_path || !dst_path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL path");
    if ((rc = ptwm_cparams_read(params, &cp, "ptwm_compress_safetensors", err))) return rc;
    ptwm_conv_opts_from(&cp, &pr, &o);
    if ((rc = ptwm_conv_src_open(&s, src_path, PTWM_SOURCE_SAFETENSORS, err)) == PTWM_OK)
        rc = ptwm_conv_file_write(&s, &ptwm_sink_ptwm_ops, &o, dst_path, err);
    ptwm_conv_src_close(&s);
    return rc;
}

ptwm_error ptwm_reader_write_safetensors(ptwm_reader *r, const char *path, ptwm_err *err) {
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    ptwm_conv_progress pr;
    ptwm_conv_opts o;
    ptwm_conv_src s;
    ptwm_error rc;
    if (!r || !path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or path");
    cp.threads = ptwm_reader_get_threads(r);
    ptwm_conv_opts_from(&cp, &pr, &o);
    if ((rc = ptwm_conv_src_wrap(&s, &ptwm_source_ptwm_ops, r, ptwm_reader_label(r), err)) ==
        PTWM_OK)
        rc = ptwm_conv_file_write(&s, &ptwm_sink_safetensors_ops, &o, path, err);
    ptwm_conv_src_close(&s);
    return rc;
}
