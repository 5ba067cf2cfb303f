/* ptwm decompress: a .ptwm file or directory back to safetensors. */
#include <stdio.h>

#include "cli.h"
#include "options.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm decompress SRC -o OUTDIR [options]\n\n"
            "Decompress SRC, a .ptwm file or a directory made by 'ptwm compress', into\n"
            "OUTDIR: the original safetensors files under their original names, the\n"
            "original model.safetensors.index.json and every other file, byte for byte\n"
            "(same SHA-256). Every CRC and payload hash is checked on the way. OUTDIR is\n"
            "built under a temporary name, fsynced and renamed when complete: a crash\n"
            "leaves the old OUTDIR or the complete new one.\n\n"
            "options:\n"
            "  -o, --output OUTDIR     output directory (required; missing parents are made)\n"
            "  --max-shard-size SIZE   write fresh Hugging Face shards of at most SIZE\n"
            "                          bytes (5GB, 500MiB, bytes) and a new index instead\n"
            "                          of the original files\n"
            "  --threads N             decoding threads (0 = all cores, the default)\n"
            "  -f, --force             replace OUTDIR if it exists (one atomic swap), and\n"
            "                          remove OUTDIR.tmp-*/.old-* an interrupted run left\n"
            "  -q, --quiet             no progress bar and no summary\n"
            "  -h, --help              this help\n\n"
            "exit status: 0 done, 1 bad or damaged input or I/O error, 2 bad usage,\n"
            "130/143/129 on SIGINT/SIGTERM/SIGHUP (temporary output removed)\n");
}

static int run(int argc, char **argv) {
    ckpt_args a;
    char r[32];
    double secs;
    uint64_t raw;
    int rc = run_ckpt_command("decompress", argc, argv, 0, ptwm_decompress_checkpoint, &a, &secs,
                              &raw);
    if (rc != CLI_OK || a.quiet) return rc;
    printf("%s -> %s: %s of tensors, %.2f s, %.1f MB/s\n", a.src, a.outdir,
           cli_bytes(raw, r, sizeof r), secs, secs > 0 ? (double)raw / secs / 1e6 : 0.0);
    return CLI_OK;
}

const cli_command cli_cmd_decompress = {"decompress",
                                        "restore the original safetensors files from .ptwm",
                                        run, help};
