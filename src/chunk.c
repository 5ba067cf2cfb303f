/* One chunk through a chain: transform into planes, code each plane, frame.
 *
 * Payload (docs/CHAINS.md, "Chunk payload"):
 *   u8 flags        bit 0: a CRC32 follows each plane entry
 *                   bit 1: MICROSCALE block-relative exponents in this chunk
 *   u8 planes P
 *   P entries       u8 stage (0 CONST, 1 HUFFMAN, 2 ZSTD, 4 RANS, 5 IDENTITY),
 *                   varint raw length, varint coded length, [u32 LE CRC32 of
 *                   the coded bytes]
 *   coded planes    concatenated in entry order; they end exactly at the end
 *
 * Plane order: the transform's planes (plane 0 holds the MICROSCALE residuals
 * when bit 1 is set), then the block-scale plane (bit 1), then a tail plane
 * with the raw_len % width bytes that do not fill an element.
 *
 * Scratch buffers are cached per thread (pthread key with a destructor): no
 * global mutable state, and no page-faulting fresh allocation per chunk. */
#include <libdeflate.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include "chain.h"
#include "chunk.h"
#include "entropy.h"
#include "microscale.h"
#include "planes.h"

#define STAGE_CONST 0
#define FLAG_CRC 1u
#define FLAG_MICRO 2u
#define MAX_PLANES (PTWM_MAX_BASE_PLANES + 2)
#define ENTRY_MAX (1 + 10 + 10 + 4)
#define HEADER_MAX (2 + MAX_PLANES * ENTRY_MAX)

/* ---- per-thread scratch --------------------------------------------------- */

typedef struct scratch {
    uint8_t *buf[2];
    size_t cap[2];
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
    scratch *s = (scratch *)p;
    if (!s) return;
    free(s->buf[0]);
    free(s->buf[1]);
    free(s);
}

