/* ptwm decompress: a .ptwm file or directory back to safetensors. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "options.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm decompress SRC -o OUTDIR [options]\n\n"
            "Decompress SRC, a .ptwm file or a directory made by 'ptwm compress', into\n"
            "OUTDIR: the original safetensors files under their original names, the\n"
            "original model.safetensors.index.json and every other file, byte for byte\n"
            "(same SHA-256). Every CRC and payload hash is checked on the way, and every\n"
            "other file against its file record (model.ptwm.files.json); a file that\n"
            "fails is not written and the run fails naming it. Tensors that carry no\n"
            "check at all (files before format version 4 written without CRCs and\n"
            "hashes), and directories written without a file record, are named in a\n"
            "warning.\n"
            "OUTDIR is built under a temporary name, fsynced and renamed when complete:\n"
            "a crash leaves the old OUTDIR or the complete new one.\n\n"
            "options:\n"
            "  -o, --output OUTDIR     output directory (required; missing parents are made)\n"
            "  --max-shard-size SIZE   write fresh Hugging Face shards of at most SIZE\n"
            "                          bytes (5GB, 500MiB, bytes) and a new index instead\n"
            "                          of the original files\n"
            "  --threads N             decoding threads (0, the default: one per 32 MiB of\n"
            "                          output, up to all cores)\n"
            "  --base BASE             the base SRC was compressed against ('ptwm compress\n"
            "                          --base'; 'ptwm inspect' shows whether it needs one):\n"
            "                          a .safetensors or .ptwm file or a directory of either.\n"
            "                          A missing, different or damaged base is an error\n"
            "                          naming the tensor and the hashes, never wrong output.\n"
            "  -f, --force             replace OUTDIR if it exists (one atomic swap), and\n"
            "                          remove OUTDIR.tmp-*/.old-* an interrupted run left\n"
            "  --follow-symlinks       read links in SRC wherever they lead (by default only\n"
            "                          those that stay inside SRC; others are refused)\n"
            "  --part K/N|auto         write only part K of N of the output files, then\n"
            "                          'ptwm index OUTDIR' (as for compress: docs/SCALE.md)\n"
            "  -q, --quiet             no progress bar and no summary\n"
            "  -h, --help              this help\n\n"
            "exit status: 0 done, 1 bad or damaged input or I/O error, 2 bad usage,\n"
            "130/143/129 on SIGINT/SIGTERM/SIGHUP (temporary output removed)\n");
}

/* Whether `path` is a .ptwm file older than format version 4, the first
 * whose tensors may carry no check at all (its head: magic, u32 version). */
static int before_v4(const char *path) {
    unsigned char h[12];
    FILE *f = fopen(path, "rb");
    int old = f && fread(h, 1, sizeof h, f) == sizeof h && memcmp(h, "\x89PTWM\r\n\x1a", 8) == 0 &&
              (h[8] | h[9] << 8 | h[10] << 16 | (unsigned)h[11] << 24) < 4;
    if (f) fclose(f);
    return old;
}

/* Whether SRC is or holds such a file: only then is it opened to count
 * (opening parses every table, tens of ms for thousands of tensors). */
static int may_be_unchecked(const char *src) {
    DIR *d;
    struct dirent *e;
    int old = 0;
    if (!cli_is_dir(src)) return before_v4(src);
    if (!(d = opendir(src))) return 0;
    while (!old && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char path[8192];
        if (len < 5 || strcmp(e->d_name + len - 5, ".ptwm") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", src, e->d_name);
        old = before_v4(path);
    }
    closedir(d);
    return old;
}

/* Tensors with nothing to check them against decode as they are: say so
 * before decoding them. */
static void warn_unchecked(const char *src) {
    static char shown[CLI_ESCAPED_MAX(4096)];
    size_t n = 0, i;
    ptwm_err err;
    if (!may_be_unchecked(src)) return;
    if (cli_is_dir(src)) {
        ptwm_ptdir *d;
        if (ptwm_ptdir_open(src, &d, &err) != PTWM_OK) return;   /* reported by the decode */
        for (i = 0; i < ptwm_ptdir_shard_count(d); i++)
            n += ptwm_reader_unchecked_count(ptwm_ptdir_shard(d, i));
        ptwm_ptdir_close(d);
    } else {
        ptwm_reader *r;
        if (ptwm_reader_open(src, &r, &err) != PTWM_OK) return;
        n = ptwm_reader_unchecked_count(r);
        ptwm_reader_close(r);
    }
    if (n)
        fprintf(stderr,
                "ptwm decompress: warning: '%s': %zu tensor%s carry no CRC or hash (written "
                "without them before format version 4): damage to them cannot be detected\n",
                cli_escape(src, shown, sizeof shown), n, n == 1 ? "" : "s");
}

/* A directory written before file records: its index and other files are
 * restored as they are, with nothing to check them against. */
static void warn_no_record(const char *src) {
    static char shown[CLI_ESCAPED_MAX(4096)];
    DIR *d;
    struct dirent *e;
    int others = 0;
    if (!cli_is_dir(src) || cli_has_file(src, PTWM_FILES_NAME) || !(d = opendir(src))) return;
    while (!others && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        others = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                 (len < 5 || strcmp(e->d_name + len - 5, ".ptwm") != 0);
    }
    closedir(d);
    if (others)
        fprintf(stderr,
                "ptwm decompress: warning: '%s' has no file record (%s; written by an older "
                "ptwm): its index and other files cannot be checked\n",
                cli_escape(src, shown, sizeof shown), PTWM_FILES_NAME);
}

static ptwm_error decompress(const char *src, const char *outdir,
                             const ptwm_checkpoint_options *opt, ptwm_err *err) {
    warn_unchecked(src);
    warn_no_record(src);
    return ptwm_decompress_checkpoint(src, outdir, opt, err);
}

static int run(int argc, char **argv) {
    ckpt_args a;
    char r[32];
    double secs;
    uint64_t raw;
    int rc = run_ckpt_command("decompress", argc, argv, 0, decompress, &a, &secs,
                              &raw);
    if (rc != CLI_OK || a.quiet) return rc;
    if (a.opt.parts) {
        printf("%s -> %s: part %u of %u, %.2f s; when every part is done: ptwm index %s\n",
               a.src, a.outdir, (unsigned)a.opt.part, (unsigned)a.opt.parts, secs, a.outdir);
        return CLI_OK;
    }
    printf("%s -> %s: %s of tensors, %.2f s, %.1f MB/s\n", a.src, a.outdir,
           cli_bytes(raw, r, sizeof r), secs, secs > 0 ? (double)raw / secs / 1e6 : 0.0);
    return CLI_OK;
}

const cli_command cli_cmd_decompress = {"decompress",
                                        "restore the original safetensors files from .ptwm",
                                        run, help};
