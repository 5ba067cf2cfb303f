/* Compressing a checkpoint in parts, one process (or machine) per part, then
 * assembling the result (docs/SCALE.md).
 *
 * Every part computes the same plan from the same source and options: the
 * output shards, and which part writes each (the largest shards first, each
 * to the part with the fewest bytes so far). A part writes its shards and a
 * manifest under OUTDIR/.ptwm-parts/; assembly checks that every part is
 * there and agrees (plan fingerprint, shards, sizes, hashes), moves the
 * shards into place, copies the source's other files and writes the index
 * last. Until then OUTDIR holds no index and no model.ptwm: no reader takes
 * it for a finished checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fileio.h"
#include "hash.h"
#include "outdir.h"
#include "ptdir_files.h"
#include "ptdir_parts.h"
#include "source_impl.h"

#define PARTS_DIR ".ptwm-parts"
#define SHARDS_DIR ".ptwm-parts/shards"
#define MANIFEST_MAX ((uint64_t)64 << 20)

void ptwm_parts_assign(const uint64_t *raw, size_t n, uint32_t parts, uint32_t *part_of) {
    uint64_t *load = (uint64_t *)ptwm_calloc(parts, sizeof *load);
    uint8_t *done = (uint8_t *)ptwm_calloc(n + 1, 1);
    size_t step, i;
    uint32_t k, best;
    if (!load || !done) { /* no memory: round robin, still the same in every process */
        for (i = 0; i < n; i++) part_of[i] = (uint32_t)(i % parts);
        ptwm_free(load);
        ptwm_free(done);
        return;
    }
    for (step = 0; step < n; step++) {
        size_t pick = n;
        for (i = 0; i < n; i++) /* the largest shard left, the first of equals */
            if (!done[i] && (pick == n || raw[i] > raw[pick])) pick = i;
        for (best = 0, k = 1; k < parts; k++)
            if (load[k] < load[best]) best = k;
        done[pick] = 1;
        part_of[pick] = best;
        load[best] += raw[pick];
    }
    ptwm_free(load);
    ptwm_free(done);
}

