/* Chains as data: wire encoding, validation, text form, standard table.
 *
 * Wire format (docs/CHAINS.md):
 *   u8 version (1) | u8 stage count (1..16) | per stage: u8 id, u8 param
 *   length, params.  Stages: SPLIT(width, exp_bits, man_bits),
 *   PLANES(width), MICROSCALE(block u16 LE), ENTROPY(plane, mask, zstd
 *   level, rANS order).
 *
 * Text form: stages joined by " > ", e.g.
 *   "split(e8m7) > microscale(32) > entropy(*:auto)"
 *   "planes(4) > entropy(*:rans/o-1) > entropy(0:zstd/19)"
 * describe() and parse() are exact inverses on valid chains. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include "chain.h"

static const char *const method_names[] = {NULL, "huffman", "zstd", "microscale", "rans",
                                           "identity"};

const char *ptwm_method_name(ptwm_method method) {
    if ((int)method < 1 || (int)method > 5) return NULL;
    return method_names[method];
}

ptwm_error ptwm_method_from_name(const char *name, ptwm_method *method, ptwm_err *err) {
    int i;
    if (!name || !method)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_method_from_name: NULL argument");
    for (i = 1; i <= 5; i++) {
        if (strcasecmp(name, method_names[i]) == 0) {
            *method = (ptwm_method)i;
            return PTWM_OK;
        }
    }
    if (name[0] >= '1' && name[0] <= '5' && name[1] == 0) {
        *method = (ptwm_method)(name[0] - '0');
        return PTWM_OK;
    }
    return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID,
                     "'%s' is not a method: use huffman, zstd, microscale, rans or identity", name);
}

/* ---- parse / validate --------------------------------------------------- */

static unsigned ceil8(unsigned bits) { return (bits + 7) / 8; }

/* Each stage's parameters, checked against the chain so far (c): the
 * stages' own rules, the error naming stage_no. */
static ptwm_error parse_split(const uint8_t *p, unsigned plen, int seen_xform, ptwm_chain_info *c,
                              unsigned stage_no, ptwm_err *err) {
    if (plen != 3 || seen_xform || stage_no != 0)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: split needs 3 parameter bytes (got %u) and must be "
                         "the first stage",
                         stage_no, plen);
    c->xform = PTWM_XFORM_SPLIT;
    c->width = p[0];
    c->exp_bits = p[1];
    c->man_bits = p[2];
    if (c->width < 1 || c->width > 8 || c->exp_bits < 1 || c->exp_bits > 16 ||
        1 + c->exp_bits + c->man_bits != 8 * c->width)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: split width %u bytes, exponent %u bits, mantissa %u "
                         "bits: 1 + exponent + mantissa must equal 8 x width (width 1..8)",
                         stage_no, c->width, c->exp_bits, c->man_bits);
    c->exp_planes = ceil8(c->exp_bits);
    c->sm_planes = ceil8(c->man_bits + 1);
    c->nplanes = c->exp_planes + c->sm_planes;
    return PTWM_OK;
}

static ptwm_error parse_planes(const uint8_t *p, unsigned plen, int seen_xform, ptwm_chain_info *c,
                               unsigned stage_no, ptwm_err *err) {
    if (plen != 1 || seen_xform || stage_no != 0)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: planes needs 1 parameter byte (got %u) and must be "
                         "the first stage",
                         stage_no, plen);
    c->xform = PTWM_XFORM_PLANES;
    c->width = p[0];
    if (c->width < 1 || c->width > 8)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain stage %u: planes width %u (1..8)",
                         stage_no, c->width);
    c->nplanes = c->width;
    return PTWM_OK;
}

static ptwm_error parse_microscale(const uint8_t *p, unsigned plen, ptwm_chain_info *c,
                                   unsigned stage_no, ptwm_err *err) {
    unsigned block;
    if (plen != 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: microscale needs 2 parameter bytes (got %u)",
                         stage_no, plen);
    block = ptwm_load_le16(p);
    if (c->xform != PTWM_XFORM_SPLIT || c->exp_bits > 8 || c->micro_block)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: microscale must follow a split whose exponent has "
                         "at most 8 bits, once",
                         stage_no);
    if (block < 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain stage %u: microscale block %u (2..65535)",
                         stage_no, block);
    c->micro_block = block;
    return PTWM_OK;
}

