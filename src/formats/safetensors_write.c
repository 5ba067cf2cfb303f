/* Safetensors writer. The header is compact JSON in the layout of the
 * reference writer: "__metadata__" first (when there is metadata), then the
 * tensors in the order given, each as {"dtype","shape","data_offsets"},
 * padded with spaces so the data region starts at a multiple of 8. Strings
 * are escaped the way serde_json does, so a file written by the reference
 * (in this key order) is rebuilt byte for byte. Input is validated against
 * the reader's rules first, so whatever is written reads back. */
#include <stdio.h>
#include <stdlib.h>
#include "fileio.h"
#include "safetensors.h"

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->cap - b->len < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        char *np;
        while (cap - b->len < n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            cap *= 2;
        }
        np = ptwm_realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(sbuf *b, uint64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string escaped like serde_json: \" \\ \b \f \n \r \t, other
 * control characters as \u00xx (lower-case hex), everything else raw UTF-8. */
static void sb_json_string(sbuf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    sb_put(b, "\"", 1);
    for (; *p; p++) {
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (*p) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            if (*p < 0x20) {
                memcpy(esc + 1, "u00", 3);
                esc[4] = hex[*p >> 4];
                esc[5] = hex[*p & 15];
                n = 6;
            } else {
                sb_put(b, (const char *)p, 1);
                continue;
            }
        }
        sb_put(b, esc, n);
    }
    sb_put(b, "\"", 1);
}

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static int valid_utf8(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s, need, i;
        uint32_t cp;
        if (c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        for (i = 1; i <= need; i++) {
            if ((s[i] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        s += need + 1;
    }
    return 1;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name given twice, or NULL. names is sorted in place. */
static const char *find_duplicate(const char **names, size_t n) {
    size_t i;
    if (n > 1) qsort(names, n, sizeof(*names), cmp_str_ptr);
    for (i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

static ptwm_error check_tensor(const ptwm_tensor_desc *t, size_t i, uint64_t *total,
                               ptwm_err *err) {
    uint64_t nbytes;
    uint32_t d;
    char sh[160];
    ptwm_error rc;
    if (!t->name) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor %zu has no name", i);
    if (strlen(t->name) > PTWM_MAX_NAME)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "tensor %zu: name of %zu bytes is longer than %d",
                         i, strlen(t->name), PTWM_MAX_NAME);
    if (!valid_utf8(t->name))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor %zu: name is not valid UTF-8", i);
    if (strcmp(t->name, "__metadata__") == 0)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "tensor %zu: a tensor may not be named '__metadata__'", i);
    if (t->ndim && !t->shape)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': shape is NULL", t->name);
    for (d = 0; d < t->ndim && d < PTWM_MAX_NDIM; d++)
        if (t->shape[d] > (uint64_t)INT64_MAX)
            return ptwm_fail(err, PTWM_ERR_SHAPE, "tensor '%s': dimension %u is %llu, over 2^63",
                             t->name, (unsigned)d, (unsigned long long)t->shape[d]);
    rc = ptwm_tensor_nbytes(t->dtype, t->shape, t->ndim, &nbytes, err);
    if (rc) {
        ptwm_err_prefix(err, "tensor '%s'", t->name);
        return rc;
    }
    if (nbytes != t->nbytes) {
        ptwm_format_shape(t->shape, t->ndim, sh, sizeof(sh));
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "tensor '%s': %llu bytes given, shape %s of %s needs %llu", t->name,
                         (unsigned long long)t->nbytes, sh, ptwm_dtype_name(t->dtype),
                         (unsigned long long)nbytes);
    }
    if (ptwm_add_overflow(*total, nbytes, total) || *total > (uint64_t)INT64_MAX)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "tensor '%s': data region passes 2^63 bytes",
                         t->name);
    return PTWM_OK;
}

/* Everything the reader would reject, refused up front. */
static ptwm_error check_input(const ptwm_tensor_desc *tensors, size_t n, const ptwm_kv *meta,
                              size_t nmeta, ptwm_err *err) {
    const char **names;
    const char *dup;
    uint64_t total = 0;
    size_t i;
    ptwm_error rc = PTWM_OK;
    if ((n && !tensors) || (nmeta && !meta))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "safetensors writer: NULL tensor or metadata list");
    for (i = 0; i < n && !rc; i++) rc = check_tensor(&tensors[i], i, &total, err);
    for (i = 0; i < nmeta && !rc; i++) {
        if (!meta[i].key || !meta[i].value)
            rc = ptwm_fail(err, PTWM_ERR_INVALID_ARG, "metadata entry %zu has a NULL key or value", i);
        else if (!valid_utf8(meta[i].key) || !valid_utf8(meta[i].value))
            rc = ptwm_fail(err, PTWM_ERR_INVALID_ARG, "metadata key '%.64s': not valid UTF-8",
                           meta[i].key);
    }
    if (rc) return rc;
    names = ptwm_calloc(PTWM_MAX(n, nmeta) + 1, sizeof(*names));
    if (!names) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory checking names");
    for (i = 0; i < n; i++) names[i] = tensors[i].name;
    dup = find_duplicate(names, n);
    if (dup) rc = ptwm_fail(err, PTWM_ERR_DUPLICATE, "tensor name '%s' is given twice", dup);
    for (i = 0; i < nmeta && !rc; i++) names[i] = meta[i].key;
    dup = rc ? NULL : find_duplicate(names, nmeta);
    if (dup) rc = ptwm_fail(err, PTWM_ERR_DUPLICATE, "metadata key '%s' is given twice", dup);
    ptwm_free(names);
    return rc;
}

ptwm_error ptwm_st_build_header(const ptwm_tensor_desc *tensors, size_t n, const ptwm_kv *meta,
                                size_t nmeta, void **out, size_t *out_len, ptwm_err *err) {
    sbuf b = {NULL, 0, 0, 0};
    uint64_t off = 0;
    size_t i;
    uint32_t d;
    int first = 1;
    ptwm_error rc;
    if (!out || !out_len)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_build_header: NULL output");
    *out = NULL;
    *out_len = 0;
    rc = check_input(tensors, n, meta, nmeta, err);
    if (rc) return rc;
    sb_put(&b, "\0\0\0\0\0\0\0\0{", 9); /* the length is filled in below */
    if (nmeta) {
        sb_str(&b, "\"__metadata__\":{");
        for (i = 0; i < nmeta; i++) {
            if (i) sb_put(&b, ",", 1);
            sb_json_string(&b, meta[i].key);
            sb_put(&b, ":", 1);
            sb_json_string(&b, meta[i].value);
        }
        sb_put(&b, "}", 1);
        first = 0;
    }
    for (i = 0; i < n; i++) {
        const ptwm_tensor_desc *t = &tensors[i];
        if (!first) sb_put(&b, ",", 1);
        first = 0;
        sb_json_string(&b, t->name);
        sb_str(&b, ":{\"dtype\":\"");
        sb_str(&b, ptwm_dtype_name(t->dtype));
        sb_str(&b, "\",\"shape\":[");
        for (d = 0; d < t->ndim; d++) {
            if (d) sb_put(&b, ",", 1);
            sb_u64(&b, t->shape[d]);
        }
        sb_str(&b, "],\"data_offsets\":[");
        sb_u64(&b, off);
        sb_put(&b, ",", 1);
        off += t->nbytes; /* checked in check_input */
        sb_u64(&b, off);
        sb_str(&b, "]}");
    }
    sb_put(&b, "}", 1);
    while (!b.oom && b.len % 8) sb_put(&b, " ", 1);
    if (b.oom) {
        ptwm_free(b.p);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory building a safetensors header");
    }
    if (b.len - 8 > PTWM_ST_MAX_HEADER) {
        rc = ptwm_fail(err, PTWM_ERR_LIMIT, "safetensors header of %zu bytes is over the cap of %llu",
                       b.len - 8, (unsigned long long)PTWM_ST_MAX_HEADER);
        ptwm_free(b.p);
        return rc;
    }
    ptwm_store_le64(b.p, (uint64_t)(b.len - 8));
    *out = b.p;
    *out_len = b.len;
    return PTWM_OK;
}

/* build_header takes descriptions without data (a container rebuilding a
 * file streams the bytes itself); writing needs them. */
ptwm_error ptwm_st_check_data(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                              ptwm_err *err) {
    size_t i;
    for (i = 0; i < n && tensors; i++)
        if (tensors[i].nbytes && !tensors[i].data && tensors[i].name)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "writing '%s': tensor '%s': data is NULL",
                             path, tensors[i].name);
    return PTWM_OK;
}

