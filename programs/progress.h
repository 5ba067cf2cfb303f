/* A progress line on stderr for long work: bytes done, rate and time left.
 * Shown only when stderr is a terminal and not quiet; otherwise every call is
 * a no-op, so scripts and pipes see nothing. */
#ifndef PTWM_PROGRESS_H
#define PTWM_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    const char *label;
    int enabled;
    double start, last;
    uint64_t done, total;
} progress;

void progress_init(progress *p, const char *label, int quiet);
/* ptwm_progress_fn-compatible: ctx is a progress*. Redraws at most 10 times a second. */
void progress_update(void *ctx, uint64_t done, uint64_t total);
/* Erase the line (the caller prints its summary after). */
void progress_end(progress *p);

#endif
