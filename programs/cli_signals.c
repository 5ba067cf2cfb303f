/* SIGINT, SIGTERM and SIGHUP end the program after removing its temporary
 * output. The signals are blocked in every thread (the library's workers
 * inherit the mask) and one thread waits for them with sigwait, so the
 * cleanup runs as ordinary code, not in a signal handler: it may take locks,
 * list directories and free memory. Exit status 128 + the signal number (130,
 * 143, 129), as a shell reports a process the signal killed. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cli.h"

static sigset_t wait_set;
static atomic_int signalled;

static void *wait_for_signal(void *arg) {
    int sig = 0;
    (void)arg;
    if (sigwait(&wait_set, &sig) != 0) return NULL;
    atomic_store(&signalled, 1);
    ptwm_remove_temporary_outputs();   /* and no commit renames one after this */
    _exit(128 + sig);
}

/* The removal above makes the command's next write or commit fail: its
 * error exit must not win the race with the signal's status. */
int cli_signals_exit(int rc) {
    if (!atomic_load(&signalled)) return rc;
    for (;;) pause(); /* the waiting thread exits the process */
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
