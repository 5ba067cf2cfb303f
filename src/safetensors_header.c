/* Safetensors header: JSON parsing (jansson) and every structural check.
 *
 * The rules, stricter than the reference implementation where it is lax:
 *  - the JSON is one object; jansson rejects invalid UTF-8, NUL bytes (raw or
 *    \u0000), trailing bytes other than JSON whitespace, and duplicate keys
 *    (JSON_REJECT_DUPLICATES), and caps nesting at JSON_PARSER_MAX_DEPTH
 *    without recursing further (a header of 100000 '[' fails cleanly);
 *  - every tensor is an object with exactly "dtype", "shape" and
 *    "data_offsets": an unknown key is an error, not silently ignored, since
 *    it would be an extension this library does not understand;
 *  - numbers in shape and data_offsets are integers in [0, 2^63): jansson
 *    stores integers as signed 64-bit, so larger ones (no real file has them)
 *    are rejected as out of range, naming the tensor and field; negative
 *    numbers, fractions and exponents (1e3 is a real in JSON) are rejected;
 *  - "__metadata__" maps strings to strings, so no tensor can be named that;
 *  - tensor names are at most PTWM_MAX_NAME bytes; the empty name is allowed
 *    (the reference accepts it, and raw-file sources use it);
 *  - sorted by (begin, end, header order), the tensors tile [0, data_len)
 *    exactly: no hole, no overlap, no two tensors on one range. Zero-size
 *    tensors occupy the empty range at the running position, so several may
 *    share an offset.
 * Object order: jansson (>= 2.8) iterates objects in insertion order, so
 * "header order" is the order of the file. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "safetensors.h"

#define LABEL(l) ((l) ? (l) : "<memory>")

void ptwm_json_describe(const void *value, char *buf, size_t cap) {
    const json_t *v = (const json_t *)value;
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(buf, cap, "%.17g (not an integer)", json_real_value(v));
        break;
    case JSON_STRING: snprintf(buf, cap, "a string"); break;
    case JSON_ARRAY: snprintf(buf, cap, "an array"); break;
    case JSON_OBJECT: snprintf(buf, cap, "an object"); break;
    case JSON_TRUE: snprintf(buf, cap, "true"); break;
    case JSON_FALSE: snprintf(buf, cap, "false"); break;
    default: snprintf(buf, cap, "null"); break;
    }
}

/* An integer in [0, 2^63), else PTWM_ERR_SCHEMA naming tensor and field. */
static ptwm_error get_u64(const json_t *v, const char *label, const char *tensor,
                          const char *field, size_t i, uint64_t *out, ptwm_err *err) {
    char what[64];
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return PTWM_OK;
    }
    ptwm_json_describe(v, what, sizeof(what));
    return ptwm_fail(err, PTWM_ERR_SCHEMA,
                     "file '%s': tensor '%s': %s[%zu] must be a non-negative integer, got %s",
                     LABEL(label), tensor, field, i, what);
}