void ptwm_parts_hash_u64(ptwm_xxh128 *h, uint64_t v) {
    uint8_t b[8];
    int i;
    for (i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    ptwm_xxh128_update(h, b, 8);
}

void ptwm_parts_hash_str(ptwm_xxh128 *h, const char *s) { ptwm_xxh128_update(h, s, strlen(s) + 1); }


#define BASE_SAMPLE 4096

/* A base changes the coded bytes (compress) and is needed to decode
 * (decompress): its kind, size and tensors (not its path, which may differ
 * between machines), and what tells two bases of one architecture apart
 * without reading them whole: the payload hash a .ptwm base records for
 * each tensor, else each tensor's first bytes (different weights differ
 * there). */
static ptwm_error hash_base(ptwm_xxh128 *h, ptwm_source *base, ptwm_err *err) {
    const ptwm_source_ops *ops;
    void *bh = ptwm_source_impl(base, &ops);
    size_t i, n = ptwm_source_count(base);
    uint8_t sample[BASE_SAMPLE];
    ptwm_error rc = PTWM_OK;
    ptwm_parts_hash_str(h, "base");
    ptwm_parts_hash_u64(h, (uint64_t)ops->kind);
    ptwm_parts_hash_u64(h, ops->file_size(bh));
    ptwm_parts_hash_u64(h, n);
    for (i = 0; i < n && !rc; i++) {
        ptwm_tensor_info t;
        size_t len;
        ptwm_source_tensor(base, i, &t, NULL);
        ptwm_parts_hash_str(h, t.name);
        ptwm_parts_hash_u64(h, t.nbytes);
        if (ptwm_source_tensor_hash(base, i, sample)) {
            ptwm_xxh128_update(h, sample, 16);
            continue;
        }
        len = (size_t)PTWM_MIN((uint64_t)BASE_SAMPLE, t.nbytes);
        if (!(rc = ptwm_source_read(base, i, 0, sample, len, err))) ptwm_xxh128_update(h, sample, len);
    }
    return rc;
}

/* Everything that decides the output files and who writes them: the
 * direction, the part count, the options that change coded bytes, every
 * output file, every tensor and its file, the input files and the index.
 * Threads do not change the output. */
static ptwm_error fingerprint(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                              const ptwm_conv_plan *pl, const ptwm_checkpoint_options *o,
                              char out[33], ptwm_err *err) {
    ptwm_xxh128 h = {0};
    uint8_t d[16];
    size_t i;
    ptwm_error rc = ptwm_xxh128_begin(&h, err);
    if (rc) return rc;
    ptwm_parts_hash_str(&h, "ptwm parts plan 2");
    ptwm_parts_hash_str(&h, sink->direction);
    ptwm_parts_hash_u64(&h, o->parts);
    ptwm_parts_hash_u64(&h, o->max_shard_size);
    ptwm_parts_hash_u64(&h, (uint64_t)(o->method ? o->method : PTWM_METHOD_MICROSCALE));
    ptwm_parts_hash_u64(&h, o->chunk_size);
    ptwm_parts_hash_u64(&h, (uint64_t)pl->with_index * 2 + (uint64_t)pl->exact);
    for (i = 0; i < pl->nfiles; i++) {
        ptwm_parts_hash_str(&h, pl->names[i]);
        ptwm_parts_hash_u64(&h, pl->raw[i]);
    }
    for (i = 0; i < pl->n; i++) {
        ptwm_parts_hash_str(&h, pl->items[i].info.name);
        ptwm_parts_hash_u64(&h, pl->items[i].info.nbytes);
        ptwm_parts_hash_u64(&h, pl->shard_of[i]);
    }
    for (i = 0; i < s->nin; i++) {
        ptwm_parts_hash_str(&h, s->nin > 1 ? s->in[i].label : "");
        ptwm_parts_hash_u64(&h, s->in[i].ops->file_size(s->in[i].h));
    }
    ptwm_parts_hash_u64(&h, s->index_len);
    if (s->index_text) ptwm_xxh128_update(&h, s->index_text, s->index_len);
    if (o->base && (rc = hash_base(&h, o->base, err))) {
        ptwm_xxh128_free(&h);
        return rc;
    }
    ptwm_xxh128_end(&h, d);
    ptwm_hex128(d, out);
    return PTWM_OK;
}

ptwm_error ptwm_parts_hash_file(const char *path, char hex[33], uint64_t *size, ptwm_err *err) {
    uint8_t d[16];
    ptwm_error rc = ptwm_hash_file(path, d, size, err);
    if (!rc) ptwm_hex128(d, hex);
    return rc;
}

static char *manifest_name(uint32_t part, uint32_t parts, char buf[64]) {
    snprintf(buf, 64, "part-%05u-of-%05u.json", (unsigned)part, (unsigned)parts);
    return buf;
}

static char *join3(const char *a, const char *b, const char *c) {
    char *ab = ptwm_path_join(a, b), *abc = ab ? ptwm_path_join(ab, c) : NULL;
    ptwm_free(ab);
    return abc;
}

/* The manifest of part `o->part`: what it was planned as and what it wrote. */
ptwm_error ptwm_parts_write_manifest(const char *outdir, const char *src, const char *fp,
                                     const char *direction, const ptwm_checkpoint_options *o,
                                     const ptwm_parts_files *f, ptwm_err *err) {
    json_t *root = json_object(), *shards = json_array();
    char name[64], *path = NULL, *text = NULL, *abs_src = ptwm_realpath(src);
    size_t k;
    ptwm_error rc = PTWM_OK;
    char *abs_base = o->base ? ptwm_realpath(ptwm_source_path(o->base)) : NULL;
    int bad = !root || !shards || !abs_src || (o->base && !abs_base);
    for (k = 0; k < f->n && !bad && !rc; k++) {
        char hex[33], *spath;
        uint64_t size = 0;
        json_t *e;
        if (f->part_of[k] + 1 != o->part) continue;
        if (!(spath = join3(outdir, SHARDS_DIR, f->name[k]))) {
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
            break;
        }
        rc = ptwm_parts_hash_file(spath, hex, &size, err);
        ptwm_free(spath);
        e = rc ? NULL
               : json_pack("{s:I, s:s, s:I, s:I, s:s}", "index", (json_int_t)k, "name",
                           f->name[k], "raw_bytes", (json_int_t)f->raw[k], "file_bytes",
                           (json_int_t)size, "xxh3", hex);
        if (!rc) bad |= !e || json_array_append_new(shards, e) != 0;
    }
    if (!bad && !rc) {
        bad |= json_object_set_new(root, "format", json_string("ptwm-part")) != 0;
        bad |= json_object_set_new(root, "version", json_integer(1)) != 0;
        bad |= json_object_set_new(root, "direction", json_string(direction)) != 0;
        bad |= json_object_set_new(root, "plan", json_string(fp)) != 0;
        bad |= json_object_set_new(root, "part", json_integer(o->part)) != 0;
        bad |= json_object_set_new(root, "parts", json_integer(o->parts)) != 0;
        bad |= json_object_set_new(root, "source", json_string(abs_src)) != 0;
        bad |= json_object_set_new(root, "max_shard_size", json_integer((json_int_t)o->max_shard_size)) != 0;
        bad |= json_object_set_new(root, "method", json_integer(o->method)) != 0;
        bad |= json_object_set_new(root, "chunk_size", json_integer((json_int_t)o->chunk_size)) != 0;
        if (abs_base) bad |= json_object_set_new(root, "base", json_string(abs_base)) != 0;
        if (o->follow_symlinks)
            bad |= json_object_set_new(root, "follow_symlinks", json_true()) != 0;
        bad |= json_object_set(root, "shards", shards) != 0;
        if (!bad) text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    }
    if (!rc && !text)
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "cannot build the manifest of part %u (out of memory, "
                       "or a source path that is not UTF-8)", (unsigned)o->part);
    if (!rc && !(path = join3(outdir, PARTS_DIR, manifest_name(o->part, o->parts, name))))
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_write_small_file(path, text, strlen(text), "\n", err);
    free(text); /* json_dumps allocates with jansson's allocator */
    ptwm_free(abs_src);
    ptwm_free(abs_base);
    ptwm_free(path);
    json_decref(shards);
    json_decref(root);
    return rc;
}

