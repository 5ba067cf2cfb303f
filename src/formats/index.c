/* The index of a sharded checkpoint: model.ptwm.index.json and Hugging
 * Face's model.safetensors.index.json, one reader and one writer for both.
 *
 * Both are {"metadata": {...}, "weight_map": {tensor: shard file}}, so tools
 * that list a checkpoint's tensors from its index read ours too. The reader
 * is strict: the index decides which files are opened, so a shard name that
 * could leave the directory, a duplicated key or a total that is not an exact
 * non-negative integer is an error, never a guess. The kinds differ in what
 * they require: a .ptwm index has exactly those two keys, metadata.format
 * "ptwm", both totals and shard names ending in .ptwm; a safetensors index
 * needs only the weight_map (transformers adds keys over time, which are
 * ignored) and is written as transformers writes it. */
#include <stdio.h>
#include <stdlib.h>
#include <jansson.h>
#include "common.h"
#include "fileio.h"
#include "index.h"
#include "nametab.h"
#include "ptdir_files.h"
#include "safetensors.h"

/* A 100,000-tensor Hugging Face index is about 8 MB; parsing costs jansson
 * ~100 bytes per entry, so the cap also bounds the memory a hostile file gets. */
#define INDEX_FILE_MAX ((uint64_t)64 << 20)
#define INDEX_MAX_ENTRIES ((size_t)1 << 24)
#define INDEX_MAX_SHARDS ((size_t)1 << 20)

typedef struct index_entry {
    char *tensor;
    size_t shard;       /* into shards[] */
} index_entry;

typedef struct meta_entry {
    char *key;
    char *value;
    size_t len;
} meta_entry;

struct ptwm_index {
    ptwm_index_kind kind;
    int has_total;          /* a safetensors index may leave total_size out */
    uint64_t total_size, compressed_total_size;
    index_entry *entries;
    size_t count, cap;
    char **shards;
    size_t nshards, shards_cap;
    meta_entry *meta;
    size_t nmeta;
    ptwm_nametab by_tensor, by_shard;
};

static const char *tensor_at(const void *owner, size_t i) {
    return ((const ptwm_index *)owner)->entries[i].tensor;
}
static const char *shard_at(const void *owner, size_t i) {
    return ((const ptwm_index *)owner)->shards[i];
}

static char *dup_str(const char *s, size_t len) {
    char *p = (char *)ptwm_malloc((uint64_t)len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = 0;
    }
    return p;
}

const char *ptwm_index_bad_shard_name(const char *shard) {
    if (!*shard) return "is empty";
    if (strchr(shard, '/') || strchr(shard, '\\')) return "contains a path separator";
    if (strstr(shard, "..")) return "contains '..'";
    return NULL;
}

ptwm_error ptwm_index_check_shard_name(const char *shard, ptwm_err *err) {
    size_t len = shard ? strlen(shard) : 0;
    if (len == 0 || len > 255 || ptwm_index_bad_shard_name(shard) || len < 6 ||
        strcmp(shard + len - 5, ".ptwm") != 0)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "shard name '%s' is not a plain file name (at most 255 bytes, no '/', "
                         "'\\\\' or '..') ending in .ptwm",
                         shard ? shard : "(null)");
    return PTWM_OK;
}

ptwm_error ptwm_index_create(uint64_t total_size, uint64_t compressed_total_size,
                             ptwm_index **out, ptwm_err *err) {
    ptwm_error rc;
    if (total_size > INT64_MAX || compressed_total_size > INT64_MAX)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "index totals %llu / %llu exceed 2^63-1",
                         (unsigned long long)total_size,
                         (unsigned long long)compressed_total_size);
    rc = ptwm_index_new(PTWM_INDEX_PTWM, out, err);
    if (rc == PTWM_OK) ptwm_index_set_totals(*out, total_size, compressed_total_size);
    return rc;
}

ptwm_error ptwm_index_new(ptwm_index_kind kind, ptwm_index **out, ptwm_err *err) {
    ptwm_index *idx;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_create: out is NULL");
    *out = NULL;
    idx = (ptwm_index *)ptwm_calloc(1, sizeof *idx);
    if (!idx || !ptwm_nametab_reserve(&idx->by_tensor, 1) ||
        !ptwm_nametab_reserve(&idx->by_shard, 1)) {
        ptwm_index_free(idx);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory creating an index");
    }
    idx->kind = kind;
    idx->has_total = kind == PTWM_INDEX_PTWM;
    *out = idx;
    return PTWM_OK;
}

