/* Safetensors header: JSON parsing (jansson) and every structural check.
 *
 * The rules, stricter than the reference implementation where it is lax:
 *  - the JSON is one object; jansson rejects invalid UTF-8, NUL bytes (raw or
 *    \u0000), trailing bytes other than JSON whitespace, and duplicate keys
 *    inside a tensor or __metadata__ (JSON_REJECT_DUPLICATES); duplicate
 *    top-level keys are caught by the name hash below; nesting is capped at
 *    JSON_PARSER_MAX_DEPTH inside each entry without recursing further (a
 *    header of 100000 '[' fails cleanly);
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
 *
 * Memory: a jansson tree of the whole header costs about 1 KB per tensor (a
 * million-tensor header would need a gigabyte), so the outer object is
 * scanned here and jansson decodes one key and one value at a time, each
 * freed as soon as it is checked. What stays is a compact entry per tensor,
 * the names in one arena, the shapes in one array and a hash table of names.
 * Errors are reported in file order: the first bad byte or entry wins (a
 * whole-header parse reported any JSON error before any schema error). A raw
 * NUL byte right after a number, which jansson itself skips, is rejected: the
 * position jansson reports then falls short of the bytes it read, and the
 * scan resumes inside the value, where nothing valid can follow. */
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

/* The parse under way: the result plus the arenas' fill and capacity. */
typedef struct st_build {
    ptwm_st_parsed p;
    size_t cap_t, names_len, names_cap, dims_len, dims_cap;
    size_t *meta_at;            /* key and value offsets in names, per metadata entry */
    int seen_meta;
    uint32_t key_hash;          /* claim_key's key's, for keep_entry */
    const char *label;
} st_build;

/* Copy `len` bytes and a NUL into the names arena; *at receives the offset. */
static int put_string(st_build *b, const char *s, size_t len, size_t *at) {
    if (!ptwm_grow((void **)&b->p.names, &b->names_cap, b->names_len + len + 1, 1)) return 0;
    memcpy(b->p.names + b->names_len, s, len);
    b->p.names[b->names_len + len] = 0;
    *at = b->names_len;
    b->names_len += len + 1;
    return 1;
}

/* e's dtype from its name, for both paths of an entry. */
static ptwm_error set_dtype(const char *name, const char *dtype, const char *label,
                            ptwm_st_entry *e, ptwm_err *err) {
    if (ptwm_dtype_from_name(dtype, &e->dtype, NULL) != PTWM_OK)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "file '%s': tensor '%s': unknown dtype '%.32s'",
                         LABEL(label), name, dtype);
    return PTWM_OK;
}

/* The checks of a tensor's offsets against its dtype and shape (e holds
 * dtype, ndim, begin and end), for both paths of an entry. */
static ptwm_error check_extent(const char *name, const char *label, const ptwm_st_entry *e,
                               const uint64_t *shape, ptwm_err *err) {
    char sh[160];
    uint64_t nbytes;
    ptwm_error rc;
    if (e->end < e->begin)
        return ptwm_fail(err, PTWM_ERR_OFFSETS,
                         "file '%s': tensor '%s': data_offsets [%llu, %llu] end before they begin",
                         LABEL(label), name, (unsigned long long)e->begin,
                         (unsigned long long)e->end);

    rc = ptwm_tensor_nbytes(e->dtype, shape, e->ndim, &nbytes, err);
    if (rc) {
        ptwm_err_prefix(err, "file '%s': tensor '%s'", LABEL(label), name);
        return rc;
    }
    if (e->end - e->begin != nbytes) {
        ptwm_format_shape(shape, e->ndim, sh, sizeof(sh));
        return ptwm_fail(err, PTWM_ERR_OFFSETS,
                         "file '%s': tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, shape "
                         "%s of %s needs %llu",
                         LABEL(label), name, (unsigned long long)e->begin,
                         (unsigned long long)e->end, (unsigned long long)(e->end - e->begin), sh,
                         ptwm_dtype_name(e->dtype), (unsigned long long)nbytes);
    }
    return PTWM_OK;
}

