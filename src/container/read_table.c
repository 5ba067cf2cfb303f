/* The .ptwm table (docs/FORMAT.md, "The table"), parsed and validated when a
 * reader opens: sections (tensors, metadata, source header, or one packed
 * section holding them), each read through a cursor that knows the bytes
 * left. Every count, offset and size is checked against the table and the
 * file before it is used, allocations are bounded by the table's length,
 * names are unique, and payloads named by several chunk entries are
 * attributed once. Runs on the opening thread alone, before any worker. */
#include "reader_impl.h"
#include "chunk.h"
#include "container_format.h"
#include "entropy.h"

#include <stdlib.h>

typedef struct cursor {
    const uint8_t *p;
    uint64_t left;
} cursor;

static int cur_take(cursor *c, uint64_t n, const uint8_t **out) {
    if (c->left < n) return 0;
    *out = c->p;
    c->p += n;
    c->left -= n;
    return 1;
}
static int cur_u8(cursor *c, uint8_t *v) {
    const uint8_t *q;
    if (!cur_take(c, 1, &q)) return 0;
    *v = q[0];
    return 1;
}
static int cur_u16(cursor *c, uint16_t *v) {
    const uint8_t *q;
    if (!cur_take(c, 2, &q)) return 0;
    *v = ptwm_load_le16(q);
    return 1;
}
static int cur_u32(cursor *c, uint32_t *v) {
    const uint8_t *q;
    if (!cur_take(c, 4, &q)) return 0;
    *v = ptwm_load_le32(q);
    return 1;
}
static int cur_u64(cursor *c, uint64_t *v) {
    const uint8_t *q;
    if (!cur_take(c, 8, &q)) return 0;
    *v = ptwm_load_le64(q);
    return 1;
}

/* A NUL-free string of `len` bytes copied out as a C string. */
static ptwm_error cur_string(cursor *c, uint64_t len, uint64_t max, const char *what, char **out,
                             ptwm_err *err) {
    const uint8_t *q;
    *out = NULL;
    if (len > max) return ptwm_fail(err, PTWM_ERR_LIMIT, "%s of %llu bytes (max %llu)", what,
                                    (unsigned long long)len, (unsigned long long)max);
    if (!cur_take(c, len, &q))
        return ptwm_fail(err, PTWM_ERR_TRUNCATED, "%s of %llu bytes runs past the table end", what,
                         (unsigned long long)len);
    if (len && memchr(q, 0, (size_t)len))
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "%s contains a NUL byte", what);
    *out = (char *)ptwm_malloc((size_t)len + 1);
    if (!*out) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (len) memcpy(*out, q, (size_t)len);
    (*out)[len] = 0;
    return PTWM_OK;
}

#define TRUNC(what) ptwm_fail(err, PTWM_ERR_TRUNCATED, "table ends inside %s", what)

/* Room for `more` elements of `size` bytes at the end of `a`; their offset. */
static int arena_take(rarena *a, size_t more, size_t size, size_t *at) {
    /* more is bounded by the table size */
    if (!ptwm_grow(&a->p, &a->cap, a->len + more, size)) return 0;
    *at = a->len;
    a->len += more;
    return 1;
}

