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
#include "ptdir_parts.h"
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
    ptwm_free(o);
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
        ptwm_free(o);
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
    if (ptwm_reader_tensor(r, i, &info, NULL) == PTWM_OK && strcmp(info.name, name) == 0) {
        *local = i;
        return PTWM_OK;
    }
    return ptwm_reader_find(r, name, local, NULL);
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
        ptwm_reader_tensor(r, local[i], &info, NULL);
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
    ptwm_free(local);
    ptwm_free(offs);
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

/* Rebuild the recorded source files of the shards k with wanted[k] set (all
 * when wanted is NULL) into dir. */
static ptwm_error restore_files(dsrc *s, const char *dir, const uint8_t *wanted, ptwm_err *err) {
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
        if (wanted && !wanted[i]) continue;
        path = ptwm_path_join(dir, ptwm_reader_source_name(r));
        rc = path ? restore_file(s, r, shard_label(s, i), path, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        ptwm_free(path);
    }
    return rc;
}

/* The source's Hugging Face index, as it was, into dir (if it had one). */
static ptwm_error restore_index(const dsrc *s, const char *dir, ptwm_err *err) {
    const ptwm_index *idx = s->dir ? ptwm_ptdir_index(s->dir) : NULL;
    const char *iname = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX_NAME, NULL);
    size_t len = 0;
    const char *text = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX, &len);
    char *path;
    ptwm_error rc;
    if (!iname) return PTWM_OK;
    if (!text || !ptwm_plain_name(iname))
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "'%s': %s names source index '%s' but is missing its text or the "
                         "name is not a plain file name", s->path, PTWM_INDEX_NAME, iname);
    if (!(path = ptwm_path_join(dir, iname)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    rc = ptwm_write_small_file(path, text, len, NULL, err);
    ptwm_free(path);
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
    ptwm_free(names);
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
        ptwm_free(descs);
        ptwm_free(local);
        ptwm_free(offs);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    /* The header builder wants a data pointer but reads only the sizes; the
     * bytes are streamed after it. */
    for (i = 0; i < n; i++) descs[i] = ptwm_desc_of(&t[i].info, &header_only);
    if (n) {
        nmeta = ptwm_reader_metadata_count(t[0].r);
        meta = (ptwm_kv *)ptwm_calloc(nmeta + 1, sizeof *meta);
        if (!meta) {
            ptwm_free(descs);
            ptwm_free(local);
            ptwm_free(offs);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        }
        for (i = 0; i < nmeta; i++) meta[i] = ptwm_reader_metadata(t[0].r, i);
    }
    rc = ptwm_st_build_header(descs, n, meta, nmeta, &hdr, &hlen, err);
    ptwm_free(descs);
    ptwm_free(meta);
    if (rc) {
        ptwm_free(local);
        ptwm_free(offs);
        ptwm_err_prefix(err, "'%s'", path);
        return rc;
    }
    for (i = 0; i < n; i++) {
        local[i] = t[i].local;
        offs[i] = (i ? offs[i - 1] + t[i - 1].info.nbytes : hlen);
    }
    rc = out_begin(s, path, hdr, hlen, err);
    ptwm_free(hdr);
    if (!rc) {
        /* One addition per run of tensors from one .ptwm shard. */
        for (i = 0; i < n && !rc; i = j) {
            for (j = i + 1; j < n && t[j].shard == t[i].shard; j++) continue;
            rc = ptwm_fstream_add(s->out, t[i].r, local + i, j - i, offs + i, err);
        }
        r2 = ptwm_fstream_end(s->out, rc ? NULL : err);
        if (!rc) rc = r2;
    }
    ptwm_free(local);
    ptwm_free(offs);
    return rc;
}

/* Fresh Hugging Face shards: the .ptwm shards' grouping, or a new plan. */
typedef struct fresh_plan {
    fresh_tensor *t;
    size_t *shard_of, *start;
    size_t n, nshards;
} fresh_plan;

static void fresh_free(fresh_plan *p) {
    ptwm_free(p->t);
    ptwm_free(p->shard_of);
    ptwm_free(p->start);
    memset(p, 0, sizeof *p);
}

static ptwm_error fresh_make(dsrc *s, uint64_t max_shard_size, fresh_plan *p, ptwm_err *err) {
    size_t ns = d_nshards(s), i, j, k = 0;
    uint64_t *sizes;
    ptwm_error rc = PTWM_OK;
    memset(p, 0, sizeof *p);
    for (i = 0; i < ns; i++) p->n += ptwm_reader_count(d_shard(s, i));
    p->t = (fresh_tensor *)ptwm_calloc(p->n + 1, sizeof *p->t);
    p->shard_of = (size_t *)ptwm_calloc(p->n + 1, sizeof *p->shard_of);
    sizes = (uint64_t *)ptwm_calloc(p->n + 1, sizeof *sizes);
    if (!p->t || !p->shard_of || !sizes) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu tensors", p->n);
        goto done;
    }
    for (i = 0; i < ns; i++) {
        ptwm_reader *r = d_shard(s, i);
        for (j = 0; j < ptwm_reader_count(r); j++, k++) {
            p->t[k].r = r;
            p->t[k].shard = i;
            p->t[k].local = j;
            ptwm_reader_tensor(r, j, &p->t[k].info, NULL);
            sizes[k] = p->t[k].info.nbytes;
            p->shard_of[k] = i;
        }
    }
    if (max_shard_size)
        rc = ptwm_plan_shards(sizes, p->n, max_shard_size, p->shard_of, &p->nshards, err);
    else
        p->nshards = ns;
    if (p->nshards == 0) p->nshards = 1;
    if (!rc && !(p->start = (size_t *)ptwm_calloc(p->nshards + 1, sizeof *p->start)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0, k = 0; !rc && k < p->nshards; k++) {
        p->start[k] = i;
        while (i < p->n && p->shard_of[i] == k) i++;
    }
    if (!rc) p->start[p->nshards] = p->n;
done:
    ptwm_free(sizes);
    if (rc) fresh_free(p);
    return rc;
}

static ptwm_error fresh_name(const fresh_plan *p, size_t k, char name[64], ptwm_err *err) {
    if (p->nshards == 1) {
        snprintf(name, 64, "model.safetensors");
        return PTWM_OK;
    }
    if (ptwm_shard_filename(k + 1, p->nshards, "safetensors", name, 64, NULL))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "cannot name shard %zu of %zu", k + 1,
                         p->nshards);
    return PTWM_OK;
}