/* *set_all: an entropy stage came before, so one for every plane is refused
 * (it would override it); set_plane: the planes that have their own. */
static ptwm_error parse_entropy(const uint8_t *p, unsigned plen, ptwm_chain_info *c, int *set_all,
                                uint8_t *set_plane, unsigned stage_no, ptwm_err *err) {
    unsigned plane, mask, lvl, i;
    int order;
    if (plen != 4)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: entropy needs 4 parameter bytes (got %u)", stage_no,
                         plen);
    plane = p[0];
    mask = p[1];
    lvl = p[2];
    order = (int8_t)p[3];
    if (mask & ~PTWM_EMASK_VALID)
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID,
                         "chain stage %u: entropy candidate mask 0x%02x names unknown stages",
                         stage_no, mask);
    if (lvl > 22 || order < -1 || order > 1)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: zstd level %u (0..22), rANS order %d (-1..1)",
                         stage_no, lvl, order);
    if (plane == PTWM_ENTROPY_ALL_PLANES) {
        if (*set_all)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chain stage %u: entropy for every plane given twice (or after a "
                             "single plane's)",
                             stage_no);
        *set_all = 1;
        for (i = 0; i < PTWM_MAX_BASE_PLANES; i++) {
            c->mask[i] = (uint8_t)mask;
            c->zstd_level[i] = (uint8_t)lvl;
            c->rans_order[i] = (int8_t)order;
        }
        return PTWM_OK;
    }
    if (plane >= c->nplanes || set_plane[plane])
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chain stage %u: entropy for plane %u (the transform makes %u "
                         "planes; each plane once)",
                         stage_no, plane, c->nplanes);
    set_plane[plane] = 1;
    *set_all = 1; /* an "every plane" stage after this one would override it */
    c->mask[plane] = (uint8_t)mask;
    c->zstd_level[plane] = (uint8_t)lvl;
    c->rans_order[plane] = (int8_t)order;
    return PTWM_OK;
}

static ptwm_error parse_stage_params(const uint8_t *p, unsigned id, unsigned plen, int seen_xform,
                                     ptwm_chain_info *c, int *set_all, uint8_t *set_plane,
                                     unsigned stage_no, ptwm_err *err) {
    switch (id) {
    case PTWM_STAGE_SPLIT:
        return parse_split(p, plen, seen_xform, c, stage_no, err);
    case PTWM_STAGE_PLANES:
        return parse_planes(p, plen, seen_xform, c, stage_no, err);
    case PTWM_STAGE_MICROSCALE:
        return parse_microscale(p, plen, c, stage_no, err);
    case PTWM_STAGE_ENTROPY:
        return parse_entropy(p, plen, c, set_all, set_plane, stage_no, err);
    default:
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "chain stage %u: unknown stage id %u", stage_no,
                         id);
    }
}

