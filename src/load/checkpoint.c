/* Training checkpoints: optimizer state saved and resumed bit-exactly.
 *
 * Self-describing formats (.ptwm, safetensors) hold one tensor per parameter
 * and buffer ("param/<name>", "momentum/<name>", "adam.m/<name>",
 * "adam.v/<name>") and metadata naming the optimizer, the step, the
 * hyper-parameters and the bias corrections. Floats are written with nine
 * significant digits, which strtof reads back to the same bits.
 *
 * The raw format is what simple trainers write: the buffers back to back with
 * no header, its size fixed by the optimizer and the parameter count
 * (docs/LOADING.md has the byte layout). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "fileio.h"
#include "raw_f32.h"
#include "safetensors.h"
#include "sink.h"

#define CKPT_PIECE ((uint64_t)1 << 18)  /* values per staged write */
#define CKPT_MAX_BUFFERS 4              /* params, momentum or m and v */

typedef struct opt_desc {
    ptwm_optimizer kind;
    const char *key;      /* metadata value */
    const char *title;    /* for messages */
} opt_desc;

static const opt_desc opt_table[] = {
    {PTWM_OPT_SGD, "sgd", "SGD"},
    {PTWM_OPT_MOMENTUM, "momentum", "SGD+momentum"},
    {PTWM_OPT_ADAM, "adam", "Adam"},
    {PTWM_OPT_ADAMW, "adamw", "AdamW"},
    {PTWM_OPT_ADAMW_BF16, "adamw_bf16", "AdamW-BF16"},
};

static const opt_desc *opt_find(ptwm_optimizer kind) {
    size_t i;
    for (i = 0; i < PTWM_ARRAY_LEN(opt_table); i++)
        if (opt_table[i].kind == kind) return &opt_table[i];
    return NULL;
}

/* One stored buffer of the state: where it lives and how it is named. */
typedef struct ckpt_buf {
    const char *prefix;   /* "param/" ... */
    ptwm_dtype dtype;     /* F32, or BF16 for packed moments */
    void *data;           /* n_params values */
} ckpt_buf;

/* The buffers a kind stores, in raw-file order. */
static size_t state_buffers(const ptwm_optim_state *st, ckpt_buf *b) {
    size_t k = 0;
    b[k++] = (ckpt_buf){"param/", PTWM_DTYPE_F32, st->params};
    switch (st->kind) {
    case PTWM_OPT_MOMENTUM: b[k++] = (ckpt_buf){"momentum/", PTWM_DTYPE_F32, st->momentum_buf}; break;
    case PTWM_OPT_ADAM:
    case PTWM_OPT_ADAMW:
        b[k++] = (ckpt_buf){"adam.m/", PTWM_DTYPE_F32, st->m};
        b[k++] = (ckpt_buf){"adam.v/", PTWM_DTYPE_F32, st->v};
        break;
    case PTWM_OPT_ADAMW_BF16:
        b[k++] = (ckpt_buf){"adam.m/", PTWM_DTYPE_BF16, st->m_bf16};
        b[k++] = (ckpt_buf){"adam.v/", PTWM_DTYPE_BF16, st->v_bf16};
        break;
    default: break;
    }
    return k;
}

static int has_bias_corrections(ptwm_optimizer kind) {
    return kind == PTWM_OPT_ADAM || kind == PTWM_OPT_ADAMW || kind == PTWM_OPT_ADAMW_BF16;
}

ptwm_error ptwm_ckpt_raw_size(ptwm_optimizer kind, uint64_t n_params, uint64_t *bytes,
                              ptwm_err *err) {
    uint64_t per = 0, total;
    switch (kind) {
    case PTWM_OPT_SGD: per = 4; break;
    case PTWM_OPT_MOMENTUM: per = 8; break;
    case PTWM_OPT_ADAM:
    case PTWM_OPT_ADAMW: per = 12; break;
    case PTWM_OPT_ADAMW_BF16: per = 8; break;
    default: return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "unknown optimizer kind %d", (int)kind);
    }
    if (ptwm_mul_overflow(n_params, per, &total) ||
        ptwm_add_overflow(total, has_bias_corrections(kind) ? 8 : 0, &total))
        return ptwm_fail(err, PTWM_ERR_SHAPE, "%llu parameters overflow a file size",
                         (unsigned long long)n_params);
    *bytes = total;
    return PTWM_OK;
}

