/* Staged output directories and file copies for checkpoint conversion.
 *
 * Everything is written into OUTDIR.tmp-XXXXXX beside OUTDIR (same filesystem,
 * so the final rename is atomic); an interrupted run leaves only that
 * temporary directory, never an OUTDIR that looks complete. Commit fsyncs the
 * staged tree, renames it in (swapping with an old OUTDIR atomically where
 * the file system allows), then fsyncs the parent: durable before visible. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "outdir.h"
#include "fileio.h"
#include "hash.h"
#include "tmpout.h"

#define COPY_BUF ((size_t)1 << 20)
#define COPY_MAX_DEPTH 16

const char *ptwm_base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int ptwm_plain_name(const char *name) {
    return name && name[0] && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           !strchr(name, '/') && !strchr(name, '\\') && strlen(name) <= 255;
}

/* Canonical absolute path of `path`, which need not exist (its parent must). */
static char *canonical(const char *path) {
    char *dup, *slash, *parent, *out;
    const char *base;
    char *r = ptwm_realpath(path);
    if (r) return r;
    dup = ptwm_strdup(path);
    if (!dup) return NULL;
    while (strlen(dup) > 1 && dup[strlen(dup) - 1] == '/') dup[strlen(dup) - 1] = 0;
    slash = strrchr(dup, '/');
    if (slash == dup) {
        parent = ptwm_realpath("/");
        base = dup + 1;
    } else if (slash) {
        *slash = 0;
        parent = ptwm_realpath(dup);
        base = slash + 1;
    } else {
        parent = ptwm_realpath(".");
        base = dup;
    }
    out = parent ? ptwm_path_join(parent, base) : NULL;
    ptwm_free(parent);
    ptwm_free(dup);
    return out;
}

/* 1 if `inner` is `outer` or lies below it. */
static int path_within(const char *inner, const char *outer) {
    size_t n = strlen(outer);
    if (strncmp(inner, outer, n) != 0) return 0;
    return inner[n] == 0 || inner[n] == '/' || (n > 0 && outer[n - 1] == '/');
}

ptwm_error ptwm_check_overlap(const char *outdir, const char *src, ptwm_err *err) {
    char *ro = canonical(outdir), *rs = src ? ptwm_realpath(src) : NULL;
    ptwm_error rc = PTWM_OK;
    if (!ro)
        rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': its parent directory does not exist: %s",
                       outdir, strerror(errno));
    else if (rs && (path_within(ro, rs) || path_within(rs, ro)))
        rc = ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                       "output '%s' and source '%s' overlap (one contains the other)", outdir, src);
    ptwm_free(ro);
    ptwm_free(rs);
    return rc;
}

/* mkdir -p of the directories above `path` (not `path` itself). */
ptwm_error ptwm_make_parents(const char *path, ptwm_err *err) {
    char *p = ptwm_strdup(path), *s;
    ptwm_error rc = PTWM_OK;
    if (!p) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (s = strchr(p + 1, '/'); s && rc == PTWM_OK; s = strchr(s + 1, '/')) {
        struct stat sb;
        *s = 0;
        if (s[1] && stat(p, &sb) != 0 && mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': cannot create '%s': %s", path, p,
                           strerror(errno));
        *s = '/';
    }
    ptwm_free(p);
    return rc;
}

/* fsync every file and directory below `path` and `path` itself, so the
 * rename that publishes it never comes before its contents are on disk. */
static ptwm_error sync_tree(const char *path, int depth, ptwm_err *err) {
    DIR *dir;
    struct dirent *e;
    ptwm_error rc = PTWM_OK;
    if (depth > COPY_MAX_DEPTH + 1)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "'%s': directories nested too deep", path);
    dir = opendir(path);
    if (!dir) return ptwm_fail(err, PTWM_ERR_IO, "'%s': cannot list: %s", path, strerror(errno));
    while (rc == PTWM_OK && (e = readdir(dir)) != NULL) {
        struct stat sb;
        char *p;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        p = ptwm_path_join(path, e->d_name);
        if (!p)
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        else if (lstat(p, &sb) != 0)
            rc = ptwm_fail(err, PTWM_ERR_IO, "'%s': %s", p, strerror(errno));
        else if (S_ISDIR(sb.st_mode))
            rc = sync_tree(p, depth + 1, err);
        else if (S_ISREG(sb.st_mode))
            rc = ptwm_sync_path(p, err);
        ptwm_free(p);
    }
    closedir(dir);
    return rc ? rc : ptwm_sync_path(path, err);
}

