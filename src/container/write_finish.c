/* The end of a .ptwm file: the ring drained, the names checked unique, the
 * table built (packed when that is smaller), appended with the footer, and
 * the header's version raised if the file needs a newer one; then the file
 * committed (fsync, rename, directory fsync) or the image handed over. On
 * the writing thread, once no job is pending (no lock is needed). */
#include "writer_impl.h"
#include "container_format.h"
#include "entropy.h"
#include "hash.h"

#include <stdlib.h>

static int cmp_name(const void *a, const void *b) {
    const wtensor *x = *(const wtensor *const *)a, *y = *(const wtensor *const *)b;
    return strcmp(x->name, y->name);
}

static ptwm_error check_duplicates(ptwm_writer *w, ptwm_err *err) {
    const wtensor **v;
    size_t i;
    if (w->nt < 2) return PTWM_OK;
    v = (const wtensor **)ptwm_malloc((uint64_t)w->nt * sizeof(*v));
    if (!v) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < w->nt; i++) v[i] = &w->t[i];
    qsort(v, w->nt, sizeof(*v), cmp_name);
    for (i = 1; i < w->nt; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0) {
            ptwm_error rc = ptwm_fail(err, PTWM_ERR_DUPLICATE, "tensor name '%s' added twice", v[i]->name);
            ptwm_free(v);
            return rc;
        }
    ptwm_free(v);
    return PTWM_OK;
}

/* A tensor with a base tensor none of whose chunks came out smaller against
 * it is written as without a base (no hash, no base fields in its entries). */
static uint8_t tensor_flags(const wtensor *t) {
    uint64_t k;
    if (!(t->flags & PTWM_TF_BASE)) return t->flags;
    for (k = 0; k < t->nchunks; k++)
        if (t->chunks[k].based) return t->flags;
    return (uint8_t)(t->flags & ~PTWM_TF_BASE);
}

static int put_tensor(wbuf *b, const wtensor *t) {
    size_t name_len = strlen(t->name);
    const uint8_t *q;
    uint64_t k;
    unsigned i;
    uint8_t flags = tensor_flags(t);
    int ok = wbuf_u32(b, (uint32_t)name_len) && wbuf_put(b, t->name, name_len) &&
             wbuf_u8(b, (uint8_t)t->dtype) && wbuf_u8(b, (uint8_t)t->ndim) && wbuf_u8(b, flags) &&
             wbuf_u8(b, (uint8_t)t->nchains);
    for (i = 0; ok && i < t->ndim; i++) ok = wbuf_u64(b, t->shape[i]);
    ok = ok && wbuf_u64(b, t->nbytes) && wbuf_u64(b, t->chunk_size);
    for (i = 0, q = t->chain_bytes; ok && i < t->nchains; q += t->chain_len[i++])
        ok = wbuf_u16(b, t->chain_len[i]) && wbuf_put(b, q, t->chain_len[i]);
    if (ok && (t->flags & PTWM_TF_PAYLOAD_HASH)) ok = wbuf_put(b, t->hash, 16);
    if (ok && (flags & PTWM_TF_BASE)) ok = wbuf_put(b, t->base_hash, 16);
    ok = ok && wbuf_u64(b, t->nchunks);
    for (k = 0; ok && k < t->nchunks; k++) {
        const wchunk *c = &t->chunks[k];
        ok = wbuf_u64(b, c->offset) && wbuf_u32(b, c->coded) && wbuf_u32(b, c->raw) &&
             wbuf_u8(b, c->chain) && wbuf_u32(b, c->crc);
        if (ok && (flags & PTWM_TF_BASE)) ok = wbuf_u8(b, c->based) && wbuf_u32(b, c->base_crc);
    }
    return ok;
}

/* A section: u8 id, u64 length, body. The body is written in place after a
 * head whose length is patched once the body is complete (no second copy of
 * a table that may hold a million tensors and a 100 MB source header). */
