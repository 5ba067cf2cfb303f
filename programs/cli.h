/* The ptwm command-line tool: one file per command, dispatched from ptwm.c.
 * Programs use only the public header. Exit codes: 0 success, 1 bad input or
 * failed check, 2 bad usage. */
#ifndef PTWM_CLI_H
#define PTWM_CLI_H

#include <stdio.h>
#include "ptwm.h"

#define CLI_OK 0
#define CLI_BAD_INPUT 1
#define CLI_USAGE 2

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);   /* argv[0] is the command name */
    void (*help)(FILE *out);
} cli_command;

/* Print "ptwm: <message>" for an error to stderr and return CLI_BAD_INPUT. */
int cli_report(const ptwm_err *err);
/* Print a usage error and return CLI_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* True if stderr is a terminal (progress is shown only then). */
int cli_is_tty(void);
/* Monotonic seconds. */
double cli_now(void);
/* Human-readable byte count into buf. */
const char *cli_bytes(uint64_t n, char *buf, size_t cap);

#endif
