/* Byte histograms and order-0 entropy, shared by the coders and the coder
 * policy. */
#ifndef PTWM_HISTOGRAM_H
#define PTWM_HISTOGRAM_H

#include "common.h"

/* Zero-order entropy of a byte plane in bits per symbol (for benchmarks and
 * for choosing stages cheaply). */
double ptwm_entropy_order0(const uint8_t *src, size_t n);
/* k log2 k (0 for 0), exact to double rounding; fast for small k. */
double ptwm_xlogx(uint64_t k);
/* The table behind it for k < PTWM_XLOGX_SMALL, for loops over histograms
 * (one lookup a count, no call). */
#define PTWM_XLOGX_SMALL 4096
const double *ptwm_xlogx_table(void);

/* Byte histogram of src[0..n) into count[256] (overwritten). */
void ptwm_histogram(const uint8_t *src, size_t n, uint64_t count[256]);

#endif