static int begin_section(wbuf *b, uint8_t id, size_t *start) {
    *start = b->len;
    return wbuf_u8(b, id) && wbuf_u64(b, 0);
}
static void end_section(wbuf *b, size_t start) {
    ptwm_store_le64(b->p + start + 1, (uint64_t)(b->len - start - PTWM_FMT_SECTION_HEAD));
}

static ptwm_error build_table(ptwm_writer *w, wbuf *tab, ptwm_err *err) {
    size_t i, at = 0;
    int ok = w->nt <= UINT32_MAX && begin_section(tab, PTWM_SEC_TENSORS, &at) &&
             wbuf_u32(tab, (uint32_t)w->nt);
    for (i = 0; ok && i < w->nt; i++) ok = put_tensor(tab, &w->t[i]);
    if (ok) end_section(tab, at);
    if (ok && w->nmeta) {
        ok = begin_section(tab, PTWM_SEC_METADATA, &at) && wbuf_u32(tab, (uint32_t)w->nmeta);
        for (i = 0; ok && i < w->nmeta; i++) {
            size_t kl = strlen(w->meta[i].key), vl = strlen(w->meta[i].value);
            ok = kl <= UINT32_MAX && vl <= UINT32_MAX && wbuf_u32(tab, (uint32_t)kl) &&
                 wbuf_put(tab, w->meta[i].key, kl) && wbuf_u32(tab, (uint32_t)vl) &&
                 wbuf_put(tab, w->meta[i].value, vl);
        }
        if (ok) end_section(tab, at);
    }
    if (ok && w->has_source) {
        size_t nl = w->src_name ? strlen(w->src_name) : 0;
        ok = begin_section(tab, PTWM_SEC_SOURCE, &at) && wbuf_u64(tab, w->src_header_len) &&
             (w->src_header ? wbuf_put(tab, w->src_header, w->src_header_len)
                            : wbuf_u64(tab, w->src_header_len - 8) &&
                                  wbuf_put(tab, w->src_json, w->src_header_len - 8)) &&
             wbuf_u32(tab, (uint32_t)nl) && wbuf_put(tab, w->src_name, nl) &&
             wbuf_u64(tab, w->src_file_size);
        if (ok) end_section(tab, at);
    }
    if (!ok) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory building the tensor table");
    return PTWM_OK;
}

/* Replace the table by one packed section (names, the source header that
 * repeats them, chains and sizes shrink ~10x) when that is smaller and the
 * reader's caps allow it. */
static ptwm_error pack_table(ptwm_ws *ws, wbuf *tab, ptwm_err *err) {
    wbuf packed = {NULL, 0, 0};
    size_t bound = ptwm_zstd_bound(tab->len), zlen = 0;
    uint64_t stored;
    ptwm_error rc;
    if (!bound || tab->len > PTWM_FMT_PACK_MAX) return PTWM_OK;
    if (!wbuf_reserve(&packed, PTWM_FMT_SECTION_HEAD + 8 + bound))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory packing the tensor table");
    rc = ptwm_zstd_encode(ws, tab->p, tab->len, PTWM_FMT_PACK_LEVEL, packed.p + PTWM_FMT_SECTION_HEAD + 8, bound,
                          &zlen);
    if (rc == PTWM_ERR_NOMEM) {
        ptwm_free(packed.p);
        return ptwm_fail(err, rc, "out of memory packing the tensor table");
    }
    stored = PTWM_FMT_SECTION_HEAD + 8 + (uint64_t)zlen;
    if (rc || stored >= tab->len || tab->len > PTWM_FMT_PACK_RATIO * stored) {
        ptwm_free(packed.p);     /* not worth it (or not allowed): keep the plain table */
        return PTWM_OK;
    }
    packed.p[0] = PTWM_SEC_PACKED;
    ptwm_store_le64(packed.p + 1, 8 + (uint64_t)zlen);
    ptwm_store_le64(packed.p + PTWM_FMT_SECTION_HEAD, tab->len);
    packed.len = (size_t)stored;
    ptwm_free(tab->p);
    *tab = packed;
    return PTWM_OK;
}

