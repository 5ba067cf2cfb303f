/* bench_planes: the chunk codec over real weights, beside libzstd level 3.
 *
 *   bench_planes [--chunk BYTES] [--method NAME] [--chain TEXT] [--reps N] FILE.safetensors...
 *
 * Every tensor is cut into chunks as the container cuts it, coded with the
 * standard chain of its dtype (or --chain), decoded and compared byte for
 * byte. libzstd level 3 codes the same chunks in the same run. Prints, per
 * file and per dtype over all files: raw bytes, coded bytes, ratio, compress
 * and decompress MB/s (best of --reps passes, single thread), and zstd-3's
 * figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>
#include "chunk.h"
#include "../programs/bench_time.h"

typedef struct totals {
    double raw, coded, zcoded;
    double ct, dt, zct, zdt; /* seconds */
} totals;


static void add(totals *a, const totals *b) {
    a->raw += b->raw;
    a->coded += b->coded;
    a->zcoded += b->zcoded;
    a->ct += b->ct;
    a->dt += b->dt;
    a->zct += b->zct;
    a->zdt += b->zdt;
}

static void print_line(const char *label, const totals *t) {
    double mb = t->raw / 1e6;
    printf("%-36s raw %10.0f coded %10.0f %6.2f%%  c %7.1f MB/s d %7.1f MB/s | zstd-3 %6.2f%% c "
           "%6.1f d %7.1f | speed x%.2f c x%.2f d\n",
           label, t->raw, t->coded, 100.0 * t->coded / t->raw, mb / t->ct, mb / t->dt,
           100.0 * t->zcoded / t->raw, mb / t->zct, mb / t->zdt, t->zct / t->ct, t->zdt / t->dt);
}