void ptwm_index_free(ptwm_index *idx) {
    size_t i;
    if (!idx) return;
    for (i = 0; i < idx->count; i++) ptwm_free(idx->entries[i].tensor);
    for (i = 0; i < idx->nshards; i++) ptwm_free(idx->shards[i]);
    for (i = 0; i < idx->nmeta; i++) {
        ptwm_free(idx->meta[i].key);
        ptwm_free(idx->meta[i].value);
    }
    ptwm_free(idx->entries);
    ptwm_free(idx->shards);
    ptwm_free(idx->meta);
    ptwm_nametab_free(&idx->by_tensor);
    ptwm_nametab_free(&idx->by_shard);
    ptwm_free(idx);
}

uint64_t ptwm_index_total_size(const ptwm_index *idx) { return idx ? idx->total_size : 0; }
uint64_t ptwm_index_compressed_total_size(const ptwm_index *idx) {
    return idx ? idx->compressed_total_size : 0;
}
int ptwm_index_has_total(const ptwm_index *idx) { return idx && idx->has_total; }
void ptwm_index_set_totals(ptwm_index *idx, uint64_t total, uint64_t compressed) {
    if (!idx) return;
    idx->has_total = 1;
    idx->total_size = total;
    idx->compressed_total_size = compressed;
}
size_t ptwm_index_count(const ptwm_index *idx) { return idx ? idx->count : 0; }
size_t ptwm_index_shard_count(const ptwm_index *idx) { return idx ? idx->nshards : 0; }
const char *ptwm_index_shard(const ptwm_index *idx, size_t i) {
    return idx && i < idx->nshards ? idx->shards[i] : NULL;
}

ptwm_error ptwm_index_entry(const ptwm_index *idx, size_t i, const char **tensor,
                            const char **shard, ptwm_err *err) {
    if (!idx) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_entry: NULL index");
    if (i >= idx->count) return ptwm_fail_index(err, "index", i, idx->count);
    if (tensor) *tensor = idx->entries[i].tensor;
    if (shard) *shard = idx->shards[idx->entries[i].shard];
    return PTWM_OK;
}

ptwm_error ptwm_index_find(const ptwm_index *idx, const char *tensor, size_t *pos,
                           ptwm_err *err) {
    size_t i;
    if (!idx || !tensor) return ptwm_fail_name(err, "index", tensor);
    if ((i = ptwm_nametab_lookup(&idx->by_tensor, idx, tensor_at, tensor)) == SIZE_MAX)
        return ptwm_fail_name(err, "index", tensor);
    if (pos) *pos = i;
    return PTWM_OK;
}

static ptwm_error intern_shard(ptwm_index *idx, const char *shard, size_t *out, ptwm_err *err) {
    uint32_t h = ptwm_name_hash(shard, strlen(shard));
    uint64_t *slot;
    if (!ptwm_nametab_reserve(&idx->by_shard, idx->nshards + 1))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    slot = ptwm_nametab_find(&idx->by_shard, idx, shard_at, shard, h);
    if (*slot) {
        *out = ptwm_nametab_index(*slot);
        return PTWM_OK;
    }
    if (idx->nshards >= INDEX_MAX_SHARDS)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "index names more than %zu shards", INDEX_MAX_SHARDS);
    if (idx->nshards == idx->shards_cap) {
        size_t cap = idx->shards_cap ? idx->shards_cap * 2 : 8;
        char **p = (char **)ptwm_realloc(idx->shards, (uint64_t)cap * sizeof(char *));
        if (!p) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory growing the shard list");
        idx->shards = p;
        idx->shards_cap = cap;
    }
    idx->shards[idx->nshards] = dup_str(shard, strlen(shard));
    if (!idx->shards[idx->nshards]) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    ptwm_nametab_put(slot, h, idx->nshards);
    *out = idx->nshards++;
    return PTWM_OK;
}

