/* Internal: the deferred finish of .ptwm writers that share a context's
 * threads (write_shared.c), and the wait for the commits it leaves to the
 * context's committer thread (context.c). */
#ifndef PTWM_WRITE_LATER_H
#define PTWM_WRITE_LATER_H

#include "common.h"

/* A writer's finish that returns while its file is completed behind the
 * caller: given a context (cparams.ctx), the writer's last chunks code on
 * the context's threads while the caller fills the next writer of that
 * context, then its table and footer are appended, and it is fsynced,
 * renamed and its directory fsynced on the context's committer thread (in
 * the order files were finished). The file is visible only once whole and
 * durable, as with ptwm_writer_finish; *file_size is set then (at the
 * latest when ptwm_ctx_commit_wait returns), and what the writer borrows
 * (ptwm_writer_borrow_source_json) must stay valid until then. A failure is
 * returned by the next open or finish of a writer on the context and by
 * ptwm_ctx_commit_wait, with its message naming the file; the failed file
 * is not written. Until ptwm_ctx_commit_wait, the context serves writers
 * only. Without a context, the same as ptwm_writer_finish. Frees w. */
ptwm_error ptwm_writer_finish_later(ptwm_writer *w, uint64_t *file_size, ptwm_err *err);
/* Wait for every commit ptwm_writer_finish_later left to ctx; the first
 * failure (its message names the file), or PTWM_OK. */
ptwm_error ptwm_ctx_commit_wait(ptwm_ctx *ctx, ptwm_err *err);

#endif