static ptwm_error parse_tensor(const char *name, const json_t *obj, const char *label,
                               ptwm_st_entry *e, ptwm_err *err) {
    const json_t *dt = NULL, *shape = NULL, *offs = NULL, *v;
    const char *key;
    char what[64], sh[160];
    uint64_t nbytes;
    size_t i;
    ptwm_error rc;

    if (strlen(name) > PTWM_MAX_NAME)
        return ptwm_fail(err, PTWM_ERR_LIMIT,
                         "file '%s': tensor name of %zu bytes is longer than %d (starts '%.40s')",
                         LABEL(label), strlen(name), PTWM_MAX_NAME, name);
    if (!json_is_object(obj)) {
        ptwm_json_describe(obj, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s' must be an object, got %s",
                         LABEL(label), name, what);
    }
    json_object_foreach((json_t *)obj, key, v) {
        if (strcmp(key, "dtype") == 0)
            dt = v;
        else if (strcmp(key, "shape") == 0)
            shape = v;
        else if (strcmp(key, "data_offsets") == 0)
            offs = v;
        else
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "file '%s': tensor '%s' has unknown key '%.64s' (only dtype, shape "
                             "and data_offsets are allowed)",
                             LABEL(label), name, key);
    }
    if (!dt || !shape || !offs)
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s' lacks '%s'", LABEL(label),
                         name, !dt ? "dtype" : !shape ? "shape" : "data_offsets");

    e->name = name;
    if (!json_is_string(dt)) {
        ptwm_json_describe(dt, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s': dtype must be a string, got %s",
                         LABEL(label), name, what);
    }
    if (ptwm_dtype_from_name(json_string_value(dt), &e->dtype) != PTWM_OK)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "file '%s': tensor '%s': unknown dtype '%.32s'",
                         LABEL(label), name, json_string_value(dt));

    if (!json_is_array(shape)) {
        ptwm_json_describe(shape, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s': shape must be an array, got %s",
                         LABEL(label), name, what);
    }
    if (json_array_size(shape) > PTWM_MAX_NDIM)
        return ptwm_fail(err, PTWM_ERR_LIMIT,
                         "file '%s': tensor '%s': shape has %zu dimensions, at most %d accepted",
                         LABEL(label), name, json_array_size(shape), PTWM_MAX_NDIM);
    e->ndim = (uint32_t)json_array_size(shape);
    for (i = 0; i < e->ndim; i++) {
        rc = get_u64(json_array_get(shape, i), label, name, "shape", i, &e->shape[i], err);
        if (rc) return rc;
    }

    if (!json_is_array(offs) || json_array_size(offs) != 2) {
        if (json_is_array(offs))
            snprintf(what, sizeof(what), "%zu element(s)", json_array_size(offs));
        else
            ptwm_json_describe(offs, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_OFFSETS,
                         "file '%s': tensor '%s': data_offsets must be [begin, end], got %s",
                         LABEL(label), name, what);
    }
    rc = get_u64(json_array_get(offs, 0), label, name, "data_offsets", 0, &e->begin, err);
    if (!rc) rc = get_u64(json_array_get(offs, 1), label, name, "data_offsets", 1, &e->end, err);
    if (rc) return rc;
    if (e->end < e->begin)
        return ptwm_fail(err, PTWM_ERR_OFFSETS,
                         "file '%s': tensor '%s': data_offsets [%llu, %llu] end before they begin",
                         LABEL(label), name, (unsigned long long)e->begin,
                         (unsigned long long)e->end);

    rc = ptwm_tensor_nbytes(e->dtype, e->shape, e->ndim, &nbytes, err);
    if (rc) {
        ptwm_err_prefix(err, "file '%s': tensor '%s'", LABEL(label), name);
        return rc;
    }
    if (e->end - e->begin != nbytes) {
        ptwm_format_shape(e->shape, e->ndim, sh, sizeof(sh));
        return ptwm_fail(err, PTWM_ERR_OFFSETS,
                         "file '%s': tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, shape "
                         "%s of %s needs %llu",
                         LABEL(label), name, (unsigned long long)e->begin,
                         (unsigned long long)e->end, (unsigned long long)(e->end - e->begin), sh,
                         ptwm_dtype_name(e->dtype), (unsigned long long)nbytes);
    }
    return PTWM_OK;
}

static ptwm_error parse_metadata(const json_t *obj, const char *label, ptwm_st_parsed *p,
                                 ptwm_err *err) {
    const char *key;
    const json_t *v;
    char what[64];
    if (!json_is_object(obj)) {
        ptwm_json_describe(obj, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "file '%s': __metadata__ must be an object of strings, got %s",
                         LABEL(label), what);
    }
    p->meta = ptwm_calloc(json_object_size(obj) + 1, sizeof(ptwm_kv));
    if (!p->meta) return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(label));
    json_object_foreach((json_t *)obj, key, v) {
        if (!json_is_string(v)) {
            ptwm_json_describe(v, what, sizeof(what));
            if (json_object_get(obj, "dtype") && json_object_get(obj, "data_offsets"))
                return ptwm_fail(err, PTWM_ERR_SCHEMA,
                                 "file '%s': a tensor may not be named '__metadata__' (its value "
                                 "must map strings to strings; key '%.64s' is %s)",
                                 LABEL(label), key, what);
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "file '%s': __metadata__ key '%.64s': value must be a string, got %s",
                             LABEL(label), key, what);
        }
        p->meta[p->nmeta].key = key;
        p->meta[p->nmeta].value = json_string_value(v);
        p->nmeta++;
    }
    return PTWM_OK;
}

