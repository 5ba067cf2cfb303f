/* bench_suite - ptwm beside its peers on real weights, in memory.
 *
 * For each input (a safetensors file, a checkpoint directory, or a .ptwm) and
 * each dtype group in it, measures coded size as % of raw and compress and
 * decompress MB/s (10^6 bytes per second of raw data) of:
 *   ptwm, every method at 1 and 2 threads (library defaults otherwise: chunk
 *     1 MiB, plane CRCs and payload hashes on), decoding a group's tensors
 *     in one ptwm_reader_decode_many call, with one ptwm_ctx kept across
 *     calls as the zstd runs keep their ZSTD_CCtx/DCtx (--no-ctx: each
 *     call's own memory);
 *   libzstd levels 1, 3, 9, 19, one frame per tensor, one thread;
 *   c-blosc 1.x (when built with it) with byte or bit shuffle and zstd or lz4,
 *     clevel 5, typesize = element size, default block size, one thread,
 *     one buffer per tensor;
 *   the zero-order entropy floor of the planes (exponent and sign+mantissa
 *     fields of F16/BF16/F32, F32's sign+mantissa by bytes; bytes for other
 *     dtypes, with order-1 as well for one-byte dtypes).
 * Every run decodes and compares all bytes; a mismatch is reported on stderr
 * and makes the exit status 1. Runs alternate between methods (each run
 * starts at a different method) so machine noise falls on all alike; the
 * figures are medians.
 *
 * usage: bench_suite [--runs N] [--slow-runs N] [--csv FILE] [--no-peers] [--no-ctx] PATH...
 *        bench_suite --scale MB[,MB...] [--runs N] [--csv FILE] PATH...
 *            in-memory throughput against input size (PATHs' tensors repeated)
 *        bench_suite --make OUT.safetensors MB PATH...
 *            write a safetensors file of about MB megabytes (2^20) by
 *            repeating the PATHs' tensors round robin, streaming
 * The CSV (appended; header when the file is empty) holds one row per figure:
 *   section,file,dtype,method,level,threads,raw_bytes,coded_bytes,size_pct,
 *   comp_mbs,decomp_mbs,comp_s,decomp_s,peak_rss_kb,runs,note
 * Uses only the public header ptwm.h, libzstd and libblosc. */

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>
#ifdef PTWM_HAVE_BLOSC
#include <blosc.h>
#endif

#include "ptwm.h"
#include "../programs/bench_time.h"

#define MAX_RUNS 31
#define BLOSC_CLEVEL 5
/* Peers code at most this much per call (c-blosc takes < 2 GiB a buffer). */
#define PIECE_MAX ((size_t)1 << 30)

static int g_failed;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */


static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench_suite: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* The last component of a path, without trailing slashes (a directory). */
static const char *base_name(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    const char *s;
    while (n > 1 && path[n - 1] == '/') n--;
    s = path + n;
    while (s > path && s[-1] != '/') s--;
    snprintf(buf, cap, "%.*s", (int)(path + n - s), s);
    return buf;
}

static unsigned elem_bytes(ptwm_dtype dt) {
    unsigned b = ptwm_dtype_bits(dt) / 8;
    return b ? b : 1;
}

static double mbs(uint64_t bytes, double s) { return s > 0 ? (double)bytes / s / 1e6 : 0; }
static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }

/* ------------------------------------------------------------------------ */
/* Inputs: the tensors of one path, grouped by dtype, each group contiguous  */
/* ------------------------------------------------------------------------ */

typedef struct group {
    ptwm_dtype dtype;
    size_t n;
    ptwm_tensor_desc *d;   /* names and shapes point into the source handle */
    uint8_t *data;         /* all tensors back to back; d[i].data points here */
    uint64_t raw;
} group;

typedef struct input {
    const char *path;
    ptwm_source *src;
    group g[PTWM_DTYPE_COUNT];
    size_t ng;
} input;

static void input_free(input *in) {
    size_t i;
    for (i = 0; i < in->ng; i++) {
        free(in->g[i].d);
        free(in->g[i].data);
    }
    ptwm_source_close(in->src);
    memset(in, 0, sizeof(*in));
}

static int input_load(const char *path, input *in) {
    ptwm_err err;
    size_t i, n;
    memset(in, 0, sizeof(*in));
    in->path = path;
    if (ptwm_source_open(path, PTWM_SOURCE_AUTO, &in->src, &err)) {
        fprintf(stderr, "bench_suite: %s: %s\n", path, err.message);
        return -1;
    }
    n = ptwm_source_count(in->src);
    /* First pass: group sizes. */
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        size_t k;
        ptwm_source_tensor(in->src, i, &t, NULL);
        for (k = 0; k < in->ng && in->g[k].dtype != t.dtype; k++) {}
        if (k == in->ng) {
            in->g[k].dtype = t.dtype;
            in->ng++;
        }
        in->g[k].n++;
        in->g[k].raw += t.nbytes;
    }
    for (i = 0; i < in->ng; i++) {
        if (in->g[i].raw > SIZE_MAX / 2) {
            fprintf(stderr, "bench_suite: %s: too large to hold in memory\n", path);
            return -1;
        }
        in->g[i].d = (ptwm_tensor_desc *)xmalloc(in->g[i].n * sizeof(ptwm_tensor_desc));
        in->g[i].data = (uint8_t *)xmalloc((size_t)in->g[i].raw);
        in->g[i].raw = 0;
        in->g[i].n = 0;
    }
    /* Second pass: read every tensor into its group's buffer. */
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        size_t k;
        group *g;
        ptwm_tensor_desc *d;
        ptwm_source_tensor(in->src, i, &t, NULL);
        for (k = 0; in->g[k].dtype != t.dtype; k++) {}
        g = &in->g[k];
        d = &g->d[g->n++];
        d->name = t.name;
        d->dtype = t.dtype;
        d->ndim = t.ndim;
        d->shape = t.shape;
        d->nbytes = t.nbytes;
        d->data = g->data + g->raw;
        if (t.nbytes && ptwm_source_read(in->src, i, 0, g->data + g->raw, (size_t)t.nbytes, &err)) {
            fprintf(stderr, "bench_suite: %s: %s\n", path, err.message);
            return -1;
        }
        g->raw += t.nbytes;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Methods                                                                   */
