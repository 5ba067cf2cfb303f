/* The .ptwm reader (docs/FORMAT.md).
 *
 * Opening reads the footer and the table only (every count, offset and
 * size checked against the file size, allocations capped by what the table's
 * own length can hold); payloads are read when a chunk is decoded, by pread
 * for a file (so decoding a big file keeps only a window of chunks resident)
 * or straight from the caller's buffer for an in-memory image. */
#include "container_format.h"
#include "entropy.h"
#include "container_read.h"
#include "context.h"
#include "chunk.h"
#include "fileio.h"
#include "iothread.h"
#include "nametab.h"
#include "hash.h"
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct rchunk {
    uint64_t offset, start;      /* start: raw offset of the chunk in its tensor */
    uint32_t coded, raw;
    uint8_t chain;
    uint32_t crc;                /* CRC32 of the payload (version 4 on) */
    uint8_t based;               /* coded against the base chunk (version 6 on) */
    uint32_t base_crc;           /* then the CRC32 of the base chunk's raw bytes */
} rchunk;

/* Names, shapes, chain lists and chunk entries of all tensors live in one
 * arena each (ptwm_reader's names, dims, chain_ptrs/chain_lens, chunk_pool),
 * not in allocations or fixed arrays per tensor: a table of a million small
 * tensors then costs about 200 bytes a tensor. While the table is parsed the
 * arenas grow, so entries hold offsets (*_at) that become pointers after. */
typedef struct rtensor {
    const char *name;                      /* in r->names */
    const uint64_t *shape;                 /* ndim dims in r->dims */
    const uint8_t *const *chain_ptr;       /* nchains chains, each into r->table */
    const size_t *chain_len;
    rchunk *chunks;                        /* nchunks entries in r->chunk_pool */
    uint64_t nbytes, chunk_size, nchunks, coded;
    size_t name_at, dims_at, chains_at, chunks_at;
    ptwm_dtype dtype;
    uint32_t ndim;
    unsigned nchains;
    uint8_t flags;
    uint8_t hash[16];
    uint8_t base_hash[16];                 /* PTWM_TF_BASE: the base tensor's payload hash */
} rtensor;

/* A growable array: `len` of `cap` elements in use. */
typedef struct rarena {
    void *p;
    size_t len, cap;
} rarena;

struct ptwm_reader {
    char *label;
    const uint8_t *mem;          /* in-memory image, else NULL */
    int fd;
    uint64_t size;
    uint8_t *table;              /* owned copy of the table */
    uint64_t table_offset, table_size;
    unsigned version;
    rtensor *t;
    size_t nt;
    ptwm_nametab by_name;        /* the tensors' names */
    rarena names, dims, chain_ptrs, chain_lens, chunk_pool;
    ptwm_kv *meta;
    size_t nmeta;
    const uint8_t *src_header;   /* into r->table */
    size_t src_header_len;
    char *src_name;
    uint64_t src_file_size;
    int threads;
    ptwm_pool *pool;
    /* Work memory: the caller's context (ptwm_reader_set_ctx) or the
     * reader's own (made on first use, kept between calls as ZSTD_DCtx is:
     * a reader decodes many tensors); ws: its workspaces, one per worker. */
    ptwm_ctx *ctx;
    ptwm_ctx *own_ctx;
    ptwm_ws **ws;
    /* decode_range reads that run through a tensor in order from byte 0
     * feed its payload hash: the tensor, where the next such read starts
     * (seq_on: a run is under way), and the running hash. */
    size_t seq_tensor;
    uint64_t seq_next;
    int seq_on;
    ptwm_xxh128 seq_hash;
    /* The base of tensors coded against one (ptwm_reader_set_base; not
     * owned): per tensor its index in the base, or why it has none. A .ptwm
     * base decodes one range at a time (base_mu). */
    ptwm_source *base;
    size_t *base_idx;
    ptwm_error *base_rc;
    int base_locked, base_mu_ready;
    pthread_mutex_t base_mu;
};

/* ---- cursor over the table ----------------------------------------------- */

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

/* ---- parsing ------------------------------------------------------------- */

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

static const char *tensor_name(const void *owner, size_t i) {
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
        uint64_t *s = ptwm_nametab_find(&r->by_name, r, tensor_name, name, h);
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
static ptwm_error get_workspaces(ptwm_reader *r, unsigned n, ptwm_err *err);

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
    rc = get_workspaces(r, 1, err);
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
static ptwm_error parse_table(ptwm_reader *r, const uint8_t *p, uint64_t size, int stored, ptwm_err *err) {
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
            return parse_table(r, raw, raw_len, 0, err);
        }
        default: return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown table section id %u", id);
        }
        if (rc) return rc;
    }
    if (!r->t) return ptwm_fail(err, PTWM_ERR_CORRUPT, "no tensor section");
    return PTWM_OK;
}

/* ---- opening ------------------------------------------------------------- */

static ptwm_error read_at(const ptwm_reader *r, uint64_t off, void *dst, size_t len, ptwm_err *err) {
    if (r->mem) {
        memcpy(dst, r->mem + off, len);
        return PTWM_OK;
    }
    return ptwm_pread_full(r->fd, dst, len, off, r->label, err);
}

static ptwm_error open_common(ptwm_reader *r, ptwm_err *err) {
    uint8_t head[PTWM_FMT_HEAD_SIZE], foot[PTWM_FMT_FOOT_SIZE];
    uint64_t end;
    uint32_t version, fver;
    ptwm_error rc;
    if (r->size < PTWM_FMT_MAGIC_LEN) return ptwm_fail(err, PTWM_ERR_BAD_MAGIC, "%llu bytes: not a .ptwm file",
                                                       (unsigned long long)r->size);
    if ((rc = read_at(r, 0, head, PTWM_FMT_MAGIC_LEN, err))) return rc;
    if (memcmp(head, PTWM_FMT_MAGIC, PTWM_FMT_MAGIC_LEN) != 0)
        return ptwm_fail(err, PTWM_ERR_BAD_MAGIC, "no .ptwm magic at the start");
    if (r->size < PTWM_FMT_HEAD_SIZE + PTWM_FMT_FOOT_SIZE)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED, "%llu bytes, a .ptwm has at least %u",
                         (unsigned long long)r->size, PTWM_FMT_HEAD_SIZE + PTWM_FMT_FOOT_SIZE);
    if ((rc = read_at(r, 0, head, sizeof(head), err))) return rc;
    version = ptwm_load_le32(head + 8);
    if (version < PTWM_FMT_MIN_VERSION || version > PTWM_FMT_MAX_VERSION)
        return ptwm_fail(err, PTWM_ERR_VERSION, "format version %u (this library reads %u..%u)", version,
                         PTWM_FMT_MIN_VERSION, PTWM_FMT_MAX_VERSION);
    if (ptwm_load_le32(head + 12) != 0)
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown file flags 0x%08x", ptwm_load_le32(head + 12));
    r->version = version;
    if ((rc = read_at(r, r->size - PTWM_FMT_FOOT_SIZE, foot, sizeof(foot), err))) return rc;
    if (memcmp(foot + PTWM_FOOT_END_MAGIC, PTWM_FMT_END_MAGIC, PTWM_FMT_MAGIC_LEN) != 0)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED,
                         "no footer at the end of %llu bytes (truncated or unfinished file)",
                         (unsigned long long)r->size);
    if (ptwm_crc32(0, foot, PTWM_FOOT_CRC) != ptwm_load_le32(foot + PTWM_FOOT_CRC))
        return ptwm_fail(err, PTWM_ERR_CRC, "footer CRC 0x%08x, expected 0x%08x",
                         ptwm_crc32(0, foot, PTWM_FOOT_CRC), ptwm_load_le32(foot + PTWM_FOOT_CRC));
    fver = ptwm_load_le32(foot + PTWM_FOOT_VERSION);
    if (fver != version)
        return ptwm_fail(err, PTWM_ERR_VERSION, "footer says version %u, header %u", fver, version);
    if (ptwm_load_le64(foot + PTWM_FOOT_FILE_SIZE) != r->size)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED, "file has %llu bytes, its footer says %llu",
                         (unsigned long long)r->size,
                         (unsigned long long)ptwm_load_le64(foot + PTWM_FOOT_FILE_SIZE));
    if (ptwm_load_le32(foot + PTWM_FOOT_RESERVED) != 0)
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown footer flags 0x%08x",
                         ptwm_load_le32(foot + PTWM_FOOT_RESERVED));
    r->table_offset = ptwm_load_le64(foot + PTWM_FOOT_TABLE_OFFSET);
    r->table_size = ptwm_load_le64(foot + PTWM_FOOT_TABLE_SIZE);
    if (ptwm_add_overflow(r->table_offset, r->table_size, &end) || r->table_offset < PTWM_FMT_HEAD_SIZE ||
        end != r->size - PTWM_FMT_FOOT_SIZE)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "table at %llu of %llu bytes does not end at the footer (%llu)",
                         (unsigned long long)r->table_offset, (unsigned long long)r->table_size,
                         (unsigned long long)(r->size - PTWM_FMT_FOOT_SIZE));
    r->table = (uint8_t *)ptwm_malloc(r->table_size);
    if (!r->table) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a %llu-byte table",
                                    (unsigned long long)r->table_size);
    if ((rc = read_at(r, r->table_offset, r->table, (size_t)r->table_size, err))) return rc;
    if (ptwm_crc32(0, r->table, (size_t)r->table_size) != ptwm_load_le32(foot + PTWM_FOOT_TABLE_CRC))
        return ptwm_fail(err, PTWM_ERR_CRC, "tensor table CRC 0x%08x, expected 0x%08x",
                         ptwm_crc32(0, r->table, (size_t)r->table_size),
                         ptwm_load_le32(foot + PTWM_FOOT_TABLE_CRC));
    return parse_table(r, r->table, r->table_size, 1, err);
}

