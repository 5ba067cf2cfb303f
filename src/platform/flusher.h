/* A flusher: fdatasync of one file on a thread of its own, every
 * PTWM_FLUSH_STEP bytes handed to the kernel, so the fsync that commits
 * the file has little left to flush. On a disk that acknowledges writes
 * from a cache (direct writes here return at 1.7 GB/s), that fsync paid
 * for every byte of the file after the last one was coded: a quarter of a
 * compress (docs/SCALING.md, "Flushing while coding"). */
#ifndef PTWM_FLUSHER_H
#define PTWM_FLUSHER_H

#include "common.h"

#define PTWM_FLUSH_STEP ((uint64_t)16 << 20)

typedef struct ptwm_flusher ptwm_flusher;

/* Flush fd (errors name `path`, which must outlive the flusher); `done`
 * bytes are already written. NULL into *out where no thread can be had:
 * the caller's final fsync then does all the work, as before. */
void ptwm_flusher_start(int fd, const char *path, uint64_t done, ptwm_flusher **out);
/* n more bytes were written (any thread; NULL is fine). */
void ptwm_flusher_add(ptwm_flusher *f, uint64_t n);
/* Run the flush asked for, if any, and stop the thread: the first flush's
 * failure, if any (a failed fdatasync may not fail the next fsync too, so
 * the caller must fail the file with it). NULL is fine. */
ptwm_error ptwm_flusher_stop(ptwm_flusher *f, ptwm_err *err);
/* Tests: the flushes every flusher of the process has run. */
uint64_t ptwm_flusher_flushes(void);

#endif
