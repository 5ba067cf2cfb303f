/* Chunk payload headers: write version 5, read versions 1-5 (see
 * chunk_frame.h). */
#include "chunk_frame.h"
#include "hash.h"
#include "plane_coder.h"

/* Largest header: the stages, then per plane a coder, a coded length and a
 * CRC32. */
#define STAGE_BYTES_MAX (1 + PTWM_CSTAGE_PARAMS * 10)
#define HEADER_MAX (2 + PTWM_CSTAGES_MAX * STAGE_BYTES_MAX + PTWM_CHUNK_PLANES * (1 + 10 + 4))

size_t ptwm_put_varint(uint8_t *p, uint64_t v) {
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

const char *ptwm_coder_label(int coder) {
    return coder == PTWM_CODER_CONST ? "const" : ptwm_method_name(coder);
}

/* ---- writing --------------------------------------------------------------- */

static size_t put_stages(const ptwm_stage_use *use, unsigned nuse, uint8_t *p) {
    size_t h = 0;
    unsigned s, k;
    p[h++] = (uint8_t)nuse;
    for (s = 0; s < nuse; s++) {
        p[h++] = use[s].id;
        for (k = 0; k < ptwm_stage_find(use[s].id)->nparams; k++)
            h += ptwm_put_varint(p + h, use[s].p[k]);
    }
    return h;
}

size_t ptwm_chunk_head_size(const ptwm_stage_use *use, unsigned nuse, unsigned count,
                            const size_t *coded, int crc) {
    uint8_t tmp[STAGE_BYTES_MAX * PTWM_CSTAGES_MAX + 1];
    size_t h = 1 + put_stages(use, nuse, tmp);
    unsigned k;
    for (k = 0; k < count; k++) h += 1 + ptwm_put_varint(tmp, coded[k]) + (crc ? 4 : 0);
    return h;
}

ptwm_error ptwm_chunk_frame(unsigned flags, const ptwm_stage_use *use, unsigned nuse,
                            unsigned count, const int *coder, const size_t *coded,
                            const uint8_t *body, size_t body_len, uint8_t *dst, size_t cap,
                            size_t *out_len, ptwm_err *err) {
    uint8_t hdr[HEADER_MAX];
    size_t h = 0, pos = 0, total;
    unsigned k;
    hdr[h++] = (uint8_t)flags;
    h += put_stages(use, nuse, hdr + h);
    for (k = 0; k < count; k++) {
        hdr[h++] = (uint8_t)coder[k];
        h += ptwm_put_varint(hdr + h, coded[k]);
        if (flags & PTWM_CHUNK_FLAG_CRC) {
            ptwm_store_le32(hdr + h, ptwm_crc32(0, body + pos, coded[k]));
            h += 4;
        }
        pos += coded[k];
    }
    total = h + body_len;
    if (total > cap)
        return ptwm_fail(err, PTWM_ERR_DST_SIZE,
                         "chunk_encode: payload of %zu bytes, buffer of %zu (ptwm_chunk_bound "
                         "gives the worst case)",
                         total, cap);
    /* body may already be in dst (coded in place behind a guessed header):
     * it moves only if the guess was off. */
    if (body_len && body != dst + h) memmove(dst + h, body, body_len);
    memcpy(dst, hdr, h);
    *out_len = total;
    return PTWM_OK;
}

/* ---- reading --------------------------------------------------------------- */

/* One plane's entry: coder, [raw length (before version 5)], coded length,
 * [CRC]. */
static ptwm_error read_entry(const uint8_t *src, size_t src_len, size_t *pos, unsigned k,
                             int legacy, ptwm_chunk_head *h, uint64_t *rawl, ptwm_err *err) {
    uint64_t cl;
    int coder;
    if (*pos >= src_len)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: plane %u entry past the end (%zu bytes)", k, src_len);
    coder = src[(*pos)++];
    if (coder != PTWM_CODER_CONST && !ptwm_method_name(coder))
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "chunk payload: plane %u: unknown stage id %d",
                         k, coder);
    if (coder == PTWM_METHOD_MICROSCALE)
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID,
                         "chunk payload: plane %u: stage id 3 is not an entropy stage", k);
    if ((legacy && !get_varint(src, src_len, pos, rawl)) || !get_varint(src, src_len, pos, &cl))
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: plane %u: lengths malformed or past the end", k);
    if (cl > src_len)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: plane %u: coded length %llu exceeds the payload of %zu "
                         "bytes",
                         k, (unsigned long long)cl, src_len);
    h->coder[k] = coder;
    h->coded[k] = (size_t)cl;
    if (h->flags & PTWM_CHUNK_FLAG_CRC) {
        if (src_len - *pos < 4)
            return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: plane %u CRC past the end",
                             k);
        h->crc[k] = ptwm_load_le32(src + *pos);
        *pos += 4;
    }
    return PTWM_OK;
}

