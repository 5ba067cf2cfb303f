/* RANS stage (wire id 4): static rANS, order 0 or order 1, for byte planes.
 *
 * ENCODING (all multi-byte integers little-endian). n, the plane length, is
 * not stored; the decoder is told it (dst_size).
 *
 *   byte 0      mode
 *                 0 RAW     the n bytes follow verbatim (coded size n + 1)
 *                 1 SINGLE  one byte follows: the symbol repeated n times
 *                           (n >= 1; coded size 2)
 *                 2 O0      order-0 rANS
 *                 3 O1      order-1 rANS (context = previous symbol)
 *                 4 O0X2    order-0 rANS in two streams (container format
 *                           version 7 on; the chunk decoder refuses it in
 *                           older files)
 *                 5 O0X4    order-0 rANS in four streams (version 8 on)
 *   O0, O1, O0X2 and O0X4 continue with:
 *   byte 1      prec: log2 of the frequency total M. O0, O0X2, O0X4: 8..15;
 *               O1: 8..12.
 *   tables      O0, O0X2, O0X4: one frequency table.
 *               O1: a symbol set naming the contexts that have a table, then
 *                   one frequency table per such context, ascending.
 *   O0 and O1 then hold one stream:
 *   states      S = 32 x u32: the final encoder states =
 *               the initial decoder states, each in [L, 2^32) with L = 2^16.
 *   words       u16 renormalisation words, in the order the decoder reads them.
 *   Nothing follows: the decoder must consume exactly every word and end with
 *   all S states equal to L (the encoder's initial value).
 *   O0X2 holds two order-0 streams with the one table: symbols [0, h) and
 *   [h, n), h = floor(n / 64) * 32 (half the whole rounds of 32):
 *     +----------+---------------------------+---------------------------+
 *     | u32 lenA | stream A: states, words   | stream B: states, words   |
 *     +----------+---------------------------+---------------------------+
 *                 <-------- lenA bytes ------> <--- the rest of the plane ->
 *   each stream as an O0 stream of its symbols, ending as above.
 *   O0X4 holds four order-0 streams with the one table, in the same way:
 *   q = floor(n / 128) * 32 (a quarter of the whole rounds of 32); streams
 *   A, B, C code symbols [0, q), [q, 2q), [2q, 3q) and D [3q, n):
 *     +----------+----------+----------+----------+----------+----------+----------+
 *     | u32 lenA | u32 lenB | u32 lenC | stream A | stream B | stream C | stream D |
 *     +----------+----------+----------+----------+----------+----------+----------+
 *   lenA, lenB, lenC the bytes of streams A, B, C; D runs to the plane's end.
 *
 *   symbol set: byte R.
 *     R == 0:     32 bytes of bitmap follow; symbol s is present if bit (s & 7)
 *                 of byte s >> 3 is set (at least one must be).
 *     R in 1..128: R runs of present symbols follow, 2 bytes each: gap, len-1.
 *                 The first run starts at symbol `gap`; each later run starts
 *                 `gap` (>= 1) symbols after the end of the previous one; a run
 *                 must end at or before symbol 255.
 *   frequency table: a symbol set, then for each present symbol ascending its
 *     frequency f (1 <= f <= M) as v = f - 1: one byte v if v < 128, else two
 *     bytes 0x80 | (v >> 8), v & 0xff (and then v >= 128). The frequencies
 *     must sum to exactly M = 2^prec.
 *
 *   Coding. S states x[0..S-1], L = 2^16, 16-bit renormalisation. A symbol s
 *   with frequency f and cumulative frequency c (sum of the frequencies of the
 *   symbols below s in the same table) is decoded from state x as
 *       slot = x mod M  (c <= slot < c + f),  x = f * (x >> prec) + slot - c,
 *       then if x < L: x = (x << 16) | next u16 word.
 *   O0: symbol i (0 <= i < n) is decoded with state i mod 32 and the one table.
 *   O1: the plane is cut into 32 segments: segment k < 31 is [k*q, (k+1)*q)
 *     with q = floor(n / 32), segment 31 is [31q, n). Segment k is decoded by
 *     state k; the context of its first symbol is 0, of every other symbol the
 *     previous symbol of the same segment. The decoder steps j = 0..q-1, and
 *     for each j the states k = 0..31 in order (symbol k*q + j); then state 31
 *     finishes symbols 32q..n-1 of segment 31 alone. Each context met must
 *     have a table.
 *
 * Why this shape: 16-bit renormalisation with L = 2^16 needs at most one read
 * per symbol, so the decoder renormalises without a branch (a mask; whether a
 * state needs a word is close to a coin toss on weight planes). Order 0 has
 * 32 states so that an AVX2 decoder keeps four vectors of 8 in flight (one
 * vector alone waits on its gathers); the scalar decoder runs them 8 at a time
 * in registers. From 32K symbols an order-0 plane is two streams because a
 * state's next symbol waits on its last (gather, multiply, renormalise:
 * about 59 cycles at AVX-512), and 32 states alone leave the core idle most
 * of that: two streams in one loop decode 1.5-1.7x as fast, for about 130
 * bytes more (rans_impl.h has the thresholds and their costs).
 * From 128K symbols a plane is four streams, which the VBMI decoder runs as
 * two pairs in one loop: on a Zen 5 core a round of byte permutes takes
 * about 80 cycles of one stream's states, 85 of two streams', 100 of four
 * (it waits on the round before it), so four decode at 0.23-0.24 ns a
 * symbol against 0.38-0.41, for about 260 bytes more.
 * Order 1 runs its 32 segments the same way, with one more
 * gather for the context's table. The encoder picks prec (and with order -1 the order;
 * with -2 order 1 only where it saves 3% on a plane of 64 KiB or more) from
 * an exact table cost plus an entropy estimate; tables are normalised
 * exactly (largest remainder, every present symbol at least 1). Its order-0
 * loop runs 8 states a vector under AVX2 (same bytes as the scalar loop), and
 * under VBMI a plane's streams in pairs, a step of each in turn,
 * branch-free: whether a state emits a word is close to a coin toss. It writes
 * SINGLE for a one-symbol plane and RAW unless rANS saves at least 1/256 of
 * the plane (near-uniform sign+mantissa planes: RAW costs < 0.4% there and
 * decodes at memcpy speed). Decoders accept any valid encoding, whatever the
 * encoder would have chosen.
 *
 * The coder's files: rans_table.c (the frequency tables), rans_encode.c,
 * rans_decode.c, and rans_impl.h for what they share; kernels/rans_*.c hold
 * the vector loops. */
#include "rans_impl.h"

size_t ptwm_rans_bound(size_t n) {
    /* The encoder falls back to RAW whenever rANS would not be smaller. */
    return n + 1 < n ? 0 : n + 1;
}

unsigned ptwm_rans_streams(const uint8_t *src, size_t src_size) {
    if (!src || !src_size) return 1;
    return src[0] == MODE_O0X4 ? 4 : src[0] == MODE_O0X2 ? 2 : 1;
}
