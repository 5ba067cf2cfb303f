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
#include <dirent.h>
#include <sys/stat.h>
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

/* One file's (or shard's) tensors of a dtype, with the buffers of its runs:
 * its image (ptwm_compress_bound's size, reused from run to run), one
 * thread's image to check the others against, and the decoded output. */
typedef struct tq_part {
    const bc_set *s;
    uint8_t *blob, *ref, *all, **dsts;
    size_t cap, ref_len, *idx, *sizes;
} tq_part;

static ptwm_error part_init(tq_part *p, const bc_set *s, ptwm_err *err) {
    size_t i;
    uint64_t off = 0;
    memset(p, 0, sizeof(*p));
    p->s = s;
    p->cap = ptwm_compress_bound(s->d, s->n, NULL, NULL);
    p->blob = p->cap ? (uint8_t *)malloc(p->cap) : NULL;
    p->all = (uint8_t *)malloc((size_t)s->raw + 1);
    p->idx = (size_t *)calloc(s->n + 1, sizeof(size_t));
    p->sizes = (size_t *)calloc(s->n + 1, sizeof(size_t));
    p->dsts = (uint8_t **)calloc(s->n + 1, sizeof(uint8_t *));
    if (!p->blob || !p->all || !p->idx || !p->sizes || !p->dsts)
        return bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (i = 0; i < s->n; i++) {
        p->idx[i] = i;
        p->sizes[i] = (size_t)s->d[i].nbytes;
        p->dsts[i] = p->all + off;
        off += p->sizes[i];
    }
    return PTWM_OK;
}

static void part_free(tq_part *p) {
    free(p->blob);
    free(p->ref);
    free(p->all);
    free(p->idx);
    free(p->sizes);
    free(p->dsts);
}

/* One round trip of part p on `threads` threads, its times added to run r
 * of *m. On the first run its image's bytes are checked against one
 * thread's (kept as the reference when there is none yet) and the decoded
 * bytes against the input. */
static ptwm_error one_run(tq_part *p, ptwm_ctx *ctx, unsigned threads, int r, tq_runs *m,
                          ptwm_err *err) {
    ptwm_cparams cp = PTWM_CPARAMS_DEFAULT;
    const bc_set *s = p->s;
    size_t len = 0, i;
    ptwm_reader *rd = NULL;
    double t0, c0;
    ptwm_error rc;
    cp.threads = (int)threads;
    cp.ctx = ctx;
    t0 = bench_now();
    c0 = cpu_now();
    if ((rc = ptwm_compress_into(s->d, s->n, NULL, &cp, p->blob, p->cap, &len, err))) return rc;
    m->cw[r] += bench_now() - t0;
    m->cc[r] += cpu_now() - c0;
    if (r == 0 && p->ref && (len != p->ref_len || memcmp(p->blob, p->ref, len) != 0))
        rc = bc_fail(err, PTWM_ERR_MISMATCH, "the image differs from one thread's");
    t0 = bench_now();
    c0 = cpu_now();
    if (!rc) rc = ptwm_reader_open_memory(p->blob, len, "bench", &rd, err);
    if (!rc) ptwm_reader_set_threads(rd, (int)threads);
    if (!rc) rc = ptwm_reader_set_ctx(rd, ctx, err);
    if (!rc) rc = ptwm_reader_decode_many(rd, p->idx, (void *const *)p->dsts, p->sizes, s->n, err);
    m->dw[r] += bench_now() - t0;
    m->dc[r] += cpu_now() - c0;
    ptwm_reader_close(rd);
    for (i = 0; i < s->n && !rc && r == 0; i++)
        if (memcmp(p->dsts[i], s->d[i].data, p->sizes[i]) != 0)
            rc = bc_fail(err, PTWM_ERR_MISMATCH, "round trip: decoded bytes differ");
    if (!rc && !p->ref) {
        if (!(p->ref = (uint8_t *)malloc(len + 1))) return bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
        memcpy(p->ref, p->blob, len);
        p->ref_len = len;
    }
    return rc;
}

/* Every thread count 1..maxt on the sets of one file, or of a directory's
 * shards one after another (one image each, as `ptwm compress DIR` writes
 * one file per shard), `runs` times, turns rotating; one context kept
 * across them all. */
