/* How compress and decompress scale with threads, in memory (the scaling
 * table of docs/SCALING.md; bench/bench_scaling.sh runs it beside the whole
 * processes). For each file and dtype: the same tensors compressed with
 * ptwm_compress_into (into one buffer of ptwm_compress_bound's size, reused
 * from run to run, as a program compressing in a loop would, and as zstd's
 * bench does) and decoded with one ptwm_reader_decode_many, on 1..N threads, the thread counts taking turns run after run (a burst of load on
 * a shared machine falls on all of them alike), one ptwm_ctx kept across the
 * runs; wall and process CPU seconds of each call, medians of the runs. The
 * first run of each count is checked: the image's bytes equal one thread's,
 * and the decoded bytes the input's.
 *
 * usage: bench_threads [--runs N] [--threads N] [--csv FILE] PATH...
 *   --threads N  measure 1..N threads (default: the machine's cores, at
 *                least 2)
 * Prints one line per file and dtype; the CSV has one row per file, dtype,
 * operation and thread count:
 *   file,dtype,op,threads,raw_bytes,coded_bytes,wall_s,cpu_s,runs */
#include <unistd.h>

/* (bench_core.h's other helpers serve ptwm bench and bench_container) */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../programs/bench_core.h"

#define MAX_THREADS 64

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Medians of one thread count: compress and decompress, wall and CPU. */
typedef struct tq_row {
    double cw, cc, dw, dc;
} tq_row;

typedef struct tq_runs {
    double cw[BC_MAX_RUNS], cc[BC_MAX_RUNS], dw[BC_MAX_RUNS], dc[BC_MAX_RUNS];
} tq_runs;

/* One round trip on `threads` threads into run r of *m; the image's length
 * into *len and, on the first run, its bytes checked against ref (one
 * thread's image; NULL: kept as the reference) and the decoded bytes
 * against the input. */
static ptwm_error one_run(const bc_set *s, ptwm_ctx *ctx, unsigned threads, int r, tq_runs *m,
                          uint8_t **ref, size_t *ref_len, uint8_t *const *dsts, const size_t *idx,
                          const size_t *sizes, uint8_t *blob, size_t cap, ptwm_err *err) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    size_t len = 0, i;
    ptwm_reader *rd = NULL;
    double t0, c0;
    ptwm_error rc;
    p.threads = (int)threads;
    p.ctx = ctx;
    t0 = bench_now();
    c0 = cpu_now();
    if ((rc = ptwm_compress_into(s->d, s->n, NULL, &p, blob, cap, &len, err))) return rc;
    m->cw[r] = bench_now() - t0;
    m->cc[r] = cpu_now() - c0;
    if (r == 0 && *ref && (len != *ref_len || memcmp(blob, *ref, len) != 0))
        rc = bc_fail(err, PTWM_ERR_MISMATCH, "the image differs from one thread's");
    t0 = bench_now();
    c0 = cpu_now();
    if (!rc) rc = ptwm_reader_open_memory(blob, len, "bench", &rd, err);
    if (!rc) ptwm_reader_set_threads(rd, (int)threads);
    if (!rc) rc = ptwm_reader_set_ctx(rd, ctx, err);
    if (!rc) rc = ptwm_reader_decode_many(rd, idx, (void *const *)dsts, sizes, s->n, err);
    m->dw[r] = bench_now() - t0;
    m->dc[r] = cpu_now() - c0;
    ptwm_reader_close(rd);
    for (i = 0; i < s->n && !rc && r == 0; i++)
        if (memcmp(dsts[i], s->d[i].data, sizes[i]) != 0)
            rc = bc_fail(err, PTWM_ERR_MISMATCH, "round trip: decoded bytes differ");
    if (!rc && !*ref) {
        if (!(*ref = (uint8_t *)malloc(len + 1))) return bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
        memcpy(*ref, blob, len);
        *ref_len = len;
    }
    return rc;
}