/* The state must be complete for its kind and agree with the layout. */
static ptwm_error check_state(const ptwm_optim_state *st, const ptwm_layout_entry *layout,
                              size_t n, int need_layout, const opt_desc **od, ptwm_err *err) {
    ckpt_buf b[CKPT_MAX_BUFFERS];
    size_t k, i;
    uint64_t total;
    ptwm_error rc;
    if (!st) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: NULL state");
    *od = opt_find(st->kind);
    if (!*od) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: unknown optimizer kind %d",
                               (int)st->kind);
    k = state_buffers(st, b);
    for (i = 0; i < k; i++)
        if (!b[i].data && st->n_params)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: %s state lacks its %.*s buffer",
                             (*od)->title, (int)strlen(b[i].prefix) - 1, b[i].prefix);
    if (!need_layout && !layout) return PTWM_OK;
    rc = ptwm_layout_elements(layout, n, &total, err);
    if (rc) return rc;
    if (total != st->n_params)
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "checkpoint layout names %llu parameters, the state has %llu",
                         (unsigned long long)total, (unsigned long long)st->n_params);
    return PTWM_OK;
}

/* ---- raw format -------------------------------------------------------- */

/* n values of `width` bytes to fd, little-endian, through a small buffer. */
static ptwm_error write_values(ptwm_atomic_file *f, const void *src, uint64_t n, unsigned width,
                               uint8_t *stage, ptwm_err *err) {
    uint64_t done = 0;
    while (done < n) {
        uint64_t k = PTWM_MIN(n - done, CKPT_PIECE);
        ptwm_error rc;
        memcpy(stage, (const uint8_t *)src + done * width, (size_t)(k * width));
        if (width == 4) ptwm_raw_le32_inplace(stage, k);
        else ptwm_raw_le16_inplace(stage, k);
        rc = ptwm_write_full(f->fd, stage, (size_t)(k * width), f->final_path, err);
        if (rc) return rc;
        done += k;
    }
    return PTWM_OK;
}

static ptwm_error save_raw(const char *path, const ptwm_optim_state *st, ptwm_err *err) {
    ckpt_buf b[CKPT_MAX_BUFFERS];
    size_t k = state_buffers(st, b), i;
    ptwm_atomic_file f;
    uint8_t *stage = (uint8_t *)ptwm_malloc(CKPT_PIECE * 4);
    ptwm_error rc;
    memset(&f, 0, sizeof(f));
    f.fd = -1;
    if (!stage) return ptwm_fail(err, PTWM_ERR_NOMEM, "checkpoint '%s': out of memory", path);
    rc = ptwm_atomic_open(path, &f, err);
    for (i = 0; !rc && i < k; i++)
        rc = write_values(&f, b[i].data, st->n_params, b[i].dtype == PTWM_DTYPE_BF16 ? 2 : 4,
                          stage, err);
    if (!rc && has_bias_corrections(st->kind)) {
        float bc[2];
        bc[0] = st->bc1;
        bc[1] = st->bc2;
        rc = write_values(&f, bc, 2, 4, stage, err);
    }
    if (!rc) rc = ptwm_atomic_commit(&f, err);
    ptwm_atomic_abort(&f);
    ptwm_free(stage);
    return rc;
}

/* Which raw layout a file of `size` bytes would be, for the mismatch message. */
static const char *raw_size_hint(uint64_t size, uint64_t n_params, ptwm_optimizer want) {
    size_t i;
    for (i = 0; i < PTWM_ARRAY_LEN(opt_table); i++) {
        uint64_t b;
        if (opt_table[i].kind == want || opt_table[i].kind == PTWM_OPT_ADAMW) continue;
        if (!ptwm_ckpt_raw_size(opt_table[i].kind, n_params, &b, NULL) && b == size)
            return opt_table[i].title;
    }
    return NULL;
}