ptwm_error ptwm_chain_info_parse(const uint8_t *chain, size_t len, int dtype, ptwm_chain_info *out,
                                 ptwm_err *err) {
    ptwm_chain_info c;
    size_t pos = 2;
    unsigned nst, s;
    int set_all = 0;
    uint8_t set_plane[PTWM_MAX_BASE_PLANES] = {0};
    ptwm_error e;
    if (!chain || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chain: NULL argument");
    if (len < 2 || len > PTWM_CHAIN_MAX_BYTES)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain: %zu bytes (2..%d)", len,
                         PTWM_CHAIN_MAX_BYTES);
    if (chain[0] != PTWM_CHAIN_VERSION)
        return ptwm_fail(err, PTWM_ERR_VERSION, "chain: version %u (this library reads %d)",
                         chain[0], PTWM_CHAIN_VERSION);
    nst = chain[1];
    if (nst < 1 || nst > PTWM_CHAIN_MAX_STAGES)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain: %u stages (1..%d)", nst,
                         PTWM_CHAIN_MAX_STAGES);
    memset(&c, 0, sizeof(c));
    c.xform = PTWM_XFORM_BYTES;
    c.width = 1;
    c.nplanes = 1;
    for (s = 0; s < nst; s++) {
        unsigned id, plen;
        if (len - pos < 2)
            return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain: stage %u header past the end (%zu bytes)",
                             s, len);
        id = chain[pos];
        plen = chain[pos + 1];
        pos += 2;
        if (len - pos < plen)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chain: stage %u has %u parameter bytes, %zu left", s, plen, len - pos);
        e = parse_stage_params(chain + pos, id, plen, c.xform != PTWM_XFORM_BYTES, &c, &set_all,
                               set_plane, s, err);
        if (e) return e;
        pos += plen;
    }
    if (pos != len)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain: %zu trailing bytes after %u stages",
                         len - pos, nst);
    if (dtype >= 0) {
        unsigned bits = ptwm_dtype_bits((ptwm_dtype)dtype);
        if (bits == 0)
            return ptwm_fail(err, PTWM_ERR_DTYPE, "chain: unknown dtype %d", dtype);
        if (c.xform != PTWM_XFORM_BYTES && (bits % 8 != 0 || (bits / 8) % c.width != 0))
            return ptwm_fail(err, PTWM_ERR_DTYPE,
                             "chain: %s elements of %u bits cannot be cut into %u-byte fields",
                             ptwm_dtype_name((ptwm_dtype)dtype), bits, c.width);
    }
    *out = c;
    return PTWM_OK;
}

ptwm_error ptwm_chain_info_parse_cached(ptwm_chain_cache *cache, const uint8_t *chain,
                                        size_t len, int dtype, ptwm_chain_info *out,
                                        ptwm_err *err) {
    ptwm_error e;
    if (chain && len && cache->len == len && cache->dtype == dtype &&
        memcmp(cache->bytes, chain, len) == 0) {
        *out = cache->info;
        return PTWM_OK;
    }
    if ((e = ptwm_chain_info_parse(chain, len, dtype, out, err))) return e;
    if (len <= PTWM_CHAIN_CACHE_BYTES) {
        memcpy(cache->bytes, chain, len);
        cache->len = len;
        cache->dtype = dtype;
        cache->info = *out;
    }
    return PTWM_OK;
}

ptwm_error ptwm_chain_validate(const uint8_t *chain, size_t len, ptwm_dtype dtype, ptwm_err *err) {
    ptwm_chain_info c;
    if ((unsigned)dtype >= PTWM_DTYPE_COUNT)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "chain: unknown dtype %d", (int)dtype);
    return ptwm_chain_info_parse(chain, len, (int)dtype, &c, err);
}

/* ---- building ------------------------------------------------------------ */

typedef struct chain_builder {
    uint8_t *buf;
    size_t cap, len;
    unsigned nst;
    int overflow;
} chain_builder;

static void cb_init(chain_builder *b, uint8_t *buf, size_t cap) {
    b->buf = buf;
    b->cap = cap;
    b->len = 0;
    b->nst = 0;
    b->overflow = cap < 2;
    if (!b->overflow) {
        buf[0] = PTWM_CHAIN_VERSION;
        buf[1] = 0;
        b->len = 2;
    }
}

static void cb_stage(chain_builder *b, unsigned id, const uint8_t *params, unsigned plen) {
    if (b->overflow || b->cap - b->len < 2u + plen || b->len + 2 + plen > PTWM_CHAIN_MAX_BYTES ||
        b->nst >= PTWM_CHAIN_MAX_STAGES) {
        b->overflow = 1;
        return;
    }
    b->buf[b->len] = (uint8_t)id;
    b->buf[b->len + 1] = (uint8_t)plen;
    if (plen) memcpy(b->buf + b->len + 2, params, plen);
    b->len += 2 + plen;
    b->nst++;
    b->buf[1] = (uint8_t)b->nst;
}

static void cb_entropy(chain_builder *b, unsigned plane, unsigned mask, unsigned zlevel, int order) {
    uint8_t p[4];
    p[0] = (uint8_t)plane;
    p[1] = (uint8_t)mask;
    p[2] = (uint8_t)zlevel;
    p[3] = (uint8_t)(int8_t)order;
    cb_stage(b, PTWM_STAGE_ENTROPY, p, 4);
}