ptwm_error ptwm_index_add(ptwm_index *idx, const char *tensor, const char *shard, ptwm_err *err) {
    size_t si = 0, len;
    uint64_t *slot;
    uint32_t h;
    ptwm_error rc;
    if (!idx || !tensor || !shard)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_add: NULL argument");
    len = strlen(tensor);
    if (len > PTWM_MAX_NAME)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "tensor name of %zu bytes exceeds %d", len,
                         PTWM_MAX_NAME);
    if (idx->kind == PTWM_INDEX_PTWM ? ptwm_index_check_shard_name(shard, NULL) != 0
                                     : ptwm_index_bad_shard_name(shard) != NULL)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "tensor '%s': shard name '%s' is not a plain file name%s", tensor, shard,
                         idx->kind == PTWM_INDEX_PTWM ? " ending in .ptwm" : "");
    if (!ptwm_nametab_reserve(&idx->by_tensor, idx->count + 1))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory growing the index");
    h = ptwm_name_hash(tensor, len);
    slot = ptwm_nametab_find(&idx->by_tensor, idx, tensor_at, tensor, h);
    if (*slot != 0)
        return ptwm_fail(err, PTWM_ERR_DUPLICATE, "tensor '%s' mapped twice (to '%s' and '%s')",
                         tensor, idx->shards[idx->entries[ptwm_nametab_index(*slot)].shard], shard);
    if (idx->count >= INDEX_MAX_ENTRIES)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "index holds more than %zu tensors",
                         INDEX_MAX_ENTRIES);
    if ((rc = intern_shard(idx, shard, &si, err)) != PTWM_OK) return rc;
    if (idx->count == idx->cap) {
        size_t cap = idx->cap ? idx->cap * 2 : 64;
        index_entry *p = (index_entry *)ptwm_realloc(idx->entries, (uint64_t)cap * sizeof *p);
        if (!p) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory growing the index");
        idx->entries = p;
        idx->cap = cap;
    }
    idx->entries[idx->count].tensor = dup_str(tensor, len);
    if (!idx->entries[idx->count].tensor) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    idx->entries[idx->count].shard = si;
    ptwm_nametab_put(slot, h, idx->count++);
    return PTWM_OK;
}

static int reserved_key(const char *key) {
    return strcmp(key, "total_size") == 0 || strcmp(key, "compressed_total_size") == 0 ||
           strcmp(key, "format") == 0;
}

ptwm_error ptwm_index_set_meta(ptwm_index *idx, const char *key, const char *value,
                               size_t value_len, ptwm_err *err) {
    size_t i;
    char *v;
    if (!idx || !key || (!value && value_len))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_set_meta: NULL argument");
    if (reserved_key(key))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "index metadata key '%s' is reserved", key);
    v = dup_str(value ? value : "", value_len);
    if (!v) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < idx->nmeta; i++) {
        if (strcmp(idx->meta[i].key, key) == 0) {
            ptwm_free(idx->meta[i].value);
            idx->meta[i].value = v;
            idx->meta[i].len = value_len;
            return PTWM_OK;
        }
    }
    {
        meta_entry *p = (meta_entry *)ptwm_realloc(idx->meta, (uint64_t)(idx->nmeta + 1) * sizeof *p);
        if (!p) {
            ptwm_free(v);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        }
        idx->meta = p;
        p[idx->nmeta].key = dup_str(key, strlen(key));
        if (!p[idx->nmeta].key) {
            ptwm_free(v);
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        }
        p[idx->nmeta].value = v;
        p[idx->nmeta].len = value_len;
        idx->nmeta++;
    }
    return PTWM_OK;
}

const char *ptwm_index_get_meta(const ptwm_index *idx, const char *key, size_t *len) {
    size_t i;
    if (!idx || !key) return NULL;
    for (i = 0; i < idx->nmeta; i++) {
        if (strcmp(idx->meta[i].key, key) == 0) {
            if (len) *len = idx->meta[i].len;
            return idx->meta[i].value;
        }
    }
    return NULL;
}

