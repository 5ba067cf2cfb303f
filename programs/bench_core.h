/* In-memory benchmark of the .ptwm codec beside libzstd, shared by
 * `ptwm bench` (programs/cmd_bench.c) and bench/bench_container.c.
 * Header-only (static functions) so that both programs, which build apart,
 * use one implementation. Uses the public API plus libzstd. */
#ifndef PTWM_BENCH_CORE_H
#define PTWM_BENCH_CORE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "ptwm.h"
#include "bench_time.h"

/* The tensors of one file, grouped by dtype: one set per dtype present. */
typedef struct bc_set {
    ptwm_dtype dtype;
    ptwm_tensor_desc *d;
    size_t n;
    uint64_t raw;
} bc_set;

typedef struct bc_file {
    char *path;
    ptwm_st *st;              /* safetensors source (read with pread), or NULL */
    uint8_t **owned;          /* every tensor's bytes, read or decoded */
    size_t nowned;
    ptwm_tensor_desc *all;
    size_t n;
    bc_set sets[PTWM_DTYPE_COUNT];
    size_t nsets;
} bc_file;

/* Sizes and times (seconds, medians of runs) for one set of tensors. */
typedef struct bc_result {
    uint64_t raw, coded, zcoded;
    double c_s, d_s, zc_s, zd_s;
} bc_result;

static ptwm_error bc_fail(ptwm_err *err, ptwm_error code, const char *what) {
    if (err) {
        err->code = code;
        snprintf(err->message, sizeof(err->message), "%s", what);
    }
    return code;
}


static void bc_file_free(bc_file *f) {
    size_t i;
    for (i = 0; i < f->nowned; i++) free(f->owned[i]);
    free(f->owned);
    for (i = 0; i < f->nsets; i++) free(f->sets[i].d);
    free(f->all);
    free(f->path);
    ptwm_st_close(f->st);
    memset(f, 0, sizeof(*f));
}

static int bc_is_ptwm(const char *path) {
    unsigned char m[8] = {0};
    FILE *fp = fopen(path, "rb");
    size_t got;
    if (!fp) return 0;
    got = fread(m, 1, 8, fp);
    fclose(fp);
    return got == 8 && memcmp(m, "\x89PTWM\r\n\x1a", 8) == 0;
}

/* Load a safetensors file (read with pread) or a .ptwm (decoded) into memory.
 * Not mapped: a file that shrinks while it loads is then an error
 * (PTWM_ERR_TRUNCATED naming it), not SIGBUS, as for every other command. */
static ptwm_error bc_file_load(const char *path, bc_file *f, ptwm_err *err) {
    size_t i, n;
    ptwm_error rc = PTWM_OK;
    ptwm_reader *r = NULL;
    memset(f, 0, sizeof(*f));
    f->path = (char *)malloc(strlen(path) + 1);
    if (!f->path) return bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
    strcpy(f->path, path);
    if (bc_is_ptwm(path)) {
        if ((rc = ptwm_reader_open(path, &r, err))) goto fail;
        n = ptwm_reader_count(r);
    } else {
        if ((rc = ptwm_st_open(path, PTWM_OPEN_PREAD, &f->st, err))) goto fail;
        n = ptwm_st_count(f->st);
    }
    f->all = (ptwm_tensor_desc *)calloc(n + 1, sizeof(ptwm_tensor_desc));
    f->owned = (uint8_t **)calloc(n + 1, sizeof(uint8_t *));
    if (!f->all || !f->owned) {
        rc = bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        ptwm_tensor_desc *d = &f->all[i];
        size_t extra;
        uint8_t *buf;
        if (r) ptwm_reader_tensor(r, i, &info, NULL);
        else ptwm_st_tensor(f->st, i, &info, NULL);
        d->dtype = info.dtype;
        d->ndim = info.ndim;
        d->nbytes = info.nbytes;
        /* Names and shapes live in the reader: keep copies past its close. */
        extra = strlen(info.name) + 1 + info.ndim * sizeof(uint64_t);
        buf = (uint8_t *)malloc((size_t)info.nbytes + extra + 8);
        if (!buf) {
            rc = bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
            goto fail;
        }
        f->owned[f->nowned++] = buf;
        memcpy(buf, info.shape, info.ndim * sizeof(uint64_t));
        d->shape = (const uint64_t *)(void *)buf;
        d->name = (const char *)buf + info.ndim * sizeof(uint64_t);
        strcpy((char *)d->name, info.name);
        d->data = buf + extra;
        rc = r ? ptwm_reader_decode(r, i, (void *)d->data, (size_t)info.nbytes, err)
               : ptwm_st_read(f->st, i, 0, (void *)d->data, (size_t)info.nbytes, err);
        if (rc) goto fail;
    }
    f->n = n;
    for (i = 0; i < n; i++) {
        size_t s;
        for (s = 0; s < f->nsets && f->sets[s].dtype != f->all[i].dtype; s++) {}
        if (s == f->nsets) {
            f->sets[s].dtype = f->all[i].dtype;
            f->sets[s].d = (ptwm_tensor_desc *)calloc(n, sizeof(ptwm_tensor_desc));
            if (!f->sets[s].d) {
                rc = bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
                goto fail;
            }
            f->nsets++;
        }
        f->sets[s].d[f->sets[s].n++] = f->all[i];
        f->sets[s].raw += f->all[i].nbytes;
    }
    ptwm_reader_close(r);
    return PTWM_OK;
fail:
    ptwm_reader_close(r);
    bc_file_free(f);
    return rc;
}

