/* SIGINT, SIGTERM and SIGHUP end the program after removing its temporary
 * output. The signals are blocked in every thread (the library's workers
 * inherit the mask) and one thread waits for them with sigwait, so the
 * cleanup runs as ordinary code, not in a signal handler: it may take locks,
 * list directories and free memory. Exit status 128 + the signal number (130,
 * 143, 129), as a shell reports a process the signal killed. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static sigset_t wait_set;
static pthread_mutex_t temp_lock = PTHREAD_MUTEX_INITIALIZER;
static char *temp_path;

static void *wait_for_signal(void *arg) {
    int sig = 0;
    (void)arg;
    if (sigwait(&wait_set, &sig) != 0) return NULL;
    ptwm_remove_temporary_outputs();
    pthread_mutex_lock(&temp_lock); /* held until exit: no commit renames it after this */
    if (temp_path) unlink(temp_path);
    _exit(128 + sig);
}

void cli_signals_start(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    pthread_attr_t attr;
    pthread_t t;
    size_t i;
    sigemptyset(&wait_set);
    for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* A signal ignored at start (nohup, a background job) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaddset(&wait_set, sigs[i]);
    }
    if (pthread_attr_init(&attr) != 0) return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_sigmask(SIG_BLOCK, &wait_set, NULL) == 0 &&
        pthread_create(&t, &attr, wait_for_signal, NULL) != 0)
        pthread_sigmask(SIG_UNBLOCK, &wait_set, NULL); /* no waiter: default actions */
    pthread_attr_destroy(&attr);
}

int cli_temp_set(const char *path) {
    char *copy = path ? strdup(path) : NULL;
    if (path && !copy) return -1;
    pthread_mutex_lock(&temp_lock);
    free(temp_path);
    temp_path = copy;
    pthread_mutex_unlock(&temp_lock);
    return 0;
}

int cli_temp_commit(const char *final) {
    const char *slash = strrchr(final, '/');
    char *dir = NULL;
    int rc, fd;
    pthread_mutex_lock(&temp_lock);
    rc = temp_path ? rename(temp_path, final) : -1;
    free(temp_path);
    temp_path = NULL;
    pthread_mutex_unlock(&temp_lock);
    if (rc != 0) return rc;
    /* The rename is durable once the directory holding it is synced. */
    if (slash) {
        size_t n = slash == final ? 1 : (size_t)(slash - final);
        if (!(dir = (char *)malloc(n + 1))) return -1;
        memcpy(dir, final, n);
        dir[n] = 0;
    }
    fd = open(dir ? dir : ".", O_RDONLY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    rc = fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

int cli_temp_leftovers(const char *final, int force) {
    const char *slash = strrchr(final, '/'), *base = slash ? slash + 1 : final;
    size_t dlen = slash ? (size_t)(slash - final) + (slash == final) : 1, blen = strlen(base);
    char *dir = (char *)malloc(dlen + 1);
    DIR *d;
    struct dirent *e;
    int count = 0;
    if (!dir) return 0;
    memcpy(dir, slash ? final : ".", dlen);
    dir[dlen] = 0;
    d = opendir(dir);
    while (d && (e = readdir(d)) != NULL) {
        /* exactly what mkstemp makes of FINAL.tmp-XXXXXX */
        if (strncmp(e->d_name, base, blen) != 0 || strlen(e->d_name) != blen + 11 ||
            strncmp(e->d_name + blen, ".tmp-", 5) != 0)
            continue;
        if (force) {
            char *p = (char *)malloc(dlen + strlen(e->d_name) + 2);
            if (p) {
                snprintf(p, dlen + strlen(e->d_name) + 2, "%s/%s", dir, e->d_name);
                unlink(p);
            }
            free(p);
        } else {
            fprintf(stderr, "%s'%s'", count ? ", " : "ptwm: left over from an interrupted run: ",
                    e->d_name);
            count++;
        }
    }
    if (count) fprintf(stderr, " (remove them, or --force removes them)\n");
    if (d) closedir(d);
    free(dir);
    return count;
}