static ptwm_error parse_chunks(ptwm_reader *r, rtensor *t, cursor *c, ptwm_err *err) {
    uint64_t k, expect, start = 0;
    int has_crc = r->version >= PTWM_FMT_ENTRY_CRC_VERSION, based = (t->flags & PTWM_TF_BASE) != 0;
    unsigned entry = based ? PTWM_FMT_CHUNK_ENTRY_BASE
                           : has_crc ? PTWM_FMT_CHUNK_ENTRY_V4 : PTWM_FMT_CHUNK_ENTRY;
    if (!cur_u64(c, &t->nchunks)) return TRUNC("the chunk count");
    expect = t->nbytes / t->chunk_size + (t->nbytes % t->chunk_size != 0);
    if (t->nchunks != expect)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "%llu chunks, %llu bytes in chunks of %llu need %llu",
                         (unsigned long long)t->nchunks, (unsigned long long)t->nbytes,
                         (unsigned long long)t->chunk_size, (unsigned long long)expect);
    /* The entries must fit the table: this bounds the allocation by the file. */
    if (t->nchunks > c->left / entry)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED, "%llu chunk entries do not fit in the %llu table bytes left",
                         (unsigned long long)t->nchunks, (unsigned long long)c->left);
    if (!arena_take(&r->chunk_pool, (size_t)t->nchunks, sizeof(rchunk), &t->chunks_at))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for chunk entries");
    for (k = 0; k < t->nchunks; k++) {
        rchunk *ch = (rchunk *)r->chunk_pool.p + t->chunks_at + k;
        uint64_t end, want = PTWM_MIN(t->chunk_size, t->nbytes - start);
        cur_u64(c, &ch->offset);
        cur_u32(c, &ch->coded);
        cur_u32(c, &ch->raw);
        cur_u8(c, &ch->chain);
        if (has_crc) cur_u32(c, &ch->crc);
        ch->based = 0;
        ch->base_crc = 0;
        if (based) {
            cur_u8(c, &ch->based);
            cur_u32(c, &ch->base_crc);
            if (ch->based > 1 || (!ch->based && ch->base_crc))
                return ptwm_fail(err, PTWM_ERR_CORRUPT,
                                 "chunk %llu of %llu: base flag %u with base CRC32 %08x (0 or 1; "
                                 "the CRC 0 without the base)",
                                 (unsigned long long)k, (unsigned long long)t->nchunks, ch->based,
                                 (unsigned)ch->base_crc);
        }
        ch->start = start;
        if (ptwm_add_overflow(ch->offset, ch->coded, &end) || ch->offset < PTWM_FMT_HEAD_SIZE ||
            end > r->table_offset)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk %llu of %llu: bytes %llu..%llu lie outside the data region %u..%llu",
                             (unsigned long long)k, (unsigned long long)t->nchunks,
                             (unsigned long long)ch->offset, (unsigned long long)ch->offset + ch->coded,
                             PTWM_FMT_HEAD_SIZE, (unsigned long long)r->table_offset);
        if (ch->raw != want)
            return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk %llu of %llu: %u raw bytes, expected %llu",
                             (unsigned long long)k, (unsigned long long)t->nchunks, ch->raw,
                             (unsigned long long)want);
        if (ch->chain >= t->nchains)
            return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk %llu of %llu: chain %u of %u",
                             (unsigned long long)k, (unsigned long long)t->nchunks, ch->chain,
                             t->nchains);
        t->coded += ch->coded;
        start += ch->raw;
    }
    return PTWM_OK;
}

