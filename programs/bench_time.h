/* Timing helpers shared by `ptwm bench` and the programs in bench/: a
 * monotonic clock and the median of repeated runs (runs alternate between
 * methods, and the median keeps a noisy machine's outliers out). */
#ifndef PTWM_BENCH_TIME_H
#define PTWM_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place; the middle value, or the mean of the middle two. */
static inline double bench_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