/* Manifests of other parts already in OUTDIR must come from the same plan:
 * a part of another source or part count is refused before any work. */
static ptwm_error check_neighbours(const char *outdir, const char *fp, uint32_t parts,
                                   ptwm_err *err) {
    ptwm_parts_manifest *m = NULL;
    size_t n = 0, i;
    ptwm_error rc = ptwm_parts_read_all(outdir, &m, &n, err);
    for (i = 0; i < n && !rc; i++)
        if (strcmp(m[i].plan, fp) != 0 || m[i].parts != parts)
            rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                           "'%s' holds part %u of %u of another plan (another source, options or "
                           "part count); remove '%s/" PARTS_DIR "' to start over",
                           outdir, (unsigned)m[i].part, (unsigned)m[i].parts, outdir);
    ptwm_parts_free(m, n);
    return rc;
}

int ptwm_parts_finished(const char *outdir) {
    char *parts = ptwm_path_join(outdir, PARTS_DIR);
    DIR *d = parts && !ptwm_is_dir(parts) ? opendir(outdir) : NULL;
    struct dirent *e;
    int yes = 0;
    while (d && !yes && (e = readdir(d)) != NULL)
        yes = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    ptwm_free(parts);
    return yes;
}

static ptwm_error make_dir(const char *path, ptwm_err *err) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return ptwm_fail(err, PTWM_ERR_IO, "cannot create directory '%s': %s", path,
                         strerror(errno));
    if (!ptwm_is_dir(path)) return ptwm_fail(err, PTWM_ERR_IO, "'%s' is not a directory", path);
    return PTWM_OK;
}

/* OUTDIR and its .ptwm-parts/shards, made if missing: a directory that holds
 * parts, or a new or empty one (not a finished checkpoint). */
static ptwm_error prepare_outdir(const char *outdir, const char *src, ptwm_err *err) {
    char *parts = ptwm_path_join(outdir, PARTS_DIR), *shards = ptwm_path_join(outdir, SHARDS_DIR);
    ptwm_error rc = !parts || !shards ? ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory") : PTWM_OK;
    if (!rc) rc = ptwm_make_parents(outdir, err);
    if (!rc) rc = ptwm_check_overlap(outdir, src, err);
    if (!rc && ptwm_parts_finished(outdir))
        rc = ptwm_fail(err, PTWM_ERR_EXISTS,
                       "'%s' is already a finished checkpoint (or holds files that are not "
                       "parts); parts go into a new or empty directory",
                       outdir);
    if (!rc) rc = make_dir(outdir, err);
    if (!rc) rc = make_dir(parts, err);
    if (!rc) rc = make_dir(shards, err);
    ptwm_free(parts);
    ptwm_free(shards);
    return rc;
}