ptwm_error ptwm_st_write(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                         const ptwm_kv *meta, size_t nmeta, ptwm_err *err) {
    ptwm_atomic_file f;
    void *hdr = NULL;
    size_t hlen = 0, i;
    ptwm_error rc;
    if (!path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_st_write: path is NULL");
    rc = ptwm_st_check_data(path, tensors, n, err);
    if (!rc) rc = ptwm_st_build_header(tensors, n, meta, nmeta, &hdr, &hlen, err);
    if (rc) {
        ptwm_err_prefix(err, "writing '%s'", path);
        return rc;
    }
    memset(&f, 0, sizeof(f));
    f.fd = -1;
    rc = ptwm_atomic_open(path, &f, err);
    if (!rc) rc = ptwm_write_full(f.fd, hdr, hlen, path, err);
    ptwm_free(hdr);
    for (i = 0; i < n && !rc; i++) {
        /* Pieces: nbytes is 64-bit, and a size_t may not hold it (32-bit hosts). */
        const uint8_t *p = tensors[i].data;
        uint64_t left = tensors[i].nbytes;
        while (left && !rc) {
            size_t piece = (size_t)PTWM_MIN(left, (uint64_t)1 << 30);
            rc = ptwm_write_full(f.fd, p, piece, path, err);
            p += piece;
            left -= piece;
        }
    }
    if (!rc) rc = ptwm_atomic_commit(&f, err);
    if (rc) ptwm_atomic_abort(&f);
    return rc;
}