/* An exact non-negative integer (jansson already refuses values past 2^63-1). */
static ptwm_error get_total(json_t *v, const char *key, const char *label, uint64_t *out,
                            ptwm_err *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        char what[64];
        ptwm_json_describe(v, what, sizeof what);
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "index '%s': metadata.%s must be a non-negative integer, got %s", label,
                         key, what);
    }
    *out = (uint64_t)json_integer_value(v);
    return PTWM_OK;
}

static ptwm_error parse_totals(ptwm_index *idx, json_t *meta, const char *label, ptwm_err *err) {
    static const char *const keys[2] = {"total_size", "compressed_total_size"};
    uint64_t *dst[2] = {&idx->total_size, &idx->compressed_total_size};
    int k, need = idx->kind == PTWM_INDEX_PTWM ? 2 : 1;
    for (k = 0; k < need; k++) {
        json_t *v = json_object_get(meta, keys[k]);
        ptwm_error rc;
        if (!v && idx->kind == PTWM_INDEX_PTWM)
            return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s': metadata.%s is missing", label,
                             keys[k]);
        if (v && (rc = get_total(v, keys[k], label, dst[k], err)) != PTWM_OK) return rc;
        if (v && k == 0) idx->has_total = 1;
    }
    return PTWM_OK;
}

static ptwm_error parse_metadata(ptwm_index *idx, json_t *meta, const char *label,
                                 ptwm_err *err) {
    const char *key;
    json_t *v;
    ptwm_error rc;
    if (!json_is_object(meta))
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s': \"metadata\" must be an object",
                         label);
    if ((rc = parse_totals(idx, meta, label, err)) != PTWM_OK) return rc;
    if (idx->kind == PTWM_INDEX_PTWM) {
        v = json_object_get(meta, "format");
        if (!json_is_string(v) || strcmp(json_string_value(v), "ptwm") != 0)
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "index '%s': metadata.format must be \"ptwm\" (is this a .ptwm "
                             "index?)",
                             label);
    }
    json_object_foreach(meta, key, v) {
        if (reserved_key(key)) continue;
        if (!json_is_string(v)) {
            if (idx->kind != PTWM_INDEX_PTWM) continue; /* transformers' own entries */
            return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s': metadata.%s must be a string",
                             label, key);
        }
        if ((rc = ptwm_index_set_meta(idx, key, json_string_value(v), json_string_length(v),
                                      err)) != PTWM_OK)
            return rc;
    }
    return PTWM_OK;
}

/* A weight_map value that is not a usable shard name, in each kind's words. */
static ptwm_error bad_shard(const ptwm_index *idx, const char *label, const char *tensor,
                            json_t *v, ptwm_err *err) {
    const char *name = json_string_value(v), *why;
    if (idx->kind == PTWM_INDEX_PTWM) {
        if (!name)
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "index '%s': weight_map['%s'] must be a shard file name", label,
                             tensor);
        if (ptwm_index_check_shard_name(name, NULL) == 0 && strlen(name) == json_string_length(v))
            return PTWM_OK;
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "index '%s': tensor '%s' maps to shard '%s', which is not a plain "
                         "file name ending in .ptwm inside the directory",
                         label, tensor, name);
    }
    if (!name)
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "index '%s': tensor '%s' must map to a shard file name (a string)", label,
                         tensor);
    why = strlen(name) != json_string_length(v) ? "contains a NUL byte"
                                                : ptwm_index_bad_shard_name(name);
    if (!why) return PTWM_OK;
    return ptwm_fail(err, PTWM_ERR_INDEX, "index '%s': tensor '%s' maps to shard name '%s', which %s",
                     label, tensor, name, why);
}

static ptwm_error parse_weight_map(ptwm_index *idx, json_t *map, const char *label,
                                   ptwm_err *err) {
    const char *tensor;
    json_t *v;
    if (!json_is_object(map))
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s': \"weight_map\" must be an object",
                         label);
    json_object_foreach(map, tensor, v) {
        ptwm_error rc = bad_shard(idx, label, tensor, v, err);
        if (rc == PTWM_OK && (rc = ptwm_index_add(idx, tensor, json_string_value(v), err)))
            ptwm_err_prefix(err, "index '%s'", label);
        if (rc != PTWM_OK) return rc;
    }
    return PTWM_OK;
}

