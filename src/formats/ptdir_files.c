/* The file record of a .ptwm directory (ptdir_files.h, docs/SHARDING.md).
 *
 * The record is JSON whose last member is the XXH3-128 of every byte before
 * it, at a fixed place: the file ends with exactly
 *     "  \"record_xxh3_128\": \"" <32 lowercase hex digits> "\"\n}\n"
 * and the hash covers the bytes before that line. A reader checks that
 * ending and the hash before it parses anything, so a damaged record is
 * found as damage, never read as a different list of files; the JSON is
 * then checked strictly (hand-made or hostile records). The writer lists the
 * files sorted by name, so two runs over the same files write the same
 * bytes, whatever order the directory lists them in. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <jansson.h>
#include "fileio.h"
#include "hash.h"
#include "ptdir_files.h"

#define FILES_FORMAT "ptwm-files"
#define FILES_VERSION 1
/* A record lists the files beside the shards; a million is far past any
 * checkpoint, and the caps bound what a hostile record costs. */
#define FILES_MAX_BYTES ((uint64_t)64 << 20)
#define FILES_MAX_ENTRIES ((size_t)1 << 20)
#define NAME_MAX_BYTES 4096
#define NAME_MAX_PARTS 17   /* the copy's 16 directories deep, then the file */
#define HASH_BUF ((size_t)1 << 20)

static const char trail_key[] = "  \"record_xxh3_128\": \"";
static const char trail_end[] = "\"\n}\n";
#define TRAIL_KEY_LEN (sizeof trail_key - 1)
#define TRAIL_LEN (TRAIL_KEY_LEN + 32 + sizeof trail_end - 1)

void ptwm_files_free(ptwm_files *f) {
    size_t i;
    if (!f) return;
    for (i = 0; i < f->n; i++) ptwm_free(f->e[i].name);
    ptwm_free(f->e);
    memset(f, 0, sizeof *f);
}

ptwm_error ptwm_files_add(ptwm_files *f, const char *name, uint64_t size, const uint8_t hash[16],
                          ptwm_err *err) {
    char *copy;
    if (f->n >= FILES_MAX_ENTRIES)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "more than %zu files to record", FILES_MAX_ENTRIES);
    if (!ptwm_grow((void **)&f->e, &f->cap, f->n + 1, sizeof *f->e) || !(copy = ptwm_strdup(name)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    f->e[f->n].name = copy;
    f->e[f->n].size = size;
    memcpy(f->e[f->n].hash, hash, 16);
    f->n++;
    return PTWM_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const ptwm_files_entry *)a)->name, ((const ptwm_files_entry *)b)->name);
}

const ptwm_files_entry *ptwm_files_find(const ptwm_files *f, const char *name) {
    ptwm_files_entry key;
    if (!f || !f->n) return NULL;
    key.name = (char *)name;
    return (const ptwm_files_entry *)bsearch(&key, f->e, f->n, sizeof *f->e, by_name);
}

/* ---- writing -------------------------------------------------------------- */