static ptwm_error parse_tensor(ptwm_reader *r, rtensor *t, cursor *c, ptwm_err *err) {
    uint32_t name_len;
    uint8_t dtype, ndim, nchains;
    uint64_t nbytes, granule, shape[PTWM_MAX_NDIM];
    unsigned i;
    size_t at;
    char *name;
    ptwm_error rc;
    if (!cur_u32(c, &name_len)) return TRUNC("a tensor name length");
    if ((rc = cur_string(c, name_len, PTWM_MAX_NAME, "tensor name", &name, err))) return rc;
    /* The name goes to the arena; t->name points at the copy until the
     * table is parsed (messages name the tensor). */
    if (!arena_take(&r->names, (size_t)name_len + 1, 1, &t->name_at)) {
        ptwm_free(name);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for tensor names");
    }
    memcpy((char *)r->names.p + t->name_at, name, (size_t)name_len + 1);
    ptwm_free(name);
    t->name = (char *)r->names.p + t->name_at;
    if (!cur_u8(c, &dtype) || !cur_u8(c, &ndim) || !cur_u8(c, &t->flags) || !cur_u8(c, &nchains))
        return TRUNC("a tensor entry");
    if (dtype >= PTWM_DTYPE_COUNT) return ptwm_fail(err, PTWM_ERR_DTYPE, "unknown dtype %u", dtype);
    t->dtype = (ptwm_dtype)dtype;
    if (ndim > PTWM_MAX_NDIM) return ptwm_fail(err, PTWM_ERR_SHAPE, "%u dims (max %d)", ndim, PTWM_MAX_NDIM);
    t->ndim = ndim;
    if (t->flags & ~(PTWM_TF_KNOWN | (r->version >= PTWM_FMT_BASE_VERSION ? PTWM_TF_BASE : 0)))
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown tensor flags 0x%02x", t->flags);
    if (nchains < 1 || nchains > PTWM_FMT_MAX_CHAINS)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "%u candidate chains (1..%u)", nchains, PTWM_FMT_MAX_CHAINS);
    t->nchains = nchains;
    for (i = 0; i < ndim; i++)
        if (!cur_u64(c, &shape[i])) return TRUNC("a shape");
    if (!arena_take(&r->dims, ndim, sizeof(uint64_t), &t->dims_at))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for shapes");
    if (ndim) memcpy((uint64_t *)r->dims.p + t->dims_at, shape, ndim * sizeof(uint64_t));
    if (!cur_u64(c, &t->nbytes) || !cur_u64(c, &t->chunk_size)) return TRUNC("a tensor entry");
    if ((rc = ptwm_tensor_nbytes(t->dtype, shape, t->ndim, &nbytes, err))) return rc;
    if (nbytes != t->nbytes)
        return ptwm_fail(err, PTWM_ERR_SHAPE, "%llu bytes recorded, shape and %s need %llu",
                         (unsigned long long)t->nbytes, ptwm_dtype_name(t->dtype),
                         (unsigned long long)nbytes);
    granule = ptwm_fmt_granule(t->dtype);
    if (t->chunk_size < granule || t->chunk_size > PTWM_FMT_MAX_CHUNK || t->chunk_size % granule)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk size %llu is not a multiple of %llu up to %llu",
                         (unsigned long long)t->chunk_size, (unsigned long long)granule,
                         (unsigned long long)PTWM_FMT_MAX_CHUNK);
    if (!arena_take(&r->chain_ptrs, nchains, sizeof(const uint8_t *), &t->chains_at) ||
        !arena_take(&r->chain_lens, nchains, sizeof(size_t), &at))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for chains");
    for (i = 0; i < nchains; i++) {
        uint16_t len;
        const uint8_t *q;
        if (!cur_u16(c, &len) || !cur_take(c, len, &q)) return TRUNC("a chain");
        if (len > PTWM_CHAIN_MAX_BYTES)
            return ptwm_fail(err, PTWM_ERR_CORRUPT, "chain %u of %u bytes (max %d)", i, len,
                             PTWM_CHAIN_MAX_BYTES);
        if ((rc = ptwm_chain_validate(q, len, t->dtype, err))) {
            ptwm_err_prefix(err, "chain %u", i);
            return rc;
        }
        ((const uint8_t **)r->chain_ptrs.p)[t->chains_at + i] = q;
        ((size_t *)r->chain_lens.p)[t->chains_at + i] = len;
    }
    if (t->flags & PTWM_TF_PAYLOAD_HASH) {
        const uint8_t *q;
        if (!cur_take(c, 16, &q)) return TRUNC("a payload hash");
        memcpy(t->hash, q, 16);
    }
    if (t->flags & PTWM_TF_BASE) {
        const uint8_t *q;
        if (!cur_take(c, 16, &q)) return TRUNC("a base hash");
        memcpy(t->base_hash, q, 16);
    }
    return parse_chunks(r, t, c, err);
}

const char *ptwm_reader_tensor_name(const void *owner, size_t i) {
    return ((const ptwm_reader *)owner)->t[i].name;
}