static int cmp_entry(const void *a, const void *b) {
    const ptwm_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sorted by (begin, end, order), the tensors must tile [0, data_len). */
static ptwm_error check_tiling(ptwm_st_parsed *p, const char *label, ptwm_err *err) {
    uint64_t pos = 0;
    const ptwm_st_entry *last = NULL; /* the tensor that ends at pos */
    size_t i;
    if (p->n > 1) qsort(p->t, p->n, sizeof(*p->t), cmp_entry);
    for (i = 0; i < p->n; i++) {
        const ptwm_st_entry *e = &p->t[i];
        if (e->begin > pos) {
            if (last)
                return ptwm_fail(err, PTWM_ERR_LAYOUT,
                                 "file '%s': hole in the data region: bytes [%llu, %llu) between "
                                 "tensor '%s' [%llu, %llu] and tensor '%s' [%llu, %llu] belong to "
                                 "no tensor",
                                 LABEL(label), (unsigned long long)pos,
                                 (unsigned long long)e->begin, last->name,
                                 (unsigned long long)last->begin, (unsigned long long)last->end,
                                 e->name, (unsigned long long)e->begin,
                                 (unsigned long long)e->end);
            return ptwm_fail(err, PTWM_ERR_LAYOUT,
                             "file '%s': hole in the data region: bytes [0, %llu) before tensor "
                             "'%s' [%llu, %llu] belong to no tensor",
                             LABEL(label), (unsigned long long)e->begin, e->name,
                             (unsigned long long)e->begin, (unsigned long long)e->end);
        }
        if (e->begin < pos) {
            /* last is non-NULL: pos > 0 only after a tensor ended there. */
            if (e->begin == last->begin && e->end == last->end)
                return ptwm_fail(err, PTWM_ERR_LAYOUT,
                                 "file '%s': tensors '%s' and '%s' both occupy data_offsets "
                                 "[%llu, %llu]",
                                 LABEL(label), last->name, e->name,
                                 (unsigned long long)e->begin, (unsigned long long)e->end);
            return ptwm_fail(err, PTWM_ERR_LAYOUT,
                             "file '%s': tensor '%s' [%llu, %llu] overlaps tensor '%s' [%llu, %llu]",
                             LABEL(label), e->name, (unsigned long long)e->begin,
                             (unsigned long long)e->end, last->name,
                             (unsigned long long)last->begin, (unsigned long long)last->end);
        }
        if (e->end > pos || !last) last = e;
        pos = e->end;
    }
    p->data_len = pos;
    return PTWM_OK;
}

/* jansson failed with "too big integer": say which tensor and field hold it.
 * A second parse decoding integers as doubles finds the culprit; if that
 * fails too (a number beyond double range) fall back to jansson's position. */
static ptwm_error number_out_of_range(const char *json, size_t len, const char *label,
                                      const json_error_t *first, ptwm_err *err) {
    static const char *const fields[] = {"shape", "data_offsets"};
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
    const char *name;
    json_t *t;
    if (root && json_is_object(root)) {
        json_object_foreach(root, name, t) {
            size_t f, i;
            if (!json_is_object(t)) continue;
            for (f = 0; f < 2; f++) {
                json_t *a = json_object_get(t, fields[f]);
                for (i = 0; json_is_array(a) && i < json_array_size(a); i++) {
                    json_t *v = json_array_get(a, i);
                    if (json_is_real(v) && fabs(json_real_value(v)) >= 9223372036854775807.0) {
                        ptwm_fail(err, PTWM_ERR_SCHEMA,
                                  "file '%s': tensor '%s': %s[%zu] = %.6g is out of range "
                                  "(integers must be below 2^63)",
                                  LABEL(label), name, fields[f], i, json_real_value(v));
                        json_decref(root);
                        return PTWM_ERR_SCHEMA;
                    }
                }
            }
        }
    }
    json_decref(root);
    return ptwm_fail(err, PTWM_ERR_SCHEMA,
                     "file '%s': header has a number out of range at byte %d (integers must be "
                     "below 2^63): %s",
                     LABEL(label), first->position, first->text);
}

static ptwm_error json_failure(const char *json, size_t len, const char *label,
                               const json_error_t *jerr, ptwm_err *err) {
    switch (json_error_code(jerr)) {
    case json_error_duplicate_key:
        return ptwm_fail(err, PTWM_ERR_DUPLICATE, "file '%s': header has a duplicate key at byte %d: %s",
                         LABEL(label), jerr->position, jerr->text);
    case json_error_stack_overflow:
        return ptwm_fail(err, PTWM_ERR_LIMIT,
                         "file '%s': header nests deeper than %d levels (at byte %d)", LABEL(label),
                         JSON_PARSER_MAX_DEPTH, jerr->position);
    case json_error_numeric_overflow:
        return number_out_of_range(json, len, label, jerr, err);
    case json_error_out_of_memory:
        return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory parsing the header",
                         LABEL(label));
    case json_error_invalid_utf8:
        return ptwm_fail(err, PTWM_ERR_JSON, "file '%s': header is not valid UTF-8 (byte %d): %s",
                         LABEL(label), jerr->position, jerr->text);
    default:
        return ptwm_fail(err, PTWM_ERR_JSON,
                         "file '%s': header is not valid JSON at byte %d (line %d, column %d): %s",
                         LABEL(label), jerr->position, jerr->line, jerr->column, jerr->text);
    }
}

