/* BASE: the chunk as its difference from the same chunk of a base tensor
 * (a fine-tune against the model it came from, a checkpoint against an
 * earlier one; docs/DELTA.md). Element by element, with w the width:
 * ordered (floats): ord(u) maps the bits to an unsigned integer in the
 * float's order (negative: every bit flipped; positive or +0: the sign bit
 * set), so neighbouring floats differ by 1; not ordered (integers): ord is
 * the identity. D = zigzag(ord(T) - ord(B) mod 2^(8w)), exact for every bit
 * pattern (NaNs and infinities too), and inverted as ord^-1(ord(B) +
 * unzigzag(D)). Parameters: width (1..8) and ordered (0 or 1). It comes
 * first, and a transform of the same width takes its elements. */
#include "planes.h"
#include "stage.h"

/* One loop per element type and kind, so the compiler vectorises each (a
 * branch on `ordered` inside the loop kept it scalar). */
#define BASE_LOOPS(T, BITS)                                                                     \
    static T ord##BITS(T u) { /* the top bit spread, or'ed with the sign */                    \
        return (T)(u ^ ((T)((T)0 - (T)(u >> (BITS - 1))) | (T)((T)1 << (BITS - 1))));            \
    }                                                                                           \
    static T unord##BITS(T v) {                                                                 \
        return (T)(v ^ ((T)((T)(v >> (BITS - 1)) - (T)1) | (T)((T)1 << (BITS - 1))));            \
    }                                                                                           \
    static T zig##BITS(T r) { return (T)((T)(r << 1) ^ (T)((T)0 - (T)(r >> (BITS - 1)))); }     \
    static T unzig##BITS(T z) { return (T)((T)(z >> 1) ^ (T)((T)0 - (T)(z & 1u))); }           \
    static void diff##BITS(const uint8_t *restrict x, const uint8_t *restrict b, size_t n,      \
                           int ordered, uint8_t *restrict d) {                                  \
        size_t i;                                                                               \
        T u, v, r;                                                                              \
        if (ordered) {                                                                          \
            for (i = 0; i < n; i++) {                                                           \
                memcpy(&u, x + i * sizeof(T), sizeof(T));                                       \
                memcpy(&v, b + i * sizeof(T), sizeof(T));                                       \
                r = zig##BITS((T)(ord##BITS(u) - ord##BITS(v)));                                \
                memcpy(d + i * sizeof(T), &r, sizeof(T));                                       \
            }                                                                                   \
            return;                                                                             \
        }                                                                                       \
        for (i = 0; i < n; i++) {                                                               \
            memcpy(&u, x + i * sizeof(T), sizeof(T));                                           \
            memcpy(&v, b + i * sizeof(T), sizeof(T));                                           \
            r = zig##BITS((T)(u - v));                                                          \
            memcpy(d + i * sizeof(T), &r, sizeof(T));                                           \
        }                                                                                       \
    }                                                                                           \
    static void undiff##BITS(uint8_t *restrict x, const uint8_t *restrict b, size_t n,          \
                             int ordered) {                                                     \
        size_t i;                                                                               \
        T z, v, r;                                                                              \
        if (ordered) {                                                                          \
            for (i = 0; i < n; i++) {                                                           \
                memcpy(&z, x + i * sizeof(T), sizeof(T));                                       \
                memcpy(&v, b + i * sizeof(T), sizeof(T));                                       \
                r = unord##BITS((T)(ord##BITS(v) + unzig##BITS(z)));                            \
                memcpy(x + i * sizeof(T), &r, sizeof(T));                                       \
            }                                                                                   \
            return;                                                                             \
        }                                                                                       \
        for (i = 0; i < n; i++) {                                                               \
            memcpy(&z, x + i * sizeof(T), sizeof(T));                                           \
            memcpy(&v, b + i * sizeof(T), sizeof(T));                                           \
            r = (T)(v + unzig##BITS(z));                                                        \
            memcpy(x + i * sizeof(T), &r, sizeof(T));                                           \
        }                                                                                       \
    }

BASE_LOOPS(uint8_t, 8)
BASE_LOOPS(uint16_t, 16)
BASE_LOOPS(uint32_t, 32)
BASE_LOOPS(uint64_t, 64)

/* Widths of 3, 5, 6 and 7 bytes (no dtype has them, but the stage allows
 * them): each element's bytes as an integer of 8w bits in a uint64_t. */
static uint64_t ord_w(uint64_t u, unsigned bits, uint64_t mask) {
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return ((u & sign) ? ~u : u | sign) & mask;
}
static uint64_t unord_w(uint64_t v, unsigned bits, uint64_t mask) {
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return ((v & sign) ? v & ~sign : ~v) & mask;
}

static void diff_any(const uint8_t *x, const uint8_t *b, size_t n, unsigned w, int ordered,
                     uint8_t *d) {
    unsigned bits = 8 * w;
    uint64_t mask = ((uint64_t)1 << bits) - 1, sign = (uint64_t)1 << (bits - 1);
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t u = ptwm_load_elem(x + i * w, w), v = ptwm_load_elem(b + i * w, w), r;
        if (ordered) u = ord_w(u, bits, mask), v = ord_w(v, bits, mask);
        r = (u - v) & mask;
        ptwm_store_elem(d + i * w, w, ((r << 1) ^ ((r & sign) ? mask : 0)) & mask);
    }
}

