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

/* The commands, one per cmd_*.c file, listed in ptwm.c's table. */
extern const cli_command cli_cmd_compress, cli_cmd_decompress, cli_cmd_verify, cli_cmd_inspect,
    cli_cmd_bench, cli_cmd_export, cli_cmd_index;

/* Copy `s` into buf (cap bytes, cap >= 8) fit for a terminal: control
 * characters (C0, DEL, C1), bidirectional overrides and bytes that are not
 * valid UTF-8 become \xNN or \uNNNN escapes, so a tensor name from a hostile
 * file cannot move the cursor, recolour the terminal or hide text. Backslash
 * itself is kept as it is (messages quote JSON text, whose escapes read as
 * written). Cut short with "..." if buf is too small. NULL prints as
 * "(null)". Returns buf. */
const char *cli_escape(const char *s, char *buf, size_t cap);
/* Bytes a buffer needs to hold any escaped string of n bytes. */
#define CLI_ESCAPED_MAX(n) (4 * (size_t)(n) + 8)
/* Print "ptwm: <message>" (escaped) for an error to stderr and return CLI_BAD_INPUT. */
int cli_report(const ptwm_err *err);
/* cli_report for an error writing an output: PTWM_ERR_EXISTS (an output, or
 * leftovers of an interrupted run, named in the message) adds how to replace it. */
int cli_report_output(const ptwm_err *err);
/* Print a usage error and return CLI_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* True if path names a directory (following symlinks). */
int cli_is_dir(const char *path);
/* True if dir/name exists and is not a directory: a regular file, or a link
 * (even one that loops or dangles, so that opening it reports why). */
int cli_has_file(const char *dir, const char *name);
/* True if stderr is a terminal (progress is shown only then). */
int cli_is_tty(void);
/* Monotonic seconds. */
double cli_now(void);
/* Make SIGINT, SIGTERM and SIGHUP remove the temporary output (see
 * ptwm_remove_temporary_outputs) and exit with 128 + the signal number. Call
 * once, before any thread starts. */
void cli_signals_start(void);
/* rc, unless a signal is being handled: then wait for its exit status. */
int cli_signals_exit(int rc);
/* Human-readable byte count into buf. */
const char *cli_bytes(uint64_t n, char *buf, size_t cap);

#endif
