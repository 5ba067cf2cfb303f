/* ptwm export: the tensors a layout names, in its order, as one raw
 * little-endian F32 or BF16 file for programs that read raw parameter files.
 * Whole tensors decode in batches (one read_many call each, so small
 * tensors' chunks share the threads), those stored as the output dtype
 * straight into the output buffer; a writer thread (export_writer.c) writes
 * one batch while the next decodes (docs/LOADING.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "export_writer.h"
#include "options.h"

/* Bytes per batch: at most this many stored bytes are decoded by one
 * read_many call (whole tensors, so small tensors' chunks share the decoding
 * threads) and at most this many output bytes written by one call. Small
 * enough that what a batch decodes is still in cache when it is converted
 * and copied into the page cache (docs/ARCHITECTURE.md). */
#define EXPORT_BYTES ((uint64_t)4 << 20)
#define EXPORT_PIECE (EXPORT_BYTES / 4)  /* floats per piece a library conversion loads */
/* Entries per batch. */
#define EXPORT_BATCH_MAX 4096

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm export SRC --layout LAYOUT.json -o OUT [options]\n\n"
            "Write the tensors LAYOUT.json names, in its order, back to back as one raw\n"
            "little-endian file. SRC is a safetensors file, a Hugging Face directory, a\n"
            ".ptwm file or a .ptwm directory (or, with --raw, a raw F32 file, whose values\n"
            "the layout then cuts in order). LAYOUT.json is a JSON list of\n"
            "{\"name\": \"...\", \"shape\": [d0, d1, ...]}; each tensor must exist with that\n"
            "shape. F32 is copied, BF16 and F16 widened exactly. The output is streamed\n"
            "through a temporary file, fsynced and renamed into place.\n\n"
            "options:\n"
            "  --layout FILE      the layout (required)\n"
            "  -o, --output FILE  the raw file to write (required)\n"
            "  --dtype f32|bf16   output values (default f32; bf16 rounds to nearest even)\n"
            "  --convert float|f64|int\n"
            "                     also accept F64 (rounded) or integer tensors (by value)\n"
            "  --raw              SRC is a raw little-endian F32 file\n"
            "  --base BASE        the base SRC was compressed against ('ptwm compress\n"
            "                     --base'); a missing, different or damaged base is an error\n"
            "  --threads N        decoding threads for .ptwm sources (0 = all cores)\n"
            "  -f, --force        replace OUT if it exists, and remove OUT.tmp-* an\n"
            "                     interrupted run left\n"
            "  -h, --help         this help\n\n"
            "exit status: 0 written, 1 bad input, 2 bad usage, 130/143/129 on\n"
            "SIGINT/SIGTERM/SIGHUP (temporary file removed)\n");
}

typedef struct export_args {
    const char *src, *layout, *out, *base;
    int bf16, raw, threads, force;
    ptwm_convert conv;
} export_args;

