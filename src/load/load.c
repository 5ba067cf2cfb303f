/* Layout loads: a program's parameters, named and shaped, filled from any
 * source into one F32 array in the program's order.
 *
 * Every entry is checked (present, same shape, a dtype the conversion allows)
 * before anything is read, so a failed load names the bad tensor and leaves
 * no half-read surprise behind a later error. Tensors then stream into the
 * destination in bounded pieces: F32 is read straight into it; other dtypes go
 * through one staging buffer (STAGE_PIECE bytes for raw reads, LOAD_PIECE
 * for .ptwm decodes). From .ptwm, runs of small whole tensors are decoded by
 * one read_many call each (BATCH_BYTES). A memory-mapped safetensors tensor
 * is converted from the mapping with no copy at all. */
#include <stdlib.h>
#include "raw_f32.h"
#include "safetensors.h"

/* Source bytes per read. A multiple of any power-of-two .ptwm chunk size up to
 * it, so a decode_range call never decodes a chunk that the next call decodes
 * again, and large enough to keep several decoding threads busy. */
#define LOAD_PIECE ((uint64_t)16 << 20)
#define STAGE_PIECE ((uint64_t)128 << 10)
/* From .ptwm, whole tensors of at most BATCH_BYTES stored bytes in all (and
 * at most BATCH_MAX of them) are decoded by one read_many call, so the
 * chunks of many small tensors share the decoding threads where one
 * decode_range call per tensor kept a single-chunk tensor on one thread. F32
 * decodes straight into the destination; other dtypes into a stage small
 * enough to be converted while still in cache (docs/ARCHITECTURE.md). */
#define BATCH_BYTES ((uint64_t)4 << 20)
#define BATCH_MAX 1024

typedef struct load_plan {
    size_t index;        /* in the source */
    ptwm_dtype dtype;
    unsigned width;      /* bytes per element */
    uint64_t count;      /* elements */
    const uint8_t *data; /* the mapping, when the source has one */
} load_plan;

ptwm_error ptwm_layout_elements(const ptwm_layout_entry *entries, size_t n, uint64_t *count,
                                ptwm_err *err) {
    uint64_t total = 0;
    size_t i;
    uint32_t d;
    if (n && !entries) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "layout: NULL entries");
    for (i = 0; i < n; i++) {
        uint64_t c = 1;
        if (!entries[i].name || (entries[i].ndim && !entries[i].shape))
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "layout entry %zu: NULL name or shape", i);
        if (entries[i].ndim > PTWM_MAX_NDIM)
            return ptwm_fail(err, PTWM_ERR_LIMIT, "layout entry '%s': %u dimensions, at most %d",
                             entries[i].name, entries[i].ndim, PTWM_MAX_NDIM);
        for (d = 0; d < entries[i].ndim; d++)
            if (ptwm_mul_overflow(c, entries[i].shape[d], &c))
                return ptwm_fail(err, PTWM_ERR_SHAPE, "layout entry '%s': shape overflows 64 bits",
                                 entries[i].name);
        if (ptwm_add_overflow(total, c, &total))
            return ptwm_fail(err, PTWM_ERR_SHAPE, "layout: element count overflows 64 bits at '%s'",
                             entries[i].name);
    }
    *count = total;
    return PTWM_OK;
}

static int dtype_allowed(ptwm_dtype dt, ptwm_convert conv) {
    switch (dt) {
    case PTWM_DTYPE_F32:
    case PTWM_DTYPE_BF16:
    case PTWM_DTYPE_F16: return 1;
    case PTWM_DTYPE_F64: return conv >= PTWM_CONVERT_F64_ROUND;
    case PTWM_DTYPE_BOOL:
    case PTWM_DTYPE_U8:
    case PTWM_DTYPE_I8:
    case PTWM_DTYPE_I16:
    case PTWM_DTYPE_U16:
    case PTWM_DTYPE_I32:
    case PTWM_DTYPE_U32:
    case PTWM_DTYPE_I64:
    case PTWM_DTYPE_U64: return conv >= PTWM_CONVERT_INT;
    default: return 0;
    }
}