static int bench_file(const char *path, size_t chunk, ptwm_method method, const uint8_t *user_chain,
                      size_t user_len, int reps, totals *per_dtype) {
    ptwm_st *st = NULL;
    ptwm_err err;
    totals ft;
    size_t i, cap = ptwm_chunk_bound(chunk);
    size_t zcap = ZSTD_compressBound(chunk);
    uint8_t *enc = malloc(cap), *dec = malloc(chunk), *zbuf = malloc(zcap);
    ZSTD_CCtx *zc = ZSTD_createCCtx();
    ZSTD_DCtx *zd = ZSTD_createDCtx();
    ptwm_ws *ws = ptwm_ws_create(); /* as a writer's or reader's worker keeps one */
    ptwm_chunk_params prm = {method, 0, 1, 0, 0};
    int rc = 0;
    memset(&ft, 0, sizeof(ft));
    if (ptwm_st_open(path, PTWM_OPEN_MMAP, &st, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    for (i = 0; i < ptwm_st_count(st) && !rc; i++) {
        ptwm_tensor_info ti;
        uint8_t chain[PTWM_CHAIN_MAX_BYTES];
        size_t clen = 0, off;
        totals t;
        int r;
        memset(&t, 0, sizeof(t));
        ptwm_st_tensor(st, i, &ti, NULL);
        if (user_chain) {
            memcpy(chain, user_chain, user_len);
            clen = user_len;
        } else if (ptwm_chain_standard(ti.dtype, method, chain, sizeof(chain), &clen, &err)) {
            fprintf(stderr, "%s\n", err.message);
            rc = 1;
            break;
        }
        for (r = 0; r < reps && !rc; r++) {
            double ct = 0, dt = 0, zct = 0, zdt = 0, coded = 0, zcoded = 0;
            for (off = 0; off < ti.nbytes; off += chunk) {
                size_t n = (size_t)PTWM_MIN((uint64_t)chunk, ti.nbytes - off), out = 0, zn;
                const uint8_t *src = (const uint8_t *)ti.data + off;
                double t0 = bench_now(), t1, t2, t3, t4;
                if (ptwm_chunk_encode(ws, chain, clen, ti.dtype, &prm, src, n, enc, cap, &out, &err)) {
                    fprintf(stderr, "%s: %s: %s\n", path, ti.name, err.message);
                    rc = 1;
                    break;
                }
                t1 = bench_now();
                if (ptwm_chunk_decode(ws, chain, clen, ti.dtype, enc, out, dec, n, &err) ||
                    memcmp(dec, src, n) != 0) {
                    fprintf(stderr, "%s: %s: round trip failed: %s\n", path, ti.name, err.message);
                    rc = 1;
                    break;
                }
                t2 = bench_now();
                zn = ZSTD_compressCCtx(zc, zbuf, zcap, src, n, 3);
                t3 = bench_now();
                if (ZSTD_isError(zn) ||
                    ZSTD_decompressDCtx(zd, dec, n, zbuf, zn) != n) {
                    fprintf(stderr, "zstd failed\n");
                    rc = 1;
                    break;
                }
                t4 = bench_now();
                ct += t1 - t0;
                dt += t2 - t1;
                zct += t3 - t2;
                zdt += t4 - t3;
                coded += (double)out;
                zcoded += (double)zn;
            }
            t.raw = (double)ti.nbytes;
            t.coded = coded;
            t.zcoded = zcoded;
            if (r == 0 || ct < t.ct) t.ct = ct;
            if (r == 0 || dt < t.dt) t.dt = dt;
            if (r == 0 || zct < t.zct) t.zct = zct;
            if (r == 0 || zdt < t.zdt) t.zdt = zdt;
        }
        add(&ft, &t);
        add(&per_dtype[ti.dtype], &t);
    }
    if (!rc) {
        const char *base = strrchr(path, '/');
        print_line(base ? base + 1 : path, &ft);
    }
    ptwm_st_close(st);
    ZSTD_freeCCtx(zc);
    ZSTD_freeDCtx(zd);
    ptwm_ws_free(ws);
    free(enc);
    free(dec);
    free(zbuf);
    return rc;
}

int main(int argc, char **argv) {
    size_t chunk = (size_t)PTWM_DEFAULT_CHUNK, ulen = 0;
    ptwm_method method = PTWM_METHOD_MICROSCALE;
    int reps = 3, i, rc = 0;
    uint8_t uchain[PTWM_CHAIN_MAX_BYTES];
    const uint8_t *user_chain = NULL;
    totals per_dtype[PTWM_DTYPE_COUNT];
    ptwm_err err;
    memset(per_dtype, 0, sizeof(per_dtype));
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chunk") && i + 1 < argc) {
            chunk = (size_t)strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--method") && i + 1 < argc) {
            if (ptwm_method_from_name(argv[++i], &method, NULL)) {
                fprintf(stderr, "unknown method %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--chain") && i + 1 < argc) {
            if (ptwm_chain_parse(argv[++i], uchain, sizeof(uchain), &ulen, &err)) {
                fprintf(stderr, "%s\n", err.message);
                return 2;
            }
            user_chain = uchain;
        } else {
            break;
        }
    }
    if (i >= argc || chunk == 0 || reps < 1) {
        fprintf(stderr,
                "usage: bench_planes [--chunk BYTES] [--method NAME] [--chain TEXT] [--reps N] "
                "FILE.safetensors...\n");
        return 2;
    }
    printf("chunk %zu bytes, method %s, best of %d passes, single thread\n", chunk,
           ptwm_method_name(method), reps);
    for (; i < argc; i++) rc |= bench_file(argv[i], chunk, method, user_chain, ulen, reps, per_dtype);
    for (i = 0; i < PTWM_DTYPE_COUNT; i++) {
        char label[64];
        if (per_dtype[i].raw == 0) continue;
        snprintf(label, sizeof(label), "all %s", ptwm_dtype_name((ptwm_dtype)i));
        print_line(label, &per_dtype[i]);
    }
    return rc;
}
