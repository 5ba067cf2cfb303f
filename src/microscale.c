/* MICROSCALE block-relative exponents (see microscale.h). */
#include "microscale.h"

void ptwm_micro_forward(const uint8_t *restrict x, size_t n, unsigned block,
                        uint8_t *restrict r, uint8_t *restrict d) {
    size_t b = 0, i = 0;
    uint8_t prev = 0;
    while (i < n) {
        size_t end = PTWM_MIN(n, i + block), k;
        uint8_t s = 0;
        /* Separate max and subtract loops: both vectorise. */
        for (k = i; k < end; k++) s = x[k] > s ? x[k] : s;
        for (k = i; k < end; k++) r[k] = (uint8_t)(s - x[k]);
        d[b++] = (uint8_t)(s - prev);
        prev = s;
        i = end;
    }
}

void ptwm_micro_inverse(const uint8_t *restrict r, const uint8_t *restrict d, size_t n,
                        unsigned block, uint8_t *restrict x) {
    size_t b = 0, i = 0;
    uint8_t s = 0;
    while (i < n) {
        size_t end = PTWM_MIN(n, i + block), k;
        s = (uint8_t)(s + d[b++]);
        for (k = i; k < end; k++) x[k] = (uint8_t)(s - r[k]);
        i = end;
    }
}
