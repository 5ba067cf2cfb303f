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
        if (strcmp(m[i].plan, m[0].plan) != 0 || m[i].parts != m[0].parts)
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

/* Each manifest lists exactly the shards the plan gives its part. */
static ptwm_error check_plan(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                             const ptwm_ck_plan *pl, const uint32_t *part_of, uint64_t *coded,
                             uint8_t *seen, ptwm_err *err) {
    size_t i, j, k;
    for (i = 0; i < n; i++) {
        for (j = 0; j < m[i].nshards; j++) {
            const ptwm_parts_shard *sh = &m[i].shards[j];
            char name[64];
            ptwm_error rc;
            if (sh->index >= pl->nshards || part_of[sh->index] + 1 != m[i].part ||
                seen[sh->index] || sh->raw_bytes != pl->raw[sh->index] ||
                (rc = ptwm_ck_shard_name(pl, sh->index, name, err)) != PTWM_OK ||
                strcmp(name, sh->name) != 0)
                return ptwm_fail(err, PTWM_ERR_INDEX,
                                 "'%s': part %u lists shard '%s' (number %zu, %llu raw bytes), "
                                 "which the plan does not give it, or gives twice",
                                 outdir, (unsigned)m[i].part, sh->name, sh->index + 1,
                                 (unsigned long long)sh->raw_bytes);
            seen[sh->index] = 1;
            coded[sh->index] = sh->file_bytes;
        }
    }
    for (k = 0; k < pl->nshards; k++)
        if (!seen[k])
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "'%s': shard %zu of %zu (part %u) is in no manifest", outdir, k + 1,
                             pl->nshards, (unsigned)part_of[k] + 1);
    return PTWM_OK;
}

/* Where a shard is now: still among the parts' files, or already moved by
 * an assembly that was interrupted. */
static char *shard_path(const char *outdir, const char *name, int *moved) {
    char *staged = ptwm_path_join(outdir, SHARDS_DIR "/"), *p = NULL;
    if (staged) p = ptwm_path_join(staged, name);
    free(staged);
    *moved = p && !ptwm_file_exists(p);
    if (*moved) {
        free(p);
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
            free(path);
        }
    }
    return rc;
}

/* Move the shards into OUTDIR; a lone model.ptwm, which marks a finished
 * checkpoint by itself, only when `last` is set. */
static ptwm_error publish_shards(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                                 int last, ptwm_err *err) {
    size_t i, j;
    ptwm_error rc = PTWM_OK;
    for (i = 0; i < n && !rc; i++) {
        for (j = 0; j < m[i].nshards && !rc; j++) {
            const char *name = m[i].shards[j].name;
            int moved, single = strcmp(name, PTWM_SINGLE_NAME) == 0;
            char *from, *to;
            if (single != last) continue;
            from = shard_path(outdir, name, &moved);
            to = ptwm_path_join(outdir, name);
            if (!from || !to)
                rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            else if (!moved && rename(from, to) != 0)
                rc = ptwm_fail(err, PTWM_ERR_IO, "cannot move '%s' to '%s': %s", from, to,
                               strerror(errno));
            free(from);
            free(to);
        }
    }
    return rc ? rc : ptwm_sync_path(outdir, err);
}

static ptwm_error assemble(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                           ptwm_err *err) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_ck_src s;
    ptwm_ck_plan pl;
    uint32_t *part_of = NULL;
    uint64_t *coded = NULL;
    uint8_t *seen = NULL;
    char fp[33], *parts_dir;
    ptwm_error rc = ptwm_ck_src_open(&s, m[0].source, err);
    if (rc) {
        ptwm_ck_src_close(&s);
        ptwm_err_prefix(err, "'%s': the parts' source", outdir);
        return rc;
    }
    o.parts = m[0].parts;
    o.max_shard_size = m[0].max_shard_size;
    o.method = m[0].method;
    o.chunk_size = m[0].chunk_size;
    if ((rc = ptwm_parts_plan(&s, &o, &pl, &part_of, fp, err))) {
        ptwm_ck_src_close(&s);
        return rc;
    }
    if (strcmp(fp, m[0].plan) != 0)
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                       "'%s': the source '%s' changed since the parts ran (plan %s, now %s)",
                       outdir, m[0].source, m[0].plan, fp);
    coded = (uint64_t *)ptwm_calloc(pl.nshards + 1, sizeof *coded);
    seen = (uint8_t *)ptwm_calloc(pl.nshards + 1, 1);
    if (!rc && (!coded || !seen)) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = check_plan(outdir, m, n, &pl, part_of, coded, seen, err);
    if (!rc) rc = check_files(outdir, m, n, err);
    if (!rc) rc = ptwm_ck_copy_other_files(&s, outdir, err);
    if (!rc) rc = publish_shards(outdir, m, n, 0, err);
    /* The index (or the lone model.ptwm) last: OUTDIR is whole once it is there. */
    if (!rc) rc = ptwm_ck_write_index(&s, &pl, coded, outdir, err);
    if (!rc) rc = publish_shards(outdir, m, n, 1, err);
    if (!rc && (parts_dir = ptwm_path_join(outdir, PARTS_DIR)) != NULL) {
        ptwm_remove_tree(parts_dir);
        free(parts_dir);
    }
    free(seen);
    free(coded);
    free(part_of);
    ptwm_ck_plan_free(&pl);
    ptwm_ck_src_close(&s);
    return rc;
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
    free(parts_dir);
    ptwm_parts_free(m, n);
    return rc;
}