static void scratch_key_init(void) {
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* Buffers above this are not kept after the call (a huge one-off chunk
 * should not pin memory in every thread). */
#define SCRATCH_KEEP ((size_t)64 << 20)

static scratch *scratch_get(void) {
    scratch *s;
    pthread_once(&scratch_once, scratch_key_init);
    if (!scratch_key_ok) return NULL;
    s = (scratch *)pthread_getspecific(scratch_key);
    if (!s) {
        s = (scratch *)calloc(1, sizeof(*s));
        if (!s) return NULL;
        if (pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    return s;
}

static uint8_t *scratch_need(scratch *s, int which, size_t size) {
    if (s->cap[which] < size) {
        uint8_t *p = (uint8_t *)ptwm_malloc(size + 64);
        if (!p) return NULL;
        free(s->buf[which]);
        s->buf[which] = p;
        s->cap[which] = size;
    }
    return s->buf[which];
}

static void scratch_trim(scratch *s) {
    int k;
    for (k = 0; k < 2; k++) {
        if (s->cap[k] > SCRATCH_KEEP) {
            free(s->buf[k]);
            s->buf[k] = NULL;
            s->cap[k] = 0;
        }
    }
}

/* ---- plane layout shared by encoder and decoder --------------------------- */

typedef struct plane_layout {
    unsigned count;
    size_t len[MAX_PLANES];
    unsigned setting[MAX_PLANES]; /* index into the chain's per-plane entropy settings */
    size_t n, tail, blocks;
    int micro;
} plane_layout;

static void layout_make(const ptwm_chain_info *c, size_t raw_len, int micro, plane_layout *L) {
    unsigned k;
    L->n = raw_len / c->width;
    L->tail = raw_len % c->width;
    L->micro = micro;
    L->count = 0;
    for (k = 0; k < c->nplanes; k++) {
        L->len[L->count] = L->n;
        L->setting[L->count++] = k;
    }
    L->blocks = micro ? ptwm_micro_blocks(L->n, c->micro_block) : 0;
    if (micro) {
        L->len[L->count] = L->blocks;
        L->setting[L->count++] = 0;
    }
    if (L->tail) {
        L->len[L->count] = L->tail;
        L->setting[L->count++] = c->nplanes; /* marks the tail: stored as is */
    }
}

/* ---- varints --------------------------------------------------------------- */

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t k = 0;
    while (v >= 0x80) {
        p[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[k++] = (uint8_t)v;
    return k;
}

static int get_varint(const uint8_t *p, size_t avail, size_t *pos, uint64_t *out) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (*pos < avail && shift < 64) {
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            /* Reject non-minimal encodings (a trailing zero group) and bits
             * past 64: every value has exactly one encoding. */
            if (shift && b == 0) return 0;
            if (shift == 63 && b > 1) return 0;
            *out = v;
            return 1;
        }
        shift += 7;
    }
    return 0;
}

/* ---- stage choice ------------------------------------------------------- */

static void histogram(const uint8_t *restrict src, size_t n, uint32_t *restrict hist) {
    /* Four tables break the store-to-load chain on runs of one symbol. */
    uint32_t h[4][256];
    size_t i;
    int s;
    memset(h, 0, sizeof(h));
    for (i = 0; i + 4 <= n; i += 4) {
        h[0][src[i]]++;
        h[1][src[i + 1]]++;
        h[2][src[i + 2]]++;
        h[3][src[i + 3]]++;
    }
    for (; i < n; i++) h[0][src[i]]++;
    for (s = 0; s < 256; s++) hist[s] = h[0][s] + h[1][s] + h[2][s] + h[3][s];
}

/* Bytes of an ideal order-0 code for a histogram (table not counted). */
static double order0_bytes(const uint32_t *hist, size_t n) {
    double bits = 0.0, dn = (double)n;
    int s;
    for (s = 0; s < 256; s++)
        if (hist[s]) bits -= (double)hist[s] * log2((double)hist[s] / dn);
    return bits / 8.0;
}

static unsigned distinct(const uint32_t *hist) {
    unsigned d = 0;
    int s;
    for (s = 0; s < 256; s++) d += hist[s] != 0;
    return d;
}

typedef struct stage_pick {
    int stage;
    int level;
} stage_pick;

/* The open-slot filling of method_hint. */
static uint8_t method_mask(int method, int8_t *order) {
    switch (method) {
    case PTWM_METHOD_HUFFMAN: return (uint8_t)PTWM_EMASK(PTWM_METHOD_HUFFMAN);
    case PTWM_METHOD_ZSTD: return (uint8_t)PTWM_EMASK(PTWM_METHOD_ZSTD);
    case PTWM_METHOD_RANS: *order = -1; return (uint8_t)PTWM_EMASK(PTWM_METHOD_RANS);
    case PTWM_METHOD_IDENTITY: return (uint8_t)PTWM_EMASK(PTWM_METHOD_IDENTITY);
    default: *order = -1; return (uint8_t)PTWM_EMASK_VALID;
    }
}

/* Pick a stage from an estimate: the order-0 cost from the histogram, with
 * rough table costs. Only the pick is encoded (and kept only if it beats
 * storing the plane raw). */
static stage_pick pick_stage(const uint32_t *hist, size_t n, unsigned mask, int zlevel,
                             int order) {
    stage_pick p;
    double e0, best;
    unsigned d;
    p.stage = PTWM_METHOD_IDENTITY;
    p.level = 0;
    if (mask == PTWM_EMASK(PTWM_METHOD_HUFFMAN) || mask == PTWM_EMASK(PTWM_METHOD_ZSTD) ||
        mask == PTWM_EMASK(PTWM_METHOD_RANS) || mask == PTWM_EMASK(PTWM_METHOD_IDENTITY)) {
        for (p.stage = 1; !(mask & PTWM_EMASK(p.stage)); p.stage++) {
        }
        p.level = p.stage == PTWM_METHOD_ZSTD ? zlevel : p.stage == PTWM_METHOD_RANS ? order : 0;
        return p;
    }
    d = distinct(hist);
    e0 = order0_bytes(hist, n);
    best = (double)n;
    if (mask & PTWM_EMASK(PTWM_METHOD_HUFFMAN)) {
        /* Huffman loses little unless one symbol dominates. */
        double c = e0 * 1.01 + n / 400.0 + 8.0 + d;
        if (c < best) {
            best = c;
            p.stage = PTWM_METHOD_HUFFMAN;
        }
    }
    if (mask & PTWM_EMASK(PTWM_METHOD_RANS)) {
        double c = e0 + 16.0 + 2.0 * d;
        /* Prefer Huffman (faster to decode) unless rANS saves over 1%. */
        if (c < best * 0.99) {
            best = c;
            p.stage = PTWM_METHOD_RANS;
            p.level = order;
        }
    }
    if (mask == PTWM_EMASK(PTWM_METHOD_ZSTD) && best >= (double)n) {
        p.stage = PTWM_METHOD_ZSTD;
        p.level = zlevel;
    }
    return p;
}

/* Encode one plane into out (room for max(bound, len) bytes). */
static ptwm_error encode_plane(const uint8_t *src, size_t len, unsigned mask, int zlevel,
                               int order, uint8_t *out, size_t cap, int *stage, size_t *coded) {
    uint32_t hist[256];
    stage_pick p;
    ptwm_error e;
    if (len == 0) {
        *stage = PTWM_METHOD_IDENTITY;
        *coded = 0;
        return PTWM_OK;
    }
    histogram(src, len, hist);
    if (hist[src[0]] == len) {
        *stage = STAGE_CONST;
        out[0] = src[0];
        *coded = 1;
        return PTWM_OK;
    }
    p = pick_stage(hist, len, mask, zlevel, order);
    if (p.stage != PTWM_METHOD_IDENTITY) {
        e = ptwm_entropy_encode(p.stage, p.level, src, len, out, cap, coded);
        if (e == PTWM_OK && *coded < len) {
            *stage = p.stage;
            return PTWM_OK;
        }
        if (e != PTWM_OK && e != PTWM_ERR_DST_SIZE) return e;
    }
    /* A plane that does not shrink is stored as is. */
    memcpy(out, src, len);
    *stage = PTWM_METHOD_IDENTITY;
    *coded = len;
    return PTWM_OK;
}

size_t ptwm_chunk_bound(size_t raw_len) {
    /* Every plane is at most its raw size (else stored raw); the planes hold
     * raw_len bytes plus at most raw_len / 4 + 1 block scales. */
    return HEADER_MAX + raw_len + raw_len / 4 + 1;
}

/* Estimated order-0 bytes of a plane (for the plain vs block-relative choice). */
static double plane_estimate(const uint8_t *src, size_t n) {
    uint32_t hist[256];
    if (n == 0) return 0.0;
    histogram(src, n, hist);
    return order0_bytes(hist, n) + 2.0 * distinct(hist);
}

ptwm_error ptwm_chunk_encode(const uint8_t *chain, size_t chain_len, ptwm_dtype dtype,
                             const ptwm_chunk_params *prm, const uint8_t *raw, size_t raw_len,
                             uint8_t *dst, size_t cap, size_t *out_len, ptwm_err *err) {
    ptwm_chain_info c;
    plane_layout L;
    scratch *s;
    uint8_t *pb, *cb;
    uint8_t *plane[MAX_PLANES];
    size_t coded[MAX_PLANES], cb_need = 0, pos, off, total, k;
    int stage[MAX_PLANES];
    int method = prm ? prm->method : PTWM_METHOD_MICROSCALE;
    int emit_crc = prm ? prm->emit_crc : 1;
    int zdefault = prm && prm->zstd_level ? prm->zstd_level : 0;
    int micro = 0;
    ptwm_error e;

    if (!out_len || (!raw && raw_len) || (!dst && cap))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_encode: NULL argument");
    e = ptwm_chain_info_parse(chain, chain_len, (int)dtype, &c, err);
    if (e) return e;
    s = scratch_get();
    if (!s) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: no scratch memory");

    /* Transform: planes live back to back in scratch 0 (room for the
     * transform's planes, the residuals and the block scales). */
    layout_make(&c, raw_len, 0, &L);
    pb = scratch_need(s, 0, raw_len + 2 * L.n + 16);
    if (!pb) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu scratch bytes", raw_len);
    for (k = 0; k < c.nplanes; k++) plane[k] = pb + k * L.n;
    if (c.xform == PTWM_XFORM_SPLIT)
        ptwm_split_float(raw, L.n, c.width, c.exp_bits, c.man_bits, plane);
    else if (c.xform == PTWM_XFORM_PLANES)
        ptwm_split_bytes(raw, L.n, c.width, plane);
    else
        plane[0] = (uint8_t *)(uintptr_t)raw; /* BYTES: the raw bytes are the plane */

    if (c.micro_block && L.n >= 2 * (size_t)c.micro_block) {
        uint8_t *r = pb + c.nplanes * L.n;
        size_t nb = ptwm_micro_blocks(L.n, c.micro_block);
        uint8_t *d = r + L.n;
        double plain, rel;
        ptwm_micro_forward(plane[0], L.n, c.micro_block, r, d);
        plain = plane_estimate(plane[0], L.n);
        rel = plane_estimate(r, L.n) + plane_estimate(d, nb);
        if (rel < plain) {
            micro = 1;
            layout_make(&c, raw_len, 1, &L);
            plane[0] = r;
            plane[c.nplanes] = d;
        }
    }
    if (L.tail) plane[L.count - 1] = (uint8_t *)(uintptr_t)(raw + raw_len - L.tail);

    for (k = 0; k < L.count; k++) cb_need += ptwm_chunk_bound(L.len[k]) + 64;
    cb = scratch_need(s, 1, cb_need);
    if (!cb) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_encode: %zu scratch bytes", cb_need);

    off = 0;
    for (k = 0; k < L.count; k++) {
        unsigned set = L.setting[k], mask;
        int8_t order = 0;
        int zl = zdefault;
        size_t pcap = cb_need - off;
        if (set >= c.nplanes) {
            mask = PTWM_EMASK(PTWM_METHOD_IDENTITY);
        } else {
            mask = c.mask[set];
            order = c.rans_order[set];
            if (c.zstd_level[set]) zl = c.zstd_level[set];
            if (mask == 0) mask = method_mask(method, &order);
        }
        e = encode_plane(plane[k], L.len[k], mask, zl, order, cb + off, pcap, &stage[k], &coded[k]);
        if (e) {
            scratch_trim(s);
            return ptwm_fail(err, e, "chunk_encode: plane %zu of %u (%zu bytes): %s", k, L.count,
                             L.len[k], ptwm_error_string(e));
        }
        off += coded[k];
    }

    /* Frame: header, then the coded planes. */
    {
        uint8_t hdr[HEADER_MAX];
        size_t h = 2;
        hdr[0] = (uint8_t)((emit_crc ? FLAG_CRC : 0) | (micro ? FLAG_MICRO : 0));
        hdr[1] = (uint8_t)L.count;
        pos = 0;
        for (k = 0; k < L.count; k++) {
            hdr[h++] = (uint8_t)stage[k];
            h += put_varint(hdr + h, L.len[k]);
            h += put_varint(hdr + h, coded[k]);
            if (emit_crc) {
                ptwm_store_le32(hdr + h, libdeflate_crc32(0, cb + pos, coded[k]));
                h += 4;
            }
            pos += coded[k];
        }
        total = h + off;
        if (total > cap) {
            scratch_trim(s);
            return ptwm_fail(err, PTWM_ERR_DST_SIZE,
                             "chunk_encode: payload of %zu bytes, buffer of %zu (use "
                             "ptwm_chunk_bound)",
                             total, cap);
        }
        memcpy(dst, hdr, h);
        if (off) memcpy(dst + h, cb, off);
    }
    scratch_trim(s);
    *out_len = total;
    return PTWM_OK;
}

static const char *stage_label(int stage) {
    return stage == STAGE_CONST ? "const" : ptwm_method_name(stage);
}

ptwm_error ptwm_chunk_decode(const uint8_t *chain, size_t chain_len, ptwm_dtype dtype,
                             const uint8_t *src, size_t src_len, uint8_t *raw, size_t raw_len,
                             ptwm_err *err) {
    ptwm_chain_info c;
    plane_layout L;
    scratch *s;
    uint8_t *pb;
    const uint8_t *plane[MAX_PLANES];
    const uint8_t *body;
    size_t coded[MAX_PLANES], pos, k, body_len, boff;
    uint32_t crc[MAX_PLANES];
    int stage[MAX_PLANES];
    unsigned flags, count;
    ptwm_error e;

    if ((!src && src_len) || (!raw && raw_len))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chunk_decode: NULL argument");
    e = ptwm_chain_info_parse(chain, chain_len, (int)dtype, &c, err);
    if (e) return e;
    if (src_len < 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload of %zu bytes (at least 2)", src_len);
    flags = src[0];
    count = src[1];
    if (flags & ~(FLAG_CRC | FLAG_MICRO))
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: unknown flags 0x%02x", flags);
    if ((flags & FLAG_MICRO) && !c.micro_block)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: block-relative exponents, but the chain has no "
                         "microscale");
    layout_make(&c, raw_len, (flags & FLAG_MICRO) != 0, &L);
    if (count != L.count)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: %u planes, the chain makes %u for %zu raw bytes", count,
                         L.count, raw_len);
    pos = 2;
    body_len = 0;
    for (k = 0; k < count; k++) {
        uint64_t rl, cl;
        if (pos >= src_len)
            return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: plane %zu entry past the end "
                             "(%zu bytes)", k, src_len);
        stage[k] = src[pos++];
        if (stage[k] != STAGE_CONST && !ptwm_method_name(stage[k]))
            return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "chunk payload: plane %zu: unknown stage id %d",
                             k, stage[k]);
        if (stage[k] == PTWM_METHOD_MICROSCALE)
            return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID,
                             "chunk payload: plane %zu: stage id 3 is not an entropy stage", k);
        if (!get_varint(src, src_len, &pos, &rl) || !get_varint(src, src_len, &pos, &cl))
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: lengths malformed or past the end", k);
        if (rl != L.len[k])
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: raw length %llu, expected %zu for a chunk "
                             "of %zu bytes",
                             k, (unsigned long long)rl, L.len[k], raw_len);
        if (cl > src_len)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: coded length %llu exceeds the payload of "
                             "%zu bytes",
                             k, (unsigned long long)cl, src_len);
        if ((stage[k] == STAGE_CONST && cl != 1) || (stage[k] == PTWM_METHOD_IDENTITY && cl != rl))
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: %s stage with coded length %llu for %llu "
                             "bytes",
                             k, stage_label(stage[k]), (unsigned long long)cl,
                             (unsigned long long)rl);
        coded[k] = (size_t)cl;
        body_len += coded[k]; /* no overflow: each <= src_len, at most MAX_PLANES */
        if (flags & FLAG_CRC) {
            if (src_len - pos < 4)
                return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: plane %zu CRC past the end",
                                 k);
            crc[k] = ptwm_load_le32(src + pos);
            pos += 4;
        }
    }
    if (body_len != src_len - pos)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: planes hold %zu coded bytes, %zu follow the %zu-byte "
                         "header",
                         body_len, src_len - pos, pos);
    body = src + pos;

    s = scratch_get();
    if (!s) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: no scratch memory");
    /* Room for every plane that needs decoding (identity planes are used in place). */
    pb = scratch_need(s, 0, raw_len + L.blocks + 16);
    if (!pb) return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu scratch bytes", raw_len);

    boff = 0;
    {
        size_t poff = 0;
        for (k = 0; k < count; k++) {
            const uint8_t *cp = body + boff;
            if (flags & FLAG_CRC) {
                uint32_t got = libdeflate_crc32(0, cp, coded[k]);
                if (got != crc[k]) {
                    scratch_trim(s);
                    return ptwm_fail(err, PTWM_ERR_CRC,
                                     "chunk payload: plane %zu (%s, %zu coded bytes): stored CRC32 "
                                     "%08x, computed %08x",
                                     k, stage_label(stage[k]), coded[k], (unsigned)crc[k],
                                     (unsigned)got);
                }
            }
            if (stage[k] == PTWM_METHOD_IDENTITY) {
                plane[k] = cp;
            } else {
                /* BYTES: plane 0 is the raw bytes, decoded in place. */
                uint8_t *out = c.xform == PTWM_XFORM_BYTES && k == 0 ? raw : pb + poff;
                if (stage[k] == STAGE_CONST) {
                    memset(out, cp[0], L.len[k]);
                } else {
                    e = ptwm_entropy_decode(stage[k], cp, coded[k], out, L.len[k]);
                    if (e) {
                        scratch_trim(s);
                        return ptwm_fail(err, e == PTWM_ERR_UNKNOWN_ID ? e : PTWM_ERR_CORRUPT,
                                         "chunk payload: plane %zu (%s, %zu coded bytes, %zu raw): "
                                         "%s",
                                         k, stage_label(stage[k]), coded[k], L.len[k],
                                         ptwm_error_string(e));
                    }
                }
                plane[k] = out;
                poff += L.len[k];
            }
            boff += coded[k];
        }
    }

    /* Inverse transform. */
    {
        const uint8_t *pl[MAX_PLANES];
        uint8_t *xbuf = NULL;
        for (k = 0; k < count; k++) pl[k] = plane[k];
        if (L.micro) {
            xbuf = scratch_need(s, 1, L.n + 16);
            if (!xbuf) {
                scratch_trim(s);
                return ptwm_fail(err, PTWM_ERR_NOMEM, "chunk_decode: %zu scratch bytes", L.n);
            }
            ptwm_micro_inverse(plane[0], plane[c.nplanes], L.n, c.micro_block, xbuf);
            pl[0] = xbuf;
        }
        if (c.xform == PTWM_XFORM_SPLIT)
            ptwm_merge_float(pl, L.n, c.width, c.exp_bits, c.man_bits, raw);
        else if (c.xform == PTWM_XFORM_PLANES)
            ptwm_merge_bytes(pl, L.n, c.width, raw);
        else if (L.n && pl[0] != raw)
            memcpy(raw, pl[0], L.n);
        if (L.tail) memcpy(raw + raw_len - L.tail, pl[count - 1], L.tail);
    }
    scratch_trim(s);
    return PTWM_OK;
}