/* Version 8 or 7 only when a chunk has a rANS plane in four or two streams
 * (the newest any chunk needs), else 6 only
 * when a tensor is coded against a base: a file whose base matched nothing
 * is a version-5 file, readable where version 6 is not. */
static uint32_t file_version(const ptwm_writer *w) {
    size_t i;
    if (w->min_version) return w->min_version;
    for (i = 0; w->base.ops && i < w->nt; i++)
        if (tensor_flags(&w->t[i]) & PTWM_TF_BASE) return PTWM_FMT_BASE_VERSION;
    return PTWM_FMT_VERSION;
}

/* The header's version, written before the tensors were known. */
static ptwm_error set_head_version(ptwm_writer *w, uint32_t version, ptwm_err *err) {
    uint8_t v[4];
    if (version == PTWM_FMT_VERSION) return PTWM_OK;
    ptwm_store_le32(v, version);
    if (!w->to_file) {
        memcpy(w->mem.p + 8, v, sizeof(v));
        return PTWM_OK;
    }
    return ptwm_pwrite_full(w->af.fd, v, sizeof(v), 8, w->af.final_path, err);
}

ptwm_error ptwm_writer_finish_common(ptwm_writer *w, ptwm_err *err) {
    wbuf tab = {NULL, 0, 0};
    uint8_t foot[PTWM_FMT_FOOT_SIZE];
    uint64_t table_offset;
    uint32_t version;
    ptwm_error rc;
    if (w->sh) ptwm_writer_settle(w->sh); /* files are committed in the order they were finished */
    if ((rc = w_failed(w, err))) return rc;
    if ((rc = ptwm_writer_drain(w, err))) return rc;
    if ((rc = check_duplicates(w, err))) return rc;
    if ((rc = build_table(w, &tab, err)) || (rc = pack_table(w->ws[0], &tab, err))) {
        ptwm_free(tab.p);
        return rc;
    }
    version = file_version(w);
    table_offset = w->pos;
    memset(foot, 0, sizeof(foot));
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_OFFSET, table_offset);
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_SIZE, tab.len);
    ptwm_store_le32(foot + PTWM_FOOT_TABLE_CRC, ptwm_crc32(0, tab.p, tab.len));
    ptwm_store_le32(foot + PTWM_FOOT_VERSION, version);
    ptwm_store_le64(foot + PTWM_FOOT_FILE_SIZE, table_offset + tab.len + PTWM_FMT_FOOT_SIZE);
    ptwm_store_le32(foot + PTWM_FOOT_CRC, ptwm_crc32(0, foot, PTWM_FOOT_CRC));
    memcpy(foot + PTWM_FOOT_END_MAGIC, PTWM_FMT_END_MAGIC, PTWM_FMT_MAGIC_LEN);
    rc = ptwm_writer_emit(w, tab.p, tab.len, err);
    ptwm_free(tab.p);
    if (!rc) rc = ptwm_writer_emit(w, foot, sizeof(foot), err);
    if (!rc && w->dout) rc = ptwm_dout_finish(w->dout, err);
    if (!rc) rc = set_head_version(w, version, err);
    return rc;
}

ptwm_error ptwm_writer_finish(ptwm_writer *w, ptwm_err *err) {
    ptwm_error rc;
    if (!w) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer");
    rc = ptwm_writer_finish_common(w, err);
    if (!rc && w->to_file) rc = ptwm_atomic_commit(&w->af, err);
    ptwm_writer_free(w);
    return rc;
}

ptwm_error ptwm_writer_finish_memory(ptwm_writer *w, void **out, size_t *len, ptwm_err *err) {
    ptwm_error rc;
    if (!w || !out || !len) {
        ptwm_writer_free(w);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or output");
    }
    *out = NULL;
    *len = 0;
    if (w->to_file) {
        ptwm_writer_free(w);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "a file writer has no memory image");
    }
    rc = ptwm_writer_finish_common(w, err);
    if (!rc) {
        *out = w->mem.p;
        *len = w->mem.len;
        w->mem.p = NULL;
    }
    ptwm_writer_free(w);
    return rc;
}
