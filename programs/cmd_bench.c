/* ptwm bench: in-memory compress/decompress of every tensor beside libzstd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_core.h"
#include "cli.h"
#include "options.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm bench PATH... [options]\n\n"
            "For each safetensors or .ptwm file, in memory: compress every tensor into a\n"
            ".ptwm image and decode it again (checking the round trip byte for byte),\n"
            "and beside it compress and decompress the same tensors with zstd level 3\n"
            "(one frame per tensor, one thread). Prints raw and coded bytes, the ratio\n"
            "(coded as %% of raw) and MB/s (medians of alternating runs), per file,\n"
            "per dtype within a file, and per dtype over all files.\n\n"
            "options:\n"
            "  --threads N     ptwm threads (default 1, to compare with one-thread zstd;\n"
            "                  0 = all cores)\n"
            "  --method NAME   huffman, zstd, microscale (default), rans, identity\n"
            "  --chunk SIZE    raw bytes per chunk (default 1MiB)\n"
            "  --runs N        timed runs, median reported (default 5, max 15)\n"
            "  --json          machine-readable output on stdout\n"
            "  -h, --help      this help\n");
}

typedef struct bench_opts {
    ptwm_cparams p;
    int runs, json;
} bench_opts;

static void print_row(const char *label, const char *dtype, const bc_result *r) {
    printf("%-34.34s %-5s %12llu %12llu %6.2f%% %8.1f %8.1f | %6.2f%% %7.1f %7.1f | %5.2fx %5.2fx\n",
           label, dtype, (unsigned long long)r->raw, (unsigned long long)r->coded,
           bc_pct(r->coded, r->raw), bc_mbs(r->raw, r->c_s), bc_mbs(r->raw, r->d_s),
           bc_pct(r->zcoded, r->raw), bc_mbs(r->raw, r->zc_s), bc_mbs(r->raw, r->zd_s),
           r->c_s > 0 ? r->zc_s / r->c_s : 0.0, r->d_s > 0 ? r->zd_s / r->d_s : 0.0);
}

static void json_row(int first, const char *kind, const char *label, const char *dtype,
                     const bc_result *r) {
    printf("%s\n    {\"%s\": \"", first ? "" : ",", kind);
    {
        const char *c;
        for (c = label; *c; c++) {
            if (*c == '"' || *c == '\\') putchar('\\');
            putchar(*c);
        }
    }
    printf("\", \"dtype\": \"%s\", \"raw_bytes\": %llu, \"coded_bytes\": %llu, \"ratio_pct\": %.3f, "
           "\"compress_mbs\": %.2f, \"decompress_mbs\": %.2f, \"zstd3_bytes\": %llu, "
           "\"zstd3_ratio_pct\": %.3f, \"zstd3_compress_mbs\": %.2f, \"zstd3_decompress_mbs\": %.2f}",
           dtype, (unsigned long long)r->raw, (unsigned long long)r->coded, bc_pct(r->coded, r->raw),
           bc_mbs(r->raw, r->c_s), bc_mbs(r->raw, r->d_s), (unsigned long long)r->zcoded,
           bc_pct(r->zcoded, r->raw), bc_mbs(r->raw, r->zc_s), bc_mbs(r->raw, r->zd_s));
}

static int parse(int argc, char **argv, bench_opts *o, const char ***paths, int *npaths) {
    static const ptwm_cparams defaults = PTWM_CPARAMS_DEFAULT;
    int i;
    o->p = defaults;
    o->p.threads = 1;
    o->runs = 5;
    o->json = 0;
    *npaths = 0;
    *paths = (const char **)calloc((size_t)argc + 1, sizeof(char *));
    if (!*paths) return CLI_BAD_INPUT;
    for (i = 1; i < argc; i++) {
        const char *v = NULL;
        int k;
        if (!strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if ((k = opt_value("bench", argc, argv, &i, "--threads", &v)) != 0) {
            if (k < 0 || opt_threads("bench", v, &o->p.threads) != CLI_OK) return CLI_USAGE;
        } else if ((k = opt_value("bench", argc, argv, &i, "--method", &v)) != 0) {
            if (k < 0 || opt_method("bench", v, &o->p.method) != CLI_OK) return CLI_USAGE;
        } else if ((k = opt_value("bench", argc, argv, &i, "--chunk", &v)) != 0) {
            if (k < 0 || opt_chunk("bench", v, &o->p.chunk_size) != CLI_OK) return CLI_USAGE;
        } else if ((k = opt_value("bench", argc, argv, &i, "--runs", &v)) != 0) {
            char *end;
            long n = k < 0 ? 0 : strtol(v, &end, 10);
            if (k < 0 || *end || n < 1 || n > BC_MAX_RUNS)
                return cli_usage_error("bench", "--runs wants 1..%d", BC_MAX_RUNS);
            o->runs = (int)n;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return opt_unexpected("bench", argv[i]);
        } else {
            (*paths)[(*npaths)++] = argv[i];
        }
    }
    if (!*npaths) return cli_usage_error("bench", "no input file");
    return CLI_OK;
}

static int run(int argc, char **argv) {
    bench_opts o;
    const char **paths = NULL;
    int npaths = 0, i, rc, first = 1;
    bc_result groups[PTWM_DTYPE_COUNT], total;
    int seen[PTWM_DTYPE_COUNT];
    size_t d;
    if ((rc = parse(argc, argv, &o, &paths, &npaths)) != CLI_OK) {
        free(paths);
        return rc;
    }
    memset(groups, 0, sizeof(groups));
    memset(seen, 0, sizeof(seen));
    memset(&total, 0, sizeof(total));
    if (o.json)
        printf("{\"method\": \"%s\", \"threads\": %d, \"chunk_size\": %llu, \"runs\": %d, "
               "\"isa\": \"%s\", \"rows\": [",
               ptwm_method_name(o.p.method), o.p.threads,
               (unsigned long long)(o.p.chunk_size ? o.p.chunk_size : PTWM_DEFAULT_CHUNK), o.runs,
               ptwm_isa_name(ptwm_isa_level()));
    else
        printf("method %s, %d thread%s, chunk %llu, median of %d runs, instruction set %s; "
               "zstd level 3, 1 thread\n"
               "%-34s %-5s %12s %12s %7s %8s %8s | %7s %7s %7s | %6s %6s\n",
               ptwm_method_name(o.p.method), o.p.threads, o.p.threads == 1 ? "" : "s",
               (unsigned long long)(o.p.chunk_size ? o.p.chunk_size : PTWM_DEFAULT_CHUNK), o.runs,
               ptwm_isa_name(ptwm_isa_level()),
               "file", "dtype", "raw", "ptwm", "ratio", "comp", "dec", "zstd-3", "comp", "dec",
               "c/zstd", "d/zstd");
    for (i = 0; i < npaths; i++) {
        bc_file f;
        bc_result fr;
        ptwm_err err;
        size_t s;
        const char *base = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        if (bc_file_load(paths[i], &f, &err)) {
            if (o.json) printf("]}\n");
            free(paths);
            return cli_report(&err);
        }
        memset(&fr, 0, sizeof(fr));
        for (s = 0; s < f.nsets; s++) {
            bc_result r;
            const char *dt = ptwm_dtype_name(f.sets[s].dtype);
            if (bc_measure(&f.sets[s], &o.p, o.runs, 3, &r, &err)) {
                fprintf(stderr, "ptwm: %s: %s tensors: ", paths[i], dt);
                bc_file_free(&f);
                if (o.json) printf("]}\n");
                free(paths);
                return cli_report(&err);
            }
            if (f.nsets > 1) {
                if (o.json) json_row(first, "file_dtype", base, dt, &r);
                else print_row(base, dt, &r);
                first = 0;
            }
            bc_add(&fr, &r);
            bc_add(&groups[f.sets[s].dtype], &r);
            seen[f.sets[s].dtype]++;
        }
        if (o.json) json_row(first, "file", base, f.nsets == 1 ? ptwm_dtype_name(f.sets[0].dtype) : "mixed", &fr);
        else print_row(base, f.nsets == 1 ? ptwm_dtype_name(f.sets[0].dtype) : "mixed", &fr);
        first = 0;
        bc_add(&total, &fr);
        bc_file_free(&f);
    }
    if (!o.json) printf("per dtype, all files:\n");
    for (d = 0; d < PTWM_DTYPE_COUNT; d++)
        if (seen[d]) {
            if (o.json) json_row(0, "dtype_group", ptwm_dtype_name((ptwm_dtype)d), ptwm_dtype_name((ptwm_dtype)d), &groups[d]);
            else print_row("  all files", ptwm_dtype_name((ptwm_dtype)d), &groups[d]);
        }
    if (o.json) {
        json_row(0, "total", "all", "all", &total);
        printf("\n]}\n");
    } else {
        print_row("total", "", &total);
    }
    free(paths);
    return CLI_OK;
}

const cli_command cli_cmd_bench = {"bench", "compress and decompress in memory beside zstd -3", run, help};