/* Find the entry's tensor and check its shape and dtype. */
static ptwm_error plan_entry(ptwm_source *s, const ptwm_layout_entry *e, ptwm_convert conv,
                             load_plan *p, ptwm_err *err) {
    ptwm_tensor_info ti;
    ptwm_error rc;
    uint32_t d;
    int same;
    rc = ptwm_source_find(s, e->name, &p->index, err);
    if (rc) return rc;
    rc = ptwm_source_tensor(s, p->index, &ti, NULL);
    if (rc) return ptwm_fail(err, rc, "tensor '%s': cannot describe it", e->name);
    same = ti.ndim == e->ndim;
    for (d = 0; same && d < e->ndim; d++) same = ti.shape[d] == e->shape[d];
    if (ptwm_source_get_kind(s) == PTWM_SOURCE_RAW_F32) {
        /* a raw file has no shape of its own: any shape of as many values fits */
        uint64_t want;
        same = !ptwm_layout_elements(e, 1, &want, NULL) && want == ti.shape[0];
    }
    if (!same) {
        char have[256], want[256];
        ptwm_format_shape(ti.shape, ti.ndim, have, sizeof(have));
        ptwm_format_shape(e->shape, e->ndim, want, sizeof(want));
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "tensor '%s': shape %s in '%s', layout expects %s", e->name, have,
                         ptwm_source_path(s), want);
    }
    if (!dtype_allowed(ti.dtype, conv)) {
        const char *dn = ptwm_dtype_name(ti.dtype);
        const char *need = ti.dtype == PTWM_DTYPE_F64 ? "PTWM_CONVERT_F64_ROUND"
                           : dtype_allowed(ti.dtype, PTWM_CONVERT_INT) ? "PTWM_CONVERT_INT"
                                                                       : NULL;
        if (need)
            return ptwm_fail(err, PTWM_ERR_DTYPE,
                             "tensor '%s': dtype %s in '%s' is not loaded as F32 without %s",
                             e->name, dn ? dn : "?", ptwm_source_path(s), need);
        return ptwm_fail(err, PTWM_ERR_DTYPE,
                         "tensor '%s': dtype %s in '%s' has no conversion to F32", e->name,
                         dn ? dn : "?", ptwm_source_path(s));
    }
    p->dtype = ti.dtype;
    p->width = ptwm_dtype_bits(ti.dtype) / 8;
    if (ti.dtype == PTWM_DTYPE_BOOL) p->width = 1;
    p->count = p->width ? ti.nbytes / p->width : 0;
    p->data = (const uint8_t *)ti.data;
    return PTWM_OK;
}

/* n little-endian elements of dtype dt at src (any alignment) to F32. */
static void convert(ptwm_dtype dt, const uint8_t *src, float *dst, size_t n) {
    size_t i;
    switch (dt) {
    case PTWM_DTYPE_F32:
        memcpy(dst, src, n * 4);
        ptwm_raw_le32_inplace(dst, n);
        return;
    case PTWM_DTYPE_BF16:
    case PTWM_DTYPE_F16:
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        for (i = 0; i < n; i++) {
            uint16_t h = ptwm_load_le16(src + 2 * i);
            if (dt == PTWM_DTYPE_BF16) ptwm_bf16_to_f32(&h, dst + i, 1);
            else ptwm_f16_to_f32(&h, dst + i, 1);
        }
#else
        /* callers pass 2-byte-aligned sources (see load_part) */
        if (dt == PTWM_DTYPE_BF16) ptwm_bf16_to_f32((const uint16_t *)(const void *)src, dst, n);
        else ptwm_f16_to_f32((const uint16_t *)(const void *)src, dst, n);
#endif
        return;
    case PTWM_DTYPE_F64:
        for (i = 0; i < n; i++) {
            uint64_t b = ptwm_load_le64(src + 8 * i);
            double v;
            memcpy(&v, &b, 8);
            dst[i] = (float)v;
        }
        return;
    case PTWM_DTYPE_BOOL:
        for (i = 0; i < n; i++) dst[i] = src[i] ? 1.0f : 0.0f;
        return;
    case PTWM_DTYPE_U8:
        for (i = 0; i < n; i++) dst[i] = (float)src[i];
        return;
    case PTWM_DTYPE_I8:
        for (i = 0; i < n; i++) dst[i] = (float)(int8_t)src[i];
        return;
    case PTWM_DTYPE_U16:
        for (i = 0; i < n; i++) dst[i] = (float)ptwm_load_le16(src + 2 * i);
        return;
    case PTWM_DTYPE_I16:
        for (i = 0; i < n; i++) dst[i] = (float)(int16_t)ptwm_load_le16(src + 2 * i);
        return;
    case PTWM_DTYPE_U32:
        for (i = 0; i < n; i++) dst[i] = (float)ptwm_load_le32(src + 4 * i);
        return;
    case PTWM_DTYPE_I32:
        for (i = 0; i < n; i++) dst[i] = (float)(int32_t)ptwm_load_le32(src + 4 * i);
        return;
    case PTWM_DTYPE_U64:
        for (i = 0; i < n; i++) dst[i] = (float)ptwm_load_le64(src + 8 * i);
        return;
    case PTWM_DTYPE_I64:
        for (i = 0; i < n; i++) dst[i] = (float)(int64_t)ptwm_load_le64(src + 8 * i);
        return;
    default: return;  /* excluded by dtype_allowed */
    }
}

