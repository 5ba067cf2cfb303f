/* ptwm export: the tensors a layout names, in its order, as one raw
 * little-endian F32 or BF16 file for programs that read raw parameter files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"

#define EXPORT_PIECE ((uint64_t)1 << 20)  /* floats per streamed piece */
#define WRITEBACK_STEP ((uint64_t)8 << 20)

/* Start writing what is written so far back to the disk, without waiting:
 * the fsync of the commit then waits for the last few MiB only. Advice
 * only; an I/O error shows at that fsync. */
static void start_writeback(int fd) {
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
#endif
}

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

/* Write all of buf, retrying short writes. */
static int write_all(int fd, const void *buf, size_t len) {
    const char *p = (const char *)buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
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

/* One entry's values, piece by piece, converted and written. */
static int export_entry(ptwm_source *s, const ptwm_layout_entry *e, const export_args *a, int fd,
                        float *fbuf, uint16_t *hbuf, uint64_t *written) {
    uint64_t count = 1, done = 0;
    uint32_t d;
    ptwm_err err;
    for (d = 0; d < e->ndim; d++) count *= e->shape[d];  /* checked by ptwm_layout_elements */
    while (done < count) {
        uint64_t k = count - done < EXPORT_PIECE ? count - done : EXPORT_PIECE;
        const void *out = fbuf;
        size_t bytes = (size_t)k * 4;
        if (ptwm_load_tensor_part(s, e, a->conv, done, fbuf, k, &err) != PTWM_OK)
            return cli_report(&err);
        if (a->bf16) {
            ptwm_f32_to_bf16(fbuf, hbuf, (size_t)k);
            to_le(hbuf, (size_t)k, 2);
            out = hbuf;
            bytes = (size_t)k * 2;
        } else {
            to_le(fbuf, (size_t)k, 4);
        }
        if (write_all(fd, out, bytes) != 0) {
            fprintf(stderr, "ptwm: export: write to '%s' failed: %s\n", a->out, strerror(errno));
            return CLI_BAD_INPUT;
        }
        if ((*written + bytes) / WRITEBACK_STEP != *written / WRITEBACK_STEP) start_writeback(fd);
        *written += bytes;
        done += k;
    }
    return CLI_OK;
}

/* Check every entry, then stream them all into fd. */
static int export_all(ptwm_source *s, const ptwm_layout_entry *e, size_t n, const export_args *a,
                      int fd, uint64_t *written) {
    ptwm_err err;
    uint64_t total;
    size_t i;
    int rc = CLI_OK;
    float *fbuf;
    uint16_t *hbuf;
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
    fbuf = (float *)malloc(EXPORT_PIECE * 4);
    hbuf = (uint16_t *)malloc(EXPORT_PIECE * 2);
    if (!fbuf || !hbuf) {
        fprintf(stderr, "ptwm: export: out of memory\n");
        rc = CLI_BAD_INPUT;
    }
    for (i = 0; i < n && rc == CLI_OK; i++) rc = export_entry(s, &e[i], a, fd, fbuf, hbuf, written);
    free(fbuf);
    free(hbuf);
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
    if (!a.force && access(a.out, F_OK) == 0) {
        fprintf(stderr, "ptwm: export: '%s' exists (use --force to replace it)\n", a.out);
        return CLI_BAD_INPUT;
    }
    /* Output file first: an existing one or leftovers refuse before any work. */
    if (ptwm_outfile_open(a.out, a.force, &of, &err) != PTWM_OK) return cli_report(&err);
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