/* ------------------------------------------------------------------------ */

enum { K_PTWM, K_ZSTD, K_BLOSC };

typedef struct method {
    int kind;
    int id;          /* ptwm method, zstd level, blosc shuffle */
    int threads;
    const char *codec; /* blosc compressor */
    int slow;        /* measured with fewer runs */
    char label[48];  /* "ptwm-microscale", "zstd", "blosc-bitshuffle-zstd" */
    char level[16];  /* level column: "3", "5", "" */
} method;

/* One coded form: a ptwm blob, or peer frames back to back. */
typedef struct coded {
    uint8_t *buf;
    size_t cap, len;
    size_t *frame;   /* peer frame sizes, one per piece */
    size_t nframes;
} coded;

typedef struct scratch {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
} scratch;

/* Visit the pieces of a group: each tensor cut into PIECE_MAX pieces. */
static size_t count_pieces(const group *g) {
    size_t i, n = 0;
    for (i = 0; i < g->n; i++) n += (size_t)((g->d[i].nbytes + PIECE_MAX - 1) / PIECE_MAX);
    return n;
}

static size_t peer_bound(const method *m, size_t n) {
#ifdef PTWM_HAVE_BLOSC
    if (m->kind == K_BLOSC) return n + BLOSC_MAX_OVERHEAD;
#endif
    (void)m;
    return ZSTD_compressBound(n);
}

/* Compress with a peer, piece by piece. Returns 0 or -1 (message printed). */
static int peer_compress(const method *m, const group *g, coded *c, scratch *sc) {
    size_t i, need = 0, np = count_pieces(g), k = 0;
    for (i = 0; i < g->n; i++) {
        uint64_t off;
        for (off = 0; off < g->d[i].nbytes; off += PIECE_MAX) {
            size_t len = (size_t)(g->d[i].nbytes - off < PIECE_MAX ? g->d[i].nbytes - off : PIECE_MAX);
            need += peer_bound(m, len);
        }
    }
    if (need > c->cap) {
        free(c->buf);
        c->buf = (uint8_t *)xmalloc(need);
        c->cap = need;
    }
    free(c->frame);
    c->frame = (size_t *)xmalloc(np * sizeof(size_t));
    c->len = 0;
    for (i = 0; i < g->n; i++) {
        const uint8_t *src = (const uint8_t *)g->d[i].data;
        uint64_t off;
        for (off = 0; off < g->d[i].nbytes; off += PIECE_MAX) {
            size_t len = (size_t)(g->d[i].nbytes - off < PIECE_MAX ? g->d[i].nbytes - off : PIECE_MAX);
            size_t cap = peer_bound(m, len), z;
            if (m->kind == K_ZSTD) {
                z = ZSTD_compressCCtx(sc->cctx, c->buf + c->len, cap, src + off, len, m->id);
                if (ZSTD_isError(z)) {
                    fprintf(stderr, "bench_suite: zstd: %s\n", ZSTD_getErrorName(z));
                    return -1;
                }
            } else {
#ifdef PTWM_HAVE_BLOSC
                int r = blosc_compress_ctx(BLOSC_CLEVEL, m->id, elem_bytes(g->dtype), len, src + off,
                                           c->buf + c->len, cap, m->codec, 0, 1);
                if (r <= 0) {
                    fprintf(stderr, "bench_suite: blosc_compress_ctx returned %d\n", r);
                    return -1;
                }
                z = (size_t)r;
#else
                return -1;
#endif
            }
            c->frame[k++] = z;
            c->len += z;
        }
    }
    c->nframes = k;
    return 0;
}

static int peer_decompress(const method *m, const group *g, const coded *c, uint8_t *out,
                           scratch *sc) {
    size_t i, k = 0, pos = 0;
    for (i = 0; i < g->n; i++) {
        uint64_t off;
        size_t base = (size_t)((const uint8_t *)g->d[i].data - g->data);
        for (off = 0; off < g->d[i].nbytes; off += PIECE_MAX) {
            size_t len = (size_t)(g->d[i].nbytes - off < PIECE_MAX ? g->d[i].nbytes - off : PIECE_MAX);
            size_t got;
            if (m->kind == K_ZSTD) {
                got = ZSTD_decompressDCtx(sc->dctx, out + base + off, len, c->buf + pos, c->frame[k]);
                if (ZSTD_isError(got)) got = (size_t)-1;
            } else {
#ifdef PTWM_HAVE_BLOSC
                int r = blosc_decompress_ctx(c->buf + pos, out + base + off, len, 1);
                got = r < 0 ? (size_t)-1 : (size_t)r;
#else
                got = (size_t)-1;
#endif
            }
            if (got != len) {
                fprintf(stderr, "bench_suite: %s decode of a %zu-byte piece gave %zu\n", m->label, len,
                        got);
                return -1;
            }
            pos += c->frame[k++];
        }
    }
    return 0;
}

