/* ptwm inspect: list the tensors of a safetensors file, a Hugging Face
 * checkpoint directory, a .ptwm file or a .ptwm directory, with totals and the
 * ratio per dtype. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "cli.h"
#include "options.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm inspect PATH [--json]\n\n"
            "List the tensors of PATH: a .safetensors file, a Hugging Face checkpoint\n"
            "directory (model.safetensors.index.json or model.safetensors), a .ptwm file\n"
            "or a .ptwm directory (model.ptwm.index.json or model.ptwm). Each tensor's\n"
            "name, dtype, shape and raw bytes; for .ptwm also the coded bytes, the ratio\n"
            "(coded / raw), the chain and, for a tensor coded against a base ('ptwm\n"
            "compress --base'), the base tensor's XXH3-128 and the chunks coded against\n"
            "it; for directories the shard. Then the totals and\n"
            "the ratio per dtype. Opening validates the whole structure (headers, index\n"
            "against shards); 'ptwm verify' also checks the coded data.\n\n"
            "options:\n"
            "  --json          one JSON object: path, kind, shards, tensors (name, dtype,\n"
            "                  shape, bytes, coded_bytes, ratio, chain, base {hash,\n"
            "                  chunks}, shard), totals (base_tensors: how many need the\n"
            "                  base),\n"
            "                  dtypes\n"
            "  -h, --help      this help\n\n"
            "exit status: 0 ok, 1 bad input, 2 bad usage\n");
}

typedef enum kind { K_ST, K_STDIR, K_PTWM, K_PTDIR } kind;
static const char *const kind_names[] = {"safetensors", "safetensors directory", "ptwm",
                                         "ptwm directory"};

typedef struct src {
    kind k;
    ptwm_st *st;
    ptwm_stdir *sd;
    ptwm_reader *r;
    ptwm_ptdir *pd;
} src;

typedef struct row {
    ptwm_tensor_info info;
    const char *shard;      /* NULL for a single file */
    char chain[256];        /* "" for safetensors */
    int based;              /* coded against a base tensor (docs/DELTA.md) */
    char base_hash[33];     /* then its payload hash, */
    uint64_t base_chunks;   /* and the chunks coded against base chunks */
} row;

static ptwm_error src_open(src *s, const char *path, ptwm_err *err) {
    ptwm_error rc;
    memset(s, 0, sizeof *s);
    if (cli_is_dir(path)) {
        if (cli_has_file(path, PTWM_INDEX_NAME) || cli_has_file(path, PTWM_SINGLE_NAME)) {
            s->k = K_PTDIR;
            return ptwm_ptdir_open(path, &s->pd, err);
        }
        s->k = K_STDIR;
        return ptwm_stdir_open(path, PTWM_OPEN_PREAD, &s->sd, err);
    }
    s->k = K_PTWM;
    rc = ptwm_reader_open(path, &s->r, err);
    if (rc != PTWM_ERR_BAD_MAGIC) return rc;
    /* Not a .ptwm: the safetensors reader's message is the one to show. */
    s->k = K_ST;
    return ptwm_st_open(path, PTWM_OPEN_PREAD, &s->st, err);
}

static void src_close(src *s) {
    ptwm_st_close(s->st);
    ptwm_stdir_close(s->sd);
    ptwm_reader_close(s->r);
    ptwm_ptdir_close(s->pd);
}

static size_t src_count(const src *s) {
    switch (s->k) {
    case K_ST: return ptwm_st_count(s->st);
    case K_STDIR: return ptwm_stdir_count(s->sd);
    case K_PTWM: return ptwm_reader_count(s->r);
    default: return ptwm_ptdir_count(s->pd);
    }
}

static size_t src_shards(const src *s) {
    if (s->k == K_STDIR) return ptwm_stdir_shard_count(s->sd);
    if (s->k == K_PTDIR) return ptwm_ptdir_shard_count(s->pd);
    return 1;
}

static const char *src_shard_name(const src *s, size_t i) {
    if (s->k == K_STDIR) {
        const char *p = ptwm_st_path(ptwm_stdir_shard(s->sd, i));
        return strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    }
    if (s->k == K_PTDIR) return ptwm_ptdir_shard_name(s->pd, i);
    return NULL;
}

