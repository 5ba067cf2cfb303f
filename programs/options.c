/* Option parsing shared by compress, decompress, verify and inspect. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "progress.h"

int opt_value(const char *cmd, int argc, char **argv, int *i, const char *name,
              const char **value) {
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n] != 0) return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int opt_size(const char *cmd, const char *name, const char *text, uint64_t *out) {
    ptwm_err err;
    if (ptwm_parse_size(text, out, &err) != PTWM_OK)
        return cli_usage_error(cmd, "%s: %s", name, err.message);
    if (*out == 0) return cli_usage_error(cmd, "%s: must be more than 0 bytes", name);
    return CLI_OK;
}

int opt_chunk(const char *cmd, const char *text, uint64_t *out) {
    int rc = opt_size(cmd, "--chunk", text, out);
    if (rc != CLI_OK) return rc;
    if (*out < PTWM_MIN_CHUNK || *out > PTWM_MAX_CHUNK)
        return cli_usage_error(cmd, "--chunk: %llu bytes is outside %llu (4KiB) to %llu (256MiB)",
                               (unsigned long long)*out, (unsigned long long)PTWM_MIN_CHUNK,
                               (unsigned long long)PTWM_MAX_CHUNK);
    return CLI_OK;
}

int opt_format_version(const char *cmd, const char *text, uint64_t *out) {
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (!text[0] || *end || v < PTWM_FORMAT_VERSION_OLDEST_WRITTEN || v > PTWM_FORMAT_VERSION_NEWEST)
        return cli_usage_error(cmd, "--format-version: '%s' is not a version this ptwm writes "
                                    "(%u to %u)",
                               text, PTWM_FORMAT_VERSION_OLDEST_WRITTEN, PTWM_FORMAT_VERSION_NEWEST);
    *out = v;
    return CLI_OK;
}

int opt_threads(const char *cmd, const char *text, int *out) {
    char *end;
    long v = strtol(text, &end, 10);
    if (!text[0] || *end || v < 0 || v > 1024)
        return cli_usage_error(cmd, "--threads: '%s' is not a count from 0 (all cores) to 1024",
                               text);
    *out = (int)v;
    return CLI_OK;
}

int opt_method(const char *cmd, const char *text, ptwm_method *out) {
    if (ptwm_method_from_name(text, out, NULL) != PTWM_OK)
        return cli_usage_error(cmd, "--method: unknown method '%s' (huffman, zstd, microscale, "
                               "rans, identity)", text);
    return CLI_OK;
}

int opt_unexpected(const char *cmd, const char *arg) {
    if (arg[0] == '-' && arg[1]) return cli_usage_error(cmd, "unknown option '%s'", arg);
    return cli_usage_error(cmd, "unexpected argument '%s'", arg);
}

/* A number in [lo, max], all of `text` (digits only). */
static int number(const char *text, unsigned long lo, unsigned long max, unsigned long *out) {
    char *end;
    if (!text || text[0] < '0' || text[0] > '9') return 0;
    errno = 0;
    *out = strtoul(text, &end, 10);
    return !*end && errno == 0 && *out >= lo && *out <= max;
}

/* The part of a Slurm job array task (IDs from SLURM_ARRAY_TASK_MIN) or of a
 * Kubernetes indexed Job (JOB_COMPLETION_INDEX from 0, PTWM_PARTS parts),
 * when --part auto asks for it. */
static int part_from_env(const char *cmd, unsigned long *k, unsigned long *n) {
    const char *id = getenv("SLURM_ARRAY_TASK_ID"), *count = getenv("SLURM_ARRAY_TASK_COUNT");
    const char *min = getenv("SLURM_ARRAY_TASK_MIN"), *job = getenv("JOB_COMPLETION_INDEX");
    const char *parts = getenv("PTWM_PARTS");
    unsigned long i, lo = 0;
    if (id && count) {
        if (!number(id, 0, ULONG_MAX / 2, &i) || (min && !number(min, 0, i, &lo)) ||
            !number(count, 1, PTWM_PARTS_LIMIT, n) || i - lo >= *n)
            return cli_usage_error(cmd,
                                   "--part auto: SLURM_ARRAY_TASK_ID=%s, SLURM_ARRAY_TASK_MIN=%s "
                                   "and SLURM_ARRAY_TASK_COUNT=%s are not a task of a contiguous "
                                   "array (--array=0-N or 1-N)",
                                   id, min ? min : "(unset)", count);
        *k = i - lo + 1;
        return CLI_OK;
    }
    if (job && parts) {
        if (!number(parts, 1, PTWM_PARTS_LIMIT, n) || !number(job, 0, *n - 1, &i))
            return cli_usage_error(cmd,
                                   "--part auto: JOB_COMPLETION_INDEX=%s must be below "
                                   "PTWM_PARTS=%s (at most %u)",
                                   job, parts, PTWM_PARTS_LIMIT);
        *k = i + 1;
        return CLI_OK;
    }
    return cli_usage_error(cmd,
                           "--part auto: no Slurm job array (SLURM_ARRAY_TASK_ID and "
                           "SLURM_ARRAY_TASK_COUNT) or Kubernetes indexed Job "
                           "(JOB_COMPLETION_INDEX, with PTWM_PARTS) is set");
}

