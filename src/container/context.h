/* Contexts (ptwm_ctx): the work memory a writer or reader keeps between
 * calls, owned by the caller (as zstd's ZSTD_CCtx/ZSTD_DCtx).
 *
 * A context holds one codec workspace per worker (workspace.h) and a few
 * large buffers given back by the last user (chunk slots, coded-chunk
 * buffers). Memory freshly taken from the system is paid for in page faults
 * on first touch; a caller that compresses or decodes many files in one
 * process keeps a context so the next call reuses the pages of the last.
 * One writer, reader or stream uses a context at a time (claimed on
 * attach, released on free or close); a writer or reader given none makes
 * its own for its lifetime. */
#ifndef PTWM_CONTEXT_H
#define PTWM_CONTEXT_H

#include "common.h"
#include "fileio.h"
#include "workspace.h"

/* Claim ctx for one user (who: "writer", "reader", ...);
 * PTWM_ERR_INVALID_ARG if another user holds it. */
ptwm_error ptwm_ctx_claim(ptwm_ctx *ctx, const char *who, ptwm_err *err);
void ptwm_ctx_release(ptwm_ctx *ctx);

/* The workspaces of workers 0..n-1 in *out (made as needed; kept with the
 * context). The array stays valid until the context is freed. */
ptwm_error ptwm_ctx_workspaces(ptwm_ctx *ctx, unsigned n, ptwm_ws ***out, ptwm_err *err);

/* A buffer of at least size bytes: the smallest kept one that fits, else
 * new memory (NULL if out of memory). Thread-safe. */
void *ptwm_ctx_take(ptwm_ctx *ctx, size_t size);
/* The same, with the buffer's size (at least size: the kept buffer's) in
 * *got, to be given back with it. */
void *ptwm_ctx_take_fit(ptwm_ctx *ctx, size_t size, size_t *got);
/* Give back a buffer of size bytes from ptwm_ctx_take (NULL is fine): kept
 * for the next take, or freed when the context keeps enough already. */
void ptwm_ctx_give(ptwm_ctx *ctx, void *p, size_t size);

/* Commit *af (a whole file: fsync, rename, directory fsync, as
 * ptwm_atomic_commit) on the context's committer thread, after the files
 * queued before it, while the caller goes on; *af is taken over (left
 * empty). Failures are kept for ptwm_ctx_commit_failed and
 * ptwm_ctx_commit_wait (write_later.h); ptwm_ctx_free still commits
 * what is queued. */
ptwm_error ptwm_ctx_commit_later(ptwm_ctx *ctx, ptwm_atomic_file *af, ptwm_err *err);
/* The first failure of a deferred commit so far (its message into err), or
 * PTWM_OK; does not wait. */
ptwm_error ptwm_ctx_commit_failed(ptwm_ctx *ctx, ptwm_err *err);
/* Keep rc (err its message) as a commit failure, unless one is kept. */
void ptwm_ctx_commit_fail(ptwm_ctx *ctx, ptwm_error rc, const ptwm_err *err);
/* Wait until every queued commit is done, then as ptwm_ctx_commit_failed. */
ptwm_error ptwm_ctx_commits_done(ptwm_ctx *ctx, ptwm_err *err);

/* State the writers of this context share (write_shared.c), freed by
 * free_fn first when the context is freed. */
void *ptwm_ctx_writers(ptwm_ctx *ctx);
void ptwm_ctx_set_writers(ptwm_ctx *ctx, void *p, void (*free_fn)(void *));

#endif
