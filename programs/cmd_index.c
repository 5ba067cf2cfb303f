/* ptwm index: assemble a checkpoint compressed in parts. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void help(FILE *out) {
    fprintf(out,
            "usage: ptwm index OUTDIR\n\n"
            "Finish a checkpoint compressed in parts ('ptwm compress SRC -o OUTDIR --part\n"
            "K/N', one run per part). Checks that every part is in OUTDIR/.ptwm-parts and\n"
            "agrees with the plan recomputed from the source (same plan, no shard twice,\n"
            "every shard of the size and hash its part recorded), moves the shards into\n"
            "place, copies the source's other files and writes model.ptwm.index.json\n"
            "last: the directory one unpartitioned 'ptwm compress' gives, byte for byte.\n"
            "Until then OUTDIR has no index, and no reader takes it for a checkpoint.\n"
            "A missing, damaged or foreign part is named; rerun it and index again.\n"
            "On a finished OUTDIR it does nothing.\n\n"
            "exit status: 0 done, 1 a part missing or wrong, or an I/O error, 2 bad usage\n");
}

static int run(int argc, char **argv) {
    ptwm_err err;
    const char *dir = NULL;
    int i, positional_only = 0;
    for (i = 1; i < argc; i++) {
        if (!positional_only && !strcmp(argv[i], "--")) {
            positional_only = 1;
            continue;
        }
        if (dir || (!positional_only && argv[i][0] == '-' && argv[i][1]))
            return cli_usage_error("index", "unexpected argument '%s'", argv[i]);
        dir = argv[i];
    }
    if (!dir) return cli_usage_error("index", "missing OUTDIR");
    if (ptwm_assemble_checkpoint(dir, &err) != PTWM_OK) return cli_report(&err);
    printf("%s: assembled\n", dir);
    return CLI_OK;
}

const cli_command cli_cmd_index = {"index", "assemble a checkpoint compressed in parts", run,
                                   help};