static ptwm_error parse_tensor(const char *name, const json_t *obj, const char *label,
                               ptwm_st_entry *e, uint64_t *shape, ptwm_err *err) {
    const json_t *dt = NULL, *jshape = NULL, *offs = NULL, *v;
    const char *key;
    char what[64];
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
            jshape = v;
        else if (strcmp(key, "data_offsets") == 0)
            offs = v;
        else
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "file '%s': tensor '%s' has unknown key '%.64s' (only dtype, shape "
                             "and data_offsets are allowed)",
                             LABEL(label), name, key);
    }
    if (!dt || !jshape || !offs)
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s' lacks '%s'", LABEL(label),
                         name, !dt ? "dtype" : !jshape ? "shape" : "data_offsets");

    if (!json_is_string(dt)) {
        ptwm_json_describe(dt, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s': dtype must be a string, got %s",
                         LABEL(label), name, what);
    }
    if ((rc = set_dtype(name, json_string_value(dt), label, e, err))) return rc;

    if (!json_is_array(jshape)) {
        ptwm_json_describe(jshape, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': tensor '%s': shape must be an array, got %s",
                         LABEL(label), name, what);
    }
    if (json_array_size(jshape) > PTWM_MAX_NDIM)
        return ptwm_fail(err, PTWM_ERR_LIMIT,
                         "file '%s': tensor '%s': shape has %zu dimensions, at most %d accepted",
                         LABEL(label), name, json_array_size(jshape), PTWM_MAX_NDIM);
    e->ndim = (uint32_t)json_array_size(jshape);
    for (i = 0; i < e->ndim; i++) {
        rc = get_u64(json_array_get(jshape, i), label, name, "shape", i, &shape[i], err);
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
    return check_extent(name, label, e, shape, err);
}


static ptwm_error parse_metadata(st_build *b, const json_t *obj, ptwm_err *err) {
    const char *key, *label = b->label;
    const json_t *v;
    char what[64];
    size_t n = 0;
    if (!json_is_object(obj)) {
        ptwm_json_describe(obj, what, sizeof(what));
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "file '%s': __metadata__ must be an object of strings, got %s",
                         LABEL(label), what);
    }
    b->p.meta = ptwm_calloc(json_object_size(obj) + 1, sizeof(ptwm_kv));
    b->meta_at = ptwm_calloc(json_object_size(obj) + 1, 2 * sizeof(size_t));
    if (!b->p.meta || !b->meta_at)
        return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(label));
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
        if (!put_string(b, key, strlen(key), &b->meta_at[2 * n]) ||
            !put_string(b, json_string_value(v), json_string_length(v), &b->meta_at[2 * n + 1]))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(label));
        n++;
    }
    b->p.nmeta = n;
    return PTWM_OK;
}

/* ---- the name hash table ------------------------------------------------- */

/* Entries are named through name_at, which stays valid while the arena
 * grows. */
static const char *entry_name(const void *owner, size_t i) {
    const ptwm_st_parsed *p = (const ptwm_st_parsed *)owner;
    return p->names + p->t[i].name_at;
}

ptrdiff_t ptwm_st_parsed_find(const ptwm_st_parsed *p, const char *name) {
    size_t i = p && name ? ptwm_nametab_lookup(&p->by_name, p, entry_name, name) : SIZE_MAX;
    return i == SIZE_MAX ? -1 : (ptrdiff_t)i;
}

/* A top-level key, before its value is decoded (where jansson rejects a
 * duplicate too): PTWM_ERR_DUPLICATE if seen before, else *slot is where a
 * tensor of that name goes in the hash table. */
static ptwm_error claim_key(st_build *b, const char *key, size_t key_at, size_t *slot,
                            ptwm_err *err) {
    ptwm_st_parsed *p = &b->p;
    if (strcmp(key, "__metadata__") == 0) {
        if (b->seen_meta++)
            return ptwm_fail(err, PTWM_ERR_DUPLICATE,
                             "file '%s': header has a duplicate key at byte %zu: '__metadata__' "
                             "appears twice", LABEL(b->label), key_at);
        return PTWM_OK;
    }
    /* n < 2^32 since every entry takes bytes. */
    if (!ptwm_nametab_reserve(&p->by_name, p->n + 1))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(b->label));
    b->key_hash = ptwm_name_hash(key, strlen(key));
    *slot = (size_t)(ptwm_nametab_find(&p->by_name, p, entry_name, key, b->key_hash) -
                     p->by_name.slot);
    if (p->by_name.slot[*slot])
        return ptwm_fail(err, PTWM_ERR_DUPLICATE,
                         "file '%s': header has a duplicate key at byte %zu: tensor '%.200s' "
                         "appears twice", LABEL(b->label), key_at, key);
    return PTWM_OK;
}

/* The next entry of p->t, zeroed (a tensor's, kept by keep_entry). */
static ptwm_st_entry *next_entry(st_build *b, ptwm_err *err) {
    ptwm_st_parsed *p = &b->p;
    ptwm_st_entry *e;
    if (!ptwm_grow((void **)&p->t, &b->cap_t, p->n + 1, sizeof(*p->t))) {
        ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(b->label));
        return NULL;
    }
    e = &p->t[p->n];
    memset(e, 0, sizeof(*e));
    e->order = p->n;
    return e;
}

