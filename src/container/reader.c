/* The .ptwm reader's handle (docs/FORMAT.md): open, close, work memory and
 * the accessors of what the table holds.
 *
 * Opening reads the footer and the table only (every count, offset and size
 * checked against the file size, allocations capped by what the table's own
 * length can hold: read_table.c); payloads are read when a chunk is decoded,
 * by pread for a file (so decoding a big file keeps only a window of chunks
 * resident) or straight from the caller's buffer for an in-memory image.
 * Order at open: magic and header, footer (its CRC, then what it says of the
 * file), the table's bytes and CRC, then the table's sections. Nothing here
 * takes a lock: one thread calls a reader at a time. */
#include "reader_impl.h"
#include "chunk.h"
#include "container_format.h"
#include "context.h"
#include "fileio.h"
#include "reader.h"

#include <stdlib.h>
#include <unistd.h>

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
    return ptwm_reader_parse_table(r, r->table, r->table_size, 1, err);
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
ptwm_error ptwm_reader_workspaces(ptwm_reader *r, unsigned n, ptwm_err *err) {
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

int ptwm_reader_get_threads(const ptwm_reader *r) { return r ? r->threads : 0; }

void ptwm_reader_set_threads(ptwm_reader *r, int threads) {
    if (!r || r->threads == threads) return;
    r->threads = threads;
    ptwm_pool_free(r->pool);
    r->pool = NULL;
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
    if ((i = ptwm_nametab_lookup(&r->by_name, r, ptwm_reader_tensor_name, name)) == SIZE_MAX)
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

int ptwm_reader_tensor_hash(const ptwm_reader *r, size_t index, uint8_t hash[16]) {
    if (!r || index >= r->nt || !(r->t[index].flags & PTWM_TF_PAYLOAD_HASH)) return 0;
    memcpy(hash, r->t[index].hash, 16);
    return 1;
}