/* The work memory kept across ptwm calls (NULL: none). compare_builds.sh
 * runs this binary against builds from before contexts too: there the weak
 * symbols are NULL and each call uses its own memory. */
extern ptwm_error ptwm_ctx_create(ptwm_ctx **out, ptwm_err *err) __attribute__((weak));
extern ptwm_error ptwm_reader_set_ctx(ptwm_reader *r, ptwm_ctx *ctx, ptwm_err *err)
    __attribute__((weak));
extern void ptwm_ctx_free(ptwm_ctx *ctx) __attribute__((weak));
static ptwm_ctx *g_ctx;

static int ptwm_do_compress(const method *m, const group *g, coded *c) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    void *blob = NULL;
    size_t len = 0;
    p.method = m->id;
    p.threads = m->threads;
    p.ctx = g_ctx;
    /* Builds from before contexts (compare_builds.sh) read these two fields
     * as emit_payload_hash and emit_plane_crc: 1 asks them for the same
     * checks as the default here. */
    if (!ptwm_ctx_create) p.no_payload_hash = p.no_plane_crc = 1;
    if (ptwm_compress_blob(g->d, g->n, NULL, &p, &blob, &len, &err)) {
        fprintf(stderr, "bench_suite: ptwm_compress_blob (%s, %d threads): %s\n", m->label, m->threads,
                err.message);
        return -1;
    }
    free(c->buf);
    c->buf = (uint8_t *)blob;
    c->len = c->cap = len;
    return 0;
}

static int ptwm_do_decompress(const method *m, const group *g, const coded *c, uint8_t *out) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i;
    int rc = 0;
    if (ptwm_reader_open_memory(c->buf, c->len, "bench blob", &r, &err)) {
        fprintf(stderr, "bench_suite: ptwm_reader_open_memory: %s\n", err.message);
        return -1;
    }
    ptwm_reader_set_threads(r, m->threads);
    if (g_ctx && ptwm_reader_set_ctx(r, g_ctx, &err)) {
        fprintf(stderr, "bench_suite: ptwm_reader_set_ctx: %s\n", err.message);
        rc = -1;
    }
    if (!rc && ptwm_reader_count(r) != g->n) {
        fprintf(stderr, "bench_suite: blob holds %zu tensors, expected %zu\n", ptwm_reader_count(r), g->n);
        rc = -1;
    }
    if (!rc) {
        /* All tensors in one call, as a loader of the whole file does: the
         * chunks of small tensors then share the threads. */
        size_t *idx = (size_t *)xmalloc(g->n * sizeof(size_t));
        size_t *sizes = (size_t *)xmalloc(g->n * sizeof(size_t));
        void **dsts = (void **)xmalloc(g->n * sizeof(void *));
        for (i = 0; i < g->n; i++) {
            idx[i] = i;
            sizes[i] = (size_t)g->d[i].nbytes;
            dsts[i] = out + ((const uint8_t *)g->d[i].data - g->data);
        }
        if (ptwm_reader_decode_many(r, idx, dsts, sizes, g->n, &err)) {
            fprintf(stderr, "bench_suite: ptwm_reader_decode_many: %s\n", err.message);
            rc = -1;
        }
        free(idx);
        free(sizes);
        free(dsts);
    }
    ptwm_reader_close(r);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Results and CSV                                                           */
/* ------------------------------------------------------------------------ */

typedef struct result {
    char file[128];
    ptwm_dtype dtype;
    const method *m;
    uint64_t raw, coded;
    double c_s, d_s;
    int runs;
} result;

static FILE *g_csv;
static result *g_res;
static size_t g_nres, g_capres;

static void csv_row(const char *section, const char *file, const char *dtype, const char *meth,
                    const char *level, int threads, uint64_t raw, uint64_t coded_bytes, double c_s,
                    double d_s, long rss_kb, int runs, const char *note) {
    if (!g_csv) return;
    fprintf(g_csv, "%s,%s,%s,%s,%s,%d,%" PRIu64 ",%" PRIu64 ",%.3f,%.2f,%.2f,%.6f,%.6f,%ld,%d,%s\n",
            section, file, dtype, meth, level, threads, raw, coded_bytes, pct(coded_bytes, raw),
            mbs(raw, c_s), mbs(raw, d_s), c_s, d_s, rss_kb, runs, note ? note : "");
    fflush(g_csv);
}

static void res_add(const result *r) {
    if (g_nres == g_capres) {
        g_capres = g_capres ? 2 * g_capres : 64;
        g_res = (result *)realloc(g_res, g_capres * sizeof(result));
        if (!g_res) exit(2);
    }
    g_res[g_nres++] = *r;
}

static void print_row(const char *file, const char *dtype, const method *m, uint64_t raw,
                      uint64_t coded_bytes, double c_s, double d_s) {
    char name[96];
    snprintf(name, sizeof(name), "%s%s%s%s", m->label, m->level[0] ? " " : "", m->level,
             m->kind == K_PTWM ? (m->threads == 1 ? " t1" : " t2") : "");
    printf("  %-34s %-5s %-30s %7.2f%% %9.1f %9.1f\n", file, dtype, name, pct(coded_bytes, raw),
           mbs(raw, c_s), mbs(raw, d_s));
}

/* ------------------------------------------------------------------------ */
/* Entropy floor                                                             */
/* ------------------------------------------------------------------------ */