/* Whether `name` is `base`.tmp-XXXXXX or `base`.old-XXXXXX (kind 't' or 'o'). */
static int leftover_kind(const char *name, const char *base) {
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strlen(name) != n + 11) return 0;
    if (!strncmp(name + n, ".tmp-", 5)) return 't';
    if (!strncmp(name + n, ".old-", 5)) return 'o';
    return 0;
}

/* Leftovers of an interrupted run beside `final`: OUT.tmp-* (a staged output
 * never committed) and OUT.old-* (an old output moved aside and not yet
 * removed). If OUT itself is missing while an OUT.old-* exists, the run died
 * between moving the old output aside and renaming the new one in (only
 * possible without an atomic exchange): the newest OUT.old-* is put back.
 * Then, with force, every leftover is removed; without, the first few are
 * named in *names (malloc'd, "" if none). */
static ptwm_error leftovers(const char *final, int force, char **names, int *restored,
                            ptwm_err *err) {
    const char *base;
    char *dir = ptwm_parent_dir(final, &base), *newest = NULL;
    DIR *d;
    struct dirent *e;
    size_t cap = 256, len = 0, count = 0;
    time_t newest_time = 0;
    struct stat sb;
    *names = (char *)ptwm_calloc(1, cap);
    *restored = 0;
    if (!dir || !*names) {
        ptwm_free(dir);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    if (lstat(final, &sb) != 0 && (d = opendir(dir)) != NULL) {
        while ((e = readdir(d)) != NULL) {
            char *p;
            if (leftover_kind(e->d_name, base) != 'o' || !(p = ptwm_path_join(dir, e->d_name)))
                continue;
            if (lstat(p, &sb) == 0 && (!newest || sb.st_mtime > newest_time)) {
                ptwm_free(newest);
                newest = p;
                newest_time = sb.st_mtime;
            } else {
                ptwm_free(p);
            }
        }
        closedir(d);
        if (newest && rename(newest, final) == 0) *restored = 1;
        ptwm_free(newest);
    }
    d = opendir(dir);
    while (d && (e = readdir(d)) != NULL) {
        char *p;
        if (!leftover_kind(e->d_name, base)) continue;
        if (force) {
            if ((p = ptwm_path_join(dir, e->d_name)) != NULL) ptwm_remove_tree(p);
            ptwm_free(p);
        } else if (++count <= 3) {
            len += (size_t)snprintf(*names + len, cap - len, "%s'%s'", count > 1 ? ", " : "",
                                    e->d_name);
            if (len >= cap) len = cap - 1;
        }
    }
    if (count > 3 && len + 24 < cap) snprintf(*names + len, cap - len, " and %zu more", count - 3);
    if (d) closedir(d);
    ptwm_free(dir);
    return PTWM_OK;
}

/* Before writing `final` (shown as `shown`): deal with leftovers of an
 * interrupted run (see leftovers) and refuse, unless force, an existing output
 * or leftovers; *exists says whether final is there (to be replaced). */
static ptwm_error claim_output(const char *shown, const char *final, int force, int *exists,
                               ptwm_err *err) {
    struct stat sb;
    char *left = NULL;
    int restored = 0;
    ptwm_error rc = leftovers(final, force, &left, &restored, err);
    *exists = 0;
    if (rc == PTWM_OK) *exists = lstat(final, &sb) == 0;
    if (rc == PTWM_OK && !force && *exists) {
        rc = ptwm_fail(err, PTWM_ERR_EXISTS, "output '%s' already exists%s%s%s%s", shown,
                       restored ? " (put back from where an interrupted run had moved it)" : "",
                       left[0] ? "; left over from an interrupted run: " : "", left,
                       left[0] ? " (force removes them)" : "");
    } else if (rc == PTWM_OK && !force && left[0]) {
        rc = ptwm_fail(err, PTWM_ERR_EXISTS,
                       "output '%s': left over from an interrupted run: %s (remove them, or "
                       "force removes them)", shown, left);
    }
    ptwm_free(left);
    return rc;
}

ptwm_error ptwm_stage_begin(const char *outdir, const char *src, int force, ptwm_stage *st,
                            ptwm_err *err) {
    size_t n;
    ptwm_error rc;
    int e = 0;
    memset(st, 0, sizeof *st);
    if (!outdir || !outdir[0])
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "no output directory given");
    if ((rc = ptwm_make_parents(outdir, err)) != PTWM_OK) return rc;
    if ((rc = ptwm_check_overlap(outdir, src, err)) != PTWM_OK) return rc;
    n = strlen(outdir);
    while (n > 1 && outdir[n - 1] == '/') n--;
    st->final_path = (char *)ptwm_malloc(n + 1);
    st->tmp_path = (char *)ptwm_malloc(n + 16);
    if (!st->final_path || !st->tmp_path) {
        ptwm_stage_abort(st);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    memcpy(st->final_path, outdir, n);
    st->final_path[n] = 0;
    if ((rc = claim_output(outdir, st->final_path, force, &st->replace, err)) != PTWM_OK) {
        ptwm_stage_abort(st);
        return rc;
    }
    snprintf(st->tmp_path, n + 16, "%s.tmp-XXXXXX", st->final_path);
    if ((e = ptwm_tmp_create(st->tmp_path, NULL)) != 0) {
        rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': cannot create temporary directory: %s",
                       outdir, e == EINTR ? "interrupted by a signal" : strerror(e));
        ptwm_free(st->tmp_path);
        st->tmp_path = NULL;
        ptwm_stage_abort(st);
        return rc;
    }
    /* mkdtemp makes 0700; give the directory the permissions mkdir would. */
    {
        mode_t mask = umask(0);
        umask(mask);
        chmod(st->tmp_path, 0777 & ~mask);
    }
    ptwm_test_kill_point("begin");
    return PTWM_OK;
}