static int parse(int argc, char **argv, export_args *a) {
    int i;
    memset(a, 0, sizeof(*a));
    for (i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (!strcmp(argv[i], "--raw")) {
            a->raw = 1;
        } else if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f")) {
            a->force = 1;
        } else if ((m = opt_value("export", argc, argv, &i, "--layout", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            a->layout = v;
        } else if ((m = opt_value("export", argc, argv, &i, "--output", &v)) != 0 ||
                   (m = opt_value("export", argc, argv, &i, "-o", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            a->out = v;
        } else if ((m = opt_value("export", argc, argv, &i, "--dtype", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            if (!strcmp(v, "bf16")) a->bf16 = 1;
            else if (strcmp(v, "f32") != 0)
                return cli_usage_error("export", "--dtype takes f32 or bf16, not '%s'", v);
        } else if ((m = opt_value("export", argc, argv, &i, "--convert", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            if (!strcmp(v, "float")) a->conv = PTWM_CONVERT_FLOAT;
            else if (!strcmp(v, "f64")) a->conv = PTWM_CONVERT_F64_ROUND;
            else if (!strcmp(v, "int")) a->conv = PTWM_CONVERT_INT;
            else return cli_usage_error("export", "--convert takes float, f64 or int, not '%s'", v);
        } else if ((m = opt_value("export", argc, argv, &i, "--base", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            a->base = v;
        } else if ((m = opt_value("export", argc, argv, &i, "--threads", &v)) != 0) {
            if (m < 0 || opt_threads("export", v, &a->threads) != CLI_OK) return CLI_USAGE;
        } else if (argv[i][0] == '-' || a->src) {
            return opt_unexpected("export", argv[i]);
        } else {
            a->src = argv[i];
        }
    }
    if (!a->src) return cli_usage_error("export", "missing SRC");
    if (!a->layout) return cli_usage_error("export", "missing --layout LAYOUT.json");
    if (!a->out) return cli_usage_error("export", "missing -o OUT");
    return CLI_OK;
}

/* Host floats or BF16 values to little-endian in place (no-op on little-endian hosts). */
static void to_le(void *p, size_t n, unsigned width) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    size_t i;
    if (width == 4)
        for (i = 0; i < n; i++) ((uint32_t *)p)[i] = __builtin_bswap32(((uint32_t *)p)[i]);
    else
        for (i = 0; i < n; i++) ((uint16_t *)p)[i] = __builtin_bswap16(((uint16_t *)p)[i]);
#else
    (void)p;
    (void)n;
    (void)width;
#endif
}

/* Allocate the output's blocks, extending it to its final size, before
 * writing them, as the library's ptwm_allocate_range does for its writers
 * (which this program, using only the public header, cannot call). Advice
 * only: a failure shows again when the bytes are written. */
static void allocate_output(int fd, uint64_t len) {
#if defined(__linux__)
    if (len && len <= (uint64_t)INT64_MAX) (void)fallocate(fd, 0, 0, (off_t)len);
#else
    (void)fd;
    (void)len;
#endif
}

/* A source's error, its message prefixed with the tensor's name as the
 * library's loads word it. */
static int report_tensor(ptwm_err *err, const char *name) {
    char msg[2 * PTWM_ERR_MESSAGE_MAX];
    err->message[sizeof err->message - 1] = 0;
    snprintf(msg, sizeof msg, "tensor '%s': %s", name, err->message);
    memcpy(err->message, msg, sizeof err->message);
    err->message[sizeof err->message - 1] = 0;
    return cli_report(err);
}

/* How an entry's stored values become the output's. */
typedef enum export_path {
    EXPORT_COPY,     /* stored as the output dtype: decoded straight into the output buffer */
    EXPORT_CONVERT,  /* F32, BF16 or F16: decoded whole, then converted */
    EXPORT_LOAD      /* anything else (or a big-endian host): ptwm_load_tensor_part */
} export_path;

typedef struct export_item {
    size_t index;      /* in the source */
    ptwm_dtype dtype;  /* stored */
    uint64_t count;    /* elements */
    uint64_t nbytes;   /* stored bytes */
    export_path path;
} export_item;

typedef struct export_state {
    ptwm_source *s;
    const export_args *a;
    int fd;
    unsigned ow;       /* output bytes per element */
    uint8_t *stage;    /* stored bytes of conversions, EXPORT_BYTES */
    uint8_t *out;      /* output bytes of one batch (the writer's buffer to fill) */
    float *fbuf;       /* F32 between a load and a narrowing, EXPORT_PIECE floats */
    export_writer *w;  /* writes x->out when it is full, while the other buffer fills */
    size_t *idx, *sizes;  /* one read_many call's arguments, EXPORT_BATCH_MAX each */
    void **dsts;
} export_state;

static export_path choose_path(ptwm_dtype dt, int bf16) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    (void)dt;
    (void)bf16;
    return EXPORT_LOAD;
#else
    if (dt == (bf16 ? PTWM_DTYPE_BF16 : PTWM_DTYPE_F32)) return EXPORT_COPY;
    if (dt == PTWM_DTYPE_F32 || dt == PTWM_DTYPE_BF16 || dt == PTWM_DTYPE_F16)
        return EXPORT_CONVERT;
    return EXPORT_LOAD;
#endif
}

/* BF16 copied as it is must equal BF16 widened to F32 and rounded back,
 * which quiets a signalling NaN (sets the top mantissa bit) and keeps every
 * other pattern. */
static void quiet_bf16_nans(uint16_t *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (uint16_t)(p[i] | (((p[i] & 0x7fffu) > 0x7f80u) << 6));
}

/* k stored values at src (8-byte aligned) of a CONVERT item to the output. */
static void convert_values(export_state *x, ptwm_dtype dt, const uint8_t *src, uint8_t *dst,
                           uint64_t k) {
    uint64_t done;
    if (x->ow == 4) {
        if (dt == PTWM_DTYPE_BF16) ptwm_bf16_to_f32((const uint16_t *)src, (float *)dst, (size_t)k);
        else if (dt == PTWM_DTYPE_F16) ptwm_f16_to_f32((const uint16_t *)src, (float *)dst, (size_t)k);
        else memcpy(dst, src, (size_t)k * 4);
        return;
    }
    if (dt == PTWM_DTYPE_F32) {
        ptwm_f32_to_bf16((const float *)src, (uint16_t *)dst, (size_t)k);
        return;
    }
    for (done = 0; done < k; done += EXPORT_PIECE) {  /* F16: widened, then rounded */
        size_t m = (size_t)(k - done < EXPORT_PIECE ? k - done : EXPORT_PIECE);
        ptwm_f16_to_f32((const uint16_t *)src + done, x->fbuf, m);
        ptwm_f32_to_bf16(x->fbuf, (uint16_t *)dst + done, m);
    }
}

/* The filled output buffer to the writer, and the next one to fill. */
static int emit(export_state *x, size_t len) {
    if (export_writer_push(x->w, len) != 0) return CLI_BAD_INPUT;
    x->out = export_writer_buffer(x->w);
    return CLI_OK;
}

/* One entry too big for a batch, or of a dtype only the library converts,
 * piece by piece from its first element (so its payload hash is checked). */
static int export_pieces(export_state *x, const ptwm_layout_entry *e, const export_item *it) {
    unsigned w = it->count ? (unsigned)(it->nbytes / it->count) : 1;
    uint64_t done = 0, per = it->path == EXPORT_LOAD ? EXPORT_PIECE
                                                     : EXPORT_BYTES / (w > x->ow ? w : x->ow);
    ptwm_err err;
    int rc;
    while (done < it->count) {
        uint64_t k = it->count - done < per ? it->count - done : per;
        if (it->path == EXPORT_LOAD) {
            float *f = x->ow == 4 ? (float *)x->out : x->fbuf;
            if (ptwm_load_tensor_part(x->s, e, x->a->conv, done, f, k, &err) != PTWM_OK)
                return cli_report(&err);
            if (x->ow == 2) ptwm_f32_to_bf16(f, (uint16_t *)x->out, (size_t)k);
            to_le(x->out, (size_t)k, x->ow);
        } else {
            uint8_t *buf = it->path == EXPORT_COPY ? x->out : x->stage;
            if (ptwm_source_read(x->s, it->index, done * w, buf, (size_t)(k * w), &err) != PTWM_OK)
                return report_tensor(&err, e->name);
            if (it->path == EXPORT_CONVERT) convert_values(x, it->dtype, buf, x->out, k);
            else if (x->ow == 2) quiet_bf16_nans((uint16_t *)x->out, (size_t)k);
        }
        if ((rc = emit(x, (size_t)(k * x->ow))) != CLI_OK) return rc;
        done += k;
    }
    return CLI_OK;
}

/* Whole entries [i, end) whose stored bytes fit one batch: decoded by one
 * read_many call (their chunks share the threads), COPY items straight into
 * the output buffer, then written with one call. */
static int export_batch(export_state *x, const export_item *it, size_t i, size_t end) {
    size_t *idx = x->idx, *sizes = x->sizes, j, m = end - i;
    void **dsts = x->dsts;
    uint64_t so = 0, oo = 0;
    ptwm_err err;
    for (j = 0; j < m; j++) {
        const export_item *t = &it[i + j];
        idx[j] = t->index;
        sizes[j] = (size_t)t->nbytes;
        if (t->path == EXPORT_COPY) {
            dsts[j] = x->out + oo;
        } else {
            dsts[j] = x->stage + so;
            so += (t->nbytes + 7) & ~(uint64_t)7;
        }
        oo += t->count * x->ow;
    }
    if (ptwm_source_read_many(x->s, idx, dsts, sizes, m, &err) != PTWM_OK) return cli_report(&err);
    for (j = 0, oo = 0; j < m; j++) {
        const export_item *t = &it[i + j];
        if (t->path == EXPORT_CONVERT)
            convert_values(x, t->dtype, (const uint8_t *)dsts[j], x->out + oo, t->count);
        else if (x->ow == 2)
            quiet_bf16_nans((uint16_t *)(void *)(x->out + oo), (size_t)t->count);
        oo += t->count * x->ow;
    }
    return emit(x, (size_t)oo);
}

/* Stored dtype and size of every entry, and how each is exported. */
static int plan_items(ptwm_source *s, const ptwm_layout_entry *e, size_t n, int bf16,
                      export_item *it) {
    ptwm_err err;
    size_t i;
    for (i = 0; i < n; i++) {
        ptwm_tensor_info ti;
        if (ptwm_source_find(s, e[i].name, &it[i].index, &err) != PTWM_OK ||
            ptwm_source_tensor(s, it[i].index, &ti, &err) != PTWM_OK)
            return cli_report(&err);
        it[i].dtype = ti.dtype;
        it[i].nbytes = ti.nbytes;
        ptwm_layout_elements(&e[i], 1, &it[i].count, NULL);  /* the tensor's: shape checked */
        it[i].path = choose_path(ti.dtype, bf16);
    }
    return CLI_OK;
}

/* Entries in batches of whole tensors, bigger ones in pieces. */
static int export_items(export_state *x, const ptwm_layout_entry *e, const export_item *it,
                        size_t n) {
    size_t i = 0;
    int rc = CLI_OK;
    while (i < n && rc == CLI_OK) {
        size_t end = i;
        uint64_t stored = 0, out = 0;
        while (end < n && end - i < EXPORT_BATCH_MAX && it[end].path != EXPORT_LOAD &&
               stored + it[end].nbytes + 8 <= EXPORT_BYTES &&
               out + it[end].count * x->ow <= EXPORT_BYTES) {
            stored += (it[end].nbytes + 7) & ~(uint64_t)7;
            out += it[end].count * x->ow;
            end++;
        }
        if (end == i) {
            rc = export_pieces(x, &e[i], &it[i]);
            i++;
        } else {
            rc = export_batch(x, it, i, end);
            i = end;
        }
    }
    return rc;
}

/* Check every entry, then stream them all into fd. */
static int export_all(ptwm_source *s, const ptwm_layout_entry *e, size_t n, const export_args *a,
                      int fd, uint64_t *written) {
    ptwm_err err;
    uint64_t total;
    size_t i;
    int rc = CLI_OK;
    export_item *items;
    export_state x;
    ptwm_layout_entry whole;
    uint64_t whole_shape[1];
    if (ptwm_layout_elements(e, n, &total, &err) != PTWM_OK) return cli_report(&err);
    if (ptwm_source_get_kind(s) == PTWM_SOURCE_RAW_F32) {
        /* a raw file has no names: the layout cuts its values in order */
        ptwm_tensor_info ti;
        ptwm_source_tensor(s, 0, &ti, NULL);
        if (ti.shape[0] != total) {
            fprintf(stderr, "ptwm: export: file '%s' has %llu bytes, layout needs %llu (%llu floats)\n",
                    a->src, (unsigned long long)ti.nbytes, (unsigned long long)total * 4,
                    (unsigned long long)total);
            return CLI_BAD_INPUT;
        }
        whole_shape[0] = total;
        whole.name = "";
        whole.ndim = 1;
        whole.shape = whole_shape;
        e = &whole;
        n = 1;
    }
    for (i = 0; i < n; i++)
        if (ptwm_load_tensor_part(s, &e[i], a->conv, 0, NULL, 0, &err) != PTWM_OK)
            return cli_report(&err);
    memset(&x, 0, sizeof(x));
    x.s = s;
    x.a = a;
    x.fd = fd;
    x.ow = a->bf16 ? 2 : 4;
    items = (export_item *)calloc(n ? n : 1, sizeof(*items));
    x.stage = (uint8_t *)malloc(EXPORT_BYTES);
    x.w = export_writer_open(fd, a->out, EXPORT_BYTES);
    x.fbuf = (float *)malloc(EXPORT_PIECE * 4);
    x.idx = (size_t *)malloc(EXPORT_BATCH_MAX * sizeof(size_t));
    x.sizes = (size_t *)malloc(EXPORT_BATCH_MAX * sizeof(size_t));
    x.dsts = (void **)malloc(EXPORT_BATCH_MAX * sizeof(void *));
    if (!items || !x.stage || !x.w || !x.fbuf || !x.idx || !x.sizes || !x.dsts) {
        fprintf(stderr, "ptwm: export: out of memory\n");
        rc = CLI_BAD_INPUT;
    }
    if (rc == CLI_OK) rc = plan_items(s, e, n, a->bf16, items);
    if (rc == CLI_OK) {
        allocate_output(fd, total * x.ow);
        x.out = export_writer_buffer(x.w);
        rc = export_items(&x, e, items, n);
    }
    if (x.w && export_writer_close(x.w, written) != 0 && rc == CLI_OK) rc = CLI_BAD_INPUT;
    free(items);
    free(x.stage);
    free(x.fbuf);
    free(x.idx);
    free(x.sizes);
    free(x.dsts);
    return rc;
}

/* SRC and, with --base, its base (NULL if none). */
static int open_sources(const export_args *a, ptwm_source **s, ptwm_source **base) {
    ptwm_err err;
    *s = *base = NULL;
    if (ptwm_source_open(a->src, a->raw ? PTWM_SOURCE_RAW_F32 : PTWM_SOURCE_AUTO, s, &err) != PTWM_OK)
        return cli_report(&err);
    if (a->base && (ptwm_source_open(a->base, PTWM_SOURCE_AUTO, base, &err) != PTWM_OK ||
                    ptwm_source_set_base(*s, *base, &err) != PTWM_OK)) {
        ptwm_source_close(*s);
        ptwm_source_close(*base);
        *s = *base = NULL;
        return cli_report(&err);
    }
    return CLI_OK;
}

static int run(int argc, char **argv) {
    export_args a;
    ptwm_source *s = NULL, *base = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    ptwm_outfile *of = NULL;
    const ptwm_layout_entry *e;
    size_t n;
    int rc;
    uint64_t written = 0;
    if ((rc = parse(argc, argv, &a)) != CLI_OK) return rc;
    /* Output file first: an existing one or leftovers of an interrupted run
     * (named in the message) refuse before any work. */
    if (ptwm_outfile_open(a.out, a.force, &of, &err) != PTWM_OK) return cli_report_output(&err);
    if (ptwm_layout_read_json(a.layout, &l, &err) != PTWM_OK) {
        ptwm_outfile_abort(of);
        return cli_report(&err);
    }
    if ((rc = open_sources(&a, &s, &base)) != CLI_OK) {
        ptwm_outfile_abort(of);
        ptwm_layout_free(l);
        return rc;
    }
    ptwm_source_set_threads(s, a.threads);
    e = ptwm_layout_entries(l, &n);
    rc = export_all(s, e, n, &a, ptwm_outfile_fd(of), &written);
    if (rc == CLI_OK && ptwm_outfile_commit(of, &err) != PTWM_OK)
        rc = cli_report(&err);
    else if (rc != CLI_OK)
        ptwm_outfile_abort(of);
    if (rc == CLI_OK)
        printf("%s: %zu tensors, %llu bytes of %s\n", a.out, n, (unsigned long long)written,
               a.bf16 ? "BF16" : "F32");
    ptwm_source_close(s);
    ptwm_source_close(base);
    ptwm_layout_free(l);
    return rc;
}

const cli_command cli_cmd_export = {"export", "write the tensors a layout names as one raw F32/BF16 file",
                                    run, help};