#define BC_MAX_RUNS 15

/* Each tensor of s as one zstd frame at `zlevel`, one after another into
 * zbuf (zcap bytes); their total size into *total. */
static ptwm_error bc_zstd_compress(const bc_set *s, ZSTD_CCtx *cctx, uint8_t *zbuf, size_t zcap,
                                   int zlevel, uint64_t *total, ptwm_err *err) {
    size_t i;
    *total = 0;
    for (i = 0; i < s->n; i++) {
        size_t z = ZSTD_compressCCtx(cctx, zbuf + *total, zcap - *total, s->d[i].data,
                                     (size_t)s->d[i].nbytes, zlevel);
        if (ZSTD_isError(z)) return bc_fail(err, PTWM_ERR_IO, "zstd compression failed");
        *total += z;
    }
    return PTWM_OK;
}

/* The frames bc_zstd_compress wrote, decoded into dsts[i] (sizes[i] bytes
 * each): the same tensor array ptwm decodes into (a reused tensor-sized
 * buffer would stay in cache and flatter zstd). */
static ptwm_error bc_zstd_decompress(const bc_set *s, ZSTD_DCtx *dctx, const uint8_t *zbuf,
                                     size_t zcap, uint8_t **dsts, const size_t *sizes,
                                     ptwm_err *err) {
    size_t i, zoff = 0;
    for (i = 0; i < s->n; i++) {
        size_t fl = ZSTD_findFrameCompressedSize(zbuf + zoff, zcap - zoff), got;
        got = ZSTD_isError(fl) ? fl : ZSTD_decompressDCtx(dctx, dsts[i], sizes[i], zbuf + zoff, fl);
        if (got != s->d[i].nbytes) return bc_fail(err, PTWM_ERR_MISMATCH, "zstd round trip failed");
        zoff += ZSTD_isError(fl) ? 0 : fl;
    }
    return PTWM_OK;
}

/* Room for every tensor of s as one zstd frame, one after another. */
static size_t bc_zstd_bound(const bc_set *s) {
    size_t i, cap = 1;
    for (i = 0; i < s->n; i++) cap += ZSTD_compressBound((size_t)s->d[i].nbytes);
    return cap;
}

/* Compress and decompress a set `runs` times with ptwm (params) and with
 * zstd at `zlevel` (each tensor one frame, one thread), alternating; check
 * every round trip on the first run. zlevel 0 skips zstd. Each side keeps its
 * work memory and output buffer across the runs: zstd its CCtx and DCtx,
 * ptwm a ptwm_ctx (ptwm_compress_into). */