static ptwm_error load_raw(const char *path, ptwm_optim_state *st, const opt_desc *od,
                           ptwm_err *err) {
    ckpt_buf b[CKPT_MAX_BUFFERS];
    size_t k = state_buffers(st, b), i;
    uint64_t need, size, off = 0;
    int fd;
    ptwm_error rc = ptwm_ckpt_raw_size(st->kind, st->n_params, &need, err);
    if (rc) return rc;
    rc = ptwm_open_read(path, &fd, &size, err);
    if (rc) return rc;
    if (size != need) {
        const char *hint = raw_size_hint(size, st->n_params, st->kind);
        close(fd);
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "file '%s' has %llu bytes, an %s raw checkpoint of %llu params needs "
                         "%llu%s%s%s",
                         path, (unsigned long long)size, od->title,
                         (unsigned long long)st->n_params, (unsigned long long)need,
                         hint ? " (the size of the " : "", hint ? hint : "",
                         hint ? " raw layout)" : "");
    }
    for (i = 0; !rc && i < k; i++) {
        if (b[i].dtype == PTWM_DTYPE_BF16) {
            rc = ptwm_raw_pread_u16(fd, path, off, (uint16_t *)b[i].data, st->n_params, err);
            off += st->n_params * 2;
        } else {
            rc = ptwm_raw_pread_f32(fd, path, off, (float *)b[i].data, st->n_params, err);
            off += st->n_params * 4;
        }
    }
    if (!rc && has_bias_corrections(st->kind)) {
        float bc[2];
        rc = ptwm_raw_pread_f32(fd, path, off, bc, 2, err);
        if (!rc) {
            st->bc1 = bc[0];
            st->bc2 = bc[1];
        }
    }
    close(fd);
    return rc;
}

/* ---- self-describing formats -------------------------------------------- */

enum { META_OPT, META_STEP, META_LR, META_B1, META_B2, META_EPS, META_WD, META_MOM, META_BC1,
       META_BC2, META_COUNT };

static const char *const meta_keys[META_COUNT] = {
    "ptwm.optimizer", "ptwm.step", "ptwm.lr", "ptwm.beta1", "ptwm.beta2", "ptwm.eps",
    "ptwm.weight_decay", "ptwm.momentum", "ptwm.bc1", "ptwm.bc2"};

static float *meta_float(ptwm_optim_state *st, int i) {
    switch (i) {
    case META_LR: return &st->lr;
    case META_B1: return &st->beta1;
    case META_B2: return &st->beta2;
    case META_EPS: return &st->eps;
    case META_WD: return &st->weight_decay;
    case META_MOM: return &st->momentum;
    case META_BC1: return &st->bc1;
    default: return &st->bc2;
    }
}

/* "<prefix><name>", malloc'd. */
static char *join_name(const char *prefix, const char *name) {
    size_t a = strlen(prefix), b = strlen(name);
    char *s = (char *)ptwm_malloc(a + b + 1);
    if (!s) return NULL;
    memcpy(s, prefix, a);
    memcpy(s + a, name, b + 1);
    return s;
}

/* The buffers as a memory source, through the sink of the format. */
static ptwm_error write_tensors(const char *path, ptwm_ckpt_format fmt, const ptwm_tensor_desc *d,
                                size_t n, const ptwm_kv *meta, ptwm_err *err) {
    ptwm_memory_source m = {d, n, meta, META_COUNT};
    ptwm_conv_progress pr;
    ptwm_conv_src s;
    ptwm_conv_opts o;
    ptwm_error rc;
    ptwm_conv_opts_from(NULL, &pr, &o);
    if ((rc = ptwm_conv_src_wrap(&s, &ptwm_source_memory_ops, &m, path, err)) == PTWM_OK)
        rc = ptwm_conv_file_write(&s, fmt == PTWM_CKPT_SAFETENSORS ? &ptwm_sink_safetensors_ops
                                                                   : &ptwm_sink_ptwm_ops,
                                  &o, path, err);
    ptwm_conv_src_close(&s);
    return rc;
}

