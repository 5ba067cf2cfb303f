/* Helpers shared by the CLI commands. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int cli_report(const ptwm_err *err) {
    fprintf(stderr, "ptwm: %s: %s\n", ptwm_error_string(err->code), err->message);
    return CLI_BAD_INPUT;
}

int cli_usage_error(const char *command, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "ptwm %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'ptwm %s --help')\n", command);
    return CLI_USAGE;
}

int cli_is_tty(void) { return isatty(STDERR_FILENO); }

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cli_bytes(uint64_t n, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}