typedef struct payload_ref {
    uint64_t offset, order, chunk;
    size_t tensor;
    uint32_t coded;
} payload_ref;

static int cmp_payload_ref(const void *a, const void *b) {
    const payload_ref *x = (const payload_ref *)a, *y = (const payload_ref *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A payload named by several chunk entries (the writer stores equal payloads
 * once) counts in the stored bytes of the first tensor, in table order, that
 * names it: the tensors' coded bytes then add up to the file's payloads.
 * Entries name the same bytes or disjoint ones: a writer never lays out
 * payloads that partly overlap, so those are corrupt (and would count bytes
 * twice). */
static ptwm_error attribute_shared(ptwm_reader *r, ptwm_err *err) {
    uint64_t total = 0, k, m = 0;
    size_t i;
    payload_ref *refs;
    for (i = 0; i < r->nt; i++) total += r->t[i].nchunks; /* bounded by the table size */
    if (total < 2) return PTWM_OK;
    refs = (payload_ref *)ptwm_calloc(total, sizeof(payload_ref));
    if (!refs) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %llu chunk entries",
                                (unsigned long long)total);
    for (i = 0; i < r->nt; i++)
        for (k = 0; k < r->t[i].nchunks; k++, m++) {
            refs[m].offset = r->t[i].chunks[k].offset;
            refs[m].coded = r->t[i].chunks[k].coded;
            refs[m].order = m;
            refs[m].chunk = k;
            refs[m].tensor = i;
        }
    qsort(refs, (size_t)total, sizeof(payload_ref), cmp_payload_ref);
    for (k = 1; k < total; k++) {
        const payload_ref *a = &refs[k - 1], *b = &refs[k];
        if (b->offset == a->offset && b->coded == a->coded) {
            r->t[b->tensor].coded -= b->coded;
        } else if (b->offset - a->offset < a->coded) { /* sorted: b->offset >= a->offset */
            ptwm_error rc = ptwm_fail(
                err, PTWM_ERR_CORRUPT,
                "tensor '%s' chunk %llu (bytes %llu..%llu) overlaps tensor '%s' chunk %llu "
                "(bytes %llu..%llu)",
                r->t[b->tensor].name, (unsigned long long)b->chunk, (unsigned long long)b->offset,
                (unsigned long long)(b->offset + b->coded), r->t[a->tensor].name,
                (unsigned long long)a->chunk, (unsigned long long)a->offset,
                (unsigned long long)(a->offset + a->coded));
            ptwm_free(refs);
            return rc;
        }
    }
    ptwm_free(refs);
    return PTWM_OK;
}

static ptwm_error parse_tensors(ptwm_reader *r, cursor *c, ptwm_err *err) {
    uint32_t n;
    size_t i;
    ptwm_error rc;
    if (r->t) return ptwm_fail(err, PTWM_ERR_DUPLICATE, "two tensor sections");
    if (!cur_u32(c, &n)) return TRUNC("the tensor count");
    if (n > c->left / PTWM_FMT_TENSOR_MIN)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED, "%u tensors do not fit in %llu table bytes", n,
                         (unsigned long long)c->left);
    r->t = (rtensor *)ptwm_calloc(n ? n : 1, sizeof(rtensor));
    if (!r->t || !ptwm_nametab_reserve(&r->by_name, n))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %u tensors", n);
    for (i = 0; i < n; i++) {
        r->nt = i + 1;
        if ((rc = parse_tensor(r, &r->t[i], c, err))) {
            if (r->t[i].name) ptwm_err_prefix(err, "tensor %zu '%s'", i, r->t[i].name);
            else ptwm_err_prefix(err, "tensor %zu", i);
            return rc;
        }
    }
    /* The arenas are complete: offsets become pointers. */
    for (i = 0; i < n; i++) {
        rtensor *t = &r->t[i];
        t->name = (const char *)r->names.p + t->name_at;
        t->shape = (const uint64_t *)r->dims.p + t->dims_at;
        t->chain_ptr = (const uint8_t *const *)r->chain_ptrs.p + t->chains_at;
        t->chain_len = (const size_t *)r->chain_lens.p + t->chains_at;
        t->chunks = (rchunk *)r->chunk_pool.p + t->chunks_at;
    }
    if (c->left) return ptwm_fail(err, PTWM_ERR_CORRUPT, "%llu stray bytes after the tensor entries",
                                  (unsigned long long)c->left);
    for (i = 0; i < n; i++) {
        const char *name = r->t[i].name;
        uint32_t h = ptwm_name_hash(name, strlen(name));
        uint64_t *s = ptwm_nametab_find(&r->by_name, r, ptwm_reader_tensor_name, name, h);
        if (*s)
            return ptwm_fail(err, PTWM_ERR_DUPLICATE, "tensor name '%s' appears twice", name);
        ptwm_nametab_put(s, h, i);
    }
    return attribute_shared(r, err);
}