static ptwm_reader *reader_new(const char *label) {
    ptwm_reader *r = (ptwm_reader *)ptwm_calloc(1, sizeof(*r));
    if (!r) return NULL;
    r->fd = -1;
    r->label = (char *)ptwm_malloc(strlen(label) + 1);
    if (!r->label) {
        ptwm_free(r);
        return NULL;
    }
    strcpy(r->label, label);
    return r;
}

static ptwm_error finish_open(ptwm_reader *r, ptwm_reader **out, ptwm_error rc, ptwm_err *err) {
    if (rc) {
        ptwm_err_prefix(err, "file '%s'", r->label);
        ptwm_reader_close(r);
        return rc;
    }
    *out = r;
    return PTWM_OK;
}

ptwm_error ptwm_reader_open(const char *path, ptwm_reader **out, ptwm_err *err) {
    ptwm_reader *r;
    if (!out || !path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL path or output handle");
    *out = NULL;
    if (!(r = reader_new(path))) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    {
        ptwm_error rc = ptwm_open_read(path, &r->fd, &r->size, err);
        if (rc) {
            ptwm_reader_close(r);
            return rc;
        }
        return finish_open(r, out, open_common(r, err), err);
    }
}

ptwm_error ptwm_reader_open_memory(const void *buf, size_t size, const char *label,
                                   ptwm_reader **out, ptwm_err *err) {
    ptwm_reader *r;
    if (!out || (!buf && size)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL buffer or output handle");
    *out = NULL;
    if (!(r = reader_new(label ? label : "<memory>"))) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    r->mem = buf ? (const uint8_t *)buf : (const uint8_t *)"";
    r->size = size;
    return finish_open(r, out, open_common(r, err), err);
}

/* Workspaces for workers 0..n-1 (more are made as a call needs them), in
 * the reader's context (its own when the caller set none). */
static ptwm_error get_workspaces(ptwm_reader *r, unsigned n, ptwm_err *err) {
    ptwm_error rc;
    if (!r->ctx) {
        if ((rc = ptwm_ctx_create(&r->own_ctx, err))) return rc;
        r->ctx = r->own_ctx;
    }
    return ptwm_ctx_workspaces(r->ctx, n, &r->ws, err);
}

/* Let go of the work memory: the reader's own is freed, the caller's
 * released for another user. */
static void free_workspaces(ptwm_reader *r) {
    if (r->own_ctx) ptwm_ctx_free(r->own_ctx);
    else if (r->ctx) ptwm_ctx_release(r->ctx);
    r->ctx = r->own_ctx = NULL;
    r->ws = NULL;
}

ptwm_error ptwm_reader_set_ctx(ptwm_reader *r, ptwm_ctx *ctx, ptwm_err *err) {
    ptwm_error rc;
    if (!r) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader");
    if (ctx && ctx == r->ctx) return PTWM_OK;
    if (ctx && (rc = ptwm_ctx_claim(ctx, "reader", err))) return rc;
    free_workspaces(r);
    r->ctx = ctx;
    return PTWM_OK;
}

void ptwm_reader_close(ptwm_reader *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    ptwm_free(r->t);
    ptwm_nametab_free(&r->by_name);
    ptwm_free(r->names.p);
    ptwm_free(r->dims.p);
    ptwm_free(r->chain_ptrs.p);
    ptwm_free(r->chain_lens.p);
    ptwm_free(r->chunk_pool.p);
    ptwm_kv_free(r->meta, r->nmeta);
    ptwm_free(r->src_name);
    ptwm_free(r->table);
    ptwm_free(r->label);
    ptwm_pool_free(r->pool);
    free_workspaces(r);
    ptwm_xxh128_free(&r->seq_hash);
    ptwm_free(r->base_idx);
    ptwm_free(r->base_rc);
    if (r->base_mu_ready) pthread_mutex_destroy(&r->base_mu);
    ptwm_free(r);
}

/* ---- accessors ----------------------------------------------------------- */

int ptwm_reader_get_threads(const ptwm_reader *r) { return r ? r->threads : 0; }

void ptwm_reader_set_threads(ptwm_reader *r, int threads) {
    if (!r || r->threads == threads) return;
    r->threads = threads;
    ptwm_pool_free(r->pool);
    r->pool = NULL;
}

void ptwm_reader_release_pool(ptwm_reader *r) {
    if (!r) return;
    ptwm_pool_free(r->pool);
    r->pool = NULL;
    if (r->own_ctx) free_workspaces(r);
}

size_t ptwm_reader_count(const ptwm_reader *r) {
    return r ? r->nt : 0;
}

uint64_t ptwm_reader_file_size(const ptwm_reader *r) {
    return r ? r->size : 0;
}

const char *ptwm_reader_label(const ptwm_reader *r) {
    return r->label;
}

ptwm_error ptwm_reader_chunk_info(const ptwm_reader *r, size_t index, uint64_t chunk,
                                  uint64_t *offset, uint32_t *coded, uint32_t *raw,
                                  uint64_t *nchunks) {
    const rtensor *t;
    if (!r || index >= r->nt) return PTWM_ERR_NOT_FOUND;
    t = &r->t[index];
    if (nchunks) *nchunks = t->nchunks;
    if (chunk >= t->nchunks) return PTWM_ERR_NOT_FOUND;
    if (offset) *offset = t->chunks[chunk].offset;
    if (coded) *coded = t->chunks[chunk].coded;
    if (raw) *raw = t->chunks[chunk].raw;
    return PTWM_OK;
}

size_t ptwm_reader_unchecked_count(const ptwm_reader *r) {
    size_t i, n = 0;
    if (!r || r->version >= PTWM_FMT_ENTRY_CRC_VERSION) return 0;
    for (i = 0; i < r->nt; i++)
        n += r->t[i].nbytes && !(r->t[i].flags & (PTWM_TF_PAYLOAD_HASH | PTWM_TF_PLANE_CRC));
    return n;
}

uint64_t ptwm_reader_source_file_size(const ptwm_reader *r) {
    return r->src_file_size;
}

ptwm_error ptwm_reader_tensor(const ptwm_reader *r, size_t index, ptwm_tensor_info *out,
                              ptwm_err *err) {
    const rtensor *t;
    if (!r || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_reader_tensor: NULL argument");
    if (index >= r->nt) return ptwm_fail_index(err, r->label, index, r->nt);
    t = &r->t[index];
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    out->shape = t->shape;
    out->nbytes = t->nbytes;
    out->coded_bytes = t->coded;
    out->data = NULL;
    return PTWM_OK;
}

ptwm_error ptwm_reader_find(const ptwm_reader *r, const char *name, size_t *index,
                            ptwm_err *err) {
    size_t i;
    if (!r || !name) return ptwm_fail_name(err, r ? r->label : "ptwm_reader_find", name);
    if ((i = ptwm_nametab_lookup(&r->by_name, r, tensor_name, name)) == SIZE_MAX)
        return ptwm_fail_name(err, r->label, name);
    if (index) *index = i;
    return PTWM_OK;
}

ptwm_error ptwm_reader_chain_text(const ptwm_reader *r, size_t index, char *buf, size_t cap,
                                  ptwm_err *err) {
    const rtensor *t;
    size_t used = 0;
    unsigned i;
    if (!r || !buf || !cap) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or buffer");
    if (index >= r->nt) return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", index, r->nt);
    t = &r->t[index];
    buf[0] = 0;
    for (i = 0; i < t->nchains; i++) {
        ptwm_error rc;
        if (i) {
            if (cap - used < 4) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "buffer of %zu bytes too small", cap);
            memcpy(buf + used, " || ", 4);
            used += 4;
            buf[used] = 0;
        }
        if ((rc = ptwm_chain_describe(t->chain_ptr[i], t->chain_len[i], buf + used, cap - used, err)))
            return rc;
        used += strlen(buf + used);
    }
    return PTWM_OK;
}

const void *ptwm_reader_source_header(const ptwm_reader *r, size_t *len) {
    if (len) *len = r && r->src_header ? r->src_header_len : 0;
    return r ? r->src_header : NULL;
}

const char *ptwm_reader_source_name(const ptwm_reader *r) {
    return r ? r->src_name : NULL;
}

size_t ptwm_reader_metadata_count(const ptwm_reader *r) {
    return r ? r->nmeta : 0;
}

ptwm_kv ptwm_reader_metadata(const ptwm_reader *r, size_t i) {
    ptwm_kv kv = {NULL, NULL};
    if (r && i < r->nmeta) kv = r->meta[i];
    return kv;
}

/* ---- decoding ------------------------------------------------------------ */

/* One chunk decode: the job list of a parallel run. A job decodes chunk
 * `chunk` of tensor `t` and copies raw bytes [skip, skip+len) of it to dst. */
typedef struct rjob {
    uint64_t chunk;
    uint8_t *dst;
    size_t skip, len;
    ptwm_error rc;
    ptwm_err err;
} rjob;

typedef struct rrun {
    ptwm_reader *r;
    const rtensor *t;
    rjob *jobs;
    uint8_t **coded;     /* per worker, file mode: chunk_bound sized */
    uint8_t **raw;       /* per worker: chunk_size, for partial chunks */
    size_t coded_cap, raw_cap;
    /* A read that carries the tensor's payload hash (else NULL): jobs feed it
     * in order, `hashed` of them so far. */
    ptwm_xxh128 *seq;
    size_t hashed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} rrun;

/* Decode chunk c of tensor t from its payload src into exactly c->raw bytes.
 * From version 4 each chunk entry records the CRC32 of its payload: damaged
 * bytes, or another chunk's bytes moved to this entry's place (which plane
 * CRCs, inside the payload, cannot tell), are caught before decoding, and the
 * plane CRCs, over a subset of the bytes just checked, are skipped. The check
 * lives in the table, so entries sharing one payload share it too. */
static ptwm_error decode_based(ptwm_reader *r, ptwm_ws *ws, const rtensor *t, const rchunk *c,
                               const uint8_t *src, uint8_t *out, ptwm_err *err);

static ptwm_error decode_chunk(const ptwm_reader *r, ptwm_ws *ws, const rtensor *t,
                               const rchunk *c, const uint8_t *src, uint8_t *out, ptwm_err *err) {
    uint32_t got;
    if (r->version < PTWM_FMT_ENTRY_CRC_VERSION)
        return ptwm_chunk_decode_version(ws, r->version, t->chain_ptr[c->chain], t->chain_len[c->chain],
                                         t->dtype, src, c->coded, out, c->raw, err);
    got = ptwm_crc32(0, src, c->coded);
    if (got != c->crc)
        return ptwm_fail(err, PTWM_ERR_CRC,
                         "payload at bytes %llu..%llu has CRC32 %08x, its chunk entry records %08x "
                         "(damaged, or the bytes of another chunk)",
                         (unsigned long long)c->offset, (unsigned long long)(c->offset + c->coded),
                         (unsigned)got, (unsigned)c->crc);
    if (c->based) return decode_based((ptwm_reader *)r, ws, t, c, src, out, err);
    return ptwm_chunk_decode_checked(ws, r->version, t->chain_ptr[c->chain], t->chain_len[c->chain],
                                     t->dtype, src, c->coded, out, c->raw, err);
}

/* ---- bases (docs/DELTA.md) ------------------------------------------------ */

/* Why tensor t cannot have its base, into err: no base given, the base
 * lacks it (or its dtype or shape differ), or the base's tensor hashes
 * differently; the messages name the tensor and the hashes. */
static ptwm_error base_fail(const ptwm_reader *r, const rtensor *t, ptwm_error rc, ptwm_err *err) {
    char want[33], got[33];
    uint8_t h[16];
    size_t bi = r->base_idx ? r->base_idx[t - r->t] : SIZE_MAX;
    ptwm_hex128(t->base_hash, want);
    if (rc == PTWM_ERR_BASE_MISSING)
        return ptwm_fail(err, rc,
                         "coded against a base tensor of XXH3-128 %s, and no base was given "
                         "(--base)",
                         want);
    if (rc == PTWM_ERR_BASE_HASH && bi != SIZE_MAX && ptwm_source_tensor_hash(r->base, bi, h))
        return ptwm_fail(err, rc,
                         "coded against a base tensor of XXH3-128 %s, the base '%s' holds one of "
                         "XXH3-128 %s (a different base)",
                         want, ptwm_source_path(r->base), ptwm_hex128(h, got));
    return ptwm_fail(err, PTWM_ERR_BASE_MISMATCH,
                     "coded against a base tensor of XXH3-128 %s, and the base '%s' %s", want,
                     ptwm_source_path(r->base),
                     bi == SIZE_MAX ? "has no tensor of this name"
                                    : "holds one of another dtype or shape");
}

/* A chunk coded against its base chunk (its payload's CRC32 checked): the
 * base's bytes of the same range, checked against the CRC32 the chunk entry
 * records, then the payload. */
static ptwm_error decode_based(ptwm_reader *r, ptwm_ws *ws, const rtensor *t, const rchunk *c,
                               const uint8_t *src, uint8_t *out, ptwm_err *err) {
    size_t ti = (size_t)(t - r->t);
    uint8_t *b;
    uint32_t got;
    ptwm_error rc;
    if (!r->base) return base_fail(r, t, PTWM_ERR_BASE_MISSING, err);
    if (r->base_rc[ti]) return base_fail(r, t, r->base_rc[ti], err);
    if (!(b = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_BASE, c->raw, 0)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a base chunk of %u bytes", c->raw);
    if (r->base_locked) pthread_mutex_lock(&r->base_mu);
    rc = ptwm_source_read(r->base, r->base_idx[ti], c->start, b, c->raw, err);
    if (r->base_locked) pthread_mutex_unlock(&r->base_mu);
    if (rc) {
        ptwm_err_prefix(err, "its base '%s'", ptwm_source_path(r->base));
        return rc;
    }
    got = ptwm_crc32(0, b, c->raw);
    if (got != c->base_crc) {
        char want[33];
        return ptwm_fail(err, PTWM_ERR_BASE_CRC,
                         "the base '%s' has bytes %llu..%llu of CRC32 %08x, this chunk was coded "
                         "against CRC32 %08x (a damaged or different base; base tensor XXH3-128 "
                         "%s)",
                         ptwm_source_path(r->base), (unsigned long long)c->start,
                         (unsigned long long)(c->start + c->raw), (unsigned)got,
                         (unsigned)c->base_crc, ptwm_hex128(t->base_hash, want));
    }
    return ptwm_chunk_decode_base(ws, r->version, t->chain_ptr[c->chain], t->chain_len[c->chain],
                                  t->dtype, src, c->coded, b, out, c->raw, 1, err);
}

ptwm_error ptwm_reader_set_base(ptwm_reader *r, ptwm_source *base, ptwm_err *err) {
    size_t i;
    ptwm_tensor_info bi;
    uint8_t h[16];
    if (!r) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_reader_set_base: NULL reader");
    ptwm_free(r->base_idx);
    ptwm_free(r->base_rc);
    r->base_idx = NULL;
    r->base_rc = NULL;
    r->base = base;
    if (!base) return PTWM_OK;
    r->base_idx = (size_t *)ptwm_calloc(r->nt ? r->nt : 1, sizeof(size_t));
    r->base_rc = (ptwm_error *)ptwm_calloc(r->nt ? r->nt : 1, sizeof(ptwm_error));
    if (!r->base_idx || !r->base_rc) {
        r->base = NULL;
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu base entries", r->nt);
    }
    if (!r->base_mu_ready) pthread_mutex_init(&r->base_mu, NULL);
    r->base_mu_ready = 1;
    /* A .ptwm base decodes with its reader's state, one range at a time, on
     * the thread that asks (no pool inside a pool); safetensors kinds read
     * with pread, from any thread at once. */
    r->base_locked = ptwm_source_get_kind(base) == PTWM_SOURCE_PTWM ||
                     ptwm_source_get_kind(base) == PTWM_SOURCE_PTWM_DIR;
    if (r->base_locked) ptwm_source_set_threads(base, 1);
    for (i = 0; i < r->nt; i++) {
        const rtensor *t = &r->t[i];
        r->base_idx[i] = SIZE_MAX;
        if (!(t->flags & PTWM_TF_BASE)) continue;
        if (ptwm_source_find(base, t->name, &r->base_idx[i], NULL)) {
            r->base_idx[i] = SIZE_MAX;
            r->base_rc[i] = PTWM_ERR_BASE_MISMATCH;
        } else if (ptwm_source_tensor(base, r->base_idx[i], &bi, NULL) || bi.dtype != t->dtype ||
                   bi.ndim != t->ndim || (t->ndim && memcmp(bi.shape, t->shape, t->ndim * 8))) {
            r->base_rc[i] = PTWM_ERR_BASE_MISMATCH;
        } else if (ptwm_source_tensor_hash(base, r->base_idx[i], h) &&
                   memcmp(h, t->base_hash, 16) != 0) {
            r->base_rc[i] = PTWM_ERR_BASE_HASH;
        }
    }
    return PTWM_OK;
}

int ptwm_reader_tensor_base(const ptwm_reader *r, size_t index, uint8_t hash[16],
                            uint64_t *chunks) {
    const rtensor *t;
    uint64_t k, n = 0;
    if (!r || index >= r->nt || !(r->t[index].flags & PTWM_TF_BASE)) return 0;
    t = &r->t[index];
    for (k = 0; k < t->nchunks; k++) n += t->chunks[k].based;
    if (hash) memcpy(hash, t->base_hash, 16);
    if (chunks) *chunks = n;
    return 1;
}

int ptwm_reader_tensor_hash(const ptwm_reader *r, size_t index, uint8_t hash[16]) {
    if (!r || index >= r->nt || !(r->t[index].flags & PTWM_TF_PAYLOAD_HASH)) return 0;
    memcpy(hash, r->t[index].hash, 16);
    return 1;
}

static void decode_job(rrun *run, size_t i, unsigned worker) {
    rjob *j = &run->jobs[i];
    const rtensor *t = run->t;
    const rchunk *c = &t->chunks[j->chunk];
    const uint8_t *src;
    uint8_t *out = (j->skip == 0 && j->len == c->raw) ? j->dst : run->raw[worker];
    if (run->r->mem) {
        src = run->r->mem + c->offset;
    } else {
        if (c->coded > run->coded_cap) {
            j->rc = ptwm_fail(&j->err, PTWM_ERR_CORRUPT, "coded size %u over the bound %zu", c->coded,
                              run->coded_cap);
            return;
        }
        j->rc = ptwm_pread_full(run->r->fd, run->coded[worker], c->coded, c->offset, run->r->label, &j->err);
        if (j->rc) return;
        src = run->coded[worker];
    }
    j->rc = decode_chunk(run->r, run->r->ws[worker], t, c, src, out, &j->err);
    if (!j->rc && out != j->dst) memcpy(j->dst, out + j->skip, j->len);
}

/* Each job's bytes go into the payload hash on the thread that decoded them,
 * while they are in its cache (hashing a decoded 8 MiB piece afterwards, from
 * the shared cache, ran at half the speed, serially): job i waits for job i-1
 * to be hashed. The pool hands jobs out in order, so the one waited for has
 * been taken, and it never waits itself on a later one. A failed job passes
 * its turn on; the call fails anyway. */
static void decode_task(void *ctx, size_t i, unsigned worker) {
    rrun *run = (rrun *)ctx;
    decode_job(run, i, worker);
    if (!run->seq) return;
    pthread_mutex_lock(&run->mu);
    while (run->hashed != i) pthread_cond_wait(&run->cv, &run->mu);
    pthread_mutex_unlock(&run->mu);
    if (!run->jobs[i].rc) ptwm_xxh128_update(run->seq, run->jobs[i].dst, run->jobs[i].len);
    pthread_mutex_lock(&run->mu);
    run->hashed++;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
}

static ptwm_error get_pool(ptwm_reader *r, ptwm_err *err) {
    ptwm_error rc;
    if (!r->pool && (rc = ptwm_pool_create(r->threads, &r->pool, err))) return rc;
    return get_workspaces(r, ptwm_pool_size(r->pool), err);
}

static void run_free(rrun *run, unsigned n) {
    unsigned i;
    for (i = 0; i < n; i++) {
        if (run->coded) ptwm_ctx_give(run->r->ctx, run->coded[i], run->coded_cap);
        if (run->raw) ptwm_ctx_give(run->r->ctx, run->raw[i], run->raw_cap);
    }
    ptwm_free(run->coded);
    ptwm_free(run->raw);
    ptwm_free(run->jobs);
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
}

/* Scratch sizes come from what the chunks to decode need (raw bytes of a
 * chunk, coded bytes actually stored in the file), not from the recorded
 * chunk size, so a hostile header cannot make us allocate more than the
 * file and the tensor justify. */
static ptwm_error run_init(rrun *run, ptwm_reader *r, const rtensor *t, uint64_t first, uint64_t last,
                           size_t njobs, ptwm_err *err) {
    unsigned i, n = ptwm_pool_size(r->pool);
    uint64_t k, raw_cap = 1;   /* (the pool's workspaces made the context) */
    memset(run, 0, sizeof(*run));
    pthread_mutex_init(&run->mu, NULL);
    pthread_cond_init(&run->cv, NULL);
    run->r = r;
    run->t = t;
    run->jobs = (rjob *)ptwm_calloc(njobs ? njobs : 1, sizeof(rjob));
    run->coded = (uint8_t **)ptwm_calloc(n, sizeof(uint8_t *));
    run->raw = (uint8_t **)ptwm_calloc(n, sizeof(uint8_t *));
    if (!run->jobs || !run->coded || !run->raw) goto nomem;
    run->coded_cap = 1;
    for (k = first; k <= last && k < t->nchunks; k++) {
        run->coded_cap = PTWM_MAX(run->coded_cap, (size_t)t->chunks[k].coded);
        raw_cap = PTWM_MAX(raw_cap, t->chunks[k].raw);
    }
    run->raw_cap = (size_t)raw_cap;
    for (i = 0; i < n; i++) {
        if (!r->mem && !(run->coded[i] = (uint8_t *)ptwm_ctx_take(r->ctx, run->coded_cap)))
            goto nomem;
        if (!(run->raw[i] = (uint8_t *)ptwm_ctx_take(r->ctx, run->raw_cap))) goto nomem;
    }
    return PTWM_OK;
nomem:
    run_free(run, n);
    return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for decode buffers");
}

/* Run jobs [0, n) and report the first failure (lowest chunk: deterministic). */
static ptwm_error run_jobs(rrun *run, size_t n, ptwm_err *err) {
    size_t i;
    ptwm_pool_run(run->r->pool, n, decode_task, run);
    for (i = 0; i < n; i++)
        if (run->jobs[i].rc) {
            if (err) *err = run->jobs[i].err;
            ptwm_err_prefix(err, "file '%s': tensor '%s' chunk %llu of %llu", run->r->label, run->t->name,
                            (unsigned long long)run->jobs[i].chunk, (unsigned long long)run->t->nchunks);
            return run->jobs[i].rc;
        }
    return PTWM_OK;
}

static ptwm_error check_hash(const ptwm_reader *r, const rtensor *t, const uint8_t got[16],
                             ptwm_err *err) {
    char a[33], b[33];
    if (memcmp(got, t->hash, 16) == 0) return PTWM_OK;
    return ptwm_fail(err, PTWM_ERR_HASH, "file '%s': tensor '%s': payload XXH3-128 %s, expected %s",
                     r->label, t->name, ptwm_hex128(got, a), ptwm_hex128(t->hash, b));
}

ptwm_error ptwm_reader_decode_range(ptwm_reader *r, size_t index, uint64_t offset, void *dst,
                                    size_t len, ptwm_err *err) {
    const rtensor *t;
    rrun run;
    uint64_t end, first, last, k;
    int seq;
    ptwm_error rc;
    if (!r || (!dst && len)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or buffer");
    if (index >= r->nt) return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", index, r->nt);
    t = &r->t[index];
    if (ptwm_add_overflow(offset, len, &end) || end > t->nbytes)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': range %llu+%zu past its %llu bytes", t->name,
                         (unsigned long long)offset, len, (unsigned long long)t->nbytes);
    /* A read from byte 0, or one continuing the last read of this tensor,
     * carries the tensor's payload hash on; any other read breaks the run. */
    seq = (t->flags & PTWM_TF_PAYLOAD_HASH) &&
          (offset == 0 || (r->seq_on && r->seq_tensor == index && r->seq_next == offset));
    r->seq_on = 0;
    if (!len) return PTWM_OK;
    if ((rc = get_pool(r, err))) return rc;
    if (seq && offset == 0 && (rc = ptwm_xxh128_begin(&r->seq_hash, err))) return rc;
    first = offset / t->chunk_size;
    last = (end - 1) / t->chunk_size;
    if ((rc = run_init(&run, r, t, first, last, (size_t)(last - first + 1), err))) return rc;
    for (k = first; k <= last; k++) {
        rjob *j = &run.jobs[k - first];
        const rchunk *c = &t->chunks[k];
        uint64_t lo = PTWM_MAX(offset, c->start), hi = PTWM_MIN(end, c->start + c->raw);
        j->chunk = k;
        j->skip = (size_t)(lo - c->start);
        j->len = (size_t)(hi - lo);
        j->dst = (uint8_t *)dst + (lo - offset);
    }
    if (seq) run.seq = &r->seq_hash;
    rc = run_jobs(&run, (size_t)(last - first + 1), err);
    run_free(&run, ptwm_pool_size(r->pool));
    if (rc || !seq) return rc;
    if (end < t->nbytes) {
        r->seq_on = 1;
        r->seq_tensor = index;
        r->seq_next = end;
        return PTWM_OK;
    }
    {
        uint8_t got[16];
        ptwm_xxh128_digest(&r->seq_hash, got);
        if ((rc = check_hash(r, t, got, err))) memset(dst, 0, len);
    }
    return rc;
}

/* ---- whole tensors: an ordered queue of chunk jobs across tensors --------- */

struct ptwm_fstream_file;

/* One slot of the ring: chunk `chunk` of tensor `tensor` of reader r, decoded
 * into dst (the caller's buffer, or the slot's own buffer when streaming). */
typedef struct sjob {
    ptwm_reader *r;
    size_t item;                 /* position in the caller's list */
    size_t tensor;
    uint64_t chunk;
    uint8_t *dst;
    uint8_t *own;
    size_t own_cap;
    /* Streaming to a file: the file, and where dst goes in it. */
    struct ptwm_fstream_file *file;
    uint64_t file_off;
    int unwritten;               /* decoded, in the drive's write list (under wq_mu) */
    uint64_t ring_end;           /* the byte ring's head after this job (see sdrive) */
    uint8_t hash[16];            /* a one-chunk tensor's XXH3-128, by the worker */
    ptwm_error rc;
    ptwm_err err;
} sjob;

typedef struct sdrive {
    ptwm_reader *r;              /* the reader of the chunks submitted next */
    ptwm_queue *q;
    sjob *jobs;
    size_t window, head, npending;
    uint64_t inflight;           /* raw bytes of queued jobs (streaming) */
    /* Files: one buffer of coded bytes per worker, needed only while it
     * decodes (a buffer per slot touched twice the memory, and fresh pages
     * cost more than the decode of small files). */
    uint8_t **coded;
    size_t *coded_cap;
    unsigned nworkers;
    /* Work memory: the reader's context, or, for a stream that serves
     * several readers (ptwm_fstream), the drive's own (own_ctx); ws: its
     * workspaces, one per worker. */
    ptwm_ctx *ctx;
    ptwm_ctx *own_ctx;
    ptwm_ws **ws;
    /* Streaming: the largest raw and coded chunk of the tensors asked for.
     * Buffers are sized for them at once (up to SLOT_KEEP): growing them
     * chunk by chunk took fresh pages each time. */
    size_t max_raw, max_coded;
    /* Streaming: decoded chunks of up to SLOT_KEEP bytes go into one ring
     * of bytes, in submission order, so slots hold many small chunks or a
     * few large ones in the same memory (`units` chunks of max_raw bytes):
     * with a buffer per slot, a ring of small tensors ran dry while the
     * caller decoded one large chunk and the other threads waited for work.
     * ring_head and ring_tail count bytes from the start (position p is at
     * p % ring_cap); chunks lying back to back in the file lie back to back
     * here too. */
    uint8_t *ring;
    size_t ring_cap, units;
    uint64_t ring_head, ring_tail;
    /* Streaming to files: the file of the chunks submitted next (else
     * NULL). Each worker writes the chunk it decoded at its place in the
     * file, so the copy into the page cache runs on every worker, beside the
     * decoding, instead of on the retiring thread. */
    struct ptwm_fstream_file *file;
    /* Writes into files: one thread writes at a time (write_mu), taking
     * every decoded chunk in the list (wq, under wq_mu) and writing runs
     * that lie back to back with one call. A thread that finds another
     * writing leaves its chunk in the list and goes on decoding: writes to
     * one file take its inode's lock in the kernel, where two threads
     * writing at once spun on each other (7% of the time on two threads). */
    pthread_mutex_t write_mu, wq_mu;
    int mu_ready;
    size_t *wq, nwq;
    uint64_t wq_bytes;           /* raw bytes listed (under wq_mu; one thread reads it bare) */
    /* One decoding thread with a core to spare: runs are written by a
     * writing thread (iothread.h), which clears their flags when done. */
    ptwm_io *io;
} sdrive;

/* On one thread, chunks are decoded ahead in order until this many bytes
 * wait to be written, and written with one call: a write per small tensor
 * cost 5 of the 35 ms that writing a 128 MiB file of BF16 tensors took. */
#define WRITE_BATCH ((uint64_t)256 << 10)

/* A file being written by a stream; see ptwm_fstream_begin. */
typedef struct ptwm_fstream_file {
    int fd;
    const char *path;
    ptwm_fstream_done_fn done;
    void *ctx;
    uint64_t pending;            /* its chunks submitted and not yet retired */
    uint64_t unsynced;           /* bytes written since writeback was last started (by the
                                  * thread holding write_mu, or the writing thread) */
    int sealed;                  /* no more tensors will be added */
    ptwm_error rc;               /* its first failure */
} ptwm_fstream_file;

/* Streaming keeps at most this many raw bytes in flight (or one chunk), and
 * gives back slot buffers larger than SLOT_KEEP once they are retired. */
#define STREAM_BUDGET ((uint64_t)64 << 20)
/* Writeback of a file being decoded is started every this many bytes (not
 * the writers' 8 MiB): the fsync that commits it then waits for 2 MiB at
 * most; on a 128 MiB restore the fsync took 0.5-4 ms instead of 8. */
#define DECODE_WRITEBACK_STEP ((uint64_t)2 << 20)
#define SLOT_KEEP ((size_t)8 << 20)

/* The disk writes what is done while the rest decodes, and the fsync that
 * commits the file waits for the last MiB or two only; the thread writing
 * starts it, not the one retiring (one thread writes a file at a time). */
static void start_writeback_every(ptwm_fstream_file *f, uint64_t bytes) {
    /* atomic: a writing thread and a thread waiting on it may both write */
    if (__atomic_add_fetch(&f->unsynced, bytes, __ATOMIC_RELAXED) >= DECODE_WRITEBACK_STEP &&
        __atomic_exchange_n(&f->unsynced, 0, __ATOMIC_RELAXED) >= DECODE_WRITEBACK_STEP)
        ptwm_start_writeback(f->fd, 0, 0);
}

/* *p with room for need bytes, from the context's buffers. */
static int grow(ptwm_ctx *ctx, uint8_t **p, size_t *cap, size_t need) {
    uint8_t *q;
    if (*cap >= need && *p) return 1;
    if (!need) need = 1;
    q = (uint8_t *)ptwm_ctx_take(ctx, need);
    if (!q) return 0;
    ptwm_ctx_give(ctx, *p, *cap);
    *p = q;
    *cap = need;
    return 1;
}

/* Order slots by file, then by offset in it (insertion sort: the list is
 * short and mostly in order already). */
static void sort_by_file_off(const sdrive *d, size_t *slots, size_t n) {
    size_t i, k;
    for (i = 1; i < n; i++) {
        size_t s = slots[i];
        const sjob *a = &d->jobs[s];
        for (k = i; k > 0; k--) {
            const sjob *b = &d->jobs[slots[k - 1]];
            if ((uintptr_t)b->file < (uintptr_t)a->file ||
                (b->file == a->file && b->file_off <= a->file_off))
                break;
            slots[k] = slots[k - 1];
        }
        slots[k] = s;
    }
}

/* A run handed to the writing thread. */
typedef struct io_run {
    sdrive *d;
    uint64_t bytes;
    size_t n;
    size_t slots[PTWM_WRITEV_MAX];
} io_run;

/* The writing thread is done with a run: its chunks carry the error, if
 * any, and are written. */
static void io_run_done(void *arg, ptwm_error rc, const ptwm_err *e) {
    io_run *run = (io_run *)arg;
    size_t k;
    if (!rc) start_writeback_every(run->d->jobs[run->slots[0]].file, run->bytes);
    for (k = 0; k < run->n; k++) {
        sjob *b = &run->d->jobs[run->slots[k]];
        if (rc) {
            b->rc = rc;
            b->err = *e;
        }
        __atomic_store_n(&b->unwritten, 0, __ATOMIC_RELEASE);
    }
    ptwm_free(run);
}

/* Hand a run of m chunks to the writing thread; 0 if it could not be (the
 * caller writes it). */
static int put_run(sdrive *d, const size_t *slots, size_t m, void *const *bufs, const size_t *lens,
                   uint64_t end) {
    sjob *a = &d->jobs[slots[0]];
    io_run *run = (io_run *)ptwm_malloc(sizeof(*run));
    if (!run) return 0;
    run->d = d;
    run->bytes = end - a->file_off;
    run->n = m;
    memcpy(run->slots, slots, m * sizeof(size_t));
    if (ptwm_io_put(d->io, a->file->fd, a->file->path, bufs, lens, m, a->file_off, io_run_done, run,
                    NULL)) {
        ptwm_free(run);
        return 0;
    }
    return 1;
}

/* Write runs of listed chunks: n slots sorted by file and offset; the
 * chunks of a run that fails all carry its error. Called with write_mu. */
static void write_runs(sdrive *d, size_t *slots, size_t n) {
    size_t i = 0, k;
    while (i < n) {
        sjob *a = &d->jobs[slots[i]];
        void *bufs[PTWM_WRITEV_MAX];
        size_t lens[PTWM_WRITEV_MAX], m = 0;
        uint64_t end = a->file_off;
        ptwm_error rc;
        ptwm_err e;
        while (i + m < n && m < PTWM_WRITEV_MAX) {
            sjob *b = &d->jobs[slots[i + m]];
            if (b->file != a->file || b->file_off != end) break;
            bufs[m] = b->dst;
            lens[m] = b->r->t[b->tensor].chunks[b->chunk].raw;
            end += lens[m++];
        }
        if (d->io && put_run(d, slots + i, m, bufs, lens, end)) {
            i += m;
            continue;
        }
        rc = ptwm_pwritev_full(a->file->fd, bufs, lens, m, a->file_off, a->file->path, &e);
        if (!rc) start_writeback_every(a->file, end - a->file_off);
        for (k = 0; k < m; k++) {
            sjob *b = &d->jobs[slots[i + k]];
            if (rc) {
                b->rc = rc;
                b->err = e;
            }
            __atomic_store_n(&b->unwritten, 0, __ATOMIC_RELEASE);
        }
        i += m;
    }
}

/* Write every chunk in the list, unless another thread is writing (wait 0:
 * then that thread takes them) or until none is left (wait 1). Whoever
 * lets go of write_mu looks at the list again, so no chunk is left behind
 * by a thread that found write_mu taken. */
static void write_listed(sdrive *d, int wait) {
    size_t batch[PTWM_WRITEV_MAX * 2], n, k;
    if (wait) pthread_mutex_lock(&d->write_mu);
    else if (pthread_mutex_trylock(&d->write_mu)) return;
    for (;;) {
        pthread_mutex_lock(&d->wq_mu);
        n = PTWM_MIN(d->nwq, sizeof(batch) / sizeof(batch[0]));
        memcpy(batch, d->wq, n * sizeof(size_t));
        memmove(d->wq, d->wq + n, (d->nwq - n) * sizeof(size_t));
        d->nwq -= n;
        for (k = 0; k < n; k++)
            d->wq_bytes -= d->jobs[batch[k]].r->t[d->jobs[batch[k]].tensor].chunks[d->jobs[batch[k]].chunk].raw;
        pthread_mutex_unlock(&d->wq_mu);
        if (n) {
            sort_by_file_off(d, batch, n);
            write_runs(d, batch, n);
            continue;
        }
        pthread_mutex_unlock(&d->write_mu);
        pthread_mutex_lock(&d->wq_mu);
        n = d->nwq;
        pthread_mutex_unlock(&d->wq_mu);
        if (!n || pthread_mutex_trylock(&d->write_mu)) return;
    }
}

static void sjob_task(void *ctx, size_t slot, unsigned worker) {
    sdrive *d = (sdrive *)ctx;
    sjob *j = &d->jobs[slot];
    const ptwm_reader *r = j->r;
    const rtensor *t = &r->t[j->tensor];
    const rchunk *c = &t->chunks[j->chunk];
    const uint8_t *src = r->mem ? r->mem + c->offset : NULL;
    j->rc = PTWM_OK;
    if (!src) {
        if (worker >= d->nworkers ||
            !grow(d->ctx, &d->coded[worker], &d->coded_cap[worker],
                  PTWM_MAX(c->coded, __atomic_load_n(&d->max_coded, __ATOMIC_RELAXED)))) {
            j->rc = ptwm_fail(&j->err, PTWM_ERR_NOMEM, "out of memory for %u coded bytes", c->coded);
            return;
        }
        if ((j->rc = ptwm_pread_full(r->fd, d->coded[worker], c->coded, c->offset, r->label, &j->err)))
            return;
        src = d->coded[worker];
    }
    j->rc = decode_chunk(r, d->ws[worker], t, c, src, j->dst, &j->err);
    /* A tensor of one chunk is hashed here, in parallel and while its bytes
     * are in cache; longer tensors are hashed in order as chunks retire. */
    if (!j->rc && t->nchunks == 1 && (t->flags & PTWM_TF_PAYLOAD_HASH))
        ptwm_xxh128_oneshot(j->dst, c->raw, j->hash);
    /* Bytes that fail their hash later are in the file, which the caller
     * then never commits. */
    if (!j->rc && j->file) {
        pthread_mutex_lock(&d->wq_mu);
        __atomic_store_n(&j->unwritten, 1, __ATOMIC_RELAXED);
        d->wq[d->nwq++] = slot;
        d->wq_bytes += c->raw;
        pthread_mutex_unlock(&d->wq_mu);
        /* One thread: the caller writes as it retires (stream_retire), or
         * hands 256 KiB at a time to the I/O thread (a hand-over a chunk
         * woke that thread, and on a busy machine preempted this one, for
         * every small tensor). Only this thread touches wq_bytes then. */
        if (d->nworkers > 1 || (d->io && d->wq_bytes >= WRITE_BATCH)) write_listed(d, 0);
    }
}

/* Work memory for n workers: the reader's context when the drive serves
 * one reader, else its own (freed by sdrive_free). */
static ptwm_error drive_workspaces(sdrive *d, unsigned n, ptwm_err *err) {
    ptwm_error rc;
    if (d->r) {
        if ((rc = get_workspaces(d->r, n, err))) return rc;
        d->ctx = d->r->ctx;
        d->ws = d->r->ws;
        return PTWM_OK;
    }
    if ((rc = ptwm_ctx_create(&d->own_ctx, err))) return rc;
    d->ctx = d->own_ctx;
    return ptwm_ctx_workspaces(d->ctx, n, &d->ws, err);
}

/* `per_thread` chunks in flight per thread: enough that no thread waits
 * for the consumer; deeper when slots hold no buffers (an image in memory
 * decoded into the caller's buffers, where the consumer also hashes;
 * docs/ARCHITECTURE.md, "Threads"). Streaming (ring 1), that many of the
 * largest chunk fit the byte ring, and four times as many slots hold
 * smaller ones. */
#define RING_SLOTS 4
static ptwm_error sdrive_init(sdrive *d, ptwm_reader *r, int threads, size_t per_thread, int ring,
                              ptwm_err *err) {
    ptwm_error rc;
    memset(d, 0, sizeof(*d));
    d->r = r;
    d->units = per_thread * (size_t)ptwm_threads_resolve(threads) + 2;
    d->window = ring ? RING_SLOTS * d->units : d->units;
    d->jobs = (sjob *)ptwm_calloc(d->window, sizeof(sjob));
    d->wq = (size_t *)ptwm_calloc(d->window, sizeof(size_t));
    pthread_mutex_init(&d->write_mu, NULL);
    pthread_mutex_init(&d->wq_mu, NULL);
    d->mu_ready = 1;
    if (!d->jobs) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if ((rc = ptwm_queue_create(threads, d->window, sjob_task, d, &d->q, err))) return rc;
    d->nworkers = ptwm_queue_size(d->q);
    /* No job runs before the first submit: the workspaces are there first. */
    if ((rc = drive_workspaces(d, d->nworkers, err))) {
        d->nworkers = 0;
        return rc;
    }
    d->coded = (uint8_t **)ptwm_calloc(d->nworkers, sizeof(uint8_t *));
    d->coded_cap = (size_t *)ptwm_calloc(d->nworkers, sizeof(size_t));
    if (!d->coded || !d->coded_cap || !d->wq) {
        d->nworkers = 0;   /* no task runs before the first submit */
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    return PTWM_OK;
}

static void sdrive_free(sdrive *d) {
    size_t i;
    ptwm_io_stop(d->io);   /* writes of ring bytes finish first */
    ptwm_queue_free(d->q);   /* waits for running jobs before their buffers go */
    if (d->jobs)
        for (i = 0; i < d->window; i++) ptwm_ctx_give(d->ctx, d->jobs[i].own, d->jobs[i].own_cap);
    for (i = 0; d->coded && i < d->nworkers; i++) ptwm_ctx_give(d->ctx, d->coded[i], d->coded_cap[i]);
    ptwm_ctx_give(d->ctx, d->ring, d->ring_cap);
    ptwm_free(d->coded);
    ptwm_free(d->coded_cap);
    ptwm_free(d->jobs);
    ptwm_free(d->wq);
    if (d->mu_ready) {
        pthread_mutex_destroy(&d->write_mu);
        pthread_mutex_destroy(&d->wq_mu);
    }
    ptwm_ctx_free(d->own_ctx);
}

/* Where a chunk of n bytes (at most ring_cap) goes in the byte ring: at its
 * head, or at the start of the ring's next turn if it would wrap. */
static uint64_t ring_place(const sdrive *d, size_t n) {
    uint64_t at = d->ring_head;
    if (at % d->ring_cap + n > d->ring_cap) at += d->ring_cap - at % d->ring_cap;
    return at;
}

/* Whether a chunk of n bytes fits in the byte ring beside those in flight. */
static int ring_fits(const sdrive *d, size_t n) {
    return n > SLOT_KEEP || ring_place(d, n) + n - d->ring_tail <= d->ring_cap;
}

/* Queue chunk k of tensor t (into dst; if NULL, the byte ring or for a
 * chunk over SLOT_KEEP the slot's own buffer). */
static ptwm_error sdrive_submit(sdrive *d, size_t item, size_t t, uint64_t k, uint8_t *dst,
                                uint64_t file_off, ptwm_err *err) {
    size_t slot = (d->head + d->npending) % d->window;
    sjob *j = &d->jobs[slot];
    const rchunk *c = &d->r->t[t].chunks[k];
    if (!dst && c->raw <= SLOT_KEEP) {
        uint64_t at = ring_place(d, c->raw);
        dst = d->ring + at % d->ring_cap;
        d->ring_head = at + c->raw;
    } else if (!dst && !grow(d->ctx, &j->own, &j->own_cap, c->raw)) {
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a chunk of %u bytes", c->raw);
    }
    j->ring_end = d->ring_head;
    j->r = d->r;
    j->file = d->file;
    if (j->file) j->file->pending++;
    j->item = item;
    j->tensor = t;
    j->chunk = k;
    j->dst = dst ? dst : j->own;
    j->file_off = file_off + c->start;
    d->inflight += c->raw;
    d->npending++;
    ptwm_queue_submit(d->q, slot, c->raw);
    return PTWM_OK;
}

/* Job j's chunk is decoded and listed for writing: write the list, or, while
 * another thread writes it (that thread empties the list before it stops),
 * decode chunks nobody has taken, polling briefly before sleeping. */
static void wait_written(sdrive *d, sjob *j) {
    unsigned k = 0;
    write_listed(d, 0);
    /* With a writing thread, decode what waits, then sleep on it. */
    while (__atomic_load_n(&j->unwritten, __ATOMIC_ACQUIRE) && k < (d->io ? 1 : 20000))
        if (!ptwm_queue_help(d->q, SIZE_MAX)) {
            ptwm_spin_pause();
            k++;
        }
    if (__atomic_load_n(&j->unwritten, __ATOMIC_ACQUIRE)) write_listed(d, 1);
    /* listed no more: written, or with the writing thread */
    if (d->io) ptwm_io_wait(d->io, &j->unwritten);
}

/* Take back the oldest job; *out points at it until the next submit. */
static ptwm_error sdrive_retire(sdrive *d, sjob **out, ptwm_err *err) {
    sjob *j = &d->jobs[d->head];
    ptwm_queue_wait(d->q, d->head);
    if (__atomic_load_n(&j->unwritten, __ATOMIC_ACQUIRE)) wait_written(d, j);
    d->ring_tail = j->ring_end;
    d->head = (d->head + 1) % d->window;
    d->npending--;
    d->inflight -= j->r->t[j->tensor].chunks[j->chunk].raw;
    *out = j;
    if (j->rc) {
        const rtensor *t = &j->r->t[j->tensor];
        if (err) *err = j->err;
        ptwm_err_prefix(err, "file '%s': tensor '%s' chunk %llu of %llu", j->r->label, t->name,
                        (unsigned long long)j->chunk, (unsigned long long)t->nchunks);
    }
    return j->rc;
}

/* Add a retired chunk to its tensor's payload hash: a tensor of one chunk
 * was hashed by the worker; longer ones go through the running state h (jobs
 * retire in order; the state is kept for the next tensor). *done is set, and
 * got filled, once the tensor is complete and hashed. */
static ptwm_error retired_hash(const rtensor *t, const sjob *j, ptwm_xxh128 *h, uint8_t got[16],
                               int *done, ptwm_err *err) {
    ptwm_error rc;
    *done = 0;
    if (!(t->flags & PTWM_TF_PAYLOAD_HASH)) return PTWM_OK;
    if (t->nchunks == 1) {
        memcpy(got, j->hash, 16);
    } else {
        if (j->chunk == 0 && (rc = ptwm_xxh128_begin(h, err))) return rc;
        ptwm_xxh128_update(h, j->dst, t->chunks[j->chunk].raw);
        if (j->chunk + 1 != t->nchunks) return PTWM_OK;
        ptwm_xxh128_digest(h, got);
    }
    *done = 1;
    return PTWM_OK;
}

/* After job j retired cleanly: hash its chunk while the decoded bytes are
 * still in cache; at the tensor's last chunk, check its payload hash (a
 * tensor that fails is zeroed: never hand back wrong bytes). */
static ptwm_error hash_retired(const ptwm_reader *r, const sjob *j, ptwm_xxh128 *h, void *const *dsts,
                               const size_t *sizes, ptwm_err *err) {
    const rtensor *t = &r->t[j->tensor];
    uint8_t got[16];
    int done;
    ptwm_error rc = retired_hash(t, j, h, got, &done, err);
    if (rc || !done) return rc;
    if ((rc = check_hash(r, t, got, err))) memset(dsts[j->item], 0, sizes[j->item]);
    return rc;
}

ptwm_error ptwm_reader_decode_many(ptwm_reader *r, const size_t *indices, void *const *dsts,
                                   const size_t *sizes, size_t n, ptwm_err *err) {
    sdrive d;
    ptwm_xxh128 h = {NULL};
    ptwm_error rc = PTWM_OK, r2;
    size_t i;
    uint64_t k, chunks = 0;
    sjob *j = NULL;
    if (!r || (n && (!indices || !dsts || !sizes)))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or list");
    for (i = 0; i < n; i++) {
        const rtensor *t;
        if (indices[i] >= r->nt)
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", indices[i], r->nt);
        t = &r->t[indices[i]];
        if (sizes[i] != t->nbytes || (!dsts[i] && sizes[i]))
            return ptwm_fail(err, PTWM_ERR_DST_SIZE, "tensor '%s' has %llu bytes, buffer %zu", t->name,
                             (unsigned long long)t->nbytes, sizes[i]);
        chunks += t->nchunks;
    }
    if ((rc = sdrive_init(&d, r, chunks <= 1 ? 1 : r->threads, r->mem ? 16 : 3, 0, err))) {
        sdrive_free(&d);
        return rc;
    }
    /* Each chunk is hashed as it retires, on this thread, while the workers
     * decode the chunks behind it; a tensor is checked when its last chunk
     * retires (jobs retire in order). */
    for (i = 0; i < n && !rc; i++) {
        const rtensor *t = &r->t[indices[i]];
        for (k = 0; k < t->nchunks && !rc; k++) {
            if (d.npending == d.window &&
                ((rc = sdrive_retire(&d, &j, err)) || (rc = hash_retired(r, j, &h, dsts, sizes, err))))
                break;
            rc = sdrive_submit(&d, i, indices[i], k, (uint8_t *)dsts[i] + t->chunks[k].start, 0, err);
        }
    }
    while (d.npending) {
        r2 = sdrive_retire(&d, &j, rc ? NULL : err);
        if (!r2 && !rc) r2 = hash_retired(r, j, &h, dsts, sizes, err);
        if (r2 && !rc) rc = r2;
    }
    ptwm_xxh128_free(&h);
    sdrive_free(&d);
    /* Tensors without chunks (empty): the hash of no bytes. */
    for (i = 0; i < n && !rc; i++) {
        const rtensor *t = &r->t[indices[i]];
        if (t->nchunks == 0 && (t->flags & PTWM_TF_PAYLOAD_HASH)) {
            uint8_t got[16];
            ptwm_xxh128_oneshot(dsts[i], sizes[i], got);
            rc = check_hash(r, t, got, err);
        }
    }
    return rc;
}

ptwm_error ptwm_reader_decode(ptwm_reader *r, size_t index, void *dst, size_t dst_size, ptwm_err *err) {
    return ptwm_reader_decode_many(r, &index, &dst, &dst_size, 1, err);
}

/* A file's last chunk has retired (or the stream failed): hand it to its
 * owner, once. */
static ptwm_error file_finish(ptwm_fstream_file *f, ptwm_error rc, ptwm_err *err) {
    ptwm_error r2 = f->done(f->ctx, rc, rc ? NULL : err);
    ptwm_free(f);
    return rc ? rc : r2;
}

/* Retire one streamed chunk: hash it into its tensor's state, hand it to the
 * sink, and finish its file if it was the file's last. */
static ptwm_error stream_retire(sdrive *d, ptwm_xxh128 *h, ptwm_sink_fn sink, void *ctx, ptwm_err *err) {
    sjob *j = NULL;
    const rtensor *t;
    const rchunk *c;
    ptwm_fstream_file *f;
    uint8_t got[16];
    int done = 0;
    ptwm_error rc;
    size_t k;
    /* One thread: decode the next chunks in order while what waits to be
     * written is small, so that retiring the first writes them all at once.
     * (On two threads this left the other thread without work a third of
     * the time; there a thread writes what is listed as it finishes.) With
     * an I/O thread, decode every chunk queued: the oldest was then decoded
     * and handed over a ring ago, and its write is done. */
    for (k = 0; d->nworkers == 1 && k < d->npending && (d->io || d->wq_bytes < WRITE_BATCH); k++)
        ptwm_queue_help(d->q, (d->head + k) % d->window);
    rc = sdrive_retire(d, &j, err);
    t = &j->r->t[j->tensor];
    c = &t->chunks[j->chunk];
    f = j->file;
    j->file = NULL;
    if (!rc) rc = retired_hash(t, j, h, got, &done, err);
    if (!rc && sink) rc = sink(ctx, j->dst, c->raw, err);
    if (!rc && done) rc = check_hash(j->r, t, got, err);
    if (j->own_cap > SLOT_KEEP) {
        ptwm_ctx_give(d->ctx, j->own, j->own_cap);
        j->own = NULL;
        j->own_cap = 0;
    }
    if (!f) return rc;
    if (rc && !f->rc) f->rc = rc;
    if (--f->pending || !f->sealed) return rc;
    return file_finish(f, f->rc, rc ? NULL : err);
}

/* Queue tensors indices[0..n) of d->r (NULL: every tensor in table order),
 * tensor i's bytes for offset offs[i] of the current file if any, retiring
 * older chunks as the ring fills. */
static ptwm_error queue_tensors(sdrive *d, ptwm_xxh128 *h, const size_t *indices, size_t n,
                                const uint64_t *offs, ptwm_sink_fn sink, void *ctx, ptwm_err *err) {
    ptwm_reader *r = d->r;
    ptwm_error rc = PTWM_OK;
    size_t i;
    uint64_t k;
    for (i = 0; indices && i < n; i++)
        if (indices[i] >= r->nt)
            return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", indices[i], r->nt);
    for (i = 0; i < n; i++) {
        const rtensor *t = &r->t[indices ? indices[i] : i];
        for (k = 0; k < t->nchunks; k++) {
            if (t->chunks[k].raw <= SLOT_KEEP) d->max_raw = PTWM_MAX(d->max_raw, t->chunks[k].raw);
            /* workers read max_coded while more tensors are queued */
            if (t->chunks[k].coded <= SLOT_KEEP && t->chunks[k].coded > d->max_coded)
                __atomic_store_n(&d->max_coded, (size_t)t->chunks[k].coded, __ATOMIC_RELAXED);
        }
    }
    if (d->ring_cap < d->units * d->max_raw) {
        /* A larger ring, once the chunks in the old one have retired. */
        while (d->npending && !rc) rc = stream_retire(d, h, sink, ctx, err);
        if (rc) return rc;
        ptwm_ctx_give(d->ctx, d->ring, d->ring_cap);
        d->ring_cap = d->units * d->max_raw;
        d->ring_head = d->ring_tail = 0;
        if (!(d->ring = (uint8_t *)ptwm_ctx_take(d->ctx, d->ring_cap))) {
            d->ring_cap = 0;
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu bytes of decoded chunks",
                             d->units * d->max_raw);
        }
    }
    for (i = 0; i < n && !rc; i++) {
        size_t ti = indices ? indices[i] : i;
        const rtensor *t = &r->t[ti];
        if (t->nchunks == 0 && (t->flags & PTWM_TF_PAYLOAD_HASH)) {
            /* An empty tensor's hash is that of no bytes; it has no chunk to carry the check. */
            uint8_t got[16];
            while (d->npending && !rc) rc = stream_retire(d, h, sink, ctx, err);
            ptwm_xxh128_oneshot("", 0, got);
            if (!rc) rc = check_hash(r, t, got, err);
        }
        for (k = 0; k < t->nchunks && !rc; k++) {
            /* Bound the raw bytes in flight too: a few coded bytes may stand
             * for a 256 MiB constant chunk, and the ring has many slots. */
            while (d->npending && !rc &&
                   (d->npending == d->window || d->inflight + t->chunks[k].raw > STREAM_BUDGET ||
                    !ring_fits(d, t->chunks[k].raw)))
                rc = stream_retire(d, h, sink, ctx, err);
            if (!rc) rc = sdrive_submit(d, i, ti, k, NULL, offs ? offs[i] : 0, err);
        }
    }
    return rc;
}

/* Retire everything still queued: cleanly while nothing failed, then
 * quietly (files of chunks retired after a failure are finished failed). */
static ptwm_error drain(sdrive *d, ptwm_xxh128 *h, ptwm_sink_fn sink, void *ctx, ptwm_error rc,
                        ptwm_err *err) {
    while (d->npending && !rc) rc = stream_retire(d, h, sink, ctx, err);
    while (d->npending) {
        sjob *j = NULL;
        ptwm_fstream_file *f;
        (void)sdrive_retire(d, &j, NULL);
        f = j->file;
        j->file = NULL;
        if (f && !--f->pending && f->sealed) (void)file_finish(f, f->rc ? f->rc : rc, NULL);
    }
    return rc;
}

ptwm_error ptwm_reader_stream_all(ptwm_reader *r, ptwm_sink_fn sink, void *ctx, ptwm_err *err) {
    sdrive d;
    ptwm_xxh128 h = {NULL};
    ptwm_error rc;
    if (!r) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader");
    if (!(rc = sdrive_init(&d, r, r->threads, 3, 1, err)))
        rc = drain(&d, &h, sink, ctx, queue_tensors(&d, &h, NULL, r->nt, NULL, sink, ctx, err), err);
    ptwm_xxh128_free(&h);
    sdrive_free(&d);
    return rc;
}

/* ---- streaming into files, across readers --------------------------------- */

struct ptwm_fstream {
    sdrive d;
    ptwm_xxh128 h;
    ptwm_sink_fn sink;
    void *ctx;
    ptwm_error rc;               /* the first failure: every later call returns it */
    ptwm_err err;
};

ptwm_error ptwm_fstream_open(int threads, ptwm_sink_fn progress, void *ctx, ptwm_fstream **out,
                             ptwm_err *err) {
    ptwm_fstream *s;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output handle");
    *out = NULL;
    if (!(s = (ptwm_fstream *)ptwm_calloc(1, sizeof(*s))))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a stream");
    s->sink = progress;
    s->ctx = ctx;
    if ((rc = sdrive_init(&s->d, NULL, threads, 3, 1, err))) {
        sdrive_free(&s->d);
        ptwm_free(s);
        return rc;
    }
    *out = s;
    return PTWM_OK;
}

static ptwm_error fstream_failed(ptwm_fstream *s, ptwm_err *err) {
    if (err) *err = s->err;
    return s->rc;
}

static ptwm_error fstream_note(ptwm_fstream *s, ptwm_error rc, ptwm_err *err) {
    if (rc && !s->rc) {
        s->rc = rc;
        if (err) s->err = *err;
    }
    return rc;
}

ptwm_error ptwm_fstream_begin(ptwm_fstream *s, int fd, const char *path, ptwm_fstream_done_fn done,
                              void *ctx, ptwm_err *err) {
    ptwm_fstream_file *f;
    if (!s || fd < 0 || !done) {
        if (done) done(ctx, PTWM_ERR_INVALID_ARG, NULL);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no stream, file or callback");
    }
    if (s->rc || s->d.file) {
        done(ctx, s->rc ? s->rc : PTWM_ERR_INVALID_ARG, NULL);
        if (s->rc) return fstream_failed(s, err);
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: the last file was not ended");
    }
    if (!(f = (ptwm_fstream_file *)ptwm_calloc(1, sizeof(*f)))) {
        done(ctx, PTWM_ERR_NOMEM, NULL);
        return fstream_note(s, ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory"), err);
    }
    f->fd = fd;
    f->path = path;
    f->done = done;
    f->ctx = ctx;
    /* One decoding thread: write on another core (without one, or if the
     * thread does not start, the decoding thread writes). */
    if (!s->d.io && s->d.nworkers == 1 && ptwm_cpu_count() > 1) (void)ptwm_io_start(&s->d.io, NULL);
    s->d.file = f;
    return PTWM_OK;
}

/* The blocks the tensors will fill, allocated at once: on a 128 MiB restore
 * (ext4) that took 8% off one thread's time and 7% off two threads' (ext4
 * reserved each 4 KiB block as it was written, and every write past the
 * end moved the file size). */
static void allocate_tensors(int fd, const ptwm_reader *r, const size_t *indices, size_t n,
                             const uint64_t *offs) {
    uint64_t lo = UINT64_MAX, hi = 0, end;
    size_t i;
    for (i = 0; i < n; i++) {
        if (indices[i] >= r->nt || ptwm_add_overflow(offs[i], r->t[indices[i]].nbytes, &end)) return;
        lo = PTWM_MIN(lo, offs[i]);
        hi = PTWM_MAX(hi, end);
    }
    if (hi > lo) ptwm_allocate_range(fd, lo, hi - lo);
}

ptwm_error ptwm_fstream_add(ptwm_fstream *s, ptwm_reader *r, const size_t *indices, size_t n,
                            const uint64_t *offs, ptwm_err *err) {
    if (!s || !r || !s->d.file || !offs || (n && !indices))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no file begun, reader or offsets");
    if (s->rc) return fstream_failed(s, err);
    s->d.r = r;
    allocate_tensors(s->d.file->fd, r, indices, n, offs);
    return fstream_note(s, queue_tensors(&s->d, &s->h, indices, n, offs, s->sink, s->ctx, err), err);
}

ptwm_error ptwm_fstream_end(ptwm_fstream *s, ptwm_err *err) {
    ptwm_fstream_file *f = s ? s->d.file : NULL;
    if (!f) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no file begun");
    f->sealed = 1;
    s->d.file = NULL;   /* its chunks in flight finish it as they retire */
    if (f->pending) return s->rc ? fstream_failed(s, err) : PTWM_OK;
    return fstream_note(s, file_finish(f, s->rc, s->rc ? NULL : err), err);
}

ptwm_error ptwm_fstream_close(ptwm_fstream *s, ptwm_err *err) {
    ptwm_error rc;
    if (!s) return PTWM_OK;
    if (s->d.file) {   /* begun and never ended: it cannot be complete */
        ptwm_fstream_file *f = s->d.file;
        f->sealed = 1;
        s->d.file = NULL;
        fstream_note(s, ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream closed with a file not ended"),
                     err);
        if (!f->pending) (void)file_finish(f, s->rc, NULL);
    }
    rc = s->rc ? fstream_failed(s, err) : PTWM_OK;
    rc = drain(&s->d, &s->h, s->sink, s->ctx, rc, err);
    ptwm_xxh128_free(&s->h);
    sdrive_free(&s->d);
    ptwm_free(s);
    return rc;
}

/* One file through a stream of its own. */
static ptwm_error done_nothing(void *ctx, ptwm_error rc, ptwm_err *err) {
    (void)ctx;
    (void)err;
    return rc;
}

ptwm_error ptwm_reader_stream_to_file(ptwm_reader *r, const size_t *indices, size_t n, int fd,
                                      const char *path, const uint64_t *offs, ptwm_sink_fn sink,
                                      void *ctx, ptwm_err *err) {
    ptwm_fstream *s = NULL;
    ptwm_error rc, r2;
    if (!r || fd < 0 || !offs || (n && !indices))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "stream to file: no file, offsets or tensors");
    if ((rc = ptwm_fstream_open(r->threads, sink, ctx, &s, err))) return rc;
    rc = ptwm_fstream_begin(s, fd, path, done_nothing, NULL, err);
    if (!rc) rc = ptwm_fstream_add(s, r, indices, n, offs, err);
    if (!rc) rc = ptwm_fstream_end(s, err);
    r2 = ptwm_fstream_close(s, rc ? NULL : err);
    return rc ? rc : r2;
}

ptwm_error ptwm_reader_verify(ptwm_reader *r, ptwm_err *err) {
    return ptwm_reader_stream_all(r, NULL, NULL, err);
}