ptwm_error ptwm_parts_check(const ptwm_checkpoint_options *o, ptwm_err *err) {
    if (o->parts > PTWM_PARTS_MAX || o->part > o->parts || (o->parts && !o->part))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "part %u of %u: parts go from 1 to a count of at most %u",
                         (unsigned)o->part, (unsigned)o->parts, PTWM_PARTS_MAX);
    return PTWM_OK;
}

ptwm_error ptwm_parts_begin(const char *outdir, const char *src, const char *fp,
                            const ptwm_checkpoint_options *o, char **files_dir, ptwm_err *err) {
    ptwm_error rc;
    *files_dir = NULL;
    if (o->force)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "force cannot be combined with parts: a part never removes the work of "
                         "the others");
    if ((rc = prepare_outdir(outdir, src, err)) || (rc = check_neighbours(outdir, fp, o->parts, err)))
        return rc;
    if (!(*files_dir = ptwm_path_join(outdir, SHARDS_DIR)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    return PTWM_OK;
}

void ptwm_parts_files_free(ptwm_parts_files *f) {
    size_t i;
    for (i = 0; f->name && i < f->n; i++) ptwm_free(f->name[i]);
    ptwm_free(f->name);
    ptwm_free(f->raw);
    ptwm_free(f->part_of);
    memset(f, 0, sizeof *f);
}

ptwm_error ptwm_parts_files_new(size_t n, uint32_t parts, ptwm_parts_files *f, ptwm_err *err) {
    memset(f, 0, sizeof *f);
    f->name = (char **)ptwm_calloc(n + 1, sizeof *f->name);
    f->raw = (uint64_t *)ptwm_calloc(n + 1, sizeof *f->raw);
    f->part_of = (uint32_t *)ptwm_calloc(n + 1, sizeof *f->part_of);
    f->n = n;
    f->parts = parts;
    if (!f->name || !f->raw || !f->part_of) {
        ptwm_parts_files_free(f);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory planning %zu files", n);
    }
    return PTWM_OK;
}

ptwm_error ptwm_parts_files_name(ptwm_parts_files *f, size_t k, const char *name, ptwm_err *err) {
    if (!(f->name[k] = ptwm_strdup(name))) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    return PTWM_OK;
}

void ptwm_parts_files_assign(ptwm_parts_files *f) {
    if (f->parts) ptwm_parts_assign(f->raw, f->n, f->parts, f->part_of);
}

ptwm_error ptwm_parts_plan(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                           const ptwm_checkpoint_options *o, ptwm_conv_plan *pl,
                           ptwm_parts_files *f, char fp[33], ptwm_err *err) {
    size_t k;
    ptwm_error rc = ptwm_conv_plan_make(s, sink, o->max_shard_size, pl, err);
    if (rc) return rc;
    rc = fingerprint(s, sink, pl, o, fp, err);
    if (!rc) rc = ptwm_parts_files_new(pl->nfiles, o->parts, f, err);
    for (k = 0; !rc && k < pl->nfiles; k++) {
        f->raw[k] = pl->raw[k];
        rc = ptwm_parts_files_name(f, k, pl->names[k], err);
    }
    if (!rc) ptwm_parts_files_assign(f);
    if (rc) {
        ptwm_parts_files_free(f);
        ptwm_conv_plan_free(pl);
    }
    return rc;
}

ptwm_error ptwm_parts_convert(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                              const char *outdir, const ptwm_checkpoint_options *o,
                              ptwm_err *err) {
    ptwm_conv_progress pr;
    ptwm_conv_opts co;
    ptwm_conv_plan pl;
    ptwm_parts_files f;
    uint8_t *wanted = NULL;
    uint64_t *sizes = NULL;
    char fp[33], *dir = NULL;
    size_t k;
    ptwm_error rc;
    if ((rc = ptwm_parts_plan(s, sink, o, &pl, &f, fp, err))) return rc;
    rc = ptwm_parts_begin(outdir, s->path, fp, o, &dir, err);
    wanted = (uint8_t *)ptwm_calloc(pl.nfiles + 1, 1);
    sizes = (uint64_t *)ptwm_calloc(pl.nfiles + 1, sizeof *sizes);
    if (!rc && (!wanted || !sizes)) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (k = 0; !rc && k < pl.nfiles; k++) wanted[k] = f.part_of[k] + 1 == o->part;
    ptwm_conv_opts_of(o, &pr, &co);
    if (!rc) rc = ptwm_conv_write(s, &pl, sink, &co, dir, wanted, sizes, err);
    if (!rc) rc = ptwm_parts_write_manifest(outdir, s->path, fp, sink->direction, o, &f, err);
    ptwm_free(dir);
    ptwm_free(sizes);
    ptwm_free(wanted);
    ptwm_parts_files_free(&f);
    ptwm_conv_plan_free(&pl);
    return rc;
}

/* ---- reading manifests ------------------------------------------------ */

static int is_hex32(const char *s) {
    size_t i;
    for (i = 0; i < 32; i++)
        if (!s[i] || !strchr("0123456789abcdef", s[i])) return 0;
    return s[32] == 0;
}

/* A non-negative integer member, else a message naming it. */
static int get_u64(json_t *o, const char *key, uint64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static char *dup_json_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v)) return NULL;
    return ptwm_strdup(s);
}