static ptwm_error json_error(const json_error_t *jerr, ptwm_index_kind kind, const char *label,
                             ptwm_err *err) {
    int dup = json_error_code(jerr) == json_error_duplicate_key;
    if (kind == PTWM_INDEX_PTWM && dup)
        return ptwm_fail(err, PTWM_ERR_DUPLICATE, "index '%s': line %d: %s", label, jerr->line,
                         jerr->text);
    if (kind == PTWM_INDEX_PTWM)
        return ptwm_fail(err, PTWM_ERR_JSON, "index '%s': line %d column %d: %s", label,
                         jerr->line, jerr->column, jerr->text);
    if (dup)
        return ptwm_fail(err, PTWM_ERR_DUPLICATE, "index '%s' has a duplicate key at byte %d: %s",
                         label, jerr->position, jerr->text);
    return ptwm_fail(err, PTWM_ERR_JSON, "index '%s' is not valid JSON at line %d, column %d: %s",
                     label, jerr->line, jerr->column, jerr->text);
}

/* The top level: a .ptwm index has exactly "metadata" and "weight_map"; a
 * safetensors index needs a "weight_map" object and may hold anything else. */
static ptwm_error check_top(ptwm_index_kind kind, json_t *root, const char *label,
                            ptwm_err *err) {
    const char *key;
    json_t *v;
    if (kind != PTWM_INDEX_PTWM) {
        if (!json_is_object(root) || !json_is_object(json_object_get(root, "weight_map")))
            return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s' has no \"weight_map\" object",
                             label);
        return PTWM_OK;
    }
    if (!json_is_object(root))
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s': top level must be an object", label);
    json_object_foreach(root, key, v) {
        if (strcmp(key, "metadata") != 0 && strcmp(key, "weight_map") != 0)
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "index '%s': unknown top-level key '%s' (expected metadata, "
                             "weight_map)",
                             label, key);
    }
    if (!json_object_get(root, "metadata") || !json_object_get(root, "weight_map"))
        return ptwm_fail(err, PTWM_ERR_SCHEMA,
                         "index '%s': needs both \"metadata\" and \"weight_map\"", label);
    return PTWM_OK;
}

ptwm_error ptwm_index_parse_kind(const char *json, size_t len, const char *label,
                                 ptwm_index_kind kind, ptwm_index **out, ptwm_err *err) {
    json_error_t jerr;
    json_t *root, *meta;
    ptwm_index *idx = NULL;
    ptwm_error rc;
    if (!out || (!json && len))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_parse: NULL argument");
    *out = NULL;
    if (!label) label = "<memory>";
    /* JSON_PRESERVE_ORDER is the default since jansson 2.8; object iteration is
     * insertion order, which keeps the weight_map's shard order. */
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) return json_error(&jerr, kind, label, err);
    meta = json_object_get(root, "metadata");
    if ((rc = check_top(kind, root, label, err)) == PTWM_OK &&
        (rc = ptwm_index_new(kind, &idx, err)) == PTWM_OK &&
        (!meta || (rc = parse_metadata(idx, meta, label, err)) == PTWM_OK) &&
        (rc = parse_weight_map(idx, json_object_get(root, "weight_map"), label, err)) == PTWM_OK) {
        *out = idx;
        idx = NULL;
    }
    ptwm_index_free(idx);
    json_decref(root);
    return rc;
}

ptwm_error ptwm_index_parse(const char *json, size_t len, const char *label, ptwm_index **out,
                            ptwm_err *err) {
    return ptwm_index_parse_kind(json, len, label, PTWM_INDEX_PTWM, out, err);
}

static uint64_t file_max(ptwm_index_kind kind) {
    return kind == PTWM_INDEX_PTWM ? INDEX_FILE_MAX : PTWM_ST_MAX_HEADER;
}

/* An index names the directory's file record (metadata.file_record) when it
 * was written with one: only that name, and then the record must be there,
 * so a record lost with the index left is found. */
