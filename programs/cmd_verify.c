/* ptwm verify: check every CRC and hash of a .ptwm file or directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm verify SRC [options]\n\n"
            "Check SRC, a .ptwm file or a .ptwm checkpoint directory: the index against\n"
            "its shards (tensors and totals), then every tensor of every shard decoded\n"
            "with every chunk payload CRC32, plane CRC32 and payload XXH3-128 checked.\n"
            "Each damaged shard is reported with the tensor and chunk. Every other file\n"
            "of a directory (the index, config.json, tokenizer files...) is checked\n"
            "against the size and XXH3-128 its file record (model.ptwm.files.json) lists;\n"
            "each damaged or missing file is named. Tensors that carry no check at all\n"
            "(files before format version 4 written without CRCs and hashes), and files\n"
            "of a directory written without a file record (or not listed in it), cannot\n"
            "be verified: they are named and the exit status is 1.\n"
            "A safetensors file or directory is validated structurally (it carries no\n"
            "checksums).\n\n"
            "options:\n"
            "  --threads N     decoding threads (0 = all cores, the default)\n"
            "  --base BASE     the base SRC was compressed against ('ptwm compress --base'),\n"
            "                  needed to decode its tensors coded against one\n"
            "  -q, --quiet     print only failures\n"
            "  -h, --help      this help\n\n"
            "exit status: 0 everything verified, 1 damage, bad input or tensors that could\n"
            "not be verified, 2 bad usage\n");
}

/* SRC as printed: escaped, like every name that reaches the terminal. */
static char shown[CLI_ESCAPED_MAX(4096)];
/* --base, opened (NULL: none). */
static ptwm_source *base;

/* ptwm_reader_verify per shard, continuing past a damaged one. */
static int verify_shards(ptwm_reader *const *shards, const char *const *names, size_t n,
                         int quiet) {
    size_t i, bad = 0, unverified = 0;
    /* Paths, shard names and messages come from the input: escaped for the terminal. */
    static char name[CLI_ESCAPED_MAX(256)], msg[CLI_ESCAPED_MAX(PTWM_ERR_MESSAGE_MAX)];
    for (i = 0; i < n; i++) {
        ptwm_err err;
        size_t unchecked = ptwm_reader_unchecked_count(shards[i]);
        cli_escape(names[i], name, sizeof name);
        if ((base && ptwm_reader_set_base(shards[i], base, &err) != PTWM_OK) ||
            ptwm_reader_verify(shards[i], &err) != PTWM_OK) {
            bad++;
            fprintf(stderr, "%s: %s: FAILED: %s: %s\n", shown, name, ptwm_error_name(err.code),
                    cli_escape(err.message, msg, sizeof msg));
        } else if (unchecked) {
            unverified++;
            fprintf(stderr,
                    "%s: %s: NOT VERIFIED: %zu of %zu tensors carry no CRC or hash (written "
                    "without them before format version 4): they decode, but damage to them "
                    "cannot be detected\n",
                    shown, name, unchecked, ptwm_reader_count(shards[i]));
        } else if (!quiet) {
            printf("%s: %s: OK (%zu tensors)\n", shown, name, ptwm_reader_count(shards[i]));
        }
    }
    if (bad) {
        fprintf(stderr, "%s: %zu of %zu shard%s damaged\n", shown, bad, n, n == 1 ? "" : "s");
        return CLI_BAD_INPUT;
    }
    if (unverified) {
        fprintf(stderr, "%s: %zu of %zu shard%s could not be verified\n", shown, unverified, n,
                n == 1 ? "" : "s");
        return CLI_BAD_INPUT;
    }
    if (!quiet) printf("%s: %zu shard%s verified\n", shown, n, n == 1 ? "" : "s");
    return CLI_OK;
}

/* The other files of a directory: counted by outcome, each problem named. */
typedef struct file_tally {
    int quiet, has_record;
    size_t ok, bad, unverified;
} file_tally;

static void on_file(void *ctx, const char *name, ptwm_file_check result, const ptwm_err *err) {
    static char nm[CLI_ESCAPED_MAX(4096)], msg[CLI_ESCAPED_MAX(PTWM_ERR_MESSAGE_MAX)];
    file_tally *t = (file_tally *)ctx;
    cli_escape(name, nm, sizeof nm);
    if (result == PTWM_FILE_OK) {
        t->ok++;
        if (!t->quiet) printf("%s: %s: OK\n", shown, nm);
    } else if (result == PTWM_FILE_UNRECORDED) {
        t->unverified++;
        fprintf(stderr, "%s: %s: NOT VERIFIED: %s\n", shown, nm,
                t->has_record ? "not listed in the file record (" PTWM_FILES_NAME ")"
                              : "the directory has no file record (" PTWM_FILES_NAME "): "
                                "written by an older ptwm, its other files carry no check");
    } else {
        t->bad++;
        fprintf(stderr, "%s: %s: FAILED: %s: %s\n", shown, nm, ptwm_error_name(err->code),
                cli_escape(err->message, msg, sizeof msg));
    }
}