static ptwm_error parse_shards(ptwm_parts_manifest *m, json_t *arr, const char *label,
                               ptwm_err *err) {
    size_t i, n = json_array_size(arr);
    if (!json_is_array(arr))
        return ptwm_fail(err, PTWM_ERR_SCHEMA, "manifest '%s': \"shards\" must be an array", label);
    m->shards = (ptwm_parts_shard *)ptwm_calloc(n + 1, sizeof *m->shards);
    if (!m->shards) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        ptwm_parts_shard *sh = &m->shards[i];
        const char *hex = json_string_value(json_object_get(e, "xxh3"));
        uint64_t index;
        m->nshards = i + 1;
        sh->name = dup_json_str(e, "name");
        if (!json_is_object(e) || !get_u64(e, "index", &index) || !sh->name ||
            !ptwm_plain_name(sh->name) || !get_u64(e, "raw_bytes", &sh->raw_bytes) ||
            !get_u64(e, "file_bytes", &sh->file_bytes) || !hex || !is_hex32(hex))
            return ptwm_fail(err, PTWM_ERR_SCHEMA,
                             "manifest '%s': shards[%zu] needs index, name (a plain file name), "
                             "raw_bytes, file_bytes and xxh3 (32 hex digits)",
                             label, i);
        sh->index = (size_t)index;
        memcpy(sh->xxh3, hex, 33);
    }
    return PTWM_OK;
}

static ptwm_error parse_manifest(const char *text, size_t len, const char *file,
                                 ptwm_parts_manifest *m, ptwm_err *err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *fmt = json_string_value(json_object_get(root, "format"));
    const char *plan = json_string_value(json_object_get(root, "plan"));
    uint64_t version = 0, part = 0, parts = 0, method = 0;
    char expect[64];
    ptwm_error rc = PTWM_OK;
    if (!root)
        return ptwm_fail(err, PTWM_ERR_JSON, "manifest '%s' is not valid JSON at line %d: %s",
                         file, jerr.line, jerr.text);
    m->source = dup_json_str(root, "source");
    m->direction = dup_json_str(root, "direction");
    m->base = dup_json_str(root, "base");
    if (!fmt || strcmp(fmt, "ptwm-part") != 0 || !get_u64(root, "version", &version) ||
        version != 1)
        rc = ptwm_fail(err, PTWM_ERR_VERSION,
                       "manifest '%s' is not a version 1 ptwm-part manifest", file);
    else if (!plan || !is_hex32(plan) || !get_u64(root, "part", &part) ||
             !get_u64(root, "parts", &parts) || parts == 0 || parts > PTWM_PARTS_MAX ||
             part == 0 || part > parts || !m->source || !m->direction ||
             (strcmp(m->direction, "compress") != 0 && strcmp(m->direction, "decompress") != 0) ||
             !get_u64(root, "max_shard_size", &m->max_shard_size) ||
             !get_u64(root, "chunk_size", &m->chunk_size) || !get_u64(root, "method", &method) ||
             method > 255 || (json_object_get(root, "base") && !m->base) ||
             (json_object_get(root, "follow_symlinks") &&
              !json_is_true(json_object_get(root, "follow_symlinks"))))
        rc = ptwm_fail(err, PTWM_ERR_SCHEMA,
                       "manifest '%s': needs direction (compress or decompress), plan (32 hex "
                       "digits), part and parts (1 <= part <= parts <= %u), source, "
                       "max_shard_size, chunk_size and method (and base a string, "
                       "follow_symlinks true, if there)",
                       file, PTWM_PARTS_MAX);
    else if (strcmp(manifest_name((uint32_t)part, (uint32_t)parts, expect), file) != 0)
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH, "manifest '%s' describes part %llu of %llu",
                       file, (unsigned long long)part, (unsigned long long)parts);
    if (!rc) {
        memcpy(m->plan, plan, 33);
        m->part = (uint32_t)part;
        m->parts = (uint32_t)parts;
        m->method = (int)method;
        m->follow_symlinks = json_object_get(root, "follow_symlinks") != NULL;
        rc = parse_shards(m, json_object_get(root, "shards"), file, err);
    }
    json_decref(root);
    return rc;
}