/* Elements [first, first + count) of a planned tensor into dst. */
static ptwm_error load_part(ptwm_source *s, const ptwm_layout_entry *e, const load_plan *p,
                            uint64_t first, float *dst, uint64_t count, ptwm_err *err) {
    uint64_t per_piece = LOAD_PIECE / p->width, done = 0;
    uint8_t *stage = NULL;
    ptwm_error rc = PTWM_OK;
    int direct_f32 = p->dtype == PTWM_DTYPE_F32;
    if (count == 0) return PTWM_OK;
    /* Zero-copy from a mapping, unless a 16-bit source is misaligned (the
     * kernels read uint16_t). */
    if (p->data && (p->width != 2 || ((uintptr_t)p->data & 1) == 0)) {
        while (done < count) {
            uint64_t k = PTWM_MIN(count - done, per_piece);
            convert(p->dtype, p->data + (first + done) * p->width, dst + done, (size_t)k);
            done += k;
        }
        return PTWM_OK;
    }
    /* Raw bytes read with pread convert while still in cache when the
     * staging piece is small; .ptwm pieces stay LOAD_PIECE (whole chunks). */
    if (!direct_f32 && ptwm_source_get_kind(s) != PTWM_SOURCE_PTWM &&
        ptwm_source_get_kind(s) != PTWM_SOURCE_PTWM_DIR)
        per_piece = STAGE_PIECE / p->width;
    if (!direct_f32) {
        stage = (uint8_t *)ptwm_malloc(PTWM_MIN(count, per_piece) * p->width);
        if (!stage)
            return ptwm_fail(err, PTWM_ERR_NOMEM, "tensor '%s': no memory for a read buffer",
                             e->name);
    }
    while (done < count) {
        uint64_t k = PTWM_MIN(count - done, per_piece);
        uint8_t *buf = direct_f32 ? (uint8_t *)(dst + done) : stage;
        rc = ptwm_source_read(s, p->index, (first + done) * p->width, buf, (size_t)(k * p->width),
                              err);
        if (rc) {
            ptwm_err_prefix(err, "tensor '%s'", e->name);
            break;
        }
        convert(p->dtype, buf, dst + done, (size_t)k);
        done += k;
    }
    ptwm_free(stage);
    return rc;
}

ptwm_error ptwm_load_tensor_part(ptwm_source *s, const ptwm_layout_entry *entry,
                                 ptwm_convert conv, uint64_t first, float *dst, uint64_t count,
                                 ptwm_err *err) {
    load_plan p;
    uint64_t end;
    ptwm_error rc;
    if (!s || !entry || (!dst && count))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "load: NULL source, entry or destination");
    rc = ptwm_layout_elements(entry, 1, &end, err);
    if (rc) return rc;
    rc = plan_entry(s, entry, conv, &p, err);
    if (rc) return rc;
    if (ptwm_add_overflow(first, count, &end) || end > p.count)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "tensor '%s': elements [%llu, +%llu) outside its %llu", entry->name,
                         (unsigned long long)first, (unsigned long long)count,
                         (unsigned long long)p.count);
    return load_part(s, entry, &p, first, dst, count, err);
}

/* A raw file holds the layout's tensors back to back with nothing to name
 * them: the layout's order is the file's, and its total must be the file's. */
static ptwm_error load_raw(ptwm_source *s, uint64_t total, float *dst, ptwm_err *err) {
    ptwm_tensor_info ti;
    ptwm_layout_entry whole;
    load_plan p;
    uint64_t shape[1];
    ptwm_error rc = ptwm_source_tensor(s, 0, &ti, NULL);
    if (rc) return ptwm_fail(err, rc, "'%s': cannot describe the raw file", ptwm_source_path(s));
    if (ti.shape[0] != total)
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "file '%s' has %llu bytes, layout needs %llu (%llu floats)",
                         ptwm_source_path(s), (unsigned long long)ti.nbytes,
                         (unsigned long long)total * 4, (unsigned long long)total);
    shape[0] = total;
    whole.name = "";
    whole.ndim = 1;
    whole.shape = shape;
    rc = plan_entry(s, &whole, PTWM_CONVERT_FLOAT, &p, err);
    if (rc) return rc;
    return load_part(s, &whole, &p, 0, dst, total, err);
}

