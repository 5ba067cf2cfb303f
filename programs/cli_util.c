/* Helpers shared by the CLI commands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Length of the valid UTF-8 sequence at p (1 to 4) with its code point in
 * *cp, or 0 if the bytes there are not one: overlong forms, surrogates and
 * code points past U+10FFFF are invalid, as are truncated sequences. */
static size_t utf8_seq(const unsigned char *p, unsigned long *cp) {
    unsigned long c = p[0], min;
    size_t len, i;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        c &= 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        c &= 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        c &= 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0; /* also stops at the final NUL */
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

/* Code points a terminal acts on rather than shows: C0, DEL, C1, and the
 * bidirectional embeddings, overrides and isolates that reorder text. */
static int is_control(unsigned long c) {
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) ||
           (c >= 0x2066 && c <= 0x2069);
}

const char *cli_escape(const char *s, char *buf, size_t cap) {
    const unsigned char *p = (const unsigned char *)(s ? s : "(null)");
    size_t o = 0;
    if (cap < 8) {
        if (cap) buf[0] = 0;
        return buf;
    }
    while (*p) {
        unsigned long c = 0;
        size_t len = utf8_seq(p, &c);
        char esc[8];
        const char *piece = (const char *)p;
        size_t plen = len;
        if (len == 0) {
            snprintf(esc, sizeof esc, "\\x%02X", p[0]);
            piece = esc;
            plen = 4;
            len = 1;
        } else if (is_control(c)) {
            plen = c < 0x80 ? 4 : 6;
            snprintf(esc, sizeof esc, c < 0x80 ? "\\x%02lX" : "\\u%04lX", c);
            piece = esc;
        }
        if (o + plen + 4 > cap) { /* room for "..." and the NUL */
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, piece, plen);
        o += plen;
        p += len;
    }
    buf[o] = 0;
    return buf;
}

int cli_report(const ptwm_err *err) {
    char msg[CLI_ESCAPED_MAX(PTWM_ERR_MESSAGE_MAX)];
    fprintf(stderr, "ptwm: %s: %s\n", ptwm_error_string(err->code),
            cli_escape(err->message, msg, sizeof msg));
    return CLI_BAD_INPUT;
}

int cli_report_output(const ptwm_err *err) {
    cli_report(err);
    if (err->code == PTWM_ERR_EXISTS) fprintf(stderr, "(use --force to replace it)\n");
    return CLI_BAD_INPUT;
}

int cli_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int cli_has_file(const char *dir, const char *name) {
    struct stat sb;
    size_t a = strlen(dir), b = strlen(name);
    char *path = (char *)malloc(a + b + 2);
    int yes;
    if (!path) return 0;
    memcpy(path, dir, a);
    path[a] = '/';
    memcpy(path + a + 1, name, b + 1);
    /* lstat: a link that loops or dangles still names the kind of directory,
     * and opening it then reports its real error. */
    yes = lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
    free(path);
    return yes;
}

int cli_usage_error(const char *command, const char *fmt, ...) {
    /* The arguments quote the command line, which may hold anything. */
    char text[1024], shown[CLI_ESCAPED_MAX(1024)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ptwm %s: %s\n(see 'ptwm %s --help')\n", command,
            cli_escape(text, shown, sizeof shown), command);
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