/* Every file besides the shards against the file record. */
static int verify_files(const ptwm_ptdir *d, int quiet) {
    file_tally t;
    ptwm_err err;
    memset(&t, 0, sizeof t);
    t.quiet = quiet;
    t.has_record = ptwm_ptdir_has_file_record(d);
    if (ptwm_ptdir_check_files(d, on_file, &t, &err) != PTWM_OK) return cli_report(&err);
    if (t.bad) {
        fprintf(stderr, "%s: %zu of %zu other files damaged or missing\n", shown, t.bad,
                t.ok + t.bad + t.unverified);
        return CLI_BAD_INPUT;
    }
    if (t.unverified) {
        fprintf(stderr, "%s: %zu of %zu other files could not be verified\n", shown, t.unverified,
                t.ok + t.unverified);
        return CLI_BAD_INPUT;
    }
    if (!quiet && t.ok)
        printf("%s: %zu other file%s verified\n", shown, t.ok, t.ok == 1 ? "" : "s");
    return CLI_OK;
}

static int verify_dir(const char *src, int threads, int quiet) {
    ptwm_ptdir *d;
    ptwm_err err;
    ptwm_reader **shards;
    const char **names;
    size_t i, n;
    int rc;
    if (!cli_has_file(src, PTWM_INDEX_NAME) && !cli_has_file(src, PTWM_SINGLE_NAME)) {
        /* Not a .ptwm directory: a safetensors one is validated by opening it,
         * and if that fails, its error is the one that matters. */
        ptwm_stdir *sd;
        if (ptwm_stdir_open(src, PTWM_OPEN_PREAD, &sd, &err) != PTWM_OK) return cli_report(&err);
        if (!quiet)
            printf("%s: safetensors checkpoint, %zu tensors: structure valid (no checksums to "
                   "check)\n", shown, ptwm_stdir_count(sd));
        ptwm_stdir_close(sd);
        return CLI_OK;
    }
    if (ptwm_ptdir_open(src, &d, &err) != PTWM_OK) {
        return cli_report(&err);
    }
    ptwm_ptdir_set_threads(d, threads);
    n = ptwm_ptdir_shard_count(d);
    shards = (ptwm_reader **)calloc(n + 1, sizeof *shards);
    names = (const char **)calloc(n + 1, sizeof *names);
    if (!shards || !names) {
        free(shards);
        free(names);
        ptwm_ptdir_close(d);
        fprintf(stderr, "ptwm: out of memory\n");
        return CLI_BAD_INPUT;
    }
    for (i = 0; i < n; i++) {
        shards[i] = ptwm_ptdir_shard(d, i);
        names[i] = ptwm_ptdir_shard_name(d, i);
    }
    if (!quiet && ptwm_ptdir_index(d))
        printf("%s: index matches its %zu shards (%llu raw bytes, %llu stored)\n", shown, n,
               (unsigned long long)ptwm_ptdir_total_size(d),
               (unsigned long long)ptwm_ptdir_compressed_total_size(d));
    rc = verify_shards(shards, names, n, quiet);
    if (verify_files(d, quiet) != CLI_OK) rc = CLI_BAD_INPUT;
    free(shards);
    free(names);
    ptwm_ptdir_close(d);
    return rc;
}

static int verify_file(const char *src, int threads, int quiet) {
    ptwm_reader *r;
    ptwm_err err;
    int rc;
    const char *name = "model";
    if (ptwm_reader_open(src, &r, &err) != PTWM_OK) {
        ptwm_st *st;
        /* Not a .ptwm file: as a safetensors file, its own error is the one to show. */
        if (err.code == PTWM_ERR_BAD_MAGIC) {
            if (ptwm_st_open(src, PTWM_OPEN_PREAD, &st, &err) != PTWM_OK) return cli_report(&err);
            if (!quiet)
                printf("%s: safetensors file, %zu tensors: structure valid (no checksums to "
                       "check)\n", shown, ptwm_st_count(st));
            ptwm_st_close(st);
            return CLI_OK;
        }
        return cli_report(&err);
    }
    ptwm_reader_set_threads(r, threads);
    name = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
    rc = verify_shards(&r, &name, 1, quiet);
    ptwm_reader_close(r);
    return rc;
}

static int run(int argc, char **argv) {
    const char *src = NULL, *base_path = NULL;
    int i, threads = 0, quiet = 0, rc;
    ptwm_err err;
    for (i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = 1;
        } else if ((m = opt_value("verify", argc, argv, &i, "--threads", &v)) != 0) {
            if (m < 0 || opt_threads("verify", v, &threads) != CLI_OK) return CLI_USAGE;
        } else if ((m = opt_value("verify", argc, argv, &i, "--base", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            base_path = v;
        } else if (argv[i][0] == '-' || src) {
            return opt_unexpected("verify", argv[i]);
        } else {
            src = argv[i];
        }
    }
    if (!src) return cli_usage_error("verify", "missing SRC");
    cli_escape(src, shown, sizeof shown);
    if (base_path && ptwm_source_open(base_path, PTWM_SOURCE_AUTO, &base, &err) != PTWM_OK)
        return cli_report(&err);
    rc = cli_is_dir(src) ? verify_dir(src, threads, quiet) : verify_file(src, threads, quiet);
    ptwm_source_close(base);
    base = NULL;
    return rc;
}

const cli_command cli_cmd_verify = {"verify", "check every CRC and hash of a .ptwm file or directory",
                                    run, help};