/* Float field geometry per dtype (C64 is two F32). F16 is not split: its
 * byte planes (sign:exponent:2 mantissa bits | 8 mantissa bits) code smaller
 * than exponent | sign:mantissa, and order-1 contexts pay on the low byte
 * (docs/CHAINS.md, section 2). */
static int float_geometry(ptwm_dtype d, unsigned *w, unsigned *e, unsigned *m) {
    switch (d) {
    case PTWM_DTYPE_BF16: *w = 2; *e = 8; *m = 7; return 1;
    case PTWM_DTYPE_F32:
    case PTWM_DTYPE_C64: *w = 4; *e = 8; *m = 23; return 1;
    case PTWM_DTYPE_F64: *w = 8; *e = 11; *m = 52; return 1;
    default: return 0;
    }
}

ptwm_error ptwm_chain_standard(ptwm_dtype dtype, ptwm_method method, uint8_t *buf, size_t cap, size_t *len,
                               ptwm_err *err) {
    chain_builder b;
    unsigned w, e, m, mask;
    int order = 0;
    if (!buf || !len) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chain_standard: NULL argument");
    if ((unsigned)dtype >= PTWM_DTYPE_COUNT)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "chain_standard: unknown dtype %d", (int)dtype);
    switch (method) {
    case PTWM_METHOD_HUFFMAN: mask = PTWM_EMASK(PTWM_METHOD_HUFFMAN); break;
    case PTWM_METHOD_ZSTD: mask = PTWM_EMASK(PTWM_METHOD_ZSTD); break;
    case PTWM_METHOD_RANS: mask = PTWM_EMASK(PTWM_METHOD_RANS); order = -1; break;
    case PTWM_METHOD_IDENTITY: mask = PTWM_EMASK(PTWM_METHOD_IDENTITY); break;
    case PTWM_METHOD_MICROSCALE:
        mask = PTWM_EMASK_VALID;
        order = -1;
        break;
    default:
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "chain_standard: unknown method %d", method);
    }
    cb_init(&b, buf, cap);
    if (method == PTWM_METHOD_IDENTITY) {
        /* Raw bytes: no transform is worth its time. */
    } else if (float_geometry(dtype, &w, &e, &m)) {
        uint8_t p[3];
        p[0] = (uint8_t)w;
        p[1] = (uint8_t)e;
        p[2] = (uint8_t)m;
        cb_stage(&b, PTWM_STAGE_SPLIT, p, 3);
        if (method == PTWM_METHOD_MICROSCALE && e <= 8) {
            uint8_t q[2];
            ptwm_store_le16(q, 32);
            cb_stage(&b, PTWM_STAGE_MICROSCALE, q, 2);
        }
    } else {
        unsigned bits = ptwm_dtype_bits(dtype);
        if (bits >= 16) {
            uint8_t p = (uint8_t)(bits / 8);
            cb_stage(&b, PTWM_STAGE_PLANES, &p, 1);
        }
    }
    /* Order-1 contexts do not pay on float field planes (the previous
     * exponent predicts nothing a per-chunk table does not: docs/CHAINS.md,
     * section 2), so splits code at order 0 and keep the encoder fast. */
    if (order == -1 && float_geometry(dtype, &w, &e, &m)) order = 0;
    if (order == -1 && method == PTWM_METHOD_MICROSCALE && ptwm_dtype_bits(dtype) >= 16) {
        /* Byte planes with every stage on offer: zstd takes what order-1
         * contexts would (docs/CHAINS.md, section 2), at a fraction of the
         * encode time. */
        cb_entropy(&b, PTWM_ENTROPY_ALL_PLANES, mask, 0, 0);
    } else if (order == -1 && ptwm_dtype_bits(dtype) >= 16) {
        /* RANS alone: order-1 contexts pay on the most significant plane
         * (F16 sign:exponent:2 mantissa bits), barely on the others, and cost
         * encode time everywhere. */
        cb_entropy(&b, PTWM_ENTROPY_ALL_PLANES, mask, 0, 0);
        cb_entropy(&b, ptwm_dtype_bits(dtype) / 8 - 1, mask, 0, -1);
    } else {
        cb_entropy(&b, PTWM_ENTROPY_ALL_PLANES, mask, 0, order);
    }
    if (b.overflow)
        return ptwm_fail(err, PTWM_ERR_DST_SIZE, "chain_standard: buffer of %zu bytes too small",
                         cap);
    *len = b.len;
    return PTWM_OK;
}

