/* Progress line: "label  [#####.....]  1.2 GiB / 4.0 GiB  310.5 MiB/s  ETA 0:09". */
#include <stdio.h>

#include "cli.h"
#include "progress.h"

#define BAR_WIDTH 24

void progress_init(progress *p, const char *label, int quiet) {
    p->label = label;
    p->enabled = !quiet && cli_is_tty();
    p->start = cli_now();
    p->last = 0;
    p->done = p->total = 0;
}

static void format_eta(double seconds, char *buf, size_t cap) {
    unsigned long s = seconds < 0 ? 0 : (unsigned long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, cap, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, cap, "%lu:%02lu", s / 60, s % 60);
}

void progress_update(void *ctx, uint64_t done, uint64_t total) {
    progress *p = (progress *)ctx;
    char a[32], b[32], r[32], eta[32], bar[BAR_WIDTH + 1];
    double now, elapsed, rate, frac;
    int i, fill;
    if (!p) return;
    p->done = done;
    p->total = total;
    if (!p->enabled) return;
    now = cli_now();
    if (now - p->last < 0.1 && done < total) return;
    p->last = now;
    elapsed = now - p->start;
    rate = elapsed > 0 ? (double)done / elapsed : 0;
    frac = total ? (double)done / (double)total : 0;
    if (frac > 1) frac = 1;
    fill = (int)(frac * BAR_WIDTH);
    for (i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = 0;
    if (rate > 0 && total > done)
        format_eta((double)(total - done) / rate, eta, sizeof eta);
    else
        snprintf(eta, sizeof eta, "--:--");
    fprintf(stderr, "\r%s [%s] %5.1f%%  %s / %s  %s/s  ETA %s\033[K", p->label, bar, frac * 100,
            cli_bytes(done, a, sizeof a), cli_bytes(total, b, sizeof b),
            cli_bytes((uint64_t)rate, r, sizeof r), eta);
    fflush(stderr);
}

void progress_end(progress *p) {
    if (!p || !p->enabled) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
}