static ptwm_error save_described(const char *path, ptwm_ckpt_format fmt,
                                 const ptwm_layout_entry *layout, size_t n,
                                 const ptwm_optim_state *st, const opt_desc *od, ptwm_err *err) {
    ckpt_buf b[CKPT_MAX_BUFFERS];
    size_t k = state_buffers(st, b), i, j, nt = 0;
    char values[META_COUNT][40];
    ptwm_kv meta[META_COUNT];
    ptwm_tensor_desc *d = (ptwm_tensor_desc *)ptwm_calloc(k * n + 1, sizeof(*d));
    ptwm_error rc = PTWM_OK;
    uint64_t pos;
    ptwm_optim_state copy = *st;
    if (!d) return ptwm_fail(err, PTWM_ERR_NOMEM, "checkpoint '%s': out of memory", path);
    snprintf(values[META_OPT], sizeof(values[0]), "%s", od->key);
    snprintf(values[META_STEP], sizeof(values[0]), "%llu", (unsigned long long)st->step);
    for (i = META_LR; i < META_COUNT; i++)
        snprintf(values[i], sizeof(values[0]), "%.9g", (double)*meta_float(&copy, (int)i));
    for (i = 0; i < META_COUNT; i++) {
        meta[i].key = meta_keys[i];
        meta[i].value = values[i];
    }
    for (j = 0; j < k && !rc; j++) {
        unsigned width = b[j].dtype == PTWM_DTYPE_BF16 ? 2 : 4;
        for (i = 0, pos = 0; i < n && !rc; i++) {
            uint64_t cnt;
            ptwm_layout_elements(&layout[i], 1, &cnt, NULL);
            d[nt].name = join_name(b[j].prefix, layout[i].name);
            d[nt].dtype = b[j].dtype;
            d[nt].ndim = layout[i].ndim;
            d[nt].shape = layout[i].shape;
            d[nt].data = (const uint8_t *)b[j].data + pos * width;
            d[nt].nbytes = cnt * width;
            if (!d[nt].name) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "checkpoint: out of memory");
            nt++;
            pos += cnt;
        }
    }
    if (!rc) rc = write_tensors(path, fmt, d, nt, meta, err);
    for (i = 0; i < nt; i++) ptwm_free((void *)d[i].name);
    ptwm_free(d);
    return rc;
}

static ptwm_error parse_meta(const ptwm_source *s, ptwm_optim_state *st, const opt_desc *od,
                             ptwm_err *err) {
    const char *path = ptwm_source_path(s);
    const char *v = ptwm_source_metadata_get(s, meta_keys[META_OPT]);
    char *end;
    int i;
    if (!v)
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "'%s' has no ptwm.optimizer metadata: not a training checkpoint", path);
    if (strcmp(v, od->key) != 0)
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "checkpoint '%s' holds optimizer '%s', resuming '%s' (%s)", path, v,
                         od->key, od->title);
    for (i = META_STEP; i < META_COUNT; i++) {
        v = ptwm_source_metadata_get(s, meta_keys[i]);
        if (!v || !*v)
            return ptwm_fail(err, PTWM_ERR_SCHEMA, "checkpoint '%s': metadata %s missing", path,
                             meta_keys[i]);
        errno = 0;
        if (i == META_STEP) {
            unsigned long long x = strtoull(v, &end, 10);
            if (*end || errno || v[0] == '-')
                return ptwm_fail(err, PTWM_ERR_SCHEMA, "checkpoint '%s': %s '%s' is not a count",
                                 path, meta_keys[i], v);
            st->step = x;
        } else {
            float x = strtof(v, &end);
            if (*end)
                return ptwm_fail(err, PTWM_ERR_SCHEMA, "checkpoint '%s': %s '%s' is not a number",
                                 path, meta_keys[i], v);
            *meta_float(st, i) = x;
        }
    }
    return PTWM_OK;
}

/* One named buffer piece: exact name, shape and dtype, bytes as stored. */
static ptwm_error read_tensor(ptwm_source *s, const char *name, const ptwm_layout_entry *e,
                              ptwm_dtype dtype, uint8_t *dst, uint64_t count, ptwm_err *err) {
    size_t idx;
    ptwm_tensor_info ti;
    unsigned width = dtype == PTWM_DTYPE_BF16 ? 2 : 4;
    uint64_t done = 0;
    uint32_t d;
    int same;
    ptwm_error rc;
    if (ptwm_source_find(s, name, &idx, NULL) || ptwm_source_tensor(s, idx, &ti, NULL))
        return ptwm_fail(err, PTWM_ERR_MISMATCH, "checkpoint '%s' has no tensor '%s'",
                         ptwm_source_path(s), name);
    same = ti.ndim == e->ndim;
    for (d = 0; same && d < e->ndim; d++) same = ti.shape[d] == e->shape[d];
    if (!same) {
        char have[256], want[256];
        ptwm_format_shape(ti.shape, ti.ndim, have, sizeof(have));
        ptwm_format_shape(e->shape, e->ndim, want, sizeof(want));
        return ptwm_fail(err, PTWM_ERR_MISMATCH,
                         "checkpoint '%s': tensor '%s' has shape %s, layout expects %s",
                         ptwm_source_path(s), name, have, want);
    }
    if (ti.dtype != dtype)
        return ptwm_fail(err, PTWM_ERR_MISMATCH, "checkpoint '%s': tensor '%s' is %s, expected %s",
                         ptwm_source_path(s), name, ptwm_dtype_name(ti.dtype) ? ptwm_dtype_name(ti.dtype) : "?",
                         ptwm_dtype_name(dtype));
    while (done < count) {
        uint64_t k = PTWM_MIN(count - done, CKPT_PIECE * 16);
        rc = ptwm_source_read(s, idx, done * width, dst + done * width, (size_t)(k * width), err);
        if (rc) return rc;
        if (width == 4) ptwm_raw_le32_inplace(dst + done * width, k);
        else ptwm_raw_le16_inplace(dst + done * width, k);
        done += k;
    }
    return PTWM_OK;
}