static double entropy_bits(const uint32_t *h, size_t nsym, uint64_t total) {
    double bits = 0;
    size_t i;
    if (!total) return 0;
    for (i = 0; i < nsym; i++)
        if (h[i]) {
            double p = (double)h[i] / (double)total;
            bits -= p * log2(p);
        }
    return bits;
}

/* Order-1 (previous byte as context) entropy per byte, over the buffer. */
static double order1_bits(const uint8_t *p, size_t n) {
    uint32_t *h = (uint32_t *)calloc(65536, sizeof(uint32_t));
    uint32_t ctx[256] = {0};
    double bits = 0;
    size_t i, c, s;
    if (!h) exit(2);
    for (i = 1; i < n; i++) {
        h[(size_t)p[i - 1] << 8 | p[i]]++;
        ctx[p[i - 1]]++;
    }
    for (c = 0; c < 256; c++)
        for (s = 0; s < 256; s++) {
            uint32_t k = h[c << 8 | s];
            if (k) bits -= (double)k * log2((double)k / (double)ctx[c]);
        }
    free(h);
    return n > 1 ? bits / (double)(n - 1) : 0;
}

static void entropy_floor(const char *file, const group *g) {
    const char *dt = ptwm_dtype_name(g->dtype);
    char note[96];
    uint64_t n, i;
    double eb = 0, sb = 0, bits_per_value, floor_bytes;
    unsigned ebits = 0, sbits = 0, vb = ptwm_dtype_bits(g->dtype);
    if (!g->raw) return;
    if (g->dtype == PTWM_DTYPE_BF16) ebits = 8, sbits = 8;
    else if (g->dtype == PTWM_DTYPE_F16) ebits = 5, sbits = 11;
    else if (g->dtype == PTWM_DTYPE_F32) ebits = 8, sbits = 24;
    if (ebits) {
        /* Exponent field and sign+mantissa field, zero-order over the group.
         * F32's 24-bit sign+mantissa is taken as its three bytes (sign with
         * the top 7 mantissa bits, then the two low bytes), each zero-order:
         * a 2^24-symbol table cannot be estimated from a few million values
         * (the empirical figure would be capped at log2 of the count). This
         * is how tests/corpus/README.md gives it (23.97 bits). */
        unsigned mbits = sbits - 1, np = sbits > 16 ? 3 : 1, pbits = sbits / np, p;
        uint32_t *he = (uint32_t *)calloc((size_t)1 << ebits, sizeof(uint32_t));
        uint32_t *hs[3] = {NULL, NULL, NULL};
        if (!he) exit(2);
        for (p = 0; p < np; p++)
            if (!(hs[p] = (uint32_t *)calloc((size_t)1 << pbits, sizeof(uint32_t)))) exit(2);
        n = g->raw / (vb / 8);
        for (i = 0; i < n; i++) {
            uint32_t v, sm;
            if (vb == 16) v = (uint32_t)g->data[2 * i] | (uint32_t)g->data[2 * i + 1] << 8;
            else
                v = (uint32_t)g->data[4 * i] | (uint32_t)g->data[4 * i + 1] << 8 |
                    (uint32_t)g->data[4 * i + 2] << 16 | (uint32_t)g->data[4 * i + 3] << 24;
            he[(v >> mbits) & ((1u << ebits) - 1)]++;
            sm = ((v >> (vb - 1)) << mbits) | (v & ((1u << mbits) - 1));
            for (p = 0; p < np; p++) hs[p][(sm >> (p * pbits)) & ((1u << pbits) - 1)]++;
        }
        eb = entropy_bits(he, (size_t)1 << ebits, n);
        for (p = 0; p < np; p++) {
            sb += entropy_bits(hs[p], (size_t)1 << pbits, n);
            free(hs[p]);
        }
        free(he);
        bits_per_value = eb + sb;
        floor_bytes = bits_per_value * (double)n / 8;
        snprintf(note, sizeof(note), "exponent %.2f bits + sign+mantissa %.2f bits a value", eb, sb);
    } else {
        uint32_t h[256] = {0};
        n = g->raw;
        for (i = 0; i < n; i++) h[g->data[i]]++;
        eb = entropy_bits(h, 256, n);
        floor_bytes = eb * (double)n / 8;
        snprintf(note, sizeof(note), "%.2f bits a byte", eb);
    }
    csv_row("floor", file, dt, "entropy-order0", "", 1, g->raw, (uint64_t)(floor_bytes + 0.5), 0, 0, 0,
            1, note);
    printf("  %-34s %-5s %-30s %7.2f%%   (%s)\n", file, dt, "entropy floor, order 0",
           pct((uint64_t)(floor_bytes + 0.5), g->raw), note);
    {
        result r;
        static method floor_m = {K_PTWM, 0, 1, NULL, 0, "entropy-order0", ""};
        memset(&r, 0, sizeof(r));
        snprintf(r.file, sizeof(r.file), "%s", file);
        r.dtype = g->dtype;
        r.m = &floor_m;
        r.raw = g->raw;
        r.coded = (uint64_t)(floor_bytes + 0.5);
        res_add(&r);
    }
    if (!ebits && vb <= 8) {
        double o1 = order1_bits(g->data, (size_t)g->raw);
        uint64_t fb = (uint64_t)(o1 * (double)g->raw / 8 + 0.5);
        snprintf(note, sizeof(note), "%.2f bits a byte given the previous byte", o1);
        csv_row("floor", file, dt, "entropy-order1", "", 1, g->raw, fb, 0, 0, 0, 1, note);
        printf("  %-34s %-5s %-30s %7.2f%%   (%s)\n", file, dt, "entropy floor, order 1",
               pct(fb, g->raw), note);
    }
}