/* ---- describe ------------------------------------------------------------ */

static const int entropy_ids[4] = {PTWM_METHOD_HUFFMAN, PTWM_METHOD_RANS, PTWM_METHOD_ZSTD,
                                   PTWM_METHOD_IDENTITY};

typedef struct text_out {
    char *buf;
    size_t cap, pos;
    int overflow;
} text_out;

static void tput(text_out *t, const char *fmt, ...) PTWM_PRINTF(2, 3);
static void tput(text_out *t, const char *fmt, ...) {
    va_list ap;
    int n;
    if (t->overflow) return;
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->pos, t->cap - t->pos, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= t->cap - t->pos) {
        t->overflow = 1;
        return;
    }
    t->pos += (size_t)n;
}

ptwm_error ptwm_chain_describe(const uint8_t *chain, size_t len, char *buf, size_t cap,
                               ptwm_err *err) {
    ptwm_chain_info c;
    text_out t;
    size_t pos = 2;
    unsigned s;
    ptwm_error e;
    if (!buf || cap == 0) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chain_describe: no buffer");
    buf[0] = 0;
    e = ptwm_chain_info_parse(chain, len, -1, &c, err);
    if (e) return e;
    t.buf = buf;
    t.cap = cap;
    t.pos = 0;
    t.overflow = 0;
    for (s = 0; s < chain[1]; s++) {
        const uint8_t *p = chain + pos + 2;
        unsigned id = chain[pos], plen = chain[pos + 1];
        if (s) tput(&t, " > ");
        switch (id) {
        case PTWM_STAGE_SPLIT: tput(&t, "split(e%um%u)", p[1], p[2]); break;
        case PTWM_STAGE_PLANES: tput(&t, "planes(%u)", p[0]); break;
        case PTWM_STAGE_MICROSCALE: tput(&t, "microscale(%u)", ptwm_load_le16(p)); break;
        default: { /* ENTROPY, the only other id parse accepts */
            unsigned mask = p[1], k, first = 1;
            if (p[0] == PTWM_ENTROPY_ALL_PLANES)
                tput(&t, "entropy(*:");
            else
                tput(&t, "entropy(%u:", p[0]);
            if (mask == 0) tput(&t, "open");
            else if (mask == PTWM_EMASK_VALID) tput(&t, "auto");
            else {
                for (k = 0; k < 4; k++) {
                    if (mask & PTWM_EMASK(entropy_ids[k])) {
                        tput(&t, "%s%s", first ? "" : "|", ptwm_method_name(entropy_ids[k]));
                        first = 0;
                    }
                }
            }
            if (p[2]) tput(&t, "/z%u", p[2]);
            if ((int8_t)p[3] != 0) tput(&t, "/o%d", (int8_t)p[3]);
            tput(&t, ")");
            break;
        }
        }
        pos += 2 + plen;
    }
    if (t.overflow)
        return ptwm_fail(err, PTWM_ERR_DST_SIZE, "chain_describe: buffer of %zu bytes too small",
                         cap);
    return PTWM_OK;
}

/* ---- parse text ---------------------------------------------------------- */

typedef struct text_in {
    const char *s;
    const char *start;
} text_in;

static void skip_ws(text_in *in) {
    while (*in->s == ' ' || *in->s == '\t') in->s++;
}

static int eat(text_in *in, const char *lit) {
    size_t n = strlen(lit);
    skip_ws(in);
    if (strncmp(in->s, lit, n) != 0) return 0;
    in->s += n;
    return 1;
}

static int read_uint(text_in *in, unsigned maxv, unsigned *out) {
    unsigned long v = 0;
    int digits = 0;
    skip_ws(in);
    while (isdigit((unsigned char)*in->s)) {
        v = v * 10 + (unsigned long)(*in->s - '0');
        if (v > maxv) return 0;
        in->s++;
        digits++;
    }
    if (!digits) return 0;
    *out = (unsigned)v;
    return 1;
}