static ptwm_error parse_metadata(ptwm_reader *r, cursor *c, ptwm_err *err) {
    uint32_t n;
    size_t i, j;
    ptwm_error rc;
    if (r->meta) return ptwm_fail(err, PTWM_ERR_DUPLICATE, "two metadata sections");
    if (!cur_u32(c, &n)) return TRUNC("the metadata count");
    if (n > c->left / 8)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED, "%u metadata entries do not fit in %llu bytes", n,
                         (unsigned long long)c->left);
    r->meta = (ptwm_kv *)ptwm_calloc(n ? n : 1, sizeof(ptwm_kv));
    if (!r->meta) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        uint32_t len;
        char *s;
        r->nmeta = i + 1;
        if (!cur_u32(c, &len)) return TRUNC("a metadata key");
        if ((rc = cur_string(c, len, c->left, "metadata key", &s, err))) return rc;
        r->meta[i].key = s;
        if (!cur_u32(c, &len)) return TRUNC("a metadata value");
        if ((rc = cur_string(c, len, c->left, "metadata value", &s, err))) return rc;
        r->meta[i].value = s;
        for (j = 0; j < i; j++)
            if (strcmp(r->meta[j].key, r->meta[i].key) == 0)
                return ptwm_fail(err, PTWM_ERR_DUPLICATE, "metadata key '%s' appears twice", r->meta[i].key);
    }
    if (c->left) return ptwm_fail(err, PTWM_ERR_CORRUPT, "stray bytes after the metadata");
    return PTWM_OK;
}

static ptwm_error parse_source(ptwm_reader *r, cursor *c, ptwm_err *err) {
    uint64_t len;
    uint32_t nl;
    const uint8_t *q;
    ptwm_error rc;
    if (r->src_header) return ptwm_fail(err, PTWM_ERR_DUPLICATE, "two source sections");
    if (!cur_u64(c, &len) || !cur_take(c, len, &q)) return TRUNC("the source header");
    if (len < 8 || ptwm_load_le64(q) != len - 8 || len > PTWM_ST_MAX_HEADER + 8)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "source header of %llu bytes does not start with its length",
                         (unsigned long long)len);
    r->src_header = q;   /* r->table is the final table here: it outlives the reader's use */
    r->src_header_len = (size_t)len;
    if (!cur_u32(c, &nl)) return TRUNC("the source name");
    if ((rc = cur_string(c, nl, 4096, "source file name", &r->src_name, err))) return rc;
    if (!cur_u64(c, &r->src_file_size)) return TRUNC("the source size");
    if (c->left) return ptwm_fail(err, PTWM_ERR_CORRUPT, "stray bytes after the source section");
    return PTWM_OK;
}

/* A packed table (section 4, the only one): u64 raw_size, then one zstd frame
 * of exactly raw_size bytes holding the plain sections. raw_size is capped by
 * the stored table size before anything is allocated. */

