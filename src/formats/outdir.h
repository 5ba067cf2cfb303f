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

/* Copy a file's bytes (streaming) to dst. */
ptwm_error ptwm_copy_file(const char *src, const char *dst, ptwm_err *err);
/* Copy every file of srcdir (recursing into subdirectories, following links)
 * into dstdir, except top-level names for which skip(ctx, name) is true. */
ptwm_error ptwm_copy_other_files(const char *srcdir, const char *dstdir,
                                 int (*skip)(void *ctx, const char *name), void *ctx,
                                 ptwm_err *err);
/* The part of a path after its last '/'. */
const char *ptwm_base_name(const char *path);
/* A name safe to create inside an output directory: plain, no '/', no "..". */
int ptwm_plain_name(const char *name);

#endif