static ptwm_error reshard_files(dsrc *s, const fresh_plan *p, const char *dir,
                                const uint8_t *wanted, ptwm_err *err) {
    size_t k;
    ptwm_error rc = PTWM_OK;
    for (k = 0; k < p->nshards && !rc; k++) {
        char name[64], *path;
        if (wanted && !wanted[k]) continue;
        if ((rc = fresh_name(p, k, name, err))) break;
        if (!(path = ptwm_path_join(dir, name))) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            break;
        }
        rc = write_fresh_shard(s, path, p->t + p->start[k], p->start[k + 1] - p->start[k], err);
        ptwm_free(path);
    }
    return rc;
}

static ptwm_error reshard_index(const dsrc *s, const fresh_plan *p, const char *dir,
                                ptwm_err *err) {
    char *path;
    ptwm_error rc;
    if (p->nshards <= 1) return PTWM_OK;
    path = ptwm_path_join(dir, PTWM_ST_INDEX_NAME);
    rc = path ? write_hf_index(path, p->t, p->shard_of, p->n, p->nshards, s->total, err)
              : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    ptwm_free(path);
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
            ptwm_reader_tensor(r, j, &info, NULL);
            if (ptwm_add_overflow(s->total, info.nbytes, &s->total))
                return ptwm_fail(err, PTWM_ERR_CORRUPT, "'%s': tensor sizes overflow", path);
        }
    }
    return PTWM_OK;
}

/* The base its tensors coded against one need (docs/DELTA.md), for every shard. */
static ptwm_error dsrc_set_base(dsrc *s, ptwm_source *base, ptwm_err *err) {
    size_t i;
    ptwm_error rc = PTWM_OK;
    for (i = 0; base && !rc && i < d_nshards(s); i++) rc = ptwm_reader_set_base(d_shard(s, i), base, err);
    return rc;
}

/* The output files of a decompression: the recorded source files, or fresh
 * shards; for parts, which part writes each, and the plan's fingerprint. */
typedef struct dk_plan {
    int restore;
    fresh_plan fresh;
    ptwm_parts_files f;
    char fp[33];
} dk_plan;

static void dk_free(dk_plan *p) {
    fresh_free(&p->fresh);
    ptwm_parts_files_free(&p->f);
}