/* ------------------------------------------------------------------------ */
/* The measurement loop                                                      */
/* ------------------------------------------------------------------------ */

typedef struct timing {
    double c[MAX_RUNS], d[MAX_RUNS];
    int n;
    uint64_t coded;
    int failed;
} timing;

/* One compress + decompress + byte check of method m on group g. */
static void run_once(const method *m, const group *g, coded *c, uint8_t *out, scratch *sc,
                     timing *t, const char *file) {
    double t0, t1, t2;
    int rc;
    static unsigned char poison = 0xA5;
    /* Poison the output so a decoder that writes nothing cannot pass. */
    poison ^= 0xFF;
    memset(out, poison, (size_t)g->raw);
    t0 = bench_now();
    rc = m->kind == K_PTWM ? ptwm_do_compress(m, g, c) : peer_compress(m, g, c, sc);
    t1 = bench_now();
    if (!rc) rc = m->kind == K_PTWM ? ptwm_do_decompress(m, g, c, out) : peer_decompress(m, g, c, out, sc);
    t2 = bench_now();
    if (!rc && memcmp(out, g->data, (size_t)g->raw) != 0) {
        size_t i = 0;
        while (out[i] == g->data[i]) i++;
        fprintf(stderr, "bench_suite: ROUND TRIP FAILED: %s %s %s%s%s threads %d: first differing byte "
                        "at %zu of %" PRIu64 "\n",
                file, ptwm_dtype_name(g->dtype), m->label, m->level[0] ? " " : "", m->level, m->threads,
                i, g->raw);
        rc = -1;
    }
    if (rc) {
        if (!t->failed)
            fprintf(stderr, "bench_suite: FAILED: %s %s %s %s threads %d\n", file,
                    ptwm_dtype_name(g->dtype), m->label, m->level, m->threads);
        t->failed = 1;
        g_failed = 1;
        return;
    }
    t->c[t->n] = t1 - t0;
    t->d[t->n] = t2 - t1;
    t->n++;
    t->coded = c->len;
}

static void measure_group(const char *file, const group *g, const method *ms, size_t nm, int runs,
                          int slow_runs, scratch *sc) {
    timing *t = (timing *)calloc(nm, sizeof(timing));
    uint8_t *out = (uint8_t *)xmalloc((size_t)g->raw + 1);
    coded c;
    size_t i;
    int r;
    const char *dt = ptwm_dtype_name(g->dtype);
    if (!t) exit(2);
    memset(&c, 0, sizeof(c));
    for (r = 0; r < runs; r++) {
        /* Rotate the starting method each run so drift in machine load
         * does not fall on one method only. */
        for (i = 0; i < nm; i++) {
            const method *m = &ms[(i + (size_t)r) % nm];
            timing *tm = &t[(i + (size_t)r) % nm];
            if (tm->failed || (m->slow && tm->n >= slow_runs)) continue;
            run_once(m, g, &c, out, sc, tm, file);
        }
    }
    for (i = 0; i < nm; i++) {
        result res;
        char note[64];
        if (t[i].failed || !t[i].n) continue;
        memset(&res, 0, sizeof(res));
        snprintf(res.file, sizeof(res.file), "%s", file);
        res.dtype = g->dtype;
        res.m = &ms[i];
        res.raw = g->raw;
        res.coded = t[i].coded;
        res.c_s = bench_median(t[i].c, t[i].n);
        res.d_s = bench_median(t[i].d, t[i].n);
        res.runs = t[i].n;
        res_add(&res);
        snprintf(note, sizeof(note), "round trip checked %d/%d", t[i].n, t[i].n);
        csv_row("mem", file, dt, ms[i].label, ms[i].level, ms[i].threads, res.raw, res.coded, res.c_s,
                res.d_s, 0, res.runs, note);
        print_row(file, dt, &ms[i], res.raw, res.coded, res.c_s, res.d_s);
    }
    free(c.buf);
    free(c.frame);
    free(out);
    free(t);
}

/* Per dtype over all inputs, then over everything: sums of bytes and of
 * median times (so a group's speed is its total bytes over total time). */
static void aggregate(const method *ms, size_t nm) {
    static const method floor_ref = {K_PTWM, 0, 1, NULL, 0, "entropy-order0", ""};
    int q, dt;
    size_t i, k;
    printf("\nper dtype, all inputs together:\n");
    for (q = 0; q <= PTWM_DTYPE_COUNT; q++) {
        dt = q < PTWM_DTYPE_COUNT ? q : -1; /* every dtype, then all of them */
        for (i = 0; i <= nm; i++) {
            const method *m = i < nm ? &ms[i] : &floor_ref;
            uint64_t raw = 0, cod = 0;
            double cs = 0, ds = 0;
            int runs = 0, any = 0;
            for (k = 0; k < g_nres; k++) {
                const result *r = &g_res[k];
                int same = i < nm ? r->m == m : strcmp(r->m->label, "entropy-order0") == 0;
                if (!same || (dt >= 0 && (int)r->dtype != dt)) continue;
                raw += r->raw;
                cod += r->coded;
                cs += r->c_s;
                ds += r->d_s;
                runs = r->runs;
                any = 1;
            }
            if (!any) continue;
            if (dt < 0 && i == nm) continue; /* the mixed-dtype floor says little */
            {
                const char *dname = dt >= 0 ? ptwm_dtype_name((ptwm_dtype)dt) : "ALL";
                if (i < nm) {
                    csv_row("mem", "all", dname, m->label, m->level, m->threads, raw, cod, cs, ds, 0, runs,
                            "sum over inputs");
                    print_row("all", dname, m, raw, cod, cs, ds);
                } else {
                    csv_row("floor", "all", dname, "entropy-order0", "", 1, raw, cod, 0, 0, 0, 1,
                            "sum over inputs");
                    printf("  %-34s %-5s %-30s %7.2f%%\n", "all", dname, "entropy floor, order 0",
                           pct(cod, raw));
                }
            }
        }
    }
}