static ptwm_error load_described(const char *path, ptwm_ckpt_format fmt,
                                 const ptwm_layout_entry *layout, size_t n, ptwm_optim_state *st,
                                 const opt_desc *od, ptwm_err *err) {
    ckpt_buf b[CKPT_MAX_BUFFERS];
    size_t k = state_buffers(st, b), i, j;
    ptwm_source *s = NULL;
    ptwm_optim_state tmp = *st;
    ptwm_error rc = ptwm_source_open(
        path, fmt == PTWM_CKPT_SAFETENSORS ? PTWM_SOURCE_SAFETENSORS : PTWM_SOURCE_PTWM, &s, err);
    if (rc) return rc;
    rc = parse_meta(s, &tmp, od, err);
    if (!rc && ptwm_source_count(s) != k * n)
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                       "checkpoint '%s' has %zu tensors, an %s state of %zu layout entries has %zu",
                       path, ptwm_source_count(s), od->title, n, k * n);
    for (j = 0; !rc && j < k; j++) {
        unsigned width = b[j].dtype == PTWM_DTYPE_BF16 ? 2 : 4;
        uint64_t pos = 0;
        for (i = 0; !rc && i < n; i++) {
            uint64_t cnt;
            char *name = join_name(b[j].prefix, layout[i].name);
            ptwm_layout_elements(&layout[i], 1, &cnt, NULL);
            rc = name ? read_tensor(s, name, &layout[i], b[j].dtype,
                                    (uint8_t *)b[j].data + pos * width, cnt, err)
                      : ptwm_fail(err, PTWM_ERR_NOMEM, "checkpoint: out of memory");
            ptwm_free(name);
            pos += cnt;
        }
    }
    ptwm_source_close(s);
    if (!rc) {
        /* scalars only once every buffer is in, so a failed resume leaves them */
        st->step = tmp.step;
        st->lr = tmp.lr;
        st->beta1 = tmp.beta1;
        st->beta2 = tmp.beta2;
        st->eps = tmp.eps;
        st->weight_decay = tmp.weight_decay;
        st->momentum = tmp.momentum;
        st->bc1 = tmp.bc1;
        st->bc2 = tmp.bc2;
    }
    return rc;
}

ptwm_error ptwm_ckpt_save(const char *path, ptwm_ckpt_format fmt, const ptwm_layout_entry *layout,
                          size_t n, const ptwm_optim_state *st, ptwm_err *err) {
    const opt_desc *od;
    ptwm_error rc;
    if (!path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: NULL path");
    rc = check_state(st, layout, n, fmt != PTWM_CKPT_RAW, &od, err);
    if (rc) return rc;
    switch (fmt) {
    case PTWM_CKPT_RAW: return save_raw(path, st, err);
    case PTWM_CKPT_PTWM:
    case PTWM_CKPT_SAFETENSORS: return save_described(path, fmt, layout, n, st, od, err);
    default: return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: unknown format %d", (int)fmt);
    }
}

ptwm_error ptwm_ckpt_load(const char *path, ptwm_ckpt_format fmt, const ptwm_layout_entry *layout,
                          size_t n, ptwm_optim_state *st, ptwm_err *err) {
    const opt_desc *od;
    ptwm_error rc;
    if (!path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: NULL path");
    rc = check_state(st, layout, n, fmt != PTWM_CKPT_RAW, &od, err);
    if (rc) return rc;
    switch (fmt) {
    case PTWM_CKPT_RAW: return load_raw(path, st, od, err);
    case PTWM_CKPT_PTWM:
    case PTWM_CKPT_SAFETENSORS: return load_described(path, fmt, layout, n, st, od, err);
    default: return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "checkpoint: unknown format %d", (int)fmt);
    }
}
