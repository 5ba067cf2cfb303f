/* Internal: building an output directory beside its final name and renaming
 * it into place, so an interrupted run never leaves a directory that looks
 * complete; plus the file copies a checkpoint conversion needs. */
#ifndef PTWM_OUTDIR_H
#define PTWM_OUTDIR_H

#include "common.h"

typedef struct ptwm_stage {
    char *final_path;   /* the requested output directory */
    char *tmp_path;     /* OUTDIR.tmp-XXXXXX, where everything is written */
    int replace;        /* final_path exists and will be replaced */
} ptwm_stage;

/* Refuse an existing outdir unless force; refuse an outdir that is `src` or
 * lies inside it, or contains it (src may be NULL); create missing parent
 * directories and the temporary directory. */
ptwm_error ptwm_stage_begin(const char *outdir, const char *src, int force, ptwm_stage *st,
                            ptwm_err *err);
/* Path of `name` inside the temporary directory (malloc'd; NULL on no memory). */
char *ptwm_stage_path(const ptwm_stage *st, const char *name);
/* Move the finished directory into place (replacing the old one when forced). */
ptwm_error ptwm_stage_commit(ptwm_stage *st, ptwm_err *err);
/* Remove the temporary directory and free; safe after commit and on a zeroed struct. */
void ptwm_stage_abort(ptwm_stage *st);

/* Refuse an output that is `src`, lies inside it or contains it (src may be
 * NULL); an output whose parent does not exist is PTWM_ERR_IO. */
ptwm_error ptwm_check_overlap(const char *outdir, const char *src, ptwm_err *err);
/* mkdir -p of the directories above `path` (not `path` itself). */
ptwm_error ptwm_make_parents(const char *path, ptwm_err *err);

/* Copy a file's bytes (streaming) to dst; *size receives its bytes and, when
 * hash is not NULL, hash their XXH3-128. */
ptwm_error ptwm_copy_file(const char *src, const char *dst, uint8_t hash[16], uint64_t *size,
                          ptwm_err *err);

/* Which links in a source directory a conversion reads through: those that
 * stay inside it, or lead into the blobs/ of the Hugging Face cache it is a
 * snapshot of (snapshots/REVISION/name -> ../../blobs/HASH); any when
 * `follow`. A link elsewhere (a config.json leading to a system file) would
 * put that file into the output. */
typedef struct ptwm_link_rule {
    char *root;     /* the source directory, resolved */
    char *blobs;    /* its cache's blobs/, resolved, or NULL */
    int follow;
} ptwm_link_rule;
ptwm_error ptwm_link_rule_init(ptwm_link_rule *r, const char *srcdir, int follow, ptwm_err *err);
void ptwm_link_rule_free(ptwm_link_rule *r);
/* PTWM_ERR_UNSUPPORTED, naming the link and where it leads, when `path` is a
 * link the rule does not follow (r NULL: every link is followed). */
ptwm_error ptwm_link_check(const ptwm_link_rule *r, const char *path, ptwm_err *err);

/* How ptwm_copy_other_files treats the files it meets. */
typedef struct ptwm_copy_opts {
    /* true for top-level names the conversion itself accounts for */
    int (*skip)(void *ctx, const char *name);
    /* each file once copied: its path inside the directory ('/' between
     * parts), bytes and XXH3-128; an error ends the copy (NULL: nothing) */
    ptwm_error (*copied)(void *ctx, const char *name, uint64_t size, const uint8_t hash[16],
                         ptwm_err *err);
    void *ctx;
    const ptwm_link_rule *links;   /* NULL: follow file links anywhere */
} ptwm_copy_opts;
/* Copy every file of srcdir (recursing into subdirectories up to 16 deep) into
 * dstdir. A link to a file is copied as the file (if the rule follows it), a
 * link to a directory is PTWM_ERR_UNSUPPORTED, other special files are
 * skipped. */
ptwm_error ptwm_copy_other_files(const char *srcdir, const char *dstdir, const ptwm_copy_opts *o,
                                 ptwm_err *err);
/* The part of a path after its last '/'. */
const char *ptwm_base_name(const char *path);
/* A name safe to create inside an output directory: one part, not "." or
 * "..", no '/' or '\', at most 255 bytes ("a..b" is a plain name). */
int ptwm_plain_name(const char *name);

#endif