static size_t build_methods(method *ms, int peers) {
    static const int pm[] = {PTWM_METHOD_MICROSCALE, PTWM_METHOD_HUFFMAN, PTWM_METHOD_RANS,
                             PTWM_METHOD_ZSTD};
    static const int zl[] = {1, 3, 9, 19};
    size_t n = 0, i;
    int th;
    for (i = 0; i < sizeof(pm) / sizeof(pm[0]); i++)
        for (th = 1; th <= 2; th++) {
            method *m = &ms[n++];
            memset(m, 0, sizeof(*m));
            m->kind = K_PTWM;
            m->id = pm[i];
            m->threads = th;
            snprintf(m->label, sizeof(m->label), "ptwm-%s", ptwm_method_name(pm[i]));
        }
    if (!peers) return n;
    for (i = 0; i < sizeof(zl) / sizeof(zl[0]); i++) {
        method *m = &ms[n++];
        memset(m, 0, sizeof(*m));
        m->kind = K_ZSTD;
        m->id = zl[i];
        m->threads = 1;
        m->slow = zl[i] >= 19;
        snprintf(m->label, sizeof(m->label), "zstd");
        snprintf(m->level, sizeof(m->level), "%d", zl[i]);
    }
#ifdef PTWM_HAVE_BLOSC
    {
        static const char *const codecs[] = {"zstd", "lz4"};
        int sh;
        for (sh = BLOSC_SHUFFLE; sh <= BLOSC_BITSHUFFLE; sh++)
            for (i = 0; i < 2; i++) {
                method *m = &ms[n++];
                memset(m, 0, sizeof(*m));
                m->kind = K_BLOSC;
                m->id = sh;
                m->threads = 1;
                m->codec = codecs[i];
                snprintf(m->label, sizeof(m->label), "blosc-%s-%s",
                         sh == BLOSC_SHUFFLE ? "shuffle" : "bitshuffle", codecs[i]);
                snprintf(m->level, sizeof(m->level), "%d", BLOSC_CLEVEL);
            }
    }
#endif
    return n;
}

/* ------------------------------------------------------------------------ */
/* Repeated tensors: in-memory scaling and big files                         */
/* ------------------------------------------------------------------------ */

typedef struct pool {
    const ptwm_tensor_desc **t;
    size_t n;
} pool;

/* Tensors of all inputs, round robin across inputs and their groups. */
static void pool_build(input *ins, size_t nin, pool *p) {
    size_t total = 0, i, k, idx, added;
    for (i = 0; i < nin; i++)
        for (k = 0; k < ins[i].ng; k++) total += ins[i].g[k].n;
    p->t = (const ptwm_tensor_desc **)xmalloc(total * sizeof(*p->t));
    p->n = 0;
    for (idx = 0;; idx++) {
        added = 0;
        for (i = 0; i < nin; i++)
            for (k = 0; k < ins[i].ng; k++)
                if (idx < ins[i].g[k].n && ins[i].g[k].d[idx].nbytes) {
                    p->t[p->n++] = &ins[i].g[k].d[idx];
                    added = 1;
                }
        if (!added) break;
    }
}

typedef struct layout_item {
    const ptwm_tensor_desc *src;
    uint64_t rot;         /* the copy starts this many bytes into src, wrapping */
    uint64_t nbytes;      /* may be a prefix of src (the last, cut tensor) */
    uint64_t shape1;      /* element count when cut: a 1-D tensor */
    char name[64];
} layout_item;

/* Tensors adding up to `target` bytes: the pool repeated, the last one cut
 * to a whole number of elements as a 1-D tensor. */
static layout_item *layout_build(const pool *p, uint64_t target, size_t *count) {
    size_t cap = 1024, n = 0, j = 0;
    uint64_t have = 0;
    layout_item *it = (layout_item *)xmalloc(cap * sizeof(layout_item));
    while (have < target && p->n) {
        const ptwm_tensor_desc *t = p->t[j % p->n];
        uint64_t left = target - have, take = t->nbytes;
        layout_item *li;
        if (take > left) {
            unsigned eb = elem_bytes(t->dtype);
            take = left / eb * eb;
            if (!take) break;
        }
        if (n == cap) {
            cap *= 2;
            it = (layout_item *)realloc(it, cap * sizeof(layout_item));
            if (!it) exit(2);
        }
        li = &it[n++];
        li->src = t;
        /* Repetition r of a tensor is rotated by r x 4099 elements: the same
         * statistics, but not the same chunks (ptwm stores equal chunks
         * once, which would measure a file of one copy). */
        li->rot = t->nbytes ? (uint64_t)(j / p->n) * 4099u * elem_bytes(t->dtype) % t->nbytes /
                                  elem_bytes(t->dtype) * elem_bytes(t->dtype)
                            : 0;
        li->nbytes = take;
        li->shape1 = take / elem_bytes(t->dtype);
        snprintf(li->name, sizeof(li->name), "rep%zu.t%zu", j / p->n, j % p->n);
        have += take;
        j++;
    }
    *count = n;
    return it;
}

