/* Assembling a checkpoint compressed in parts (docs/SCALE.md): check every
 * part against the plan recomputed from the source, then publish the shards,
 * the source's other files and, last, the index. Each step can be repeated:
 * a crash during assembly leaves OUTDIR without an index, and the next run
 * finds the shards already moved and finishes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "fileio.h"
#include "ptdir_parts.h"

#define PARTS_DIR ".ptwm-parts"
#define SHARDS_DIR ".ptwm-parts/shards"

/* The parts present agree with each other, and none is missing. */
static ptwm_error check_set(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                            ptwm_err *err) {
    size_t i;
    uint32_t want;
    if (n == 0)
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                         "'%s' holds no parts (no " PARTS_DIR "/part-*.json): compress it with "
                         "--part K/N first",
                         outdir);
    for (i = 1; i < n; i++)
        if (strcmp(m[i].plan, m[0].plan) != 0 || m[i].parts != m[0].parts ||
            strcmp(m[i].direction, m[0].direction) != 0)
            return ptwm_fail(err, PTWM_ERR_MISMATCH,
                             "'%s': part %u of %u (plan %.12s) and part %u of %u (plan %.12s) "
                             "come from different plans; rerun the odd one with the same "
                             "source and options",
                             outdir, (unsigned)m[0].part, (unsigned)m[0].parts, m[0].plan,
                             (unsigned)m[i].part, (unsigned)m[i].parts, m[i].plan);
    for (i = 0, want = 1; want <= m[0].parts; want++) {
        if (i < n && m[i].part == want) {
            i++;
            continue;
        }
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                         "'%s': part %u of %u is missing (no " PARTS_DIR
                         "/part-%05u-of-%05u.json): run it, then assemble again",
                         outdir, (unsigned)want, (unsigned)m[0].parts, (unsigned)want,
                         (unsigned)m[0].parts);
    }
    return PTWM_OK;
}

/* Each manifest lists exactly the files the plan gives its part. */
static ptwm_error check_plan(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                             const ptwm_parts_files *f, uint64_t *file_bytes, uint8_t *seen,
                             ptwm_err *err) {
    size_t i, j, k;
    for (i = 0; i < n; i++) {
        for (j = 0; j < m[i].nshards; j++) {
            const ptwm_parts_shard *sh = &m[i].shards[j];
            if (sh->index >= f->n || f->part_of[sh->index] + 1 != m[i].part ||
                seen[sh->index] || sh->raw_bytes != f->raw[sh->index] ||
                strcmp(f->name[sh->index], sh->name) != 0)
                return ptwm_fail(err, PTWM_ERR_INDEX,
                                 "'%s': part %u lists shard '%s' (number %zu, %llu raw bytes), "
                                 "which the plan does not give it, or gives twice",
                                 outdir, (unsigned)m[i].part, sh->name, sh->index + 1,
                                 (unsigned long long)sh->raw_bytes);
            seen[sh->index] = 1;
            file_bytes[sh->index] = sh->file_bytes;
        }
    }
    for (k = 0; k < f->n; k++)
        if (!seen[k])
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "'%s': shard %zu of %zu (part %u) is in no manifest", outdir, k + 1,
                             f->n, (unsigned)f->part_of[k] + 1);
    return PTWM_OK;
}

/* Where a shard is now: still among the parts' files, or already moved by
 * an assembly that was interrupted. */
static char *shard_path(const char *outdir, const char *name, int *moved) {
    char *staged = ptwm_path_join(outdir, SHARDS_DIR "/"), *p = NULL;
    if (staged) p = ptwm_path_join(staged, name);
    ptwm_free(staged);
    *moved = p && !ptwm_file_exists(p);
    if (*moved) {
        ptwm_free(p);
        p = ptwm_path_join(outdir, name);
    }
    return p;
}

/* Every shard file is there, of the size and hash its part recorded. */
static ptwm_error check_files(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                              ptwm_err *err) {
    size_t i, j;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < n && !rc; i++) {
        for (j = 0; j < m[i].nshards && !rc; j++) {
            const ptwm_parts_shard *sh = &m[i].shards[j];
            char hex[33];
            uint64_t size = 0;
            int moved;
            char *path = shard_path(outdir, sh->name, &moved);
            if (!path) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            rc = ptwm_parts_hash_file(path, hex, &size, err);
            if (!rc && (size != sh->file_bytes || strcmp(hex, sh->xxh3) != 0))
                rc = ptwm_fail(err, PTWM_ERR_HASH,
                               "'%s': shard '%s' of part %u is %llu bytes with XXH3-128 %s; its "
                               "manifest says %llu bytes, %s: rerun part %u",
                               outdir, sh->name, (unsigned)m[i].part, (unsigned long long)size,
                               hex, (unsigned long long)sh->file_bytes, sh->xxh3,
                               (unsigned)m[i].part);
            ptwm_free(path);
        }
    }
    return rc;
}

ptwm_error ptwm_parts_publish(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                              const char *last, int only_last, ptwm_err *err) {
    size_t i, j;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < n && !rc; i++) {
        for (j = 0; j < m[i].nshards && !rc; j++) {
            const char *name = m[i].shards[j].name;
            int moved, is_last = last && strcmp(name, last) == 0;
            char *from, *to;
            if (is_last != only_last) continue;
            from = shard_path(outdir, name, &moved);
            to = ptwm_path_join(outdir, name);
            if (!from || !to)
                rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            else if (!moved && rename(from, to) != 0)
                rc = ptwm_fail(err, PTWM_ERR_IO, "cannot move '%s' to '%s': %s", from, to,
                               strerror(errno));
            ptwm_free(from);
            ptwm_free(to);
        }
    }
    return rc ? rc : ptwm_sync_path(outdir, err);
}