char *ptwm_stage_path(const ptwm_stage *st, const char *name) {
    return ptwm_path_join(st->tmp_path, name);
}

/* Swap the new directory (tmp) with what is at final in one step, where the
 * file system can (Linux renameat2 RENAME_EXCHANGE: ext4, xfs, btrfs, tmpfs).
 * PTWM_TEST_NO_EXCHANGE, a test hook, makes it report "unsupported". */
static int exchange(const char *tmp, const char *final) {
    if (getenv("PTWM_TEST_NO_EXCHANGE")) {
        errno = EINVAL;
        return -1;
    }
#if defined(__linux__) && defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, final, 2 /* RENAME_EXCHANGE */);
#else
    (void)tmp;
    (void)final;
    errno = ENOSYS;
    return -1;
#endif
}

/* Replace final by tmp without an atomic exchange: park the old output at
 * OUT.old-XXXXXX, then rename the new one in. A crash between the two
 * renames leaves OUT missing; the next ptwm_stage_begin puts OUT.old-* back. */
static ptwm_error replace_in_two_steps(ptwm_stage *st, ptwm_err *err) {
    size_t n = strlen(st->final_path) + 16;
    char *old = (char *)ptwm_malloc(n);
    ptwm_error rc = PTWM_OK;
    struct stat sb;
    if (!old) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (lstat(st->final_path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        /* a file or link where the directory goes: nothing worth parking */
        ptwm_free(old);
        if (unlink(st->final_path) != 0 || rename(st->tmp_path, st->final_path) != 0)
            return ptwm_fail(err, PTWM_ERR_IO, "output '%s': cannot replace: %s",
                             st->final_path, strerror(errno));
        return ptwm_sync_parent(st->final_path, err);
    }
    snprintf(old, n, "%s.old-XXXXXX", st->final_path);
    /* rename() replaces only an empty directory, so the old one needs a
     * fresh name: mkdtemp reserves it and the rename replaces that. */
    if (!mkdtemp(old) || rename(st->final_path, old) != 0) {
        rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': cannot move the old output aside: %s",
                       st->final_path, strerror(errno));
        rmdir(old);
        ptwm_free(old);
        return rc;
    }
    ptwm_test_kill_point("parked");
    if (rename(st->tmp_path, st->final_path) != 0) {
        rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': rename from '%s': %s", st->final_path,
                       st->tmp_path, strerror(errno));
        rename(old, st->final_path); /* put the old output back */
        ptwm_free(old);
        return rc;
    }
    ptwm_test_kill_point("renamed");
    rc = ptwm_sync_parent(st->final_path, err);
    ptwm_remove_tree(old);
    ptwm_free(old);
    return rc;
}