static ptwm_error src_row(const src *s, size_t i, row *out, ptwm_err *err) {
    ptwm_error rc;
    ptwm_reader *r = NULL;
    size_t local = i;
    memset(out, 0, sizeof *out);
    switch (s->k) {
    case K_ST:
        rc = ptwm_st_tensor(s->st, i, &out->info, NULL);
        break;
    case K_STDIR:
        rc = ptwm_stdir_tensor(s->sd, i, &out->info, NULL);
        out->shard = src_shard_name(s, ptwm_stdir_shard_of(s->sd, i));
        break;
    case K_PTWM:
        r = s->r;
        rc = ptwm_reader_tensor(r, i, &out->info, NULL);
        break;
    default: {
        size_t sh = ptwm_ptdir_shard_of(s->pd, i, &local);
        r = ptwm_ptdir_shard(s->pd, sh);
        out->shard = ptwm_ptdir_shard_name(s->pd, sh);
        rc = ptwm_reader_tensor(r, local, &out->info, NULL);
        break;
    }
    }
    if (rc) {
        err->code = rc;
        snprintf(err->message, sizeof err->message, "tensor %zu: %s", i, ptwm_error_string(rc));
        return rc;
    }
    if (r && ptwm_reader_chain_text(r, local, out->chain, sizeof out->chain, err) != PTWM_OK)
        return err->code;
    if (r) {
        uint8_t h[16];
        int k;
        out->based = ptwm_reader_tensor_base(r, local, h, &out->base_chunks);
        for (k = 0; out->based && k < 16; k++) snprintf(out->base_hash + 2 * k, 3, "%02x", h[k]);
    }
    if (!r) out->info.coded_bytes = out->info.nbytes;
    return PTWM_OK;
}

/* Totals per dtype, in dtype order. */
typedef struct sums {
    size_t count, based;
    uint64_t raw, coded;
} sums;

static double ratio(uint64_t coded, uint64_t raw) { return raw ? (double)coded / (double)raw : 0.0; }

