/* Owned layouts: parsed from JSON, taken from a source, sorted and split into
 * layers by name prefix. */
#include <jansson.h>
#include <stdlib.h>
#include "fileio.h"
#include "safetensors.h"

/* A layout file is a list of small objects; a few MiB covers millions of entries. */
#define LAYOUT_JSON_MAX ((uint64_t)256 << 20)

struct ptwm_layout {
    ptwm_layout_entry *e;
    size_t n;
};

void ptwm_layout_free(ptwm_layout *l) {
    size_t i;
    if (!l) return;
    for (i = 0; i < l->n; i++) {
        ptwm_free((void *)l->e[i].name);
        ptwm_free((void *)l->e[i].shape);
    }
    ptwm_free(l->e);
    ptwm_free(l);
}

const ptwm_layout_entry *ptwm_layout_entries(const ptwm_layout *l, size_t *n) {
    *n = l ? l->n : 0;
    return l ? l->e : NULL;
}

static ptwm_layout *layout_alloc(size_t n) {
    ptwm_layout *l = (ptwm_layout *)ptwm_calloc(1, sizeof(*l));
    if (!l) return NULL;
    l->e = (ptwm_layout_entry *)ptwm_calloc(n ? n : 1, sizeof(*l->e));
    if (!l->e) {
        ptwm_free(l);
        return NULL;
    }
    return l;
}

/* Copy name and shape into entry l->n and count it. */
static int layout_push(ptwm_layout *l, const char *name, const uint64_t *shape, uint32_t ndim) {
    size_t len = strlen(name);
    char *nm = (char *)ptwm_malloc(len + 1);
    uint64_t *sh = (uint64_t *)ptwm_malloc((ndim ? ndim : 1) * sizeof(uint64_t));
    if (!nm || !sh) {
        ptwm_free(nm);
        ptwm_free(sh);
        return -1;
    }
    memcpy(nm, name, len + 1);
    if (ndim) memcpy(sh, shape, ndim * sizeof(uint64_t));
    l->e[l->n].name = nm;
    l->e[l->n].shape = sh;
    l->e[l->n].ndim = ndim;
    l->n++;
    return 0;
}

/* One {"name": ..., "shape": [...]} object into l. */
static ptwm_error parse_entry(json_t *obj, size_t i, const char *label, ptwm_layout *l,
                              ptwm_err *err) {
    const char *key;
    json_t *val, *name = NULL, *shape = NULL;
    uint64_t dims[PTWM_MAX_NDIM];
    size_t d;
    if (!json_is_object(obj))
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "layout '%s': entry %zu is not an object", label, i);
    json_object_foreach(obj, key, val) {
        if (strcmp(key, "name") == 0) name = val;
        else if (strcmp(key, "shape") == 0) shape = val;
        else
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "layout '%s': entry %zu has unknown key '%s' (only name, shape)",
                             label, i, key);
    }
    if (!json_is_string(name) || !json_is_array(shape))
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "layout '%s': entry %zu needs \"name\" (string) and \"shape\" (list)",
                         label, i);
    if (strlen(json_string_value(name)) != json_string_length(name) ||
        json_string_length(name) > PTWM_MAX_NAME)
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "layout '%s': entry %zu: name holds NUL or exceeds %d bytes", label, i,
                         PTWM_MAX_NAME);
    if (json_array_size(shape) > PTWM_MAX_NDIM)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "layout '%s': tensor '%s': %zu dimensions, at most %d",
                         label, json_string_value(name), json_array_size(shape), PTWM_MAX_NDIM);
    for (d = 0; d < json_array_size(shape); d++) {
        json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) {
            char what[64];
            ptwm_json_describe(x, what, sizeof what);
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "layout '%s': tensor '%s': dimension %zu is not a non-negative "
                             "integer, got %s",
                             label, json_string_value(name), d, what);
        }
        dims[d] = (uint64_t)json_integer_value(x);
    }
    if (layout_push(l, json_string_value(name), dims, (uint32_t)json_array_size(shape)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "layout '%s': out of memory", label);
    return PTWM_OK;
}