static ptwm_error unpack_table(ptwm_reader *r, cursor *body, uint8_t **out, uint64_t *out_len, ptwm_err *err) {
    uint64_t raw, limit;
    uint8_t *buf;
    ptwm_error rc;
    if (!cur_u64(body, &raw)) return TRUNC("the packed table size");
    if (ptwm_mul_overflow(r->table_size, PTWM_FMT_PACK_RATIO, &limit)) limit = UINT64_MAX;
    if (limit > PTWM_FMT_PACK_MAX) limit = PTWM_FMT_PACK_MAX;
    if (raw > limit)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "packed table declares %llu raw bytes, more than the limit %llu (%u x %llu stored "
                         "bytes, at most 1 GiB)",
                         (unsigned long long)raw, (unsigned long long)limit, PTWM_FMT_PACK_RATIO,
                         (unsigned long long)r->table_size);
    if (raw < PTWM_FMT_SECTION_HEAD)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "packed table declares %llu raw bytes, less than one section",
                         (unsigned long long)raw);
    buf = (uint8_t *)ptwm_malloc(raw);
    if (!buf) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a %llu-byte packed table",
                               (unsigned long long)raw);
    /* Worker 0's workspace: its zstd context then serves the chunks too. */
    rc = ptwm_reader_workspaces(r, 1, err);
    if (rc) {
        ptwm_free(buf);
        return rc;
    }
    rc = ptwm_zstd_decode(r->ws[0], body->p, (size_t)body->left, buf, (size_t)raw);
    if (rc) {
        ptwm_free(buf);
        if (rc == PTWM_ERR_NOMEM) return ptwm_fail(err, rc, "out of memory unpacking the table");
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "packed table: %llu zstd bytes are not one frame of exactly the declared %llu bytes",
                         (unsigned long long)body->left, (unsigned long long)raw);
    }
    *out = buf;
    *out_len = raw;
    return PTWM_OK;
}

/* The sections of `p`; a packed section is allowed only as the whole
 * stored table (it replaces r->table by the unpacked bytes, which the chain
 * pointers then point into). */
ptwm_error ptwm_reader_parse_table(ptwm_reader *r, const uint8_t *p, uint64_t size, int stored,
                                   ptwm_err *err) {
    cursor c = {p, size};
    ptwm_error rc;
    while (c.left) {
        uint8_t id;
        uint64_t len;
        cursor body;
        if (!cur_u8(&c, &id) || !cur_u64(&c, &len)) return TRUNC("a section header");
        if (len > c.left)
            return ptwm_fail(err, PTWM_ERR_TRUNCATED, "section %u of %llu bytes, %llu left in the table",
                             id, (unsigned long long)len, (unsigned long long)c.left);
        body.p = c.p;
        body.left = len;
        c.p += len;
        c.left -= len;
        switch (id) {
        case PTWM_SEC_TENSORS: rc = parse_tensors(r, &body, err); break;
        case PTWM_SEC_METADATA: rc = parse_metadata(r, &body, err); break;
        case PTWM_SEC_SOURCE: rc = parse_source(r, &body, err); break;
        case PTWM_SEC_PACKED: {
            uint8_t *raw = NULL;
            uint64_t raw_len = 0;
            if (!stored || body.p != p + PTWM_FMT_SECTION_HEAD || c.left)
                return ptwm_fail(err, PTWM_ERR_CORRUPT, "a packed table section that is not the whole table");
            if ((rc = unpack_table(r, &body, &raw, &raw_len, err))) return rc;
            ptwm_free(r->table);
            r->table = raw;
            return ptwm_reader_parse_table(r, raw, raw_len, 0, err);
        }
        default: return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown table section id %u", id);
        }
        if (rc) return rc;
    }
    if (!r->t) return ptwm_fail(err, PTWM_ERR_CORRUPT, "no tensor section");
    return PTWM_OK;
}