static json_t *files_json(const ptwm_files *f) {
    json_t *root = json_object(), *list = json_array();
    size_t i;
    int bad = !root || !list;
    for (i = 0; i < f->n && !bad; i++) {
        char hex[33];
        /* NULL for a name that is not UTF-8 */
        json_t *e = json_pack("{s:s, s:I, s:s}", "name", f->e[i].name, "size",
                              (json_int_t)f->e[i].size, "xxh3_128", ptwm_hex128(f->e[i].hash, hex));
        bad = !e || json_array_append_new(list, e) != 0;
    }
    if (!bad)
        bad = json_object_set_new(root, "format", json_string(FILES_FORMAT)) ||
              json_object_set_new(root, "version", json_integer(FILES_VERSION)) ||
              json_object_set(root, "files", list);
    json_decref(list);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

ptwm_error ptwm_files_text(ptwm_files *f, char **text, size_t *len, ptwm_err *err) {
    json_t *root;
    char *body, *out;
    size_t n, i;
    uint8_t h[16];
    char hex[33];
    *text = NULL;
    if (f->n > 1) qsort(f->e, f->n, sizeof *f->e, by_name);
    for (i = 0; i < f->n; i++) {
        if (f->e[i].size > INT64_MAX)
            return ptwm_fail(err, PTWM_ERR_LIMIT, "file '%s': %llu bytes", f->e[i].name,
                             (unsigned long long)f->e[i].size);
        if (i && !strcmp(f->e[i - 1].name, f->e[i].name))
            return ptwm_fail(err, PTWM_ERR_DUPLICATE, "file '%s' recorded twice", f->e[i].name);
    }
    root = files_json(f);
    body = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    /* jansson refuses a name that is not UTF-8 (or runs out of memory). */
    if (!body)
        return ptwm_fail(err, PTWM_ERR_UNSUPPORTED,
                         "cannot record the directory's files: a file name is not UTF-8 (or out "
                         "of memory)");
    /* The dump ends "\n}": the record's own hash becomes its last member. */
    n = strlen(body);
    out = n >= 2 ? (char *)ptwm_malloc(n + TRAIL_LEN + 1) : NULL;
    if (!out) {
        free(body); /* json_dumps allocates with jansson's allocator */
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    memcpy(out, body, n - 2);
    memcpy(out + n - 2, ",\n", 2);
    free(body);
    ptwm_xxh128_oneshot(out, n, h);
    memcpy(out + n, trail_key, TRAIL_KEY_LEN);
    memcpy(out + n + TRAIL_KEY_LEN, ptwm_hex128(h, hex), 32);
    memcpy(out + n + TRAIL_KEY_LEN + 32, trail_end, sizeof trail_end);
    *text = out;
    *len = n + TRAIL_LEN;
    return PTWM_OK;
}

ptwm_error ptwm_files_write(ptwm_files *f, const char *dir, ptwm_err *err) {
    char *text = NULL, *path = ptwm_path_join(dir, PTWM_FILES_NAME);
    size_t len = 0;
    ptwm_error rc = path ? ptwm_files_text(f, &text, &len, err)
                         : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_write_small_file(path, text, len, NULL, err);
    ptwm_free(text);
    ptwm_free(path);
    return rc;
}

/* ---- reading -------------------------------------------------------------- */

static int lower_hex(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static unsigned hex_digit(char c) { return (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10); }

static int hex_bytes(const char *s, uint8_t out[16]) {
    size_t i;
    if (strlen(s) != 32 || !lower_hex(s, 32)) return 0;
    for (i = 0; i < 16; i++) out[i] = (uint8_t)(hex_digit(s[2 * i]) << 4 | hex_digit(s[2 * i + 1]));
    return 1;
}

/* A path inside the directory: parts joined by '/', none empty, "." or
 * "..", no '\', none over 255 bytes, at most NAME_MAX_PARTS of them. */
static int valid_name(const char *s, size_t len) {
    size_t parts = 0;
    if (len == 0 || len > NAME_MAX_BYTES || strlen(s) != len) return 0;
    while (*s) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 0 || n > 255 || (n == 1 && s[0] == '.') || (n == 2 && !strncmp(s, "..", 2)) ||
            memchr(s, '\\', n) || ++parts > NAME_MAX_PARTS)
            return 0;
        s += n;
        if (*s == '/' && !*++s) return 0;
    }
    return 1;
}

/* The ending and the hash of the bytes before it. */
static ptwm_error check_own_hash(const char *text, size_t len, const char *label, ptwm_err *err) {
    const char *t = len >= TRAIL_LEN ? text + len - TRAIL_LEN : text;
    uint8_t h[16];
    char hex[33];
    if (len < TRAIL_LEN || memcmp(t, trail_key, TRAIL_KEY_LEN) != 0 ||
        !lower_hex(t + TRAIL_KEY_LEN, 32) || memcmp(t + TRAIL_KEY_LEN + 32, trail_end, 4) != 0)
        return ptwm_fail(err, PTWM_ERR_HASH,
                         "file record '%s' does not end with its own XXH3-128 "
                         "(\"record_xxh3_128\"): damaged or not a file record",
                         label);
    ptwm_xxh128_oneshot(text, len - TRAIL_LEN, h);
    if (memcmp(ptwm_hex128(h, hex), t + TRAIL_KEY_LEN, 32) != 0)
        return ptwm_fail(err, PTWM_ERR_HASH,
                         "file record '%s' is damaged: its bytes have XXH3-128 %s, it records "
                         "%.32s",
                         label, hex, t + TRAIL_KEY_LEN);
    return PTWM_OK;
}

static ptwm_error schema(const char *label, const char *what, size_t i, ptwm_err *err) {
    return ptwm_fail(err, PTWM_ERR_SCHEMA, "file record '%s': %s (files[%zu])", label, what, i);
}

/* files[i]: exactly name, size and xxh3_128; names in strictly ascending order. */
static ptwm_error parse_entry(json_t *e, size_t i, const char *label, ptwm_files *out,
                              ptwm_err *err) {
    json_t *name = json_object_get(e, "name"), *size = json_object_get(e, "size");
    const char *hex = json_string_value(json_object_get(e, "xxh3_128"));
    uint8_t h[16];
    if (!json_is_object(e) || json_object_size(e) != 3 || !json_is_string(name) ||
        !json_is_integer(size) || !hex)
        return schema(label, "an entry holds exactly \"name\", \"size\" and \"xxh3_128\"", i, err);
    if (!valid_name(json_string_value(name), json_string_length(name)))
        return schema(label, "a name is a path inside the directory (no empty, '.' or '..' "
                             "parts, no '\\')", i, err);
    if (json_integer_value(size) < 0) return schema(label, "a size is not negative", i, err);
    if (!hex_bytes(hex, h)) return schema(label, "xxh3_128 is 32 lowercase hex digits", i, err);
    if (i && strcmp(out->e[i - 1].name, json_string_value(name)) >= 0)
        return schema(label, "names are listed once each, in ascending byte order", i, err);
    return ptwm_files_add(out, json_string_value(name), (uint64_t)json_integer_value(size), h, err);
}

static ptwm_error parse_json(const char *text, size_t len, const char *label, ptwm_files *out,
                             ptwm_err *err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *files;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    json_t *version = json_object_get(root, "version");
    size_t i;
    ptwm_error rc = PTWM_OK;
    if (!root)
        return ptwm_fail(err, PTWM_ERR_JSON, "file record '%s': line %d column %d: %s", label,
                         jerr.line, jerr.column, jerr.text);
    files = json_object_get(root, "files");
    if (!json_is_object(root) || json_object_size(root) != 4 || !fmt ||
        strcmp(fmt, FILES_FORMAT) != 0 || !json_is_array(files) ||
        !json_is_string(json_object_get(root, "record_xxh3_128")))
        rc = ptwm_fail(err, PTWM_ERR_SCHEMA,
                       "file record '%s': needs exactly format \"" FILES_FORMAT "\", version, "
                       "files (an array) and record_xxh3_128",
                       label);
    else if (!json_is_integer(version) || json_integer_value(version) != FILES_VERSION)
        rc = ptwm_fail(err, PTWM_ERR_VERSION, "file record '%s': version %s, this reader knows %d",
                       label, json_is_integer(version) ? "other than 1" : "missing",
                       FILES_VERSION);
    else if (json_array_size(files) > FILES_MAX_ENTRIES)
        rc = ptwm_fail(err, PTWM_ERR_LIMIT, "file record '%s': more than %zu files", label,
                       FILES_MAX_ENTRIES);
    for (i = 0; !rc && i < json_array_size(files); i++)
        rc = parse_entry(json_array_get(files, i), i, label, out, err);
    json_decref(root);
    return rc;
}

ptwm_error ptwm_files_parse(const char *text, size_t len, const char *label, ptwm_files *out,
                            ptwm_err *err) {
    ptwm_error rc;
    memset(out, 0, sizeof *out);
    if (!label) label = "<memory>";
    if ((rc = check_own_hash(text, len, label, err)) == PTWM_OK)
        rc = parse_json(text, len, label, out, err);
    if (rc) ptwm_files_free(out);
    return rc;
}

ptwm_error ptwm_files_read(const char *dir, ptwm_files *out, int *found, ptwm_err *err) {
    char *path = ptwm_path_join(dir, PTWM_FILES_NAME), *text = NULL;
    size_t len = 0;
    ptwm_error rc = path ? ptwm_find_file(path, found, err)
                         : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    memset(out, 0, sizeof *out);
    if (!rc && *found) rc = ptwm_read_small_file(path, FILES_MAX_BYTES, &text, &len, err);
    if (!rc && *found) rc = ptwm_files_parse(text, len, path, out, err);
    ptwm_free(text);
    ptwm_free(path);
    return rc;
}

ptwm_error ptwm_files_check(const ptwm_files *f, const char *dir, const char *name,
                            uint64_t size, const uint8_t hash[16], ptwm_err *err) {
    const ptwm_files_entry *e = ptwm_files_find(f, name);
    char got[33], want[33];
    if (!e)
        return ptwm_fail(err, PTWM_ERR_NOT_FOUND,
                         "directory '%s': file '%s' is not in its file record (%s)", dir, name,
                         PTWM_FILES_NAME);
    if (e->size == size && memcmp(e->hash, hash, 16) == 0) return PTWM_OK;
    return ptwm_fail(err, PTWM_ERR_HASH,
                     "directory '%s': file '%s' is damaged: %llu bytes with XXH3-128 %s, its "
                     "file record (%s) says %llu bytes with %s",
                     dir, name, (unsigned long long)size, ptwm_hex128(hash, got), PTWM_FILES_NAME,
                     (unsigned long long)e->size, ptwm_hex128(e->hash, want));
}

ptwm_error ptwm_files_check_bytes(const ptwm_files *f, const char *dir, const char *name,
                                  const void *p, size_t len, ptwm_err *err) {
    uint8_t h[16];
    ptwm_xxh128_oneshot(p, len, h);
    return ptwm_files_check(f, dir, name, len, h, err);
}

ptwm_error ptwm_hash_file(const char *path, uint8_t hash[16], uint64_t *size, ptwm_err *err) {
    ptwm_xxh128 h = {0};
    uint8_t *buf = NULL;
    ptwm_error rc = PTWM_OK;
    ssize_t got;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *size = 0;
    if (fd < 0) return ptwm_fail(err, PTWM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!(buf = (uint8_t *)ptwm_malloc(HASH_BUF)))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_xxh128_begin(&h, err);
    while (!rc && (got = read(fd, buf, HASH_BUF)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            rc = ptwm_fail(err, PTWM_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            break;
        }
        ptwm_xxh128_update(&h, buf, (size_t)got);
        *size += (uint64_t)got;
    }
    if (!rc) ptwm_xxh128_digest(&h, hash);
    ptwm_xxh128_free(&h);
    ptwm_free(buf);
    close(fd);
    return rc;
}
