/* Entropy stage benchmark: every stage on real weight planes, side by side
 * with libzstd level 3 in the same run. Single thread, in memory.
 *
 *   bench_entropy [--csv FILE] [--runs N] [CORPUS_DIR]
 *
 * CORPUS_DIR defaults to $PTWM_CORPUS, then build-corpus (or ../build-corpus
 * when run from a build directory; scripts/corpus.sh builds it). Planes: the
 * exponent and sign+mantissa planes of the BF16 corpus files and the bytes of
 * handtrack.u8. Speeds are MB/s of plane bytes (1 MB = 10^6 bytes), the median
 * of N (default 7) runs alternating encode and decode; every run repeats the
 * call until it has taken at least 20 ms. Every stage's output is decoded and
 * compared before it is timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "entropy.h"
#include "../programs/bench_time.h"

typedef struct {
    const char *name;
    int stage;
    int level;
} stage_def;

static const stage_def STAGES[] = {
    {"HUFFMAN", PTWM_METHOD_HUFFMAN, 0},   {"RANS o0", PTWM_METHOD_RANS, 0},
    {"RANS o1", PTWM_METHOD_RANS, 1},      {"RANS auto", PTWM_METHOD_RANS, -1},
    {"ZSTD-3", PTWM_METHOD_ZSTD, 3},       {"IDENTITY", PTWM_METHOD_IDENTITY, 0},
};
#define N_STAGES (sizeof(STAGES) / sizeof(STAGES[0]))
enum { S_HUF = 0, S_RANS0 = 1, S_ZSTD = 4 };

typedef struct {
    char name[80];
    uint8_t *data;
    size_t n;
} plane;

typedef struct {
    size_t out;
    double enc_mbs, dec_mbs;
    int ok;
} result;


static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long size;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)size + 1);
        if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
            free(buf);
            buf = NULL;
        }
        *len = (size_t)size;
    }
    fclose(f);
    return buf;
}

/* The data region of a safetensors file: 8-byte LE header length, JSON, data. */
static const uint8_t *st_data(const uint8_t *file, size_t size, size_t *dlen) {
    uint64_t h;
    if (size < 8) return NULL;
    h = ptwm_load_le64(file);
    if (h > size - 8) return NULL;
    *dlen = size - 8 - (size_t)h;
    return file + 8 + h;
}