/* The tensor entry being built (p->t[p->n]) joins the table: its name and
 * shape into the arenas, its index into the name hash. */
static ptwm_error keep_entry(st_build *b, const char *key, size_t slot, const uint64_t *shape,
                             ptwm_err *err) {
    ptwm_st_parsed *p = &b->p;
    ptwm_st_entry *e = &p->t[p->n];
    if (!put_string(b, key, strlen(key), &e->name_at) ||
        !ptwm_grow((void **)&p->dims, &b->dims_cap, b->dims_len + e->ndim, sizeof(*p->dims)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(b->label));
    memcpy(p->dims + b->dims_len, shape, e->ndim * sizeof(*shape));
    e->shape_at = b->dims_len;
    b->dims_len += e->ndim;
    ptwm_nametab_put(&p->by_name.slot[slot], b->key_hash, p->n);
    p->n++;
    return PTWM_OK;
}

/* A claimed key and its decoded value: __metadata__ or a tensor. */
static ptwm_error add_entry(st_build *b, const char *key, size_t slot, const json_t *value,
                            ptwm_err *err) {
    uint64_t shape[PTWM_MAX_NDIM];
    ptwm_st_entry *e;
    ptwm_error rc;
    if (strcmp(key, "__metadata__") == 0) return parse_metadata(b, value, err);
    if (!(e = next_entry(b, err))) return PTWM_ERR_NOMEM;
    if ((rc = parse_tensor(key, value, b->label, e, shape, err))) return rc;
    return keep_entry(b, key, slot, shape, err);
}

/* A claimed key's plain entry (ptwm_st_plain_entry): the checks parse_tensor
 * makes after the JSON types, which a plain entry has right. */
static ptwm_error add_plain(st_build *b, const char *key, size_t slot, const ptwm_st_plain *pe,
                            ptwm_err *err) {
    ptwm_st_entry *e = next_entry(b, err);
    ptwm_error rc;
    if (!e) return PTWM_ERR_NOMEM;
    if ((rc = set_dtype(key, pe->dtype, b->label, e, err))) return rc;
    e->ndim = pe->ndim;
    e->begin = pe->offs[0];
    e->end = pe->offs[1];
    if ((rc = check_extent(key, b->label, e, pe->shape, err))) return rc;
    return keep_entry(b, key, slot, pe->shape, err);
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

/* Byte `pos` as a line and column (from 1), for messages. */
static void line_col(const char *json, size_t pos, size_t *line, size_t *col) {
    size_t i, start = 0;
    *line = 1;
    for (i = 0; i < pos; i++)
        if (json[i] == '\n') {
            ++*line;
            start = i + 1;
        }
    *col = pos - start + 1;
}

/* jansson failed with "too big integer" in the value at `at` (the value of
 * tensor `name`, NULL if none): say which field holds it. A second parse of
 * that value decoding integers as doubles finds the culprit; if that fails
 * too (a number beyond double range) fall back to jansson's position. */
static ptwm_error number_out_of_range(const char *json, size_t len, size_t at, const char *name,
                                      const char *label, const json_error_t *first, ptwm_err *err) {
    static const char *const fields[] = {"shape", "data_offsets"};
    json_error_t jerr;
    json_t *t = name ? json_loadb(json + at, len - at,
                                  JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_DECODE_INT_AS_REAL,
                                  &jerr)
                     : NULL;
    size_t f, i;
    for (f = 0; json_is_object(t) && f < 2; f++) {
        json_t *a = json_object_get(t, fields[f]);
        for (i = 0; json_is_array(a) && i < json_array_size(a); i++) {
            json_t *v = json_array_get(a, i);
            if (json_is_real(v) && fabs(json_real_value(v)) >= 9223372036854775807.0) {
                ptwm_fail(err, PTWM_ERR_SCHEMA,
                          "file '%s': tensor '%s': %s[%zu] = %.6g is out of range "
                          "(integers must be below 2^63)",
                          LABEL(label), name, fields[f], i, json_real_value(v));
                json_decref(t);
                return PTWM_ERR_SCHEMA;
            }
        }
    }
    json_decref(t);
    return ptwm_fail(err, PTWM_ERR_SCHEMA,
                     "file '%s': header has a number out of range at byte %zu (integers must be "
                     "below 2^63): %s",
                     LABEL(label), at + (size_t)first->position, first->text);
}

/* jansson failed on the key or value starting at byte `at`. */
static ptwm_error json_failure(const char *json, size_t len, size_t at, const char *name,
                               const char *label, const json_error_t *jerr, ptwm_err *err) {
    size_t pos = at + (size_t)(jerr->position > 0 ? jerr->position : 0), line, col;
    switch (json_error_code(jerr)) {
    case json_error_duplicate_key:
        return ptwm_fail(err, PTWM_ERR_DUPLICATE, "file '%s': header has a duplicate key at byte %zu: %s",
                         LABEL(label), pos, jerr->text);
    case json_error_stack_overflow:
        return ptwm_fail(err, PTWM_ERR_LIMIT,
                         "file '%s': header nests deeper than %d levels (at byte %zu)", LABEL(label),
                         JSON_PARSER_MAX_DEPTH, pos);
    case json_error_numeric_overflow:
        return number_out_of_range(json, len, at, name, label, jerr, err);
    case json_error_out_of_memory:
        return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory parsing the header",
                         LABEL(label));
    case json_error_invalid_utf8:
        return ptwm_fail(err, PTWM_ERR_JSON, "file '%s': header is not valid UTF-8 (byte %zu): %s",
                         LABEL(label), pos, jerr->text);
    default:
        line_col(json, pos < len ? pos : len, &line, &col);
        return ptwm_fail(err, PTWM_ERR_JSON,
                         "file '%s': header is not valid JSON at byte %zu (line %zu, column %zu): %s",
                         LABEL(label), pos, line, col, jerr->text);
    }
}

/* A syntax error in the outer object at byte `pos`. jansson reads a whole
 * token before it checks the token's kind, so a bad token there (invalid
 * UTF-8, a number out of range) is reported as jansson would. */
static ptwm_error syntax_error(const char *json, size_t len, size_t pos, const char *label,
                               const char *expected, ptwm_err *err) {
    size_t line, col;
    unsigned char c = pos < len ? (unsigned char)json[pos] : 0;
    json_error_t jerr;
    json_t *v = pos < len && !strchr("{[\"", c)
                    ? json_loadb(json + pos, len - pos, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &jerr)
                    : NULL;
    if (pos < len && !strchr("{[\"", c) && !v &&
        (json_error_code(&jerr) == json_error_invalid_utf8 ||
         json_error_code(&jerr) == json_error_numeric_overflow))
        return json_failure(json, len, pos, NULL, label, &jerr, err);
    json_decref(v);
    line_col(json, pos, &line, &col);
    if (pos >= len)
        return ptwm_fail(err, PTWM_ERR_JSON,
                         "file '%s': header is not valid JSON at byte %zu (line %zu, column %zu): "
                         "%s, premature end of input",
                         LABEL(label), pos, line, col, expected);
    return ptwm_fail(err, PTWM_ERR_JSON,
                     "file '%s': header is not valid JSON at byte %zu (line %zu, column %zu): %s "
                     "near %s%c%s (byte 0x%02x)",
                     LABEL(label), pos, line, col, expected, c >= 0x20 && c < 0x7f ? "'" : "",
                     c >= 0x20 && c < 0x7f ? c : '?', c >= 0x20 && c < 0x7f ? "'" : "", c);
}

/* A header that does not start with '{': jansson says what is wrong (invalid
 * JSON, nesting, or a valid value of the wrong kind). */
static ptwm_error not_an_object(const char *json, size_t len, const char *label, ptwm_err *err) {
    json_error_t jerr;
    char what[64];
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return json_failure(json, len, 0, NULL, label, &jerr, err);
    ptwm_json_describe(root, what, sizeof(what));
    json_decref(root);
    return ptwm_fail(err, PTWM_ERR_SCHEMA, "file '%s': header must be a JSON object, got %s",
                     LABEL(label), what);
}

size_t ptwm_json_skip_ws(const char *json, size_t len, size_t pos) {
    while (pos < len && (json[pos] == ' ' || json[pos] == '\t' || json[pos] == '\n' || json[pos] == '\r'))
        pos++;
    return pos;
}

/* Whether plain entries skip jansson (ptwm_st_set_plain). */
static int plain_on = 1;

void ptwm_st_set_plain(int on) {
    plain_on = on;
}

/* The outer object, whose '{' is at byte `open`, one key and one value at a
 * time (a plain entry in one step, safetensors_plain.c). */
static ptwm_error scan_object(st_build *b, const char *json, size_t len, size_t open,
                              ptwm_err *err) {
    const char *label = b->label;
    size_t pos = ptwm_json_skip_ws(json, len, open + 1);
    int empty = pos < len && json[pos] == '}';
    char name[PTWM_MAX_NAME + 1];
    ptwm_st_plain pe;
    while (!empty) {
        json_error_t jerr;
        json_t *key, *value;
        size_t key_at = pos, slot = 0;
        ptwm_error rc;
        if (pos >= len || json[pos] != '"')
            return syntax_error(json, len, pos, label, "string expected", err);
        if (plain_on && ptwm_st_plain_entry(json, len, pos, &pe)) {
            memcpy(name, json + pe.name_at, pe.name_len);
            name[pe.name_len] = 0;
            if ((rc = claim_key(b, name, key_at, &slot, err)) ||
                (rc = add_plain(b, name, slot, &pe, err)))
                return rc;
            pos = ptwm_json_skip_ws(json, len, pe.end);
            goto next;
        }
        key = json_loadb(json + pos, len - pos, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &jerr);
        if (!key) return json_failure(json, len, pos, NULL, label, &jerr, err);
        pos = ptwm_json_skip_ws(json, len, pos + (size_t)jerr.position);
        if ((rc = claim_key(b, json_string_value(key), key_at, &slot, err))) {
            json_decref(key);
            return rc;
        }
        if (pos >= len || json[pos] != ':') {
            json_decref(key);
            return syntax_error(json, len, pos, label, "':' expected", err);
        }
        pos = ptwm_json_skip_ws(json, len, pos + 1);
        value = json_loadb(json + pos, len - pos,
                           JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &jerr);
        if (!value) {
            rc = json_failure(json, len, pos, json_string_value(key), label, &jerr, err);
            json_decref(key);
            return rc;
        }
        rc = add_entry(b, json_string_value(key), slot, value, err);
        json_decref(key);
        json_decref(value);
        if (rc) return rc;
        pos = ptwm_json_skip_ws(json, len, pos + (size_t)jerr.position);
    next:
        if (pos < len && json[pos] == ',') {
            pos = ptwm_json_skip_ws(json, len, pos + 1);
            continue;
        }
        if (pos < len && json[pos] == '}') break;
        return syntax_error(json, len, pos, label, "',' or '}' expected", err);
    }
    pos = ptwm_json_skip_ws(json, len, pos + 1);
    if (pos != len) return syntax_error(json, len, pos, label, "end of file expected", err);
    return PTWM_OK;
}

ptwm_error ptwm_st_parse_header(const char *json, size_t len, const char *label,
                                ptwm_st_parsed *out, ptwm_err *err) {
    st_build b;
    ptwm_st_parsed *p = &b.p;
    ptwm_error rc;
    size_t i, first;

    memset(out, 0, sizeof(*out));
    memset(&b, 0, sizeof(b));
    b.label = label;
    first = ptwm_json_skip_ws(json, len, 0);
    if (first == len || json[first] != '{') return not_an_object(json, len, label, err);
    /* The arenas exist even when empty, so every pointer below is valid. */
    if (!ptwm_grow((void **)&p->names, &b.names_cap, 1, 1) ||
        !ptwm_grow((void **)&p->dims, &b.dims_cap, 1, sizeof(*p->dims))) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(label));
        goto fail;
    }
    if ((rc = scan_object(&b, json, len, first, err))) goto fail;
    for (i = 0; i < p->n; i++) {
        p->t[i].name = p->names + p->t[i].name_at;
        p->t[i].shape = p->dims + p->t[i].shape_at;
    }
    for (i = 0; i < p->nmeta; i++) {
        p->meta[i].key = p->names + b.meta_at[2 * i];
        p->meta[i].value = p->names + b.meta_at[2 * i + 1];
    }
    if ((rc = check_tiling(p, label, err))) goto fail;
    /* Sorting moved the entries: the table follows them to their places. */
    if (p->n) {
        size_t *map = (size_t *)ptwm_malloc((uint64_t)p->n * sizeof(size_t));
        if (!map) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': out of memory", LABEL(label));
            goto fail;
        }
        for (i = 0; i < p->n; i++) map[p->t[i].order] = i;
        ptwm_nametab_renumber(&p->by_name, map);
        ptwm_free(map);
    }
    ptwm_free(b.meta_at);
    *out = b.p;
    return PTWM_OK;
fail:
    ptwm_free(b.meta_at);
    ptwm_st_parsed_free(p);
    return rc;
}

void ptwm_st_parsed_free(ptwm_st_parsed *p) {
    if (!p) return;
    ptwm_free(p->t);
    ptwm_free(p->meta);
    ptwm_free(p->names);
    ptwm_free(p->dims);
    ptwm_nametab_free(&p->by_name);
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