/* Every thread count 1..maxt on set s, `runs` times, turns rotating. */
static ptwm_error measure_set(const bc_set *s, unsigned maxt, int runs, tq_row *rows,
                              size_t *coded, ptwm_err *err) {
    tq_runs *m = (tq_runs *)calloc(maxt, sizeof(tq_runs));
    uint8_t *all = (uint8_t *)malloc((size_t)s->raw + 1), **dsts = NULL, *ref = NULL;
    size_t cap = ptwm_compress_bound(s->d, s->n, NULL, NULL);
    uint8_t *blob = cap ? (uint8_t *)malloc(cap) : NULL;
    size_t *idx = (size_t *)calloc(s->n + 1, sizeof(size_t));
    size_t *sizes = (size_t *)calloc(s->n + 1, sizeof(size_t)), i, ref_len = 0;
    uint64_t off = 0;
    ptwm_ctx *ctx = NULL;
    ptwm_error rc = PTWM_OK;
    int r;
    unsigned k;
    dsts = (uint8_t **)calloc(s->n + 1, sizeof(uint8_t *));
    if (!m || !all || !blob || !idx || !sizes || !dsts) rc = bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
    if (!rc) rc = ptwm_ctx_create(&ctx, err);
    for (i = 0; !rc && i < s->n; i++) {
        idx[i] = i;
        sizes[i] = (size_t)s->d[i].nbytes;
        dsts[i] = all + off;
        off += sizes[i];
    }
    /* Run 0 of each count checks; runs 1..runs are timed (run 0 warms the
     * context's buffers and the parked threads). */
    for (r = 0; r <= runs && !rc; r++)
        for (k = 0; k < maxt && !rc; k++) {
            unsigned t = 1 + (k + (unsigned)r) % maxt;
            rc = one_run(s, ctx, t, r ? r - 1 : 0, &m[t - 1], &ref, &ref_len, dsts, idx, sizes, blob,
                         cap, err);
        }
    for (k = 0; k < maxt && !rc; k++) {
        rows[k].cw = bench_median(m[k].cw, runs);
        rows[k].cc = bench_median(m[k].cc, runs);
        rows[k].dw = bench_median(m[k].dw, runs);
        rows[k].dc = bench_median(m[k].dc, runs);
    }
    *coded = ref_len;
    free(ref);
    free(blob);
    ptwm_ctx_free(ctx);
    free(m);
    free(all);
    free(idx);
    free(sizes);
    free(dsts);
    return rc;
}

static void report(FILE *csv, const char *file, const bc_set *s, size_t coded, const tq_row *rows,
                   unsigned maxt, int runs) {
    unsigned k;
    double mb = (double)s->raw / 1e6;
    printf("%-34s %-5s %8.1f MB", file, ptwm_dtype_name(s->dtype), mb);
    for (k = 0; k < maxt; k++) {
        printf(" | %uT c %6.0f MB/s %.3fs cpu", k + 1, mb / rows[k].cw, rows[k].cc);
        if (k) printf(" (%.2fx, cpu %.2fx)", rows[0].cw / rows[k].cw, rows[k].cc / rows[0].cc);
        printf(" d %6.0f MB/s", mb / rows[k].dw);
        if (k) printf(" (%.2fx)", rows[0].dw / rows[k].dw);
    }
    printf("\n");
    if (!csv) return;
    for (k = 0; k < maxt; k++) {
        fprintf(csv, "%s,%s,compress,%u,%llu,%zu,%.6f,%.6f,%d\n", file, ptwm_dtype_name(s->dtype), k + 1,
                (unsigned long long)s->raw, coded, rows[k].cw, rows[k].cc, runs);
        fprintf(csv, "%s,%s,decompress,%u,%llu,%zu,%.6f,%.6f,%d\n", file, ptwm_dtype_name(s->dtype), k + 1,
                (unsigned long long)s->raw, coded, rows[k].dw, rows[k].dc, runs);
    }
}

static int usage(void) {
    fprintf(stderr, "usage: bench_threads [--runs N] [--threads N] [--csv FILE] PATH...\n");
    return 2;
}

int main(int argc, char **argv) {
    int runs = 7, a, failed = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned maxt = cores > 2 ? (unsigned)cores : 2;
    FILE *csv = NULL;
    for (a = 1; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--runs") && a + 1 < argc) runs = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) maxt = (unsigned)atoi(argv[++a]);
        else if (!strcmp(argv[a], "--csv") && a + 1 < argc) {
            if (!(csv = fopen(argv[++a], "a"))) {
                perror(argv[a]);
                return 2;
            }
        } else return usage();
    }
    if (a == argc || runs < 1 || runs > BC_MAX_RUNS || maxt < 1 || maxt > MAX_THREADS) return usage();
    for (; a < argc; a++) {
        bc_file f;
        ptwm_err err;
        size_t s;
        const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
        if (bc_file_load(argv[a], &f, &err)) {
            fprintf(stderr, "bench_threads: %s: %s\n", argv[a], err.message);
            failed = 1;
            continue;
        }
        for (s = 0; s < f.nsets; s++) {
            tq_row rows[MAX_THREADS];
            size_t coded = 0;
            if (measure_set(&f.sets[s], maxt, runs, rows, &coded, &err)) {
                fprintf(stderr, "bench_threads: %s: %s\n", argv[a], err.message);
                failed = 1;
                continue;
            }
            report(csv, base, &f.sets[s], coded, rows, maxt, runs);
            fflush(stdout);
        }
        bc_file_free(&f);
    }
    if (csv) fclose(csv);
    return failed;
}