static ptwm_error check_record_named(const ptwm_index *idx, const char *path, int have_record,
                                     ptwm_err *err) {
    size_t len = 0;
    const char *named = ptwm_index_get_meta(idx, PTWM_META_FILE_RECORD, &len);
    if (!named) return PTWM_OK;
    if (len != strlen(PTWM_FILES_NAME) || strcmp(named, PTWM_FILES_NAME) != 0)
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "index '%s': metadata.%s must be \"%s\"", path,
                         PTWM_META_FILE_RECORD, PTWM_FILES_NAME);
    if (!have_record)
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                         "index '%s' names the directory's file record %s, which is missing",
                         path, PTWM_FILES_NAME);
    return PTWM_OK;
}

/* An index read whole, then its bytes checked against the record (`checked`:
 * rec is the directory's record, NULL when it has none) and parsed. */
static ptwm_error read_index(const char *path, ptwm_index_kind kind, int checked,
                             const ptwm_files *rec, ptwm_index **out, ptwm_err *err) {
    char *text = NULL, *dir;
    const char *base;
    size_t len = 0;
    ptwm_error rc;
    if (!path || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_read: NULL argument");
    *out = NULL;
    rc = ptwm_read_small_file(path, file_max(kind), &text, &len, err);
    if (rc) return rc;
    /* The bytes checked are the bytes parsed: one read. */
    if (rec) {
        dir = ptwm_parent_dir(path, &base);
        rc = dir ? ptwm_files_check_bytes(rec, dir, base, text, len, err)
                 : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        ptwm_free(dir);
    }
    if (!rc) rc = ptwm_index_parse_kind(text, len, path, kind, out, err);
    if (!rc && kind == PTWM_INDEX_PTWM && checked)
        rc = check_record_named(*out, path, rec != NULL, err);
    if (rc) {
        ptwm_index_free(*out);
        *out = NULL;
    }
    ptwm_free(text);
    return rc;
}

ptwm_error ptwm_index_read_checked(const char *path, ptwm_index_kind kind, const ptwm_files *rec,
                                   ptwm_index **out, ptwm_err *err) {
    return read_index(path, kind, 1, rec, out, err);
}

ptwm_error ptwm_index_read_kind(const char *path, ptwm_index_kind kind, ptwm_index **out,
                                ptwm_err *err) {
    return read_index(path, kind, 0, NULL, out, err);
}

/* A model.ptwm.index.json is checked against the file record beside it. */
ptwm_error ptwm_index_read(const char *path, ptwm_index **out, ptwm_err *err) {
    ptwm_files rec;
    char *dir;
    const char *base;
    int found = 0;
    ptwm_error rc;
    if (!path || !out)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_read: NULL argument");
    if (!(dir = ptwm_parent_dir(path, &base)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    memset(&rec, 0, sizeof rec);
    if (strcmp(base, PTWM_INDEX_NAME) != 0)
        rc = ptwm_index_read_kind(path, PTWM_INDEX_PTWM, out, err);   /* not a directory's */
    else if ((rc = ptwm_files_read(dir, &rec, &found, err)) == PTWM_OK)
        rc = ptwm_index_read_checked(path, PTWM_INDEX_PTWM, found ? &rec : NULL, out, err);
    ptwm_files_free(&rec);
    ptwm_free(dir);
    return rc;
}

ptwm_error ptwm_index_check_map(const ptwm_index *want, const ptwm_index *got, const char *label,
                                ptwm_err *err) {
    size_t i, at;
    for (i = 0; i < want->count; i++) {
        const char *t = want->entries[i].tensor, *shard = want->shards[want->entries[i].shard];
        const char *listed;
        if (ptwm_index_find(got, t, &at, NULL) != PTWM_OK)
            return ptwm_fail(err, PTWM_ERR_INDEX, "'%s' does not list tensor '%s' (in '%s')",
                             label, t, shard);
        listed = got->shards[got->entries[at].shard];
        if (strcmp(listed, shard) != 0)
            return ptwm_fail(err, PTWM_ERR_INDEX,
                             "'%s' maps tensor '%s' to shard '%s', but it is in '%s'", label, t,
                             listed, shard);
    }
    /* Every tensor of want was found, each once: got lists more only if larger. */
    if (got->count != want->count)
        for (i = 0; i < got->count; i++)
            if (ptwm_index_find(want, got->entries[i].tensor, NULL, NULL) != PTWM_OK)
                return ptwm_fail(err, PTWM_ERR_INDEX,
                                 "'%s' maps tensor '%s' to shard '%s', which does not hold it",
                                 label, got->entries[i].tensor,
                                 got->shards[got->entries[i].shard]);
    if (got->has_total && got->total_size != want->total_size)
        return ptwm_fail(err, PTWM_ERR_INDEX,
                         "'%s' says metadata.total_size %llu, the tensors hold %llu bytes", label,
                         (unsigned long long)got->total_size,
                         (unsigned long long)want->total_size);
    return PTWM_OK;
}

static json_t *build_json(const ptwm_index *idx) {
    json_t *root = json_object(), *meta = json_object(), *map = json_object();
    size_t i;
    int bad = !root || !meta || !map;
    if (!bad && idx->has_total)
        bad |= json_object_set_new(meta, "total_size", json_integer((json_int_t)idx->total_size));
    if (!bad && idx->kind == PTWM_INDEX_PTWM) {
        bad |= json_object_set_new(meta, "compressed_total_size",
                                   json_integer((json_int_t)idx->compressed_total_size));
        bad |= json_object_set_new(meta, "format", json_string("ptwm"));
    }
    for (i = 0; i < idx->nmeta && !bad; i++)
        bad |= json_object_set_new(meta, idx->meta[i].key,
                                   json_stringn(idx->meta[i].value, idx->meta[i].len));
    for (i = 0; i < idx->count && !bad; i++)
        bad |= json_object_set_new(map, idx->entries[i].tensor,
                                   json_string(idx->shards[idx->entries[i].shard]));
    if (!bad) {
        bad |= json_object_set(root, "metadata", meta);
        bad |= json_object_set(root, "weight_map", map);
    }
    json_decref(meta);
    json_decref(map);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

ptwm_error ptwm_index_text(const ptwm_index *idx, const char *label, char **out, size_t *len,
                           ptwm_err *err) {
    json_t *root;
    char *text;
    size_t n;
    int hf = idx->kind != PTWM_INDEX_PTWM;
    *out = NULL;
    if (idx->total_size > INT64_MAX || idx->compressed_total_size > INT64_MAX)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "index '%s': totals exceed 2^63-1", label);
    root = build_json(idx);
    /* As transformers writes its index (json.dumps(indent=2, sort_keys=True),
     * ASCII, but for the case of the hex digits in \u escapes); ours keeps
     * the order tensors were added in. */
    text = root ? json_dumps(root, hf ? JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII
                                      : JSON_INDENT(2) | JSON_PRESERVE_ORDER)
                : NULL;
    json_decref(root);
    /* A name that is not UTF-8 makes jansson refuse it; so does running out of memory. */
    if (!text && hf)
        return ptwm_fail(err, PTWM_ERR_NOMEM,
                         "'%s': cannot build the index (out of memory, or a tensor name that is "
                         "not UTF-8)",
                         label);
    if (!text)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "index '%s': a tensor name or metadata value is not valid UTF-8 (or out "
                         "of memory)", label);
    n = strlen(text);
    /* Never write what the reader would refuse (a huge source index kept in
     * the metadata can get there). */
    if ((uint64_t)n + 1 > file_max(idx->kind)) {
        free(text); /* json_dumps allocates with jansson's allocator */
        return ptwm_fail(err, PTWM_ERR_LIMIT,
                         "index '%s' would be %zu bytes, over the %llu bytes a reader accepts",
                         label, n + 1, (unsigned long long)file_max(idx->kind));
    }
    if ((*out = (char *)ptwm_malloc(n + 2)) != NULL) {
        memcpy(*out, text, n);
        memcpy(*out + n, "\n", 2);   /* a final newline, as transformers writes it */
        *len = n + 1;
    }
    free(text);
    return *out ? PTWM_OK : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
}

ptwm_error ptwm_index_write(const ptwm_index *idx, const char *path, ptwm_err *err) {
    char *text = NULL;
    size_t len = 0;
    ptwm_error rc;
    if (!idx || !path)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_index_write: NULL argument");
    if ((rc = ptwm_index_text(idx, path, &text, &len, err)) == PTWM_OK)
        rc = ptwm_write_small_file(path, text, len, NULL, err);
    ptwm_free(text);
    return rc;
}