/* The arguments of one read_many call and the stage it decodes into. */
typedef struct load_batch {
    size_t idx[BATCH_MAX], sizes[BATCH_MAX];
    void *dsts[BATCH_MAX];
    uint8_t *stage;  /* BATCH_BYTES */
} load_batch;

/* Bytes a planned tensor takes in the stage (8-byte aligned for the kernels). */
static uint64_t staged_bytes(const load_plan *p) {
    return p->dtype == PTWM_DTYPE_F32 ? 0 : (p->count * p->width + 7) & ~(uint64_t)7;
}

/* The end of the batch of whole tensors from `start`: start itself if its
 * tensor is not decoded in a batch. */
static size_t batch_end(const load_plan *plans, size_t n, size_t start) {
    uint64_t stored = 0;
    size_t end = start;
    while (end < n && end - start < BATCH_MAX && !plans[end].data &&
           stored + plans[end].count * plans[end].width + 8 <= BATCH_BYTES) {
        stored += (plans[end].count * plans[end].width + 7) & ~(uint64_t)7;
        end++;
    }
    return end;
}

/* Planned tensors [i, end) into dst, back to back, with one read_many call. */
static ptwm_error load_batched(ptwm_source *s, const load_plan *plans, size_t i, size_t end,
                               float *dst, load_batch *b, ptwm_err *err) {
    uint64_t so = 0, pos = 0;
    size_t j;
    ptwm_error rc;
    for (j = i; j < end; j++) {
        b->idx[j - i] = plans[j].index;
        b->sizes[j - i] = (size_t)(plans[j].count * plans[j].width);
        b->dsts[j - i] = plans[j].dtype == PTWM_DTYPE_F32 ? (void *)(dst + pos) : b->stage + so;
        so += staged_bytes(&plans[j]);
        pos += plans[j].count;
    }
    rc = ptwm_source_read_many(s, b->idx, b->dsts, b->sizes, end - i, err);
    if (rc) return rc;
    for (j = i, pos = 0; j < end; j++) {
        if (plans[j].dtype == PTWM_DTYPE_F32)  /* decoded in place */
            ptwm_raw_le32_inplace(dst + pos, (size_t)plans[j].count);
        else
            convert(plans[j].dtype, (const uint8_t *)b->dsts[j - i], dst + pos,
                    (size_t)plans[j].count);
        pos += plans[j].count;
    }
    return PTWM_OK;
}

ptwm_error ptwm_load_layout(ptwm_source *s, const ptwm_layout_entry *entries, size_t n,
                            ptwm_convert conv, float *dst, uint64_t dst_count, ptwm_err *err) {
    load_plan *plans;
    load_batch *b = NULL;
    uint64_t total, pos = 0;
    size_t i;
    ptwm_error rc;
    if (!s || (!dst && dst_count))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "load: NULL source or destination");
    rc = ptwm_layout_elements(entries, n, &total, err);
    if (rc) return rc;
    if (total != dst_count)
        return ptwm_fail(err, PTWM_ERR_MISMATCH, "layout needs %llu floats, array has %llu",
                         (unsigned long long)total, (unsigned long long)dst_count);
    if (ptwm_source_get_kind(s) == PTWM_SOURCE_RAW_F32) return load_raw(s, total, dst, err);
    plans = (load_plan *)ptwm_calloc(n ? n : 1, sizeof(*plans));
    if (!plans) return ptwm_fail(err, PTWM_ERR_NOMEM, "load: no memory for %zu entries", n);
    for (i = 0; i < n && !rc; i++) rc = plan_entry(s, &entries[i], conv, &plans[i], err);
    if (!rc && n > 1 && (ptwm_source_get_kind(s) == PTWM_SOURCE_PTWM ||
                         ptwm_source_get_kind(s) == PTWM_SOURCE_PTWM_DIR)) {
        b = (load_batch *)ptwm_malloc(sizeof(*b));
        if (b) b->stage = (uint8_t *)ptwm_malloc(BATCH_BYTES);
        if (!b || !b->stage) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "load: no memory for a batch");
    }
    for (i = 0; i < n && !rc;) {
        size_t end = b ? batch_end(plans, n, i) : i;
        if (end > i + 1) {
            rc = load_batched(s, plans, i, end, dst + pos, b, err);
            for (; i < end; i++) pos += plans[i].count;
        } else {
            rc = load_part(s, &entries[i], &plans[i], 0, dst + pos, plans[i].count, err);
            pos += plans[i].count;
            i++;
        }
    }
    if (b) ptwm_free(b->stage);
    ptwm_free(b);
    ptwm_free(plans);
    return rc;
}