ptwm_error ptwm_layout_parse_json(const char *text, size_t len, const char *label,
                                  ptwm_layout **out, ptwm_err *err) {
    json_error_t jerr;
    json_t *root;
    ptwm_layout *l;
    ptwm_error rc = PTWM_OK;
    uint64_t total;
    size_t i;
    if (!label) label = "(memory)";
    if (!out || (!text && len)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "layout: NULL argument");
    *out = NULL;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ptwm_fail(err, PTWM_ERR_JSON, "layout '%s': line %d: %s", label, jerr.line,
                         jerr.text);
    if (!json_is_array(root)) {
        json_decref(root);
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "layout '%s': not a JSON list of entries", label);
    }
    l = layout_alloc(json_array_size(root));
    if (!l) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "layout '%s': out of memory", label);
    for (i = 0; !rc && i < json_array_size(root); i++)
        rc = parse_entry(json_array_get(root, i), i, label, l, err);
    json_decref(root);
    if (!rc) rc = ptwm_layout_elements(l->e, l->n, &total, err);
    if (rc) {
        ptwm_layout_free(l);
        return rc;
    }
    *out = l;
    return PTWM_OK;
}

ptwm_error ptwm_layout_read_json(const char *path, ptwm_layout **out, ptwm_err *err) {
    char *text;
    size_t len;
    ptwm_error rc = ptwm_read_small_file(path, LAYOUT_JSON_MAX, &text, &len, err);
    if (rc) return rc;
    rc = ptwm_layout_parse_json(text, len, path, out, err);
    ptwm_free(text);
    return rc;
}

ptwm_error ptwm_layout_from_source(const ptwm_source *s, ptwm_layout **out, ptwm_err *err) {
    size_t i, n = ptwm_source_count(s);
    ptwm_layout *l = layout_alloc(n);
    if (!l) return ptwm_fail(err, PTWM_ERR_NOMEM, "layout: out of memory for %zu entries", n);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info ti;
        ptwm_error rc = ptwm_source_tensor(s, i, &ti, NULL);
        if (!rc && layout_push(l, ti.name, ti.shape, ti.ndim))
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "layout: out of memory");
        else if (rc)
            rc = ptwm_fail(err, rc, "'%s': cannot describe tensor %zu", ptwm_source_path(s), i);
        if (rc) {
            ptwm_layout_free(l);
            return rc;
        }
    }
    *out = l;
    return PTWM_OK;
}

/* Stable: equal names keep their order through the original position. */
typedef struct sort_item {
    ptwm_layout_entry e;
    size_t pos;
} sort_item;

static int cmp_items(const void *a, const void *b) {
    const sort_item *x = (const sort_item *)a, *y = (const sort_item *)b;
    int c = strcmp(x->e.name, y->e.name);
    if (c) return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

void ptwm_layout_sort_by_name(ptwm_layout *l) {
    sort_item *items;
    size_t i;
    if (!l || l->n < 2) return;
    items = (sort_item *)ptwm_malloc(l->n * sizeof(*items));
    if (!items) {
        /* fall back to an in-place insertion sort: slow but never fails */
        size_t j;
        for (i = 1; i < l->n; i++) {
            ptwm_layout_entry t = l->e[i];
            for (j = i; j > 0 && strcmp(l->e[j - 1].name, t.name) > 0; j--) l->e[j] = l->e[j - 1];
            l->e[j] = t;
        }
        return;
    }
    for (i = 0; i < l->n; i++) {
        items[i].e = l->e[i];
        items[i].pos = i;
    }
    qsort(items, l->n, sizeof(*items), cmp_items);
    for (i = 0; i < l->n; i++) l->e[i] = items[i].e;
    ptwm_free(items);
}

/* Length of a name's layer key: with depth 0, up to its last '/' or '.';
 * else its first `depth` components (the whole name if it has fewer). */
static size_t key_len(const char *name, unsigned depth) {
    size_t i, cut = strlen(name);
    unsigned seen = 0;
    if (depth == 0) {
        for (i = 0; name[i]; i++)
            if (name[i] == '/' || name[i] == '.') cut = i;
        return cut;
    }
    for (i = 0; name[i]; i++)
        if ((name[i] == '/' || name[i] == '.') && ++seen == depth) return i;
    return cut;
}

size_t ptwm_layout_group_end(const ptwm_layout_entry *entries, size_t n, size_t start,
                             unsigned depth) {
    size_t klen, end;
    if (start >= n) return start;
    klen = key_len(entries[start].name, depth);
    for (end = start + 1; end < n; end++) {
        const char *nm = entries[end].name;
        if (key_len(nm, depth) != klen || memcmp(nm, entries[start].name, klen) != 0) break;
    }
    return end;
}