/* --part K/N or --part auto. */
static int opt_part(const char *cmd, const char *text, ptwm_checkpoint_options *o) {
    unsigned long k = 0, n = 0;
    const char *slash = strchr(text, '/');
    char kbuf[16];
    if (!strcmp(text, "auto")) {
        int rc = part_from_env(cmd, &k, &n);
        if (rc != CLI_OK) return rc;
    } else {
        size_t len = slash ? (size_t)(slash - text) : 0;
        if (len && len < sizeof kbuf) {
            memcpy(kbuf, text, len);
            kbuf[len] = 0;
        }
        if (!len || len >= sizeof kbuf || !number(slash + 1, 1, PTWM_PARTS_LIMIT, &n) ||
            !number(kbuf, 1, n, &k))
            return cli_usage_error(cmd, "--part '%s': give K/N with 1 <= K <= N <= %u, or auto",
                                   text, PTWM_PARTS_LIMIT);
    }
    o->part = (uint32_t)k;
    o->parts = (uint32_t)n;
    return CLI_OK;
}

int parse_ckpt_args(const char *cmd, int argc, char **argv, int with_codec, ckpt_args *a) {
    ptwm_checkpoint_options defaults = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    int i, rc = CLI_OK, positional_only = 0;
    memset(a, 0, sizeof *a);
    a->opt = defaults;
    for (i = 1; i < argc && rc == CLI_OK; i++) {
        const char *v = NULL;
        int m;
        if (positional_only || argv[i][0] != '-' || !argv[i][1]) {
            if (a->src) return opt_unexpected(cmd, argv[i]);
            a->src = argv[i];
        } else if (!strcmp(argv[i], "--")) {
            positional_only = 1;
        } else if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f")) {
            a->opt.force = 1;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            a->quiet = 1;
        } else if (!strcmp(argv[i], "--follow-symlinks")) {
            a->opt.follow_symlinks = 1;
        } else if ((m = opt_value(cmd, argc, argv, &i, "-o", &v)) != 0 ||
                   (m = opt_value(cmd, argc, argv, &i, "--output", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            a->outdir = v;
        } else if ((m = opt_value(cmd, argc, argv, &i, "--max-shard-size", &v)) != 0) {
            rc = m < 0 ? CLI_USAGE : opt_size(cmd, "--max-shard-size", v, &a->opt.max_shard_size);
        } else if ((m = opt_value(cmd, argc, argv, &i, "--threads", &v)) != 0) {
            rc = m < 0 ? CLI_USAGE : opt_threads(cmd, v, &a->opt.threads);
        } else if (with_codec && (m = opt_value(cmd, argc, argv, &i, "--method", &v)) != 0) {
            rc = m < 0 ? CLI_USAGE : opt_method(cmd, v, &a->opt.method);
        } else if (with_codec && (m = opt_value(cmd, argc, argv, &i, "--chunk", &v)) != 0) {
            rc = m < 0 ? CLI_USAGE : opt_chunk(cmd, v, &a->opt.chunk_size);
        } else if (with_codec && (m = opt_value(cmd, argc, argv, &i, "--format-version", &v)) != 0) {
            rc = m < 0 ? CLI_USAGE : opt_format_version(cmd, v, &a->opt.format_version);
        } else if ((m = opt_value(cmd, argc, argv, &i, "--part", &v)) != 0) {
            rc = m < 0 ? CLI_USAGE : opt_part(cmd, v, &a->opt);
        } else if ((m = opt_value(cmd, argc, argv, &i, "--base", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            a->base = v;
        } else if (with_codec && (m = opt_value(cmd, argc, argv, &i, "--src-base", &v)) != 0) {
            if (m < 0) return CLI_USAGE;
            a->src_base = v;
        } else {
            return opt_unexpected(cmd, argv[i]);
        }
    }
    if (rc != CLI_OK) return rc;
    if (!a->src) return cli_usage_error(cmd, "missing SRC");
    if (!a->outdir) return cli_usage_error(cmd, "missing -o OUTDIR");
    if (a->opt.parts && a->opt.force)
        return cli_usage_error(cmd, "--force cannot be combined with --part (a part never "
                                    "removes the work of the others)");
    return CLI_OK;
}

int run_ckpt_command(const char *cmd, int argc, char **argv, int with_codec, ckpt_fn fn,
                     ckpt_args *a, double *seconds, uint64_t *raw_bytes) {
    progress bar;
    ptwm_err err;
    double t0;
    int rc = parse_ckpt_args(cmd, argc, argv, with_codec, a);
    if (rc != CLI_OK) return rc;
    /* --base, --src-base: any kind of weights, opened as the loaders open them. */
    if (a->base && ptwm_source_open(a->base, PTWM_SOURCE_AUTO, &a->opt.base, &err) != PTWM_OK)
        return cli_report(&err);
    if (a->src_base &&
        ptwm_source_open(a->src_base, PTWM_SOURCE_AUTO, &a->opt.src_base, &err) != PTWM_OK) {
        ptwm_source_close(a->opt.base);
        return cli_report(&err);
    }
    progress_init(&bar, cmd, a->quiet);
    a->opt.progress = progress_update;
    a->opt.progress_ctx = &bar;
    t0 = cli_now();
    rc = fn(a->src, a->outdir, &a->opt, &err) == PTWM_OK ? CLI_OK : CLI_BAD_INPUT;
    progress_end(&bar);
    ptwm_source_close(a->opt.base);
    ptwm_source_close(a->opt.src_base);
    a->opt.base = a->opt.src_base = NULL;
    *seconds = cli_now() - t0;
    *raw_bytes = bar.total;
    if (rc != CLI_OK) cli_report_output(&err);
    return rc;
}