static ptwm_error text_error(ptwm_err *err, const text_in *in, const char *what) {
    return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chain text at offset %d (\"%.24s\"): expected %s",
                     (int)(in->s - in->start), in->s, what);
}

static ptwm_error parse_entropy_text(text_in *in, chain_builder *b, ptwm_err *err) {
    unsigned plane = PTWM_ENTROPY_ALL_PLANES, mask = 0, zl = 0, k;
    int order = 0;
    if (!eat(in, "*") && !read_uint(in, 254, &plane)) return text_error(err, in, "plane or '*'");
    if (!eat(in, ":")) return text_error(err, in, "':'");
    if (eat(in, "open")) {
        mask = 0;
    } else if (eat(in, "auto")) {
        mask = PTWM_EMASK_VALID;
    } else {
        do {
            int found = 0;
            for (k = 0; k < 4; k++) {
                if (eat(in, ptwm_method_name(entropy_ids[k]))) {
                    mask |= PTWM_EMASK(entropy_ids[k]);
                    found = 1;
                    break;
                }
            }
            if (!found) return text_error(err, in, "huffman, rans, zstd, identity, auto or open");
        } while (eat(in, "|"));
    }
    if (eat(in, "/z") && !read_uint(in, 22, &zl)) return text_error(err, in, "zstd level 1..22");
    if (eat(in, "/o")) {
        unsigned o;
        int neg = eat(in, "-");
        if (!read_uint(in, 1, &o)) return text_error(err, in, "rANS order -1, 0 or 1");
        order = neg ? -(int)o : (int)o;
    }
    if (!eat(in, ")")) return text_error(err, in, "')'");
    cb_entropy(b, plane, mask, zl, order);
    return PTWM_OK;
}

ptwm_error ptwm_chain_parse(const char *text, uint8_t *buf, size_t cap, size_t *len, ptwm_err *err) {
    chain_builder b;
    text_in in;
    ptwm_error e;
    if (!text || !buf || !len) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "chain_parse: NULL argument");
    in.s = in.start = text;
    cb_init(&b, buf, cap);
    do {
        unsigned a, m;
        if (eat(&in, "split(")) {
            uint8_t p[3];
            if (!eat(&in, "e") || !read_uint(&in, 16, &a) || !eat(&in, "m") ||
                !read_uint(&in, 63, &m) || !eat(&in, ")"))
                return text_error(err, &in, "split(eNmM)");
            if ((1 + a + m) % 8 != 0) return text_error(err, &in, "1 + e + m a multiple of 8");
            p[0] = (uint8_t)((1 + a + m) / 8);
            p[1] = (uint8_t)a;
            p[2] = (uint8_t)m;
            cb_stage(&b, PTWM_STAGE_SPLIT, p, 3);
        } else if (eat(&in, "planes(")) {
            uint8_t p;
            if (!read_uint(&in, 8, &a) || !eat(&in, ")")) return text_error(err, &in, "planes(N)");
            p = (uint8_t)a;
            cb_stage(&b, PTWM_STAGE_PLANES, &p, 1);
        } else if (eat(&in, "microscale(")) {
            uint8_t p[2];
            if (!read_uint(&in, 65535, &a) || !eat(&in, ")"))
                return text_error(err, &in, "microscale(BLOCK)");
            ptwm_store_le16(p, (uint16_t)a);
            cb_stage(&b, PTWM_STAGE_MICROSCALE, p, 2);
        } else if (eat(&in, "entropy(")) {
            e = parse_entropy_text(&in, &b, err);
            if (e) return e;
        } else {
            return text_error(err, &in, "split(, planes(, microscale( or entropy(");
        }
        if (b.overflow)
            return ptwm_fail(err, PTWM_ERR_DST_SIZE,
                             "chain_parse: more than %d stages or %zu bytes", PTWM_CHAIN_MAX_STAGES,
                             PTWM_MIN(cap, (size_t)PTWM_CHAIN_MAX_BYTES));
    } while (eat(&in, ">"));
    skip_ws(&in);
    if (*in.s) return text_error(err, &in, "'>' or the end");
    e = ptwm_chain_info_parse(buf, b.len, -1, &(ptwm_chain_info){0}, err);
    if (e) return e;
    *len = b.len;
    return PTWM_OK;
}