static void undiff_any(uint8_t *x, const uint8_t *b, size_t n, unsigned w, int ordered) {
    unsigned bits = 8 * w;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t z = ptwm_load_elem(x + i * w, w), v = ptwm_load_elem(b + i * w, w), r;
        if (ordered) v = ord_w(v, bits, mask);
        r = (v + ((z >> 1) ^ ((z & 1) ? mask : 0))) & mask;
        ptwm_store_elem(x + i * w, w, ordered ? unord_w(r, bits, mask) : r);
    }
}

/* d = D(x, b) for n elements of w bytes; the loops read and write whole
 * elements, so d may not alias x or b. */
static void base_diff(const uint8_t *x, const uint8_t *b, size_t n, unsigned w, int ordered,
                      uint8_t *d) {
    switch (w) {
    case 1: diff8(x, b, n, ordered, d); break;
    case 2: diff16(x, b, n, ordered, d); break;
    case 4: diff32(x, b, n, ordered, d); break;
    case 8: diff64(x, b, n, ordered, d); break;
    default: diff_any(x, b, n, w, ordered, d);
    }
}

/* x = D^-1(x, b) in place. */
static void base_undiff(uint8_t *x, const uint8_t *b, size_t n, unsigned w, int ordered) {
    switch (w) {
    case 1: undiff8(x, b, n, ordered); break;
    case 2: undiff16(x, b, n, ordered); break;
    case 4: undiff32(x, b, n, ordered); break;
    case 8: undiff64(x, b, n, ordered); break;
    default: undiff_any(x, b, n, w, ordered);
    }
}

static ptwm_error base_plan(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L,
                            ptwm_err *err) {
    uint64_t w = u->p[0];
    if (L->seen) return ptwm_stage_fail(err, s, u, "must be the first stage");
    if (w < 1 || w > 8 || u->p[1] > 1)
        return ptwm_stage_fail(err, s, u, "width %llu (1..8), ordered %llu (0 or 1)",
                               (unsigned long long)w, (unsigned long long)u->p[1]);
    L->width = (unsigned)w;
    L->total = L->n = L->raw_len / w;
    L->tail = L->raw_len % w;
    return PTWM_OK; /* the transform after it makes the planes */
}

static ptwm_error base_forward(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                               ptwm_pipe *P, ptwm_ws *ws) {
    unsigned w = (unsigned)u->p[0];
    size_t n = L->raw_len / w;
    uint8_t *d = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_BASE, n * w, 0);
    (void)s;
    if (!P->base || P->base_len != L->raw_len) return PTWM_ERR_INVALID_ARG;
    if (!d) return PTWM_ERR_NOMEM;
    base_diff(P->src, P->base, n, w, (int)u->p[1], d);
    P->src = d;
    return PTWM_OK;
}

/* The stages after it have put the differences where the chunk goes (the
 * raw bytes: the transform's elements, or the sparse stage's expansion of
 * them); they become the chunk there. */
static ptwm_error base_inverse(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                               ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err) {
    (void)ws;
    if (!P->base)
        return ptwm_fail(err, PTWM_ERR_BASE_MISSING,
                         "chunk payload: stage %u (base): the chunk is coded against a base "
                         "chunk, and no base was given",
                         s);
    base_undiff(P->raw, P->base, L->total, L->width, (int)u->p[1]);
    return PTWM_OK;
}

const ptwm_stage ptwm_stage_base = {
    .id = PTWM_CSTAGE_BASE,
    .name = "base",
    .nparams = 2,
    .plan = base_plan,
    .forward = base_forward,
    .inverse = base_inverse,
    .gives = ptwm_stage_gives_elements,
};