void ptwm_parts_done(const char *outdir) {
    char *parts_dir = ptwm_path_join(outdir, PARTS_DIR);
    if (parts_dir) ptwm_remove_tree(parts_dir);
    ptwm_free(parts_dir);
}

ptwm_error ptwm_parts_verify(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                             const ptwm_parts_files *f, uint64_t *file_bytes, ptwm_err *err) {
    uint8_t *seen = (uint8_t *)ptwm_calloc(f->n + 1, 1);
    ptwm_error rc = seen ? check_plan(outdir, m, n, f, file_bytes, seen, err)
                         : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = check_files(outdir, m, n, err);
    ptwm_free(seen);
    return rc;
}

/* The plan recomputed from the manifests' source and options, then the
 * parts checked against it, the source's other files, the shards in place
 * and last the index (or, without one, the one file). */
static ptwm_error assemble(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                           ptwm_err *err) {
    int compress = strcmp(m[0].direction, "compress") == 0;
    const ptwm_sink_ops *sink = compress ? &ptwm_sink_ptwm_ops : &ptwm_sink_safetensors_ops;
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_conv_src s;
    ptwm_conv_plan pl;
    ptwm_parts_files f;
    ptwm_files copied;
    uint64_t *sizes = NULL;
    const char *last;
    char fp[33];
    ptwm_source *base = NULL;
    ptwm_error rc = ptwm_conv_src_open(
        &s, m[0].source, compress ? PTWM_SOURCE_SAFETENSORS : PTWM_SOURCE_PTWM, err);
    if (!rc) rc = ptwm_conv_src_check_links(&s, m[0].follow_symlinks, err);
    if (rc) ptwm_err_prefix(err, "'%s': the parts' source", outdir);
    /* The base the parts ran with is part of their plan. */
    if (!rc && m[0].base && (rc = ptwm_source_open(m[0].base, PTWM_SOURCE_AUTO, &base, err)))
        ptwm_err_prefix(err, "'%s': the parts' base", outdir);
    o.base = base;
    o.parts = m[0].parts;
    o.max_shard_size = m[0].max_shard_size;
    o.method = (ptwm_method)m[0].method;
    o.chunk_size = m[0].chunk_size;
    if (rc || (rc = ptwm_parts_plan(&s, sink, &o, &pl, &f, fp, err))) {
        ptwm_conv_src_close(&s);
        ptwm_source_close(base);
        return rc;
    }
    if (strcmp(fp, m[0].plan) != 0) rc = ptwm_parts_changed(outdir, m, fp, err);
    sizes = (uint64_t *)ptwm_calloc(pl.nfiles + 1, sizeof *sizes);
    if (!rc && !sizes) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_parts_verify(outdir, m, n, &f, sizes, err);
    memset(&copied, 0, sizeof copied);
    if (!rc) rc = ptwm_conv_copy_other_files(&s, outdir, &copied, err);
    last = pl.with_index ? NULL : pl.names[0];
    /* The index (or the one file) last: OUTDIR is whole once it is there. */
    if (!rc) rc = ptwm_parts_publish(outdir, m, n, last, 0, err);
    if (!rc) rc = sink->index(&s, &pl, sizes, &copied, outdir, err);
    if (!rc) rc = ptwm_parts_publish(outdir, m, n, last, 1, err);
    if (!rc) ptwm_parts_done(outdir);
    ptwm_files_free(&copied);
    ptwm_free(sizes);
    ptwm_parts_files_free(&f);
    ptwm_conv_plan_free(&pl);
    ptwm_conv_src_close(&s);
    ptwm_source_close(base);
    return rc;
}

ptwm_error ptwm_parts_changed(const char *outdir, const ptwm_parts_manifest *m, const char *fp,
                              ptwm_err *err) {
    return ptwm_fail(err, PTWM_ERR_MISMATCH,
                     "'%s': the source '%s' changed since the parts ran (plan %s, now %s)",
                     outdir, m[0].source, m[0].plan, fp);
}

ptwm_error ptwm_assemble_checkpoint(const char *outdir, ptwm_err *err) {
    ptwm_parts_manifest *m = NULL;
    size_t n = 0;
    ptwm_error rc;
    char *parts_dir;
    if (!outdir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_assemble_checkpoint: NULL path");
    if (!ptwm_is_dir(outdir))
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "'%s' is not a directory", outdir);
    if ((rc = ptwm_parts_read_all(outdir, &m, &n, err))) return rc;
    parts_dir = ptwm_path_join(outdir, PARTS_DIR);
    /* Assembled already (the parts' directory went last): nothing to do. */
    if (n == 0 && parts_dir && !ptwm_is_dir(parts_dir) && ptwm_parts_finished(outdir))
        rc = PTWM_OK;
    else if (!(rc = check_set(outdir, m, n, err)))
        rc = assemble(outdir, m, n, err);
    ptwm_free(parts_dir);
    ptwm_parts_free(m, n);
    return rc;
}
