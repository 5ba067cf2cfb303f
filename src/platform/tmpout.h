/* Internal: the temporary outputs a run has in progress (staged directories,
 * files written under a temporary name), so a program's signal handling can
 * remove them through ptwm_remove_temporary_outputs(); plus the test hook
 * that kills the process at a named step of a commit. */
#ifndef PTWM_TMPOUT_H
#define PTWM_TMPOUT_H

#include "common.h"

/* Creating, committing and removing a temporary output happen with this lock
 * held, so removal on a signal never interleaves with a rename. */
void ptwm_tmp_lock(void);
void ptwm_tmp_unlock(void);
/* With the lock held: 1 once ptwm_remove_temporary_outputs() has run (no new
 * output may be created or committed after that). */
int ptwm_tmp_cancelled(void);
/* With the lock held: forget a temporary path (it was committed). */
void ptwm_tmp_drop(const char *path);
/* Create a temporary file (fd != NULL: mkostemp, close-on-exec) or directory
 * (fd == NULL: mkdtemp) from the template and record it; 0, or an errno
 * (EINTR once temporary outputs were removed on a signal). */
int ptwm_tmp_create(char *templ, int *fd);
/* Remove a temporary output (file or tree) and forget it. */
void ptwm_tmp_remove(const char *path);

/* Test hook, for the crash-safety tests only: when the environment variable
 * PTWM_TEST_KILL_AT is "STEP" the process raises SIGKILL on reaching STEP;
 * "STEP:SIG" sends itself signal number SIG instead and waits for it to take
 * effect. Steps: begin (temporary directory made), synced (its contents
 * fsynced), exchanged (old and new swapped), parked (old directory moved
 * aside: the fallback without an atomic exchange), renamed (new directory in
 * place), done (old output removed). */
void ptwm_test_kill_point(const char *step);

#endif
