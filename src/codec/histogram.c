/* Byte histograms and order-0 entropy (see histogram.h). */
#include <math.h>
#include <pthread.h>
#include "histogram.h"

void ptwm_histogram(const uint8_t *src, size_t n, uint64_t count[256]) {
    /* Four histograms break the store-to-load dependency on runs of one
     * symbol (exponent planes are full of them). */
    uint32_t h[4][256];
    size_t i = 0;
    int s;
    memset(count, 0, 256 * sizeof(uint64_t));
    while (i < n) {
        /* 32-bit counters, emptied before they can overflow */
        size_t stop = n - i > ((size_t)1 << 30) ? i + ((size_t)1 << 30) : n;
        memset(h, 0, sizeof(h));
        for (; i + 4 <= stop; i += 4) {
            h[0][src[i]]++;
            h[1][src[i + 1]]++;
            h[2][src[i + 2]]++;
            h[3][src[i + 3]]++;
        }
        for (; i < stop; i++) h[0][src[i]]++;
        for (s = 0; s < 256; s++) count[s] += (uint64_t)h[0][s] + h[1][s] + h[2][s] + h[3][s];
    }
}

/* k log2 k for the small counts that dominate histograms, from a table (a
 * log2 call per symbol was a fifth of estimating a small plane). */
#define XLOGX_SMALL PTWM_XLOGX_SMALL
static double xlogx_tab[XLOGX_SMALL];
static pthread_once_t xlogx_once = PTHREAD_ONCE_INIT;

static void xlogx_init(void) {
    int k;
    xlogx_tab[0] = 0.0;
    for (k = 1; k < XLOGX_SMALL; k++) xlogx_tab[k] = (double)k * log2((double)k);
}

const double *ptwm_xlogx_table(void) {
    pthread_once(&xlogx_once, xlogx_init);
    return xlogx_tab;
}

double ptwm_xlogx(uint64_t k) {
    if (k >= XLOGX_SMALL) return (double)k * log2((double)k);
    pthread_once(&xlogx_once, xlogx_init);
    return xlogx_tab[k];
}

double ptwm_entropy_order0(const uint8_t *src, size_t n) {
    uint64_t h[256];
    double bits = 0.0;
    int s;
    if (n == 0 || !src) return 0.0;
    ptwm_histogram(src, n, h);
    for (s = 0; s < 256; s++)
        if (h[s]) bits -= (double)h[s] * log2((double)h[s] / (double)n);
    return bits / (double)n;
}
