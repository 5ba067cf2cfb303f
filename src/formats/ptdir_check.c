/* A .ptwm directory's files checked against its file record
 * (ptwm_ptdir_check_files, ptdir_files.h): every file besides the shards and
 * the record is read whole and its size and XXH3-128 compared; `ptwm verify`
 * reports each one. The shards are checked by their own CRCs and hashes. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "fileio.h"
#include "index.h"
#include "ptdir_files.h"
#include "shardir.h"

#define WALK_MAX_DEPTH 16   /* as deep as a conversion copies */

typedef struct name_list {
    char **names;
    size_t n, cap;
} name_list;

/* The top-level names that are not checked: the shards, and the record. */
typedef struct own_files {
    const char *const *names;
    size_t n;
} own_files;

static int is_own_file(const own_files *own, const char *name) {
    size_t i;
    if (!strcmp(name, PTWM_FILES_NAME)) return 1;
    for (i = 0; i < own->n; i++)
        if (!strcmp(name, own->names[i])) return 1;
    return 0;
}

static ptwm_error add_name(name_list *l, char *name, ptwm_err *err) {
    if (!name || !ptwm_grow((void **)&l->names, &l->cap, l->n + 1, sizeof *l->names)) {
        ptwm_free(name);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    l->names[l->n++] = name;
    return PTWM_OK;
}

/* The files below `path` (rel: its path inside the directory, NULL at the top). */
static ptwm_error list_files(const own_files *own, const char *path, const char *rel, int depth,
                             name_list *l, ptwm_err *err) {
    DIR *dir = opendir(path);
    struct dirent *e;
    ptwm_error rc = PTWM_OK;
    if (!dir) return ptwm_fail(err, PTWM_ERR_IO, "'%s': cannot list: %s", path, strerror(errno));
    while (!rc && (e = readdir(dir)) != NULL) {
        struct stat sb, lsb;
        char *p, *r;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!rel && is_own_file(own, e->d_name)) continue;
        p = ptwm_path_join(path, e->d_name);
        r = rel ? ptwm_path_join(rel, e->d_name) : ptwm_strdup(e->d_name);
        if (!p || !r) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            ptwm_free(r);
        } else if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && lstat(p, &lsb) == 0 &&
                   !S_ISLNK(lsb.st_mode) && depth < WALK_MAX_DEPTH) {
            rc = list_files(own, p, r, depth + 1, l, err);
            ptwm_free(r);
        } else {
            /* A file, or what a conversion never writes (a link to a
             * directory, a tree too deep): reading it says what it is. */
            rc = add_name(l, r, err);
        }
        ptwm_free(p);
    }
    closedir(dir);
    return rc;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One file present in the directory against the record. */
static void check_one(const char *dir, const ptwm_files *rec, uint8_t *seen, const char *name,
                      ptwm_file_check_fn fn, void *ctx) {
    const ptwm_files_entry *e = rec ? ptwm_files_find(rec, name) : NULL;
    char *path;
    uint8_t h[16];
    uint64_t size = 0;
    ptwm_err err;
    if (!e) {
        fn(ctx, name, PTWM_FILE_UNRECORDED, NULL);
        return;
    }
    seen[e - rec->e] = 1;
    path = ptwm_path_join(dir, name);
    if (!path)
        ptwm_fail(&err, PTWM_ERR_NOMEM, "out of memory");
    else if (ptwm_hash_file(path, h, &size, &err) == PTWM_OK &&
             ptwm_files_check(rec, dir, name, size, h, &err) == PTWM_OK)
        err.code = PTWM_OK;
    fn(ctx, name, err.code == PTWM_OK ? PTWM_FILE_OK : PTWM_FILE_DAMAGED,
       err.code == PTWM_OK ? NULL : &err);
    ptwm_free(path);
}

/* Every file below `dir` but `own`, in name order. */
static ptwm_error sorted_files(const own_files *own, const char *dir, name_list *l, ptwm_err *err) {
    ptwm_error rc = list_files(own, dir, NULL, 0, l, err);
    if (!rc && l->n > 1) qsort(l->names, l->n, sizeof *l->names, cmp_names);
    return rc;
}