static ptwm_error dk_files(dsrc *s, dk_plan *p, ptwm_err *err) {
    size_t k, i, n = p->restore ? d_nshards(s) : p->fresh.nshards;
    char name[64];
    ptwm_error rc = ptwm_parts_files_new(n, p->f.parts, &p->f, err);
    for (k = 0; k < n && !rc; k++) {
        if (p->restore) {
            ptwm_reader *r = d_shard(s, k);
            size_t hlen = 0;
            ptwm_reader_source_header(r, &hlen);
            p->f.raw[k] = hlen;
            for (i = 0; i < ptwm_reader_count(r); i++) {
                ptwm_tensor_info info;
                ptwm_reader_tensor(r, i, &info, NULL);
                p->f.raw[k] += info.nbytes;
            }
            rc = ptwm_parts_files_name(&p->f, k, ptwm_reader_source_name(r), err);
        } else {
            for (i = p->fresh.start[k]; i < p->fresh.start[k + 1]; i++)
                p->f.raw[k] += p->fresh.t[i].info.nbytes;
            if (!(rc = fresh_name(&p->fresh, k, name, err)))
                rc = ptwm_parts_files_name(&p->f, k, name, err);
        }
    }
    return rc;
}

/* Everything that decides the output files and who writes them. */
static ptwm_error dk_fingerprint(dsrc *s, const ptwm_checkpoint_options *o, dk_plan *p,
                                 ptwm_err *err) {
    const ptwm_index *idx = s->dir ? ptwm_ptdir_index(s->dir) : NULL;
    const char *text;
    size_t k, i, len = 0;
    uint8_t d[16];
    ptwm_xxh128 h = {0};
    ptwm_error rc = ptwm_xxh128_begin(&h, err);
    if (rc) return rc;
    ptwm_parts_hash_str(&h, "ptwm parts plan 1 decompress");
    ptwm_parts_hash_u64(&h, o->parts);
    ptwm_parts_hash_u64(&h, o->max_shard_size);
    ptwm_parts_hash_u64(&h, (uint64_t)p->restore);
    for (k = 0; k < p->f.n; k++) {
        ptwm_parts_hash_str(&h, p->f.name[k]);
        ptwm_parts_hash_u64(&h, p->f.raw[k]);
    }
    for (k = 0; k < d_nshards(s); k++) {
        ptwm_reader *r = d_shard(s, k);
        ptwm_parts_hash_str(&h, s->single ? "" : shard_label(s, k));
        ptwm_parts_hash_u64(&h, ptwm_reader_file_size(r));
        for (i = 0; i < ptwm_reader_count(r); i++) {
            ptwm_tensor_info info;
            ptwm_reader_tensor(r, i, &info, NULL);
            ptwm_parts_hash_str(&h, info.name);
            ptwm_parts_hash_u64(&h, info.nbytes);
        }
    }
    text = ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX, &len);
    ptwm_parts_hash_u64(&h, len);
    if (text) ptwm_xxh128_update(&h, text, len);
    ptwm_xxh128_end(&h, d);
    ptwm_hex128(d, p->fp);
    return PTWM_OK;
}

static ptwm_error dk_plan_make(dsrc *s, const ptwm_checkpoint_options *o, dk_plan *p,
                               ptwm_err *err) {
    ptwm_error rc = PTWM_OK;
    memset(p, 0, sizeof *p);
    p->f.parts = o->parts;
    p->restore = o->max_shard_size == 0 && can_restore(s);
    if (!p->restore) rc = fresh_make(s, o->max_shard_size, &p->fresh, err);
    if (!rc) rc = dk_files(s, p, err);
    if (!rc) ptwm_parts_files_assign(&p->f);
    if (!rc && o->parts) rc = dk_fingerprint(s, o, p, err);
    if (rc) dk_free(p);
    return rc;
}

/* The files k with wanted[k] (all when NULL) into dir, through one stream;
 * every file committed or discarded when this returns. */
static ptwm_error dk_write(dsrc *s, const dk_plan *p, const ptwm_checkpoint_options *o,
                           const char *dir, const uint8_t *wanted, ptwm_err *err) {
    ptwm_ck_progress pr;
    size_t k;
    ptwm_error rc, r2;
    pr.fn = o->progress;
    pr.ctx = o->progress_ctx;
    pr.done = 0;
    pr.total = 0;
    for (k = 0; wanted && k < p->f.n; k++)
        if (wanted[k]) pr.total += p->f.raw[k];   /* headers included: a few bytes over */
    if (!wanted) pr.total = s->total;
    if ((rc = ptwm_fstream_open(s->threads, progress_sink, &pr, &s->out, err))) return rc;
    rc = p->restore ? restore_files(s, dir, wanted, err) : reshard_files(s, &p->fresh, dir, wanted, err);
    r2 = ptwm_fstream_close(s->out, rc ? NULL : err);
    s->out = NULL;
    return rc ? rc : r2;
}

static ptwm_error dk_index(const dsrc *s, const dk_plan *p, const char *dir, ptwm_err *err) {
    return p->restore ? restore_index(s, dir, err) : reshard_index(s, &p->fresh, dir, err);
}

/* Whether the plan writes an index; if not, its one file marks the output
 * whole and is published last. */