static void shape_text(const ptwm_tensor_info *t, char *buf, size_t cap) {
    size_t o = 0;
    uint32_t d;
    o += (size_t)snprintf(buf, cap, "[");
    for (d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "",
                              (unsigned long long)t->shape[d]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* Two passes over the tensors (widths, then rows), each row fetched again
 * rather than kept: a million tensors cost no memory here. */
static int print_text(const char *path, const src *s, size_t n, const sums *by, const sums *all) {
    int coded = s->k == K_PTWM || s->k == K_PTDIR, dir = s->k == K_STDIR || s->k == K_PTDIR;
    size_t i, w = 4;
    int d;
    char a[32], b[32];
    row rw;
    ptwm_err err;
    /* Names and paths come from the input: escaped before they reach a terminal. */
    static char name[CLI_ESCAPED_MAX(PTWM_MAX_NAME)], shard[CLI_ESCAPED_MAX(PTWM_MAX_NAME)];
    for (i = 0; i < n; i++) {
        size_t len;
        if (src_row(s, i, &rw, &err) != PTWM_OK) return cli_report(&err);
        len = strlen(cli_escape(rw.info.name, name, sizeof name));
        w = len > w ? len : w;
    }
    if (w > 60) w = 60;
    printf("%s: %s, %zu tensors", cli_escape(path, name, sizeof name), kind_names[s->k], n);
    if (dir) printf(" in %zu shard%s", src_shards(s), src_shards(s) == 1 ? "" : "s");
    printf("\n\n%-*s  %-11s %-22s %14s", (int)w, "name", "dtype", "shape", "bytes");
    if (coded) printf(" %14s %7s  %s", "coded", "ratio", "chain");
    if (dir) printf("  shard");
    printf("\n");
    for (i = 0; i < n; i++) {
        const row *r = &rw;
        char shape[256];
        if (src_row(s, i, &rw, &err) != PTWM_OK) return cli_report(&err);
        shape_text(&r->info, shape, sizeof shape);
        printf("%-*s  %-11s %-22s %14llu", (int)w, cli_escape(r->info.name, name, sizeof name),
               ptwm_dtype_name(r->info.dtype), shape, (unsigned long long)r->info.nbytes);
        if (coded)
            printf(" %14llu %6.2f%%  %s", (unsigned long long)r->info.coded_bytes,
                   100.0 * ratio(r->info.coded_bytes, r->info.nbytes), r->chain);
        if (r->based)
            printf("  base %s (%llu chunks on it)", r->base_hash,
                   (unsigned long long)r->base_chunks);
        if (dir) printf("  %s", cli_escape(r->shard, shard, sizeof shard));
        printf("\n");
    }
    printf("\ntotal: %zu tensors, %s raw", all->count, cli_bytes(all->raw, a, sizeof a));
    if (coded)
        printf(", %s coded, ratio %.2f%%", cli_bytes(all->coded, b, sizeof b),
               100.0 * ratio(all->coded, all->raw));
    if (all->based)
        printf("\nneeds a base: %zu tensors coded against base tensors (their XXH3-128 above); "
               "decompress with --base", all->based);
    printf("\n\nper dtype:\n");
    for (d = 0; d < PTWM_DTYPE_COUNT; d++) {
        if (!by[d].count) continue;
        printf("  %-11s %6zu tensors  %12s raw", ptwm_dtype_name((ptwm_dtype)d), by[d].count,
               cli_bytes(by[d].raw, a, sizeof a));
        if (coded)
            printf("  %12s coded  ratio %6.2f%%", cli_bytes(by[d].coded, b, sizeof b),
                   100.0 * ratio(by[d].coded, by[d].raw));
        printf("\n");
    }
    return CLI_OK;
}

/* A JSON string; text that is not UTF-8 (a path from argv, a name in a
 * damaged file) goes in escaped rather than failing the whole output. */
static json_t *json_text(const char *text) {
    static char buf[CLI_ESCAPED_MAX(PTWM_MAX_NAME)];
    json_t *j = json_string(text);
    return j ? j : json_string(cli_escape(text, buf, sizeof buf));
}

#define JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII)

/* One tensor as an object of the "tensors" array; NULL if out of memory. */
static json_t *tensor_json(const row *r, int coded) {
    json_t *t = json_object(), *shape = json_array();
    uint32_t k;
    int bad = !t || !shape;
    for (k = 0; !bad && k < r->info.ndim; k++)
        bad |= json_array_append_new(shape, json_integer((json_int_t)r->info.shape[k]));
    bad |= json_object_set_new(t, "name", json_text(r->info.name));
    bad |= json_object_set_new(t, "dtype", json_string(ptwm_dtype_name(r->info.dtype)));
    bad |= json_object_set_new(t, "shape", shape);
    bad |= json_object_set_new(t, "bytes", json_integer((json_int_t)r->info.nbytes));
    if (coded) {
        bad |= json_object_set_new(t, "coded_bytes", json_integer((json_int_t)r->info.coded_bytes));
        bad |= json_object_set_new(t, "ratio", json_real(ratio(r->info.coded_bytes, r->info.nbytes)));
        bad |= json_object_set_new(t, "chain", json_text(r->chain));
    }
    if (r->shard) bad |= json_object_set_new(t, "shard", json_text(r->shard));
    if (r->based) {
        json_t *b = json_object();
        bad |= !b || json_object_set_new(b, "hash", json_string(r->base_hash)) ||
               json_object_set_new(b, "chunks", json_integer((json_int_t)r->base_chunks));
        bad |= json_object_set_new(t, "base", b);
    }
    if (bad) {
        json_decref(t);
        return NULL;
    }
    return t;
}

/* Each tensor, dumped on its own and indented two levels, as the
 * "tensors" array of the document: the same text as one dump of a tree
 * holding every tensor, which a million tensors would make a gigabyte. */
static int print_tensors(const src *s, size_t n, ptwm_err *err) {
    int coded = s->k == K_PTWM || s->k == K_PTDIR;
    size_t i;
    printf(n ? "[\n" : "[]");
    for (i = 0; i < n; i++) {
        row rw;
        json_t *t;
        char *text, *line, *nl;
        if (src_row(s, i, &rw, err) != PTWM_OK) return CLI_BAD_INPUT;
        if (!(t = tensor_json(&rw, coded)) || !(text = json_dumps(t, JSON_FLAGS))) {
            json_decref(t);
            return -1;
        }
        json_decref(t);
        for (line = text; line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            printf("    %.*s%s", nl ? (int)(nl - line) : (int)strlen(line), line, nl ? "\n" : "");
        }
        printf(i + 1 < n ? ",\n" : "\n  ]");
        free(text);
    }
    return CLI_OK;
}

static int print_json(const char *path, const src *s, size_t n, const sums *by, const sums *all) {
    static const char mark[] = "\n  \"tensors\": []";
    int coded = s->k == K_PTWM || s->k == K_PTDIR;
    json_t *root = json_object(), *tensors = json_array(), *dtypes = json_object(),
           *totals = json_object(), *shards = json_array();
    size_t i;
    int d, bad = 0, rc = CLI_OK;
    char *text, *at = NULL;
    ptwm_err err;
    bad |= json_object_set_new(root, "path", json_text(path));
    bad |= json_object_set_new(root, "kind", json_string(kind_names[s->k]));
    if (s->k == K_STDIR || s->k == K_PTDIR)
        for (i = 0; i < src_shards(s); i++)
            bad |= json_array_append_new(shards, json_text(src_shard_name(s, i)));
    bad |= json_object_set_new(totals, "tensors", json_integer((json_int_t)all->count));
    bad |= json_object_set_new(totals, "bytes", json_integer((json_int_t)all->raw));
    if (coded) {
        bad |= json_object_set_new(totals, "coded_bytes", json_integer((json_int_t)all->coded));
        bad |= json_object_set_new(totals, "ratio", json_real(ratio(all->coded, all->raw)));
        bad |= json_object_set_new(totals, "base_tensors", json_integer((json_int_t)all->based));
    }
    for (d = 0; d < PTWM_DTYPE_COUNT; d++) {
        json_t *o;
        if (!by[d].count) continue;
        o = json_object();
        bad |= json_object_set_new(o, "tensors", json_integer((json_int_t)by[d].count));
        bad |= json_object_set_new(o, "bytes", json_integer((json_int_t)by[d].raw));
        if (coded) {
            bad |= json_object_set_new(o, "coded_bytes", json_integer((json_int_t)by[d].coded));
            bad |= json_object_set_new(o, "ratio", json_real(ratio(by[d].coded, by[d].raw)));
        }
        bad |= json_object_set_new(dtypes, ptwm_dtype_name((ptwm_dtype)d), o);
    }
    bad |= json_object_set_new(root, "shards", shards);
    bad |= json_object_set_new(root, "tensors", tensors);   /* empty: filled while printing */
    bad |= json_object_set_new(root, "totals", totals);
    bad |= json_object_set_new(root, "dtypes", dtypes);
    /* ASCII only: control and bidi characters in names stay \u escapes. */
    text = bad ? NULL : json_dumps(root, JSON_FLAGS);
    json_decref(root);
    /* Every string is quoted and escaped: the mark can only be the key itself. */
    if (text) at = strstr(text, mark);
    if (at) {
        printf("%.*s", (int)(at - text + sizeof mark - 3), text);
        rc = print_tensors(s, n, &err);
        if (rc == CLI_OK) printf("%s\n", at + sizeof mark - 1);
        else if (rc == CLI_BAD_INPUT) rc = cli_report(&err);
    }
    free(text);
    if (!at || rc < 0) {
        char p[CLI_ESCAPED_MAX(4096)];
        fprintf(stderr, "ptwm: %s: cannot build the JSON output\n", cli_escape(path, p, sizeof p));
        return CLI_BAD_INPUT;
    }
    return rc;
}

static int run(int argc, char **argv) {
    const char *path = NULL;
    int i, as_json = 0, rc;
    src s;
    ptwm_err err;
    row rw;
    sums by[PTWM_DTYPE_COUNT], all;
    size_t n, k;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) as_json = 1;
        else if (argv[i][0] == '-' || path) return opt_unexpected("inspect", argv[i]);
        else path = argv[i];
    }
    if (!path) return cli_usage_error("inspect", "missing PATH");
    if (src_open(&s, path, &err) != PTWM_OK) {
        src_close(&s);
        return cli_report(&err);
    }
    n = src_count(&s);
    memset(by, 0, sizeof by);
    memset(&all, 0, sizeof all);
    /* Totals first; the rows are fetched again while printing, never kept. */
    for (k = 0; k < n; k++) {
        if (src_row(&s, k, &rw, &err) != PTWM_OK) {
            src_close(&s);
            return cli_report(&err);
        }
        if ((unsigned)rw.info.dtype < PTWM_DTYPE_COUNT) {
            sums *d = &by[rw.info.dtype];
            d->count++;
            d->raw += rw.info.nbytes;
            d->coded += rw.info.coded_bytes;
        }
        all.count++;
        all.based += rw.based != 0;
        all.raw += rw.info.nbytes;
        all.coded += rw.info.coded_bytes;
    }
    rc = as_json ? print_json(path, &s, n, by, &all) : print_text(path, &s, n, by, &all);
    src_close(&s);
    return rc;
}

const cli_command cli_cmd_inspect = {"inspect",
                                     "list tensors of a .safetensors/.ptwm file or directory",
                                     run, help};