/* A manifest's name: part-KKKKK-of-NNNNN.json, nothing else (temporary
 * files of an interrupted write are not manifests). */
static int manifest_file(const char *name) {
    unsigned k, n;
    char tail[8];
    return sscanf(name, "part-%5u-of-%5u.%5s", &k, &n, tail) == 3 && strlen(name) == 24 &&
           strcmp(tail, "json") == 0;
}

static int by_part(const void *a, const void *b) {
    const ptwm_parts_manifest *x = a, *y = b;
    return x->part < y->part ? -1 : x->part > y->part;
}

void ptwm_parts_free(ptwm_parts_manifest *m, size_t n) {
    size_t i, j;
    for (i = 0; m && i < n; i++) {
        for (j = 0; j < m[i].nshards; j++) ptwm_free(m[i].shards[j].name);
        ptwm_free(m[i].shards);
        ptwm_free(m[i].source);
        ptwm_free(m[i].direction);
        ptwm_free(m[i].base);
        ptwm_free(m[i].file);
    }
    ptwm_free(m);
}

static ptwm_error read_one(const char *dir, const char *name, ptwm_parts_manifest *m,
                           ptwm_err *err) {
    char *path = ptwm_path_join(dir, name), *text = NULL;
    size_t len = 0;
    ptwm_error rc = path ? ptwm_read_small_file(path, MANIFEST_MAX, &text, &len, err)
                         : ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    m->file = ptwm_strdup(name);
    if (!rc && !m->file) rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = parse_manifest(text, len, name, m, err);
    if (rc) ptwm_err_prefix(err, "'%s'", dir);
    ptwm_free(text);
    ptwm_free(path);
    return rc;
}

ptwm_error ptwm_parts_read_all(const char *outdir, ptwm_parts_manifest **out, size_t *n,
                               ptwm_err *err) {
    char *dir = ptwm_path_join(outdir, PARTS_DIR);
    ptwm_parts_manifest *m = NULL;
    size_t cap = 0, count = 0;
    struct dirent *e;
    ptwm_error rc = PTWM_OK;
    DIR *d;
    *out = NULL;
    *n = 0;
    if (!dir) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    d = opendir(dir);
    if (!d) {
        rc = errno == ENOENT ? PTWM_OK
                             : ptwm_fail(err, PTWM_ERR_IO, "cannot list '%s': %s", dir, strerror(errno));
        ptwm_free(dir);
        return rc;
    }
    while (!rc && (e = readdir(d)) != NULL) {
        if (!manifest_file(e->d_name)) continue;
        if (count >= PTWM_PARTS_MAX)
            rc = ptwm_fail(err, PTWM_ERR_LIMIT, "'%s' holds more than %u manifests", dir,
                           PTWM_PARTS_MAX);
        else if (!ptwm_grow((void **)&m, &cap, count + 1, sizeof *m))
            rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
        if (rc) break;
        memset(&m[count], 0, sizeof *m);
        rc = read_one(dir, e->d_name, &m[count], err);
        count++;
    }
    closedir(d);
    ptwm_free(dir);
    if (rc) {
        ptwm_parts_free(m, count);
        return rc;
    }
    if (count > 1) qsort(m, count, sizeof *m, by_part);
    *out = m;
    *n = count;
    return PTWM_OK;
}