static ptwm_error bc_measure(const bc_set *s, const ptwm_cparams *params, int runs, int zlevel,
                             bc_result *out, ptwm_err *err) {
    double tc[BC_MAX_RUNS], td[BC_MAX_RUNS], zc[BC_MAX_RUNS], zd[BC_MAX_RUNS];
    size_t i, zcap, pcap;
    uint8_t *zbuf = NULL, *pbuf = NULL, *all = NULL, **dsts = NULL;
    size_t *idx = NULL, *sizes = NULL;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    ptwm_cparams p = *params;
    ptwm_ctx *ctx = NULL;
    ptwm_error rc = ptwm_ctx_create(&ctx, err);
    int r;
    if (rc) {
        ZSTD_freeCCtx(cctx);
        ZSTD_freeDCtx(dctx);
        return rc;
    }
    p.ctx = ctx;
    if (runs < 1) runs = 1;
    if (runs > BC_MAX_RUNS) runs = BC_MAX_RUNS;
    memset(out, 0, sizeof(*out));
    out->raw = s->raw;
    /* zstd writes its frames one after another into one region, as ptwm
     * writes one image; each into a buffer of its bound reused from run to
     * run (a fresh one costs the kernel's zeroing of its pages every run). */
    zcap = bc_zstd_bound(s);
    zbuf = (uint8_t *)malloc(zcap);
    pcap = ptwm_compress_bound(s->d, s->n, NULL, &p);
    pbuf = pcap ? (uint8_t *)malloc(pcap) : NULL;
    all = (uint8_t *)malloc((size_t)s->raw + 1);
    idx = (size_t *)calloc(s->n + 1, sizeof(size_t));
    sizes = (size_t *)calloc(s->n + 1, sizeof(size_t));
    dsts = (uint8_t **)calloc(s->n + 1, sizeof(uint8_t *));
    if (all && idx && sizes && dsts) {
        uint64_t off = 0;
        for (i = 0; i < s->n; i++) {
            idx[i] = i;
            sizes[i] = (size_t)s->d[i].nbytes;
            dsts[i] = all + off;
            off += s->d[i].nbytes;
        }
    }
    if (!zbuf || !pbuf || !cctx || !dctx || !all || !idx || !sizes || !dsts) {
        rc = bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (r = 0; r < runs && !rc; r++) {
        const void *blob = pbuf;
        size_t len = 0;
        ptwm_reader *rd = NULL;
        double t0 = bench_now();
        if ((rc = ptwm_compress_into(s->d, s->n, NULL, &p, pbuf, pcap, &len, err))) break;
        tc[r] = bench_now() - t0;
        out->coded = len;
        if (zlevel) {
            t0 = bench_now();
            rc = bc_zstd_compress(s, cctx, zbuf, zcap, zlevel, &out->zcoded, err);
            zc[r] = bench_now() - t0;
        }
        /* Decode every tensor in one call, so chunks of small tensors share the threads. */
        t0 = bench_now();
        if (!rc) rc = ptwm_reader_open_memory(blob, len, "bench", &rd, err);
        if (!rc) ptwm_reader_set_threads(rd, params->threads);
        if (!rc) rc = ptwm_reader_set_ctx(rd, ctx, err);
        if (!rc) rc = ptwm_reader_decode_many(rd, idx, (void *const *)dsts, sizes, s->n, err);
        td[r] = bench_now() - t0;
        for (i = 0; i < s->n && !rc && r == 0; i++)
            if (memcmp(dsts[i], s->d[i].data, sizes[i]) != 0)
                rc = bc_fail(err, PTWM_ERR_MISMATCH, "round trip: decoded bytes differ");
        ptwm_reader_close(rd);
        if (zlevel && !rc) {
            t0 = bench_now();
            rc = bc_zstd_decompress(s, dctx, zbuf, zcap, dsts, sizes, err);
            zd[r] = bench_now() - t0;
            for (i = 0; i < s->n && !rc && r == 0; i++)
                if (memcmp(dsts[i], s->d[i].data, sizes[i]) != 0)
                    rc = bc_fail(err, PTWM_ERR_MISMATCH, "zstd round trip: decoded bytes differ");
        }
    }
    if (!rc) {
        out->c_s = bench_median(tc, runs);
        out->d_s = bench_median(td, runs);
        if (zlevel) {
            out->zc_s = bench_median(zc, runs);
            out->zd_s = bench_median(zd, runs);
        }
    }
out:
    free(zbuf);
    free(pbuf);
    free(all);
    free(idx);
    free(sizes);
    free(dsts);
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
    ptwm_ctx_free(ctx);
    return rc;
}

static void bc_add(bc_result *a, const bc_result *b) {
    a->raw += b->raw;
    a->coded += b->coded;
    a->zcoded += b->zcoded;
    a->c_s += b->c_s;
    a->d_s += b->d_s;
    a->zc_s += b->zc_s;
    a->zd_s += b->zd_s;
}

static double bc_mbs(uint64_t bytes, double s) {
    return s > 0 ? (double)bytes / s / 1e6 : 0.0;
}

static double bc_pct(uint64_t a, uint64_t b) {
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

#endif