static void free_names(name_list *l) {
    size_t i;
    for (i = 0; i < l->n; i++) ptwm_free(l->names[i]);
    ptwm_free(l->names);
    memset(l, 0, sizeof *l);
}

ptwm_error ptwm_ptdir_check_files(const ptwm_ptdir *pd, ptwm_file_check_fn fn, void *ctx,
                                  ptwm_err *err) {
    const ptwm_shardir *d = (const ptwm_shardir *)pd;
    const ptwm_files *rec;
    const char *dir, **shards = NULL;
    own_files own;
    name_list l = {NULL, 0, 0};
    uint8_t *seen = NULL;
    size_t i;
    ptwm_error rc = PTWM_OK;
    if (!d || !fn)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_check_files: NULL argument");
    rec = ptwm_shardir_files(d);
    dir = ptwm_shardir_path(d);
    own.n = ptwm_shardir_shard_count(d);
    if (!(shards = (const char **)ptwm_calloc(own.n + 1, sizeof *shards)) ||
        !(seen = (uint8_t *)ptwm_calloc((rec ? rec->n : 0) + 1, 1)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; !rc && i < own.n; i++) shards[i] = ptwm_shardir_shard_name(d, i);
    own.names = shards;
    if (!rc) rc = sorted_files(&own, dir, &l, err);
    for (i = 0; !rc && i < l.n; i++) check_one(dir, rec, seen, l.names[i], fn, ctx);
    for (i = 0; !rc && rec && i < rec->n; i++) {
        ptwm_err why;
        if (seen[i]) continue;
        ptwm_fail(&why, PTWM_ERR_NOT_FOUND, "directory '%s': file '%s' of its file record (%s) "
                  "is missing", dir, rec->e[i].name, PTWM_FILES_NAME);
        fn(ctx, rec->e[i].name, PTWM_FILE_MISSING, &why);
    }
    free_names(&l);
    ptwm_free(shards);
    ptwm_free(seen);
    return rc;
}

int ptwm_ptdir_has_file_record(const ptwm_ptdir *d) {
    return ptwm_shardir_files((const ptwm_shardir *)d) != NULL;
}

/* The shards, as the index lists them (or the lone model.ptwm). */
static ptwm_error shard_names(const char *dir, ptwm_index **idx, own_files *own, const char **one,
                              ptwm_err *err) {
    char *ipath = ptwm_path_join(dir, PTWM_INDEX_NAME);
    ptwm_error rc = ipath ? PTWM_OK : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    const char **names = NULL;
    size_t i, n;
    *idx = NULL;
    own->names = one;
    own->n = 1;
    one[0] = PTWM_SINGLE_NAME;
    if (!rc && ptwm_file_exists(ipath)) rc = ptwm_index_read_kind(ipath, PTWM_INDEX_PTWM, idx, err);
    ptwm_free(ipath);
    if (rc || !*idx) return rc;
    n = ptwm_index_shard_count(*idx);
    if (!(names = (const char **)ptwm_calloc(n + 1, sizeof *names)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++) names[i] = ptwm_index_shard(*idx, i);
    own->names = names;
    own->n = n;
    return PTWM_OK;
}

ptwm_error ptwm_ptdir_record_files(const char *dir, ptwm_err *err) {
    ptwm_index *idx = NULL;
    const char *one[1];
    own_files own;
    name_list l = {NULL, 0, 0};
    ptwm_files rec;
    size_t i;
    ptwm_error rc;
    if (!dir) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_ptdir_record_files: NULL path");
    memset(&rec, 0, sizeof rec);
    rc = shard_names(dir, &idx, &own, one, err);
    if (!rc) rc = sorted_files(&own, dir, &l, err);
    for (i = 0; !rc && i < l.n; i++) {
        uint8_t h[16];
        uint64_t size = 0;
        char *path = ptwm_path_join(dir, l.names[i]);
        rc = path ? ptwm_hash_file(path, h, &size, err)
                  : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        if (!rc) rc = ptwm_files_add(&rec, l.names[i], size, h, err);
        ptwm_free(path);
    }
    if (!rc) rc = ptwm_files_write(&rec, dir, err);
    if (own.names != one) ptwm_free((void *)own.names);
    ptwm_index_free(idx);
    free_names(&l);
    ptwm_files_free(&rec);
    return rc;
}