ptwm_error ptwm_stage_commit(ptwm_stage *st, ptwm_err *err) {
    struct stat sb;
    ptwm_error rc = sync_tree(st->tmp_path, 0, err);
    if (rc) return rc;
    ptwm_test_kill_point("synced");
    /* Under the lock, so a signal's removal of temporary outputs waits for the renames. */
    ptwm_tmp_lock();
    if (ptwm_tmp_cancelled()) {
        rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': interrupted by a signal", st->final_path);
    } else if (st->replace && lstat(st->final_path, &sb) == 0) {
        if (exchange(st->tmp_path, st->final_path) == 0) {
            /* The old output is now at the temporary name (still registered). */
            ptwm_test_kill_point("exchanged");
            rc = ptwm_sync_parent(st->final_path, err);
            ptwm_remove_tree(st->tmp_path);
        } else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
            rc = replace_in_two_steps(st, err);
        } else {
            int e = errno;
            rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': exchange with '%s': %s",
                           st->final_path, st->tmp_path, strerror(e));
        }
    } else if (rename(st->tmp_path, st->final_path) != 0) {
        rc = ptwm_fail(err, PTWM_ERR_IO, "output '%s': rename from '%s': %s", st->final_path,
                       st->tmp_path, strerror(errno));
    } else {
        ptwm_test_kill_point("renamed");
        rc = ptwm_sync_parent(st->final_path, err);
    }
    if (rc == PTWM_OK) {
        ptwm_tmp_drop(st->tmp_path);
        ptwm_free(st->tmp_path);
        st->tmp_path = NULL;
    }
    ptwm_tmp_unlock();
    if (rc == PTWM_OK) {
        ptwm_test_kill_point("done");
        ptwm_stage_abort(st);
    }
    return rc;
}

void ptwm_stage_abort(ptwm_stage *st) {
    if (!st) return;
    if (st->tmp_path) ptwm_tmp_remove(st->tmp_path);
    ptwm_free(st->tmp_path);
    ptwm_free(st->final_path);
    st->tmp_path = NULL;
    st->final_path = NULL;
}

