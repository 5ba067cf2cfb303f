/* What the files of the RANS coder share (rans.c holds the byte format):
 * the format's constants, the work memory, the order-1 segments, and the
 * frequency tables of rans_table.c that rans_encode.c writes and
 * rans_decode.c reads. Private to those files. */
#ifndef PTWM_RANS_IMPL_H
#define PTWM_RANS_IMPL_H

#include "rans.h"
#include "kernels/rans_kernels.h"

#define RANS_PREC_MIN 8
#define RANS_PREC_MAX0 15
#define RANS_PREC_MAX1 12

enum { MODE_RAW = 0, MODE_SINGLE = 1, MODE_O0 = 2, MODE_O1 = 3, MODE_O0X2 = 4, MODE_O0X4 = 5 };

/* Order-0 planes of at least this many symbols are coded as two streams
 * (MODE_O0X2): a decoder runs both in one loop, twice the independent
 * states, where one stream's 32 leave the loop waiting on its chain
 * (0.57 against 0.39 ns a symbol on Zen 5). The second stream's 32 states
 * and its length cost about 130 bytes: 0.5% of the smallest such plane,
 * 0.03% of a 1 MiB BF16 chunk's; with four streams from RANS_X4_MIN the
 * corpus files grew by 0.002-0.15% and decoded 1.03-1.4x as fast
 * (docs/CHAINS.md, docs/SCALING.md "More streams for smaller planes"). */
#define RANS_X2_MIN ((size_t)1 << 15)

/* Order-0 planes of at least this many symbols are coded as four streams
 * (MODE_O0X4): a round waits on the one before it (on a Zen 5 core the VBMI
 * loop's round takes about 85 cycles for two streams, 100 for four), so a
 * decoder running two pairs of streams in one loop decodes 1.6x as fast as
 * with one pair. The two more streams cost about 260 bytes: 0.25% of the
 * smallest such plane, 0.07% of a 1 MiB BF16 chunk's (docs/CHAINS.md). */
#define RANS_X4_MIN ((size_t)1 << 17)

/* The streams of an order-0 plane of n symbols. */
PTWM_INLINE unsigned o0_streams(size_t n) {
    return n >= RANS_X4_MIN ? 4 : n >= RANS_X2_MIN ? 2 : 1;
}

/* The same, at most `cap` (1 or 2; else no cap). */
PTWM_INLINE unsigned o0_streams_cap(size_t n, unsigned cap) {
    unsigned k = o0_streams(n);
    return cap == 1 || cap == 2 ? PTWM_MIN(k, cap) : k;
}

/* Symbols of each stream but the last of an order-0 plane in k streams:
 * 1/k of its whole rounds; the last stream has the rest. */
PTWM_INLINE size_t xk_first(size_t n, unsigned k) {
    return n / (k * RANS_O0_STATES) * RANS_O0_STATES;
}

/* Work memory. Order-1 counts and encoder tables, and the decoders' slot
 * tables, are hundreds of KB to MB: they live in the caller's workspace,
 * kept from plane to plane (allocating them per plane cost page faults on
 * every small tensor). Only the order-1 decoder's tables rely on zeroed
 * memory (see rans_decode.c, decode_o1); the others are written before they
 * are read, and zeroing them would touch pages a small plane never uses. */
PTWM_INLINE void *rans_buf(ptwm_ws *ws, ptwm_ws_region which, size_t size) {
    return ptwm_ws_get(ws, which, size, which == PTWM_WS_RANS_DTAB1);
}

/* Segment k of the order-1 layout: start and length. */
PTWM_INLINE void o1_segment(size_t n, int k, size_t *start, size_t *len) {
    size_t q = n / RANS_STATES;
    *start = (size_t)k * q;
    *len = k == RANS_STATES - 1 ? n - (size_t)k * q : q;
}

/* The symbols present in a table's counts, in symbol order: found once for
 * all the precisions a plan tries (each was a walk over 256 counts). */
typedef struct symlist {
    uint8_t sym[256];
    int n;
} symlist;

/* Bounded reader over the coded bytes. */
typedef struct rcur {
    const uint8_t *p, *end;
} rcur;

/* Frequency tables (rans_table.c). */
void ptwm_rans_symlist_make(const uint64_t cnt[256], symlist *sl);
void ptwm_rans_normalize_freqs(const uint64_t cnt[256], uint64_t total, unsigned prec,
                               const symlist *sl, uint32_t freq[256]);
double ptwm_rans_table_cost_bits(const uint64_t cnt[256], const uint32_t freq[256],
                                 unsigned prec, const symlist *sl, size_t *vbytes);
size_t ptwm_rans_symset_write(const uint32_t v[256], uint8_t *out);
size_t ptwm_rans_symset_size(const symlist *sl);
size_t ptwm_rans_freqtab_write(const uint32_t freq[256], uint8_t *out);
ptwm_error ptwm_rans_symset_read(rcur *c, uint8_t present[256]);
ptwm_error ptwm_rans_freqtab_read(rcur *c, unsigned prec, uint32_t freq[256]);
void ptwm_rans_build_dtab(const uint32_t freq[256], unsigned prec, uint32_t *tab, uint8_t *sym);
int ptwm_rans_dtab_packs(const uint32_t freq[256], unsigned prec);

#endif
