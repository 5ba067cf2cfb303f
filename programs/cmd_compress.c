/* ptwm compress: a safetensors file or checkpoint directory to a .ptwm directory. */
#include <stdio.h>

#include "cli.h"
#include "options.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm compress SRC -o OUTDIR [options]\n\n"
            "Compress SRC, a .safetensors file or a Hugging Face checkpoint directory\n"
            "(model.safetensors.index.json plus shards, or model.safetensors), losslessly.\n"
            "A .ptwm file or directory as SRC is re-coded: against --base (a training\n"
            "checkpoint against the one before it), or whole when only --src-base is\n"
            "given; decompressing OUTDIR gives the files decompressing SRC gives.\n"
            "A file becomes OUTDIR/model.ptwm; a directory becomes one .ptwm shard per\n"
            "input shard (model-0000k-of-0000n.ptwm plus model.ptwm.index.json), and its\n"
            "other files (config.json, tokenizer files) are copied as they are, so OUTDIR\n"
            "is a complete model directory, with model.ptwm.files.json recording the\n"
            "size and XXH3-128 of each file beside the shards (the index included), which\n"
            "every reader checks. 'ptwm decompress' gives back every file byte\n"
            "for byte. Shards are coded one after another on shared threads: memory\n"
            "does not grow with the model. OUTDIR is built under a temporary name,\n"
            "fsynced and renamed when complete: a crash leaves the old OUTDIR or the\n"
            "complete new one. A .ptwm file past 8 MiB is written past the page cache\n"
            "(O_DIRECT, where the file system takes it): it goes to the disk anyway, and\n"
            "is not left in memory (PTWM_DIRECT_IO=0 writes through the page cache).\n\n"
            "options:\n"
            "  -o, --output OUTDIR     output directory (required; missing parents are made)\n"
            "  --max-shard-size SIZE   re-plan the shards: at most SIZE raw bytes each\n"
            "                          (5GB, 500MiB, bytes); a larger tensor gets its own\n"
            "                          shard. Decompression then writes fresh shards.\n"
            "  --method NAME           entropy stage where a chain leaves it open: microscale\n"
            "                          (default), huffman, rans, zstd, identity\n"
            "  --threads N             coding threads (0, the default: one per 32 MiB of\n"
            "                          input, up to all cores)\n"
            "  --chunk SIZE            raw bytes per chunk (default 1MiB)\n"
            "  --format-version N      the newest .ptwm version the files may take, for\n"
            "                          readers of an older one: 7 (rANS planes in at most\n"
            "                          two streams), 5 or 6 (in one); default: as needed\n"
            "  --base BASE             code each tensor against the tensor of the same name,\n"
            "                          dtype and shape in BASE (a .safetensors or .ptwm file,\n"
            "                          or a directory of either: the model a fine-tune came\n"
            "                          from, an earlier checkpoint), chunk by chunk where\n"
            "                          that is smaller; others as usual. Decompressing then\n"
            "                          needs the same BASE (--base).\n"
            "  --src-base B            the base a .ptwm SRC was coded against (to re-code\n"
            "                          it against another base, or whole without --base)\n"
            "  -f, --force             replace OUTDIR if it exists (one atomic swap), and\n"
            "                          remove OUTDIR.tmp-*/.old-* an interrupted run left\n"
            "  --follow-symlinks       read links in SRC wherever they lead. By default a\n"
            "                          link is read only if it stays inside SRC or leads\n"
            "                          into the blobs/ of the Hugging Face cache SRC is a\n"
            "                          snapshot of; any other is refused, naming it (a\n"
            "                          config.json linked to a system file would copy that\n"
            "                          file into OUTDIR)\n"
            "  --part K/N              write only part K of N of the shards (largest first,\n"
            "                          bytes balanced) with a manifest, in OUTDIR/.ptwm-parts;\n"
            "                          run every part (any order, any machines sharing\n"
            "                          OUTDIR), then 'ptwm index OUTDIR'. Same options in\n"
            "                          every part. Rerunning a part is safe.\n"
            "  --part auto             K and N from a Slurm job array (SLURM_ARRAY_TASK_ID,\n"
            "                          _MIN, _COUNT) or a Kubernetes indexed Job\n"
            "                          (JOB_COMPLETION_INDEX, with PTWM_PARTS set to N)\n"
            "  -q, --quiet             no progress bar and no summary\n"
            "  -h, --help              this help\n\n"
            "exit status: 0 done, 1 bad input or I/O error, 2 bad usage,\n"
            "130/143/129 on SIGINT/SIGTERM/SIGHUP (temporary output removed)\n");
}

static int run(int argc, char **argv) {
    ckpt_args a;
    ptwm_err err;
    ptwm_ptdir *d;
    char r[32], c[32];
    double secs;
    uint64_t raw, coded;
    int rc = run_ckpt_command("compress", argc, argv, 1, ptwm_compress_checkpoint, &a, &secs, &raw);
    if (rc != CLI_OK || a.quiet) return rc;
    if (a.opt.parts) {
        printf("%s -> %s: part %u of %u, %s of tensors, %.2f s; when every part is done: ptwm "
               "index %s\n",
               a.src, a.outdir, (unsigned)a.opt.part, (unsigned)a.opt.parts,
               cli_bytes(raw, r, sizeof r), secs, a.outdir);
        return CLI_OK;
    }
    /* Reopening checks the result and gives the sizes on disk. */
    if (ptwm_ptdir_open(a.outdir, &d, &err) != PTWM_OK) return cli_report(&err);
    raw = ptwm_ptdir_total_size(d);
    coded = ptwm_ptdir_compressed_total_size(d);
    printf("%s -> %s: %zu tensors in %zu shard%s, %s -> %s (%.2f%%), %.2f s, %.1f MB/s\n", a.src,
           a.outdir, ptwm_ptdir_count(d), ptwm_ptdir_shard_count(d),
           ptwm_ptdir_shard_count(d) == 1 ? "" : "s", cli_bytes(raw, r, sizeof r),
           cli_bytes(coded, c, sizeof c), raw ? 100.0 * (double)coded / (double)raw : 0.0, secs,
           secs > 0 ? (double)raw / secs / 1e6 : 0.0);
    ptwm_ptdir_close(d);
    return CLI_OK;
}

const cli_command cli_cmd_compress = {"compress",
                                      "compress a .safetensors file or checkpoint directory",
                                      run, help};
