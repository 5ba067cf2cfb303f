/* Option parsing shared by the checkpoint commands: "--name VALUE" and
 * "--name=VALUE", sizes ("500MB", "2GiB"), thread counts and methods. Each
 * parse function prints a usage error and returns CLI_USAGE on bad input. */
#ifndef PTWM_OPTIONS_H
#define PTWM_OPTIONS_H

#include <stdint.h>
#include "ptwm.h"

/* 1 if argv[*i] is option `name` (value in *value, *i advanced past it), 0 if
 * it is not, -1 if it is but its value is missing (usage error printed). */
int opt_value(const char *cmd, int argc, char **argv, int *i, const char *name,
              const char **value);
int opt_size(const char *cmd, const char *name, const char *text, uint64_t *out);
/* --chunk: a size from PTWM_MIN_CHUNK to PTWM_MAX_CHUNK. */
int opt_chunk(const char *cmd, const char *text, uint64_t *out);
int opt_format_version(const char *cmd, const char *text, uint64_t *out);
int opt_threads(const char *cmd, const char *text, int *out);
int opt_method(const char *cmd, const char *text, ptwm_method *out);
/* A usage error for an unknown option or an extra argument. */
int opt_unexpected(const char *cmd, const char *arg);

/* The most parts --part accepts (the library's limit). */
#define PTWM_PARTS_LIMIT 100000u

/* SRC -o OUTDIR and the options of compress (with_codec: --method, --chunk)
 * and decompress. Returns CLI_OK or CLI_USAGE (message printed). */
typedef struct ckpt_args {
    const char *src, *outdir;
    const char *base;           /* --base: a weights file or directory, or NULL */
    const char *src_base;       /* --src-base (compress): the base of a .ptwm SRC */
    ptwm_checkpoint_options opt;
    int quiet;
} ckpt_args;
int parse_ckpt_args(const char *cmd, int argc, char **argv, int with_codec, ckpt_args *a);

/* Parse, then run ptwm_compress_checkpoint or ptwm_decompress_checkpoint with a
 * progress bar. On CLI_OK *seconds and *raw_bytes describe the work done. */
typedef ptwm_error (*ckpt_fn)(const char *src, const char *outdir,
                              const ptwm_checkpoint_options *opt, ptwm_err *err);
int run_ckpt_command(const char *cmd, int argc, char **argv, int with_codec, ckpt_fn fn,
                     ckpt_args *a, double *seconds, uint64_t *raw_bytes);

#endif
