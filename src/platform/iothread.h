/* A writing thread: positional writes queued by the caller run on a thread
 * of their own, in order, so the copy into the page cache (a quarter of a
 * one-thread restore) runs beside the decoding on another core instead of
 * between its chunks, as zstd's asynchronous I/O does
 * (docs/ARCHITECTURE.md, "Writing restored files"). */
#ifndef PTWM_IOTHREAD_H
#define PTWM_IOTHREAD_H

#include "common.h"
#include "fileio.h"

typedef struct ptwm_io ptwm_io;

/* Called on the writing thread when a write is done (rc 0) or failed (e says
 * why). */
typedef void (*ptwm_io_done_fn)(void *arg, ptwm_error rc, const ptwm_err *e);

ptwm_error ptwm_io_start(ptwm_io **out, ptwm_err *err);
/* Queue the n pieces (n up to PTWM_WRITEV_MAX), written back to back from
 * offset off of fd (path names it in errors); done(arg, ...) follows. The
 * pieces stay the caller's until then. */
ptwm_error ptwm_io_put(ptwm_io *io, int fd, const char *path, void *const *bufs,
                       const size_t *lens, size_t n, uint64_t off, ptwm_io_done_fn done, void *arg,
                       ptwm_err *err);
/* Return once *flag (cleared with an atomic release store by a done
 * callback) is 0, running queued writes meanwhile: done callbacks may run
 * on the waiting thread too, and two writes at once. */
void ptwm_io_wait(ptwm_io *io, const int *flag);
/* Finish every queued write, then stop the thread. NULL is fine. */
void ptwm_io_stop(ptwm_io *io);

#endif