static const char *dk_last(const dsrc *s, const dk_plan *p) {
    const ptwm_index *idx = s->dir ? ptwm_ptdir_index(s->dir) : NULL;
    int index = p->restore ? ptwm_index_get_meta(idx, PTWM_META_SOURCE_INDEX_NAME, NULL) != NULL
                           : p->fresh.nshards > 1;
    return index || p->f.n == 0 ? NULL : p->f.name[0];
}

static ptwm_error dk_part(dsrc *s, const char *outdir, const ptwm_checkpoint_options *o,
                          ptwm_err *err) {
    dk_plan p;
    uint8_t *wanted = NULL;
    char *dir = NULL;
    size_t k;
    ptwm_error rc = dk_plan_make(s, o, &p, err);
    if (rc) return rc;
    rc = ptwm_parts_begin(outdir, s->path, p.fp, o, &dir, err);
    if (!rc && !(wanted = (uint8_t *)ptwm_calloc(p.f.n + 1, 1)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (k = 0; !rc && k < p.f.n; k++) wanted[k] = p.f.part_of[k] + 1 == o->part;
    if (!rc) rc = dk_write(s, &p, o, dir, wanted, err);
    if (!rc) rc = ptwm_parts_write_manifest(outdir, s->path, p.fp, "decompress", o, &p.f, err);
    ptwm_free(wanted);
    ptwm_free(dir);
    dk_free(&p);
    return rc;
}

static void dsrc_close(dsrc *s) {
    ptwm_ptdir_close(s->dir);
    ptwm_reader_close(s->single);
}

ptwm_error ptwm_dk_assemble(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                            ptwm_err *err) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    dsrc s;
    dk_plan p;
    uint64_t *sizes = NULL;
    const char *last;
    ptwm_error rc = dsrc_open(&s, m[0].source, 0, err);
    o.parts = m[0].parts;
    o.max_shard_size = m[0].max_shard_size;
    if (rc || (rc = dk_plan_make(&s, &o, &p, err))) {
        if (rc) ptwm_err_prefix(err, "'%s': the parts' source", outdir);
        dsrc_close(&s);
        return rc;
    }
    if (strcmp(p.fp, m[0].plan) != 0) rc = ptwm_parts_changed(outdir, m, p.fp, err);
    if (!rc && !(sizes = (uint64_t *)ptwm_calloc(p.f.n + 1, sizeof *sizes)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_parts_verify(outdir, m, n, &p.f, sizes, err);
    if (!rc && s.dir) rc = ptwm_copy_other_files(s.path, outdir, skip_ptwm_file, &s, err);
    last = dk_last(&s, &p);
    /* The index (or the one file) last: OUTDIR is whole once it is there. */
    if (!rc) rc = ptwm_parts_publish(outdir, m, n, last, 0, err);
    if (!rc) rc = dk_index(&s, &p, outdir, err);
    if (!rc) rc = ptwm_parts_publish(outdir, m, n, last, 1, err);
    if (!rc) ptwm_parts_done(outdir);
    ptwm_free(sizes);
    dk_free(&p);
    dsrc_close(&s);
    return rc;
}

ptwm_error ptwm_decompress_checkpoint(const char *src, const char *outdir,
                                      const ptwm_checkpoint_options *opt, ptwm_err *err) {
    ptwm_checkpoint_options defaults = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_stage stage;
    dk_plan p;
    dsrc s;
    ptwm_error rc;
    if (!src || !outdir)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_decompress_checkpoint: NULL path");
    if (!opt) opt = &defaults;
    if ((rc = ptwm_parts_check(opt, err))) return rc;
    memset(&stage, 0, sizeof stage);
    if ((rc = dsrc_open(&s, src, opt->threads, err)) || (rc = dsrc_set_base(&s, opt->base, err))) {
        dsrc_close(&s);
        return rc;
    }
    if (opt->parts) {
        rc = dk_part(&s, outdir, opt, err);
        dsrc_close(&s);
        return rc;
    }
    rc = ptwm_stage_begin(outdir, src, opt->force, &stage, err);
    if (!rc && !(rc = dk_plan_make(&s, opt, &p, err))) {
        rc = dk_write(&s, &p, opt, stage.tmp_path, NULL, err);
        if (!rc) rc = dk_index(&s, &p, stage.tmp_path, err);
        dk_free(&p);
    }
    if (!rc && s.dir) rc = ptwm_copy_other_files(src, stage.tmp_path, skip_ptwm_file, &s, err);
    if (!rc) rc = ptwm_stage_commit(&stage, err);
    ptwm_stage_abort(&stage);
    dsrc_close(&s);
    return rc;
}
