/* The registry of temporary outputs in progress, and the kill hook of the
 * crash-safety tests (see tmpout.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fileio.h"
#include "tmpout.h"

typedef struct tmp_node {
    struct tmp_node *next;
    char path[];
} tmp_node;

static pthread_mutex_t tmp_mutex = PTHREAD_MUTEX_INITIALIZER;
static tmp_node *tmp_list;
static int tmp_cancel;

void ptwm_tmp_lock(void) { pthread_mutex_lock(&tmp_mutex); }
void ptwm_tmp_unlock(void) { pthread_mutex_unlock(&tmp_mutex); }
int ptwm_tmp_cancelled(void) { return tmp_cancel; }

static int tmp_add(const char *path) {
    size_t n = strlen(path) + 1;
    tmp_node *t = (tmp_node *)ptwm_malloc(sizeof(*t) + n);
    if (!t) return -1;
    memcpy(t->path, path, n);
    t->next = tmp_list;
    tmp_list = t;
    return 0;
}

void ptwm_tmp_drop(const char *path) {
    tmp_node **p;
    for (p = &tmp_list; *p; p = &(*p)->next) {
        if (strcmp((*p)->path, path) == 0) {
            tmp_node *t = *p;
            *p = t->next;
            ptwm_free(t);
            return;
        }
    }
}

int ptwm_tmp_create(char *templ, int *fd) {
    int e = 0;
    if (fd) *fd = -1;
    ptwm_tmp_lock();
    if (tmp_cancel)
        e = EINTR;
    else if (fd ? (*fd = mkostemp(templ, O_CLOEXEC)) < 0 : !mkdtemp(templ))
        e = errno;
    else if (tmp_add(templ) != 0) {
        e = ENOMEM;
        if (fd) {
            close(*fd);
            *fd = -1;
        }
        ptwm_remove_tree(templ);
    }
    ptwm_tmp_unlock();
    return e;
}

void ptwm_tmp_remove(const char *path) {
    ptwm_tmp_lock();
    ptwm_remove_tree(path);
    ptwm_tmp_drop(path);
    ptwm_tmp_unlock();
}

void ptwm_remove_temporary_outputs(void) {
    tmp_node *t;
    ptwm_tmp_lock();
    tmp_cancel = 1;
    /* A writing thread may create a file in a staged directory while it is
     * being removed (its rmdir then fails): go over it again. New temporary
     * outputs cannot start now that tmp_cancel is set. */
    for (t = tmp_list; t; t = t->next) {
        struct stat sb;
        int tries;
        for (tries = 0; tries < 8 && lstat(t->path, &sb) == 0; tries++) ptwm_remove_tree(t->path);
    }
    while (tmp_list) {
        t = tmp_list;
        tmp_list = t->next;
        ptwm_free(t);
    }
    ptwm_tmp_unlock();
}

void ptwm_test_kill_point(const char *step) {
    const char *at = getenv("PTWM_TEST_KILL_AT");
    size_t n = strlen(step);
    int sig = SIGKILL;
    if (!at || strncmp(at, step, n) != 0 || (at[n] != 0 && at[n] != ':')) return;
    if (at[n] == ':') sig = atoi(at + n + 1);
    /* To the process, not this thread, so a thread waiting for signals takes it. */
    kill(getpid(), sig);
    {
        int i; /* bounded, so a signal that is ignored fails the test instead of hanging it */
        for (i = 0; i < 100; i++) usleep(100000);
    }
}