static void layout_descs(const layout_item *it, size_t n, ptwm_tensor_desc *d, const uint8_t *base) {
    size_t i;
    for (i = 0; i < n; i++) {
        d[i].name = it[i].name;
        d[i].dtype = it[i].src->dtype;
        if (it[i].nbytes == it[i].src->nbytes) {
            d[i].ndim = it[i].src->ndim;
            d[i].shape = it[i].src->shape;
        } else {
            d[i].ndim = 1;
            d[i].shape = &it[i].shape1;
        }
        d[i].nbytes = it[i].nbytes;
        d[i].data = base;
        if (base) base += it[i].nbytes;
    }
}

/* The bytes of a layout item: its source from `rot` on, wrapping. */
static void item_copy(const layout_item *li, uint8_t *dst) {
    const uint8_t *b = (const uint8_t *)li->src->data;
    uint64_t first = li->src->nbytes - li->rot;
    if (first > li->nbytes) first = li->nbytes;
    memcpy(dst, b + li->rot, (size_t)first);
    memcpy(dst + first, b, (size_t)(li->nbytes - first));
}

static int make_file(const char *out, uint64_t mb, input *ins, size_t nin) {
    pool p;
    size_t n, i;
    layout_item *it;
    ptwm_tensor_desc *d;
    void *hdr = NULL;
    size_t hlen = 0;
    ptwm_err err;
    FILE *fp;
    int rc = 0;
    pool_build(ins, nin, &p);
    it = layout_build(&p, mb << 20, &n);
    d = (ptwm_tensor_desc *)xmalloc(n * sizeof(*d));
    layout_descs(it, n, d, NULL);
    if (ptwm_st_build_header(d, n, NULL, 0, &hdr, &hlen, &err)) {
        fprintf(stderr, "bench_suite: header: %s\n", err.message);
        rc = -1;
    } else if (!(fp = fopen(out, "wb"))) {
        perror(out);
        rc = -1;
    } else {
        uint8_t *buf = NULL;
        if (fwrite(hdr, 1, hlen, fp) != hlen) rc = -1;
        for (i = 0; i < n && !rc; i++) {
            if (!(buf = (uint8_t *)realloc(buf, (size_t)it[i].nbytes + 1))) exit(2);
            item_copy(&it[i], buf);
            if (fwrite(buf, 1, (size_t)it[i].nbytes, fp) != it[i].nbytes) rc = -1;
        }
        free(buf);
        if (fclose(fp) || rc) {
            fprintf(stderr, "bench_suite: writing %s failed\n", out);
            rc = -1;
        }
    }
    if (!rc) printf("wrote %s: %zu tensors, %" PRIu64 " bytes of tensor data\n", out, n, mb << 20);
    ptwm_free(hdr);
    free(d);
    free(it);
    free((void *)p.t);
    return rc;
}

/* Throughput against input size, in memory: ptwm default method at 1 and 2
 * threads beside zstd -3, on the inputs' tensors repeated to each size. */
static void scale(const char *list, input *ins, size_t nin, int runs) {
    pool p;
    const char *s = list;
    method ms[3];
    scratch sc;
    sc.cctx = ZSTD_createCCtx();
    sc.dctx = ZSTD_createDCtx();
    memset(ms, 0, sizeof(ms));
    ms[0].kind = ms[1].kind = K_PTWM;
    ms[0].id = ms[1].id = PTWM_METHOD_MICROSCALE;
    ms[0].threads = 1;
    ms[1].threads = 2;
    snprintf(ms[0].label, sizeof(ms[0].label), "ptwm-microscale");
    snprintf(ms[1].label, sizeof(ms[1].label), "ptwm-microscale");
    ms[2].kind = K_ZSTD;
    ms[2].id = 3;
    ms[2].threads = 1;
    snprintf(ms[2].label, sizeof(ms[2].label), "zstd");
    snprintf(ms[2].level, sizeof(ms[2].level), "3");
    pool_build(ins, nin, &p);
    printf("in-memory scaling (inputs' tensors repeated; median of runs):\n");
    printf("  %10s %-24s %9s %9s %9s %8s %8s\n", "size MB", "method", "size%", "comp MB/s", "dec MB/s",
           "comp s", "dec s");
    while (*s) {
        char *end;
        uint64_t mb = strtoull(s, &end, 10);
        size_t n, i;
        layout_item *it;
        group g;
        uint8_t *base;
        int r, rr;
        timing t[3];
        char file[64];
        if (end == s) break;
        s = *end == ',' ? end + 1 : end;
        it = layout_build(&p, mb << 20, &n);
        memset(&g, 0, sizeof(g));
        g.dtype = n ? it[0].src->dtype : PTWM_DTYPE_U8;
        g.n = n;
        g.d = (ptwm_tensor_desc *)xmalloc(n * sizeof(ptwm_tensor_desc));
        for (i = 0; i < n; i++) g.raw += it[i].nbytes;
        g.data = (uint8_t *)xmalloc((size_t)g.raw);
        base = g.data;
        for (i = 0; i < n; i++) {
            item_copy(&it[i], base);
            base += it[i].nbytes;
        }
        layout_descs(it, n, g.d, g.data);
        /* Fewer repetitions for the large sizes: the noise is smaller there. */
        rr = runs;
        if (mb >= 64 && rr > 3) rr = 3;
        if (mb >= 512) rr = 1;
        memset(t, 0, sizeof(t));
        {
            uint8_t *out = (uint8_t *)xmalloc((size_t)g.raw);
            coded c;
            memset(&c, 0, sizeof(c));
            snprintf(file, sizeof(file), "repeat-%" PRIu64 "MB", mb);
            for (r = 0; r < rr; r++)
                for (i = 0; i < 3; i++) {
                    size_t k = (i + (size_t)r) % 3;
                    if (!t[k].failed) run_once(&ms[k], &g, &c, out, &sc, &t[k], file);
                }
            free(c.buf);
            free(c.frame);
            free(out);
        }
        for (i = 0; i < 3; i++) {
            double cs, ds;
            char note[64];
            if (t[i].failed || !t[i].n) continue;
            cs = bench_median(t[i].c, t[i].n);
            ds = bench_median(t[i].d, t[i].n);
            snprintf(note, sizeof(note), "in memory; round trip checked %d/%d", t[i].n, t[i].n);
            csv_row("scale_mem", file, ptwm_dtype_name(g.dtype), ms[i].label, ms[i].level, ms[i].threads,
                    g.raw, t[i].coded, cs, ds, 0, t[i].n, note);
            printf("  %10" PRIu64 " %-20s%s t%d %8.2f%% %9.1f %9.1f %8.3f %8.3f\n", mb, ms[i].label,
                   ms[i].level[0] ? (ms[i].level[0] == '3' ? "-3 " : "   ") : "   ", ms[i].threads,
                   pct(t[i].coded, g.raw), mbs(g.raw, cs), mbs(g.raw, ds), cs, ds);
        }
        free(g.d);
        free(g.data);
        free(it);
    }
    free((void *)p.t);
    ZSTD_freeCCtx(sc.cctx);
    ZSTD_freeDCtx(sc.dctx);
}