static ptwm_error measure_sets(const bc_set *const *sets, size_t nsets, unsigned maxt, int runs,
                               tq_row *rows, size_t *coded, ptwm_err *err) {
    tq_runs *m = (tq_runs *)calloc(maxt, sizeof(tq_runs));
    tq_part *parts = (tq_part *)calloc(nsets, sizeof(tq_part));
    tq_runs warm; /* run 0's times, not kept */
    ptwm_ctx *ctx = NULL;
    ptwm_error rc = PTWM_OK;
    size_t q;
    int r;
    unsigned k;
    memset(&warm, 0, sizeof(warm));
    if (!m || !parts) rc = bc_fail(err, PTWM_ERR_NOMEM, "out of memory");
    for (q = 0; !rc && q < nsets; q++) rc = part_init(&parts[q], sets[q], err);
    if (!rc) rc = ptwm_ctx_create(&ctx, err);
    /* Run 0 of each count checks; runs 1..runs are timed (run 0 warms the
     * context's buffers and the parked threads). */
    for (r = 0; r <= runs && !rc; r++)
        for (k = 0; k < maxt && !rc; k++) {
            unsigned t = 1 + (k + (unsigned)r) % maxt;
            for (q = 0; q < nsets && !rc; q++)
                rc = one_run(&parts[q], ctx, t, r ? r - 1 : 0, r ? &m[t - 1] : &warm, err);
        }
    for (k = 0; k < maxt && !rc; k++) {
        rows[k].cw = bench_median(m[k].cw, runs);
        rows[k].cc = bench_median(m[k].cc, runs);
        rows[k].dw = bench_median(m[k].dw, runs);
        rows[k].dc = bench_median(m[k].dc, runs);
    }
    *coded = 0;
    for (q = 0; q < nsets && parts; q++) {
        *coded += parts[q].ref_len;
        part_free(&parts[q]);
    }
    ptwm_ctx_free(ctx);
    free(parts);
    free(m);
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

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .safetensors files of directory `dir`, sorted (shards in order); their
 * count into *n. */
static char **dir_shards(const char *dir, size_t *n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    if (!d) return NULL;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors") != 0) continue;
        if (*n == cap) {
            char **nv = (char **)realloc(v, (cap ? 2 * cap : 16) * sizeof(char *));
            if (!nv) break;
            v = nv;
            cap = cap ? 2 * cap : 16;
        }
        if (!(v[*n] = (char *)malloc(strlen(dir) + len + 2))) break;
        sprintf(v[(*n)++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (v) qsort(v, *n, sizeof(char *), by_name);
    return v;
}

/* One row per dtype: of a file's tensors, or of a directory's shards one
 * after another. */
static int bench_path(const char *path, unsigned maxt, int runs, FILE *csv) {
    struct stat st;
    bc_file *files = NULL;
    char **shards = NULL, name[512];
    size_t nf = 0, nshards = 0, i, k;
    int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode), failed = 0;
    const char *base = strrchr(path, '/') && strrchr(path, '/')[1] ? strrchr(path, '/') + 1 : path;
    ptwm_err err;
    if (dir) {
        if (!(shards = dir_shards(path, &nshards)) || !(nf = nshards)) {
            fprintf(stderr, "bench_threads: %s: no .safetensors files\n", path);
            free(shards);
            return 1;
        }
        snprintf(name, sizeof name, "%s/ (%zu shards)", base, nf);
    } else {
        nf = 1;
        snprintf(name, sizeof name, "%s", base);
    }
    files = (bc_file *)calloc(nf, sizeof(bc_file));
    for (i = 0; files && i < nf; i++)
        if (bc_file_load(dir ? shards[i] : path, &files[i], &err)) {
            fprintf(stderr, "bench_threads: %s: %s\n", dir ? shards[i] : path, err.message);
            failed = 1;
            nf = i;
        }
    for (k = 0; files && !failed && k < PTWM_DTYPE_COUNT; k++) {
        const bc_set **sets = (const bc_set **)calloc(nf, sizeof(bc_set *));
        bc_set all;
        size_t n = 0, s;
        tq_row rows[MAX_THREADS];
        size_t coded = 0;
        memset(&all, 0, sizeof(all));
        all.dtype = (ptwm_dtype)k;
        for (i = 0; sets && i < nf; i++)
            for (s = 0; s < files[i].nsets; s++)
                if (files[i].sets[s].dtype == (ptwm_dtype)k) {
                    sets[n++] = &files[i].sets[s];
                    all.raw += files[i].sets[s].raw;
                }
        if (n && measure_sets(sets, n, maxt, runs, rows, &coded, &err)) {
            fprintf(stderr, "bench_threads: %s: %s\n", path, err.message);
            failed = 1;
        } else if (n) {
            report(csv, name, &all, coded, rows, maxt, runs);
            fflush(stdout);
        }
        free(sets);
    }
    for (i = 0; i < nf; i++) bc_file_free(&files[i]);
    for (i = 0; i < nshards; i++) free(shards[i]);
    free(shards);
    free(files);
    return failed || !files;
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
    for (; a < argc; a++)
        if (bench_path(argv[a], maxt, runs, csv)) failed = 1;
    if (csv) fclose(csv);
    return failed;
}