/* Version 5: the stages, then an entry per plane they make. */
static ptwm_error parse_stages(const uint8_t *src, size_t src_len, size_t raw_len, size_t *pos,
                               ptwm_chunk_head *h, ptwm_err *err) {
    unsigned s, k;
    ptwm_error e;
    if (h->flags & ~PTWM_CHUNK_FLAG_CRC)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: unknown flags 0x%02x", h->flags);
    h->nuse = src[(*pos)++];
    if (h->nuse > PTWM_CSTAGES_MAX)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: %u stages (at most %d)", h->nuse,
                         PTWM_CSTAGES_MAX);
    for (s = 0; s < h->nuse; s++) {
        const ptwm_stage *st;
        if (*pos >= src_len)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: stage %u of %u past the end (%zu bytes)", s, h->nuse,
                             src_len);
        h->use[s].id = src[(*pos)++];
        if (!(st = ptwm_stage_find(h->use[s].id)))
            return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "chunk payload: stage %u: unknown id %u",
                             s, (unsigned)h->use[s].id);
        for (k = 0; k < st->nparams; k++)
            if (!get_varint(src, src_len, pos, &h->use[s].p[k]))
                return ptwm_stage_fail(err, s, &h->use[s],
                                       "parameter %u malformed or past the end", k);
    }
    if ((e = ptwm_chunk_layout_make(h->use, h->nuse, raw_len, &h->L, err))) return e;
    for (k = 0; k < h->L.count; k++)
        if ((e = read_entry(src, src_len, pos, k, 0, h, NULL, err))) return e;
    return PTWM_OK;
}

/* Versions 1-4: a plane count and entries with raw lengths, then the flags
 * with the raw lengths give the stages. */
static ptwm_error parse_legacy(unsigned version, const ptwm_chain_info *c, const uint8_t *src,
                               size_t src_len, size_t raw_len, size_t *pos, ptwm_chunk_head *h,
                               ptwm_err *err) {
    uint64_t rawl[PTWM_CHUNK_PLANES];
    unsigned count = src[(*pos)++], k;
    ptwm_error e;
    if (count > PTWM_CHUNK_PLANES)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: %u planes (at most %d)", count,
                         PTWM_CHUNK_PLANES);
    for (k = 0; k < count; k++)
        if ((e = read_entry(src, src_len, pos, k, 1, h, &rawl[k], err))) return e;
    if ((e = ptwm_stages_from_flags(version, h->flags, c, rawl, count, h->use, &h->nuse, err)) ||
        (e = ptwm_chunk_layout_make(h->use, h->nuse, raw_len, &h->L, err)))
        return e;
    if (count != h->L.count)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: %u planes, the chain makes %u for %zu raw bytes", count,
                         h->L.count, raw_len);
    for (k = 0; k < count; k++)
        if (rawl[k] != h->L.len[k])
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %u: raw length %llu, expected %zu for a chunk "
                             "of %zu bytes",
                             k, (unsigned long long)rawl[k], h->L.len[k], raw_len);
    return PTWM_OK;
}

ptwm_error ptwm_chunk_head_parse(unsigned version, const ptwm_chain_info *c, const uint8_t *src,
                                 size_t src_len, size_t raw_len, ptwm_chunk_head *h,
                                 ptwm_err *err) {
    size_t pos = 1, k;
    ptwm_error e;
    if (src_len < 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload of %zu bytes (at least 2)", src_len);
    h->flags = src[0];
    e = version >= 5 ? parse_stages(src, src_len, raw_len, &pos, h, err)
                     : parse_legacy(version, c, src, src_len, raw_len, &pos, h, err);
    if (e) return e;
    h->body_len = 0;
    for (k = 0; k < h->L.count; k++) {
        if ((h->coder[k] == PTWM_CODER_CONST && h->coded[k] != 1) ||
            (h->coder[k] == PTWM_METHOD_IDENTITY && h->coded[k] != h->L.len[k]))
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: plane %zu: %s stage with coded length %zu for %zu "
                             "bytes",
                             k, ptwm_coder_label(h->coder[k]), h->coded[k], h->L.len[k]);
        h->body_len += h->coded[k]; /* no overflow: each <= src_len, at most 12 */
    }
    if (h->body_len != src_len - pos)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: planes hold %zu coded bytes, %zu follow the %zu-byte "
                         "header",
                         h->body_len, src_len - pos, pos);
    h->body = src + pos;
    return PTWM_OK;
}