ptwm_error ptwm_copy_file(const char *src, const char *dst, uint8_t hash[16], uint64_t *size,
                          ptwm_err *err) {
    int in = -1, out;
    uint64_t len = 0, off = 0;
    uint8_t *buf;
    ptwm_xxh128 h = {0};
    ptwm_error rc = ptwm_open_read(src, &in, &len, err);
    if (rc) return rc;
    buf = (uint8_t *)ptwm_malloc(COPY_BUF);
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (!buf || out < 0) {
        rc = buf ? ptwm_fail(err, PTWM_ERR_IO, "'%s': cannot create: %s", dst, strerror(errno))
                 : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    if (!rc && hash) rc = ptwm_xxh128_begin(&h, err);
    while (rc == PTWM_OK && off < len) {
        size_t piece = (size_t)PTWM_MIN(len - off, (uint64_t)COPY_BUF);
        rc = ptwm_pread_full(in, buf, piece, off, src, err);
        if (rc == PTWM_OK) rc = ptwm_write_full(out, buf, piece, dst, err);
        if (rc == PTWM_OK && hash) ptwm_xxh128_update(&h, buf, piece);
        off += piece;
    }
    /* A file that grew while we copied would come out cut short: say so. */
    if (rc == PTWM_OK) {
        struct stat sb;
        if (fstat(in, &sb) == 0 && (uint64_t)sb.st_size != len)
            rc = ptwm_fail(err, PTWM_ERR_IO, "'%s' changed size while being copied", src);
    }
    if (out >= 0 && close(out) != 0 && rc == PTWM_OK)
        rc = ptwm_fail(err, PTWM_ERR_IO, "'%s': close: %s", dst, strerror(errno));
    if (rc == PTWM_OK && hash) ptwm_xxh128_digest(&h, hash);
    if (size) *size = len;
    ptwm_xxh128_free(&h);
    close(in);
    ptwm_free(buf);
    return rc;
}

/* ---- links in a source directory ----------------------------------------- */

ptwm_error ptwm_link_rule_init(ptwm_link_rule *r, const char *srcdir, int follow, ptwm_err *err) {
    char *up;
    const char *base;
    memset(r, 0, sizeof *r);
    r->follow = follow;
    if (follow) return PTWM_OK;
    if (!(r->root = ptwm_realpath(srcdir)))
        return ptwm_fail(err, PTWM_ERR_IO, "'%s': %s", srcdir, strerror(errno));
    /* A Hugging Face cache: .../snapshots/REVISION/name -> ../../blobs/HASH. */
    up = ptwm_parent_dir(r->root, &base);
    if (up && !strcmp(ptwm_base_name(up), "snapshots")) {
        char *hub = ptwm_parent_dir(up, &base), *blobs = hub ? ptwm_path_join(hub, "blobs") : NULL;
        r->blobs = blobs ? ptwm_realpath(blobs) : NULL;
        ptwm_free(hub);
        ptwm_free(blobs);
    }
    ptwm_free(up);
    return PTWM_OK;
}

void ptwm_link_rule_free(ptwm_link_rule *r) {
    ptwm_free(r->root);
    ptwm_free(r->blobs);
    memset(r, 0, sizeof *r);
}

ptwm_error ptwm_link_check(const ptwm_link_rule *r, const char *path, ptwm_err *err) {
    struct stat sb;
    char *to;
    int inside;
    if (!r || r->follow || lstat(path, &sb) != 0 || !S_ISLNK(sb.st_mode)) return PTWM_OK;
    /* A link that dangles or loops is left to whoever opens it to report. */
    if (!(to = ptwm_realpath(path))) return PTWM_OK;
    inside = path_within(to, r->root) || (r->blobs && path_within(to, r->blobs));
    if (!inside)
        ptwm_fail(err, PTWM_ERR_UNSUPPORTED,
                  "'%s' is a symbolic link to '%s', outside the source directory (and not into a "
                  "Hugging Face cache's blobs/): not followed unless asked (--follow-symlinks)",
                  path, to);
    ptwm_free(to);
    return inside ? PTWM_OK : PTWM_ERR_UNSUPPORTED;
}

/* ---- copying a directory's other files ------------------------------------ */

typedef struct copy_walk {
    const ptwm_copy_opts *o;
    ptwm_err *err;
} copy_walk;

static ptwm_error copy_tree(const copy_walk *w, const char *srcdir, const char *dstdir,
                            const char *rel, int depth);

/* One entry `name` of srcdir (its path inside the copied tree: relname). */
static ptwm_error copy_entry(const copy_walk *w, const char *s, const char *d, const char *relname,
                             int depth) {
    struct stat sb, lsb;
    ptwm_err *err = w->err;
    ptwm_error rc;
    if (stat(s, &sb) != 0) return ptwm_fail(err, PTWM_ERR_IO, "'%s': %s", s, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        /* Files may be links (a Hugging Face cache links snapshots to
         * blobs); a linked directory may lead anywhere, "/" or back into
         * itself, so it is refused rather than followed. */
        if (lstat(s, &lsb) == 0 && S_ISLNK(lsb.st_mode))
            return ptwm_fail(err, PTWM_ERR_UNSUPPORTED,
                             "'%s' is a symbolic link to a directory, which is not followed "
                             "(copy or remove it)",
                             s);
        if (depth >= COPY_MAX_DEPTH)
            return ptwm_fail(err, PTWM_ERR_LIMIT, "'%s': directories nested deeper than %d", s,
                             COPY_MAX_DEPTH);
        if (mkdir(d, 0777) != 0)
            return ptwm_fail(err, PTWM_ERR_IO, "'%s': mkdir: %s", d, strerror(errno));
        return copy_tree(w, s, d, relname, depth + 1);
    }
    if (!S_ISREG(sb.st_mode)) return PTWM_OK;
    if ((rc = ptwm_link_check(w->o->links, s, err))) return rc;
    {
        uint8_t h[16];
        uint64_t size = 0;
        rc = ptwm_copy_file(s, d, w->o->copied ? h : NULL, &size, err);
        if (!rc && w->o->copied) rc = w->o->copied(w->o->ctx, relname, size, h, err);
    }
    return rc;
}

static ptwm_error copy_tree(const copy_walk *w, const char *srcdir, const char *dstdir,
                            const char *rel, int depth) {
    DIR *dir = opendir(srcdir);
    struct dirent *e;
    ptwm_error rc = PTWM_OK;
    if (!dir)
        return ptwm_fail(w->err, PTWM_ERR_IO, "'%s': cannot list: %s", srcdir, strerror(errno));
    while (rc == PTWM_OK && (e = readdir(dir)) != NULL) {
        char *s, *d, *r;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (depth == 0 && w->o->skip && w->o->skip(w->o->ctx, e->d_name)) continue;
        s = ptwm_path_join(srcdir, e->d_name);
        d = ptwm_path_join(dstdir, e->d_name);
        r = rel ? ptwm_path_join(rel, e->d_name) : ptwm_strdup(e->d_name);
        rc = s && d && r ? copy_entry(w, s, d, r, depth)
                         : ptwm_fail(w->err, PTWM_ERR_NOMEM, "out of memory");
        ptwm_free(s);
        ptwm_free(d);
        ptwm_free(r);
    }
    closedir(dir);
    return rc;
}

ptwm_error ptwm_copy_other_files(const char *srcdir, const char *dstdir, const ptwm_copy_opts *o,
                                 ptwm_err *err) {
    copy_walk w;
    w.o = o;
    w.err = err;
    return copy_tree(&w, srcdir, dstdir, NULL, 0);
}

struct ptwm_outfile {
    ptwm_atomic_file f;
};

ptwm_error ptwm_outfile_open(const char *path, int force, ptwm_outfile **out, ptwm_err *err) {
    ptwm_outfile *f;
    int exists;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_outfile_open: out is NULL");
    *out = NULL;
    if (!path || !path[0]) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "no output file given");
    if ((rc = claim_output(path, path, force, &exists, err)) != PTWM_OK) return rc;
    if (!(f = (ptwm_outfile *)ptwm_calloc(1, sizeof *f)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if ((rc = ptwm_atomic_open(path, &f->f, err)) != PTWM_OK) {
        ptwm_free(f);
        return rc;
    }
    *out = f;
    return PTWM_OK;
}

int ptwm_outfile_fd(const ptwm_outfile *f) {
    return f ? f->f.fd : -1;
}

ptwm_error ptwm_outfile_commit(ptwm_outfile *f, ptwm_err *err) {
    ptwm_error rc;
    if (!f) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_outfile_commit: NULL file");
    rc = ptwm_atomic_commit(&f->f, err);
    ptwm_outfile_abort(f);
    return rc;
}

void ptwm_outfile_abort(ptwm_outfile *f) {
    if (!f) return;
    ptwm_atomic_abort(&f->f);
    ptwm_free(f);
}