ptwm_error ptwm_st_parse_header(const char *json, size_t len, const char *label,
                                ptwm_st_parsed *out, ptwm_err *err) {
    ptwm_st_parsed p;
    json_error_t jerr;
    json_t *root, *v;
    const char *key;
    ptwm_error rc = PTWM_OK;
    size_t order = 0;
    char what[64];

    memset(out, 0, sizeof(*out));
    memset(&p, 0, sizeof(p));
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return json_failure(json, len, label, &jerr, err);
    p.root = root;
    if (!json_is_object(root)) {
        ptwm_json_describe(root, what, sizeof(what));
        rc = ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': header must be a JSON object, got %s",
                       LABEL(label), what);
        goto fail;
    }
    p.t = ptwm_calloc(json_object_size(root) + 1, sizeof(*p.t));
    if (!p.t) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(label));
        goto fail;
    }
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            rc = parse_metadata(v, label, &p, err);
        } else {
            p.t[p.n].order = order++;
            rc = parse_tensor(key, v, label, &p.t[p.n], err);
            p.n++;
        }
        if (rc) goto fail;
    }
    rc = check_tiling(&p, label, err);
    if (rc) goto fail;
    *out = p;
    return PTWM_OK;
fail:
    ptwm_st_parsed_free(&p);
    return rc;
}

void ptwm_st_parsed_free(ptwm_st_parsed *p) {
    if (!p) return;
    free(p->t);
    free(p->meta);
    json_decref((json_t *)p->root);
    memset(p, 0, sizeof(*p));
}

ptwm_error ptwm_st_check_prefix(const uint8_t prefix[8], uint64_t file_size, const char *label,
                                uint64_t *header_len, ptwm_err *err) {
    uint64_t hlen, end;
    if (file_size < 8)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED,
                         "file '%s' is %llu bytes, too short for the 8-byte header length",
                         LABEL(label), (unsigned long long)file_size);
    hlen = ptwm_load_le64(prefix);
    if (hlen > PTWM_ST_MAX_HEADER)
        return ptwm_fail(err, PTWM_ERR_HEADER_SIZE,
                         "file '%s': header length %llu is over the cap of %llu bytes",
                         LABEL(label), (unsigned long long)hlen,
                         (unsigned long long)PTWM_ST_MAX_HEADER);
    if (ptwm_add_overflow(8, hlen, &end) || end > file_size)
        return ptwm_fail(err, PTWM_ERR_HEADER_SIZE,
                         "file '%s': header length %llu runs past the end of the file (8 + %llu > "
                         "%llu bytes)",
                         LABEL(label), (unsigned long long)hlen, (unsigned long long)hlen,
                         (unsigned long long)file_size);
    *header_len = hlen;
    return PTWM_OK;
}

ptwm_error ptwm_st_check_size(const ptwm_st_parsed *p, uint64_t header_len, uint64_t file_size,
                              const char *label, ptwm_err *err) {
    uint64_t expected;
    if (ptwm_add_overflow(8 + header_len, p->data_len, &expected))
        return ptwm_fail(err, PTWM_ERR_TRUNCATED,
                         "file '%s': tensors end at data offset %llu, past any file size",
                         LABEL(label), (unsigned long long)p->data_len);
    if (expected > file_size)
        return ptwm_fail(err, PTWM_ERR_TRUNCATED,
                         "file '%s': tensor '%s' ends at data offset %llu: expected %llu bytes, "
                         "file has %llu (truncated?)",
                         LABEL(label), p->t[p->n - 1].name, (unsigned long long)p->data_len,
                         (unsigned long long)expected, (unsigned long long)file_size);
    if (expected < file_size)
        return ptwm_fail(err, PTWM_ERR_LAYOUT,
                         "file '%s': expected %llu bytes, file has %llu (%llu bytes after the last "
                         "tensor)",
                         LABEL(label), (unsigned long long)expected, (unsigned long long)file_size,
                         (unsigned long long)(file_size - expected));
    return PTWM_OK;
}