/* ------------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr,
            "usage: bench_suite [--runs N] [--slow-runs N] [--csv FILE] [--no-peers] [--no-ctx] PATH...\n"
            "       bench_suite --scale MB[,MB...] [--runs N] [--csv FILE] PATH...\n"
            "       bench_suite --make OUT.safetensors MB PATH...\n");
    exit(2);
}

int main(int argc, char **argv) {
    int runs = 5, slow_runs = 3, peers = 1, use_ctx = 1, a;
    const char *csv = NULL, *scale_list = NULL, *make_out = NULL;
    uint64_t make_mb = 0;
    const char **paths = (const char **)xmalloc((size_t)argc * sizeof(char *));
    size_t npaths = 0, i, k, nm;
    input *ins;
    method ms[32];
    scratch sc;
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--runs") && a + 1 < argc) runs = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--slow-runs") && a + 1 < argc) slow_runs = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--csv") && a + 1 < argc) csv = argv[++a];
        else if (!strcmp(argv[a], "--no-peers")) peers = 0;
        else if (!strcmp(argv[a], "--no-ctx")) use_ctx = 0;
        else if (!strcmp(argv[a], "--scale") && a + 1 < argc) scale_list = argv[++a];
        else if (!strcmp(argv[a], "--make") && a + 2 < argc) {
            make_out = argv[++a];
            make_mb = strtoull(argv[++a], NULL, 10);
        } else if (argv[a][0] == '-' && argv[a][1]) usage();
        else paths[npaths++] = argv[a];
    }
    if (!npaths) usage();
    if (use_ctx && ptwm_ctx_create && ptwm_ctx_create(&g_ctx, NULL)) return 2;
    if (runs < 1) runs = 1;
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    if (slow_runs < 1) slow_runs = 1;
    if (csv) {
        g_csv = fopen(csv, "a");
        if (!g_csv) {
            perror(csv);
            return 2;
        }
        if (ftell(g_csv) == 0)
            fprintf(g_csv, "section,file,dtype,method,level,threads,raw_bytes,coded_bytes,size_pct,"
                           "comp_mbs,decomp_mbs,comp_s,decomp_s,peak_rss_kb,runs,note\n");
    }
    ins = (input *)calloc(npaths, sizeof(input));
    if (!ins) return 2;
    for (i = 0; i < npaths; i++)
        if (input_load(paths[i], &ins[i])) return 2;

    if (make_out) {
        int rc = make_file(make_out, make_mb, ins, npaths);
        for (i = 0; i < npaths; i++) input_free(&ins[i]);
        free(ins);
        free(paths);
        return rc ? 1 : 0;
    }
    if (scale_list) {
        scale(scale_list, ins, npaths, runs);
    } else {
        sc.cctx = ZSTD_createCCtx();
        sc.dctx = ZSTD_createDCtx();
        nm = build_methods(ms, peers);
        printf("in memory, median of %d runs (zstd -19: %d); MB/s = 10^6 bytes of raw data per second\n",
               runs, slow_runs < runs ? slow_runs : runs);
        printf("  %-34s %-5s %-30s %8s %9s %9s\n", "file", "dtype", "method", "size", "comp MB/s",
               "dec MB/s");
        for (i = 0; i < npaths; i++)
            for (k = 0; k < ins[i].ng; k++) {
                char name[128];
                base_name(paths[i], name, sizeof(name));
                entropy_floor(name, &ins[i].g[k]);
                measure_group(name, &ins[i].g[k], ms, nm, runs, slow_runs, &sc);
            }
        aggregate(ms, nm);
        ZSTD_freeCCtx(sc.cctx);
        ZSTD_freeDCtx(sc.dctx);
    }
    for (i = 0; i < npaths; i++) input_free(&ins[i]);
    free(ins);
    free(paths);
    free(g_res);
    if (g_ctx) ptwm_ctx_free(g_ctx);
    if (g_csv) fclose(g_csv);
    if (g_failed) {
        fprintf(stderr, "bench_suite: SOME ROUND TRIPS FAILED (see above)\n");
        return 1;
    }
    return 0;
}