static int load_planes(const char *dir, plane *pl, int *count) {
    static const char *const bf16[] = {"faceres-deep", "handskeleton", "posenet", "emotion"};
    char path[2048];
    size_t i, k, size = 0, dlen = 0;
    uint8_t *file;
    const uint8_t *d;
    *count = 0;
    for (k = 0; k < 4; k++) {
        snprintf(path, sizeof(path), "%s/%s.bf16.safetensors", dir, bf16[k]);
        if (!(file = read_file(path, &size)) || !(d = st_data(file, size, &dlen))) {
            fprintf(stderr, "cannot read %s\n", path);
            return 0;
        }
        pl[*count].n = pl[*count + 1].n = dlen / 2;
        pl[*count].data = malloc(dlen / 2 + 1);
        pl[*count + 1].data = malloc(dlen / 2 + 1);
        for (i = 0; i < dlen / 2; i++) {
            unsigned v = ptwm_load_le16(d + 2 * i);
            pl[*count].data[i] = (uint8_t)((v >> 7) & 0xff);
            pl[*count + 1].data[i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
        }
        snprintf(pl[*count].name, sizeof(pl[0].name), "%s exp", bf16[k]);
        snprintf(pl[*count + 1].name, sizeof(pl[0].name), "%s s+m", bf16[k]);
        *count += 2;
        free(file);
    }
    snprintf(path, sizeof(path), "%s/handtrack.u8.safetensors", dir);
    if (!(file = read_file(path, &size)) || !(d = st_data(file, size, &dlen))) {
        fprintf(stderr, "cannot read %s\n", path);
        return 0;
    }
    pl[*count].n = dlen;
    pl[*count].data = malloc(dlen + 1);
    memcpy(pl[*count].data, d, dlen);
    snprintf(pl[*count].name, sizeof(pl[0].name), "handtrack u8");
    *count += 1;
    free(file);
    return 1;
}


/* One workspace for every call, as a writer's worker keeps one. */
static ptwm_ws *bench_ws;

/* Time `reps` calls; returns seconds per call. */
static double time_encode(const stage_def *s, const plane *p, uint8_t *enc, size_t cap, int reps) {
    double t0 = bench_now();
    size_t len;
    int r;
    for (r = 0; r < reps; r++)
        if (ptwm_entropy_encode(bench_ws, s->stage, s->level, p->data, p->n, enc, cap, &len)) return -1;
    return (bench_now() - t0) / reps;
}

static double time_decode(const stage_def *s, const plane *p, const uint8_t *enc, size_t len,
                          uint8_t *dec, int reps) {
    double t0 = bench_now();
    int r;
    for (r = 0; r < reps; r++)
        if (ptwm_entropy_decode(bench_ws, s->stage, enc, len, dec, p->n)) return -1;
    return (bench_now() - t0) / reps;
}

static result bench_one(const stage_def *s, const plane *p, int runs) {
    result res;
    size_t cap = ptwm_entropy_bound(s->stage, p->n), len = 0;
    uint8_t *enc = malloc(cap + 1), *dec = malloc(p->n + 1);
    double enc_t[64], dec_t[64], t;
    int reps_e, reps_d, r;
    memset(&res, 0, sizeof(res));
    if (!enc || !dec || ptwm_entropy_encode(bench_ws, s->stage, s->level, p->data, p->n, enc, cap, &len) ||
        ptwm_entropy_decode(bench_ws, s->stage, enc, len, dec, p->n) || memcmp(dec, p->data, p->n) != 0) {
        free(enc);
        free(dec);
        return res;
    }
    res.out = len;
    res.ok = 1;
    /* calibrate: enough calls for ~20 ms a run */
    t = time_encode(s, p, enc, cap, 1);
    reps_e = t > 0.02 ? 1 : (int)(0.02 / (t > 1e-7 ? t : 1e-7)) + 1;
    t = time_decode(s, p, enc, len, dec, 1);
    reps_d = t > 0.02 ? 1 : (int)(0.02 / (t > 1e-7 ? t : 1e-7)) + 1;
    for (r = 0; r < runs; r++) {
        enc_t[r] = time_encode(s, p, enc, cap, reps_e);
        dec_t[r] = time_decode(s, p, enc, len, dec, reps_d);
        if (enc_t[r] < 0 || dec_t[r] < 0) res.ok = 0;
    }
    qsort(enc_t, (size_t)runs, sizeof(double), bench_cmp_double);
    qsort(dec_t, (size_t)runs, sizeof(double), bench_cmp_double);
    res.enc_mbs = (double)p->n / enc_t[runs / 2] / 1e6;
    res.dec_mbs = (double)p->n / dec_t[runs / 2] / 1e6;
    /* the output of the last timed decode is the plane again */
    if (memcmp(dec, p->data, p->n) != 0) res.ok = 0;
    free(enc);
    free(dec);
    return res;
}

static const char *pass(int ok) { return ok ? "PASS" : "FAIL"; }

int main(int argc, char **argv) {
    const char *dir = NULL, *csv_path = NULL;
    plane pl[16];
    result res[16][N_STAGES];
    double h[16];
    int count = 0, runs = 7, i, all = 1;
    size_t k;
    FILE *csv = NULL;

    bench_ws = ptwm_ws_create();
    if (!bench_ws) return 1;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) csv_path = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--csv FILE] [--runs N] [CORPUS_DIR]\n", argv[0]);
            return 2;
        } else dir = argv[i];
    }
    if (runs < 1 || runs > 64) runs = 7;
    if (!dir) dir = getenv("PTWM_CORPUS");
    if (!dir) {
        /* from the source root or from a build directory inside it */
        FILE *probe = fopen("build-corpus/SHA256SUMS", "rb");
        dir = probe ? "build-corpus" : "../build-corpus";
        if (probe) fclose(probe);
    }
    if (!load_planes(dir, pl, &count)) return 1;
    if (csv_path && !(csv = fopen(csv_path, "w"))) {
        fprintf(stderr, "cannot write %s\n", csv_path);
        return 1;
    }
    if (csv)
        fprintf(csv, "plane,stage,bytes_in,bytes_out,bits_per_symbol,entropy_bits,"
                     "pct_over_entropy,encode_mbs,decode_mbs,round_trip\n");

    printf("%-18s %-9s %9s %9s %6s %6s %7s %8s %8s %s\n", "plane", "stage", "in", "out",
           "bits", "H0", "over%", "enc MB/s", "dec MB/s", "check");
    for (i = 0; i < count; i++) {
        h[i] = ptwm_entropy_order0(pl[i].data, pl[i].n);
        for (k = 0; k < N_STAGES; k++) {
            result *r = &res[i][k];
            double bits, over;
            *r = bench_one(&STAGES[k], &pl[i], runs);
            bits = 8.0 * (double)r->out / (double)pl[i].n;
            over = 100.0 * (bits / h[i] - 1.0);
            printf("%-18s %-9s %9zu %9zu %6.3f %6.3f %7.2f %8.0f %8.0f %s\n", pl[i].name,
                   STAGES[k].name, pl[i].n, r->out, bits, h[i], over, r->enc_mbs, r->dec_mbs,
                   r->ok ? "ok" : "FAILED");
            if (csv)
                fprintf(csv, "%s,%s,%zu,%zu,%.4f,%.4f,%.3f,%.1f,%.1f,%s\n", pl[i].name,
                        STAGES[k].name, pl[i].n, r->out, bits, h[i], over, r->enc_mbs,
                        r->dec_mbs, r->ok ? "ok" : "FAILED");
            if (!r->ok) all = 0;
        }
        fflush(stdout);
    }

    printf("\ntargets (zstd = ZSTD-3 on the same plane, same run)\n");
    for (i = 0; i < count; i++) {
        const result *hf = &res[i][S_HUF], *r0 = &res[i][S_RANS0], *z = &res[i][S_ZSTD];
        double floor_bytes = h[i] * (double)pl[i].n / 8.0;
        int s_huf = (double)hf->out <= floor_bytes * 1.02;
        int s_rans = (double)r0->out <= floor_bytes * 1.005;
        int d_huf = hf->dec_mbs >= 2.0 * z->dec_mbs;
        int e_huf = hf->enc_mbs >= 3.0 * z->enc_mbs;
        int d_rans = r0->dec_mbs >= z->dec_mbs;
        printf("%-18s HUFFMAN size<=H0+2%% %s (%+.2f%%)  RANS-o0 size<=H0+0.5%% %s (%+.2f%%)\n",
               pl[i].name, pass(s_huf), 100.0 * ((double)hf->out / floor_bytes - 1), pass(s_rans),
               100.0 * ((double)r0->out / floor_bytes - 1));
        printf("%-18s HUFFMAN dec>=2x zstd %s (%.2fx)  enc>=3x zstd %s (%.2fx)  RANS-o0 dec>=1x "
               "zstd %s (%.2fx)%s\n",
               "", pass(d_huf), hf->dec_mbs / z->dec_mbs, pass(e_huf), hf->enc_mbs / z->enc_mbs,
               pass(d_rans), r0->dec_mbs / z->dec_mbs,
               /* both sides copy: a speed ratio of two memcpys says nothing */
               hf->out == pl[i].n + 1 && z->out > pl[i].n ? "  [HUFFMAN and zstd both stored raw]"
                                                          : "");
    }
    if (csv) fclose(csv);
    for (i = 0; i < count; i++) free(pl[i].data);
    return all ? 0 : 1;
}
