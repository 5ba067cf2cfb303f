/* ptwm: command-line front end. Each command lives in its own cmd_*.c file
 * and uses only the public header. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The command table: a command added is one cmd_*.c file, one line in
 * cli.h and one line here; a command file left out of the build is a link
 * error, not a command silently missing. */
static const cli_command *const commands[] = {
    &cli_cmd_compress, &cli_cmd_decompress, &cli_cmd_verify,
    &cli_cmd_index,    &cli_cmd_inspect,    &cli_cmd_bench,
    &cli_cmd_export,
};

static void usage(FILE *out) {
    size_t i;
    fprintf(out,
            "ptwm %s - store, compress and load neural-network weights\n\n"
            "usage: ptwm COMMAND [OPTIONS]\n\ncommands:\n",
            ptwm_version());
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-12s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out,
            "\n'ptwm COMMAND --help' describes a command's options; 'ptwm --help' prints\n"
            "this and 'ptwm --version' the version and the instruction set in use.\n"
            "Environment: PTWM_ISA=scalar|ssse3|avx2|avx512|avx512vbmi caps the CPU-specific\n"
            "kernels at that level (the output is the same at every level).\n"
            "Exit status: 0 success, 1 bad input or failed check, 2 bad usage; 130, 143\n"
            "or 129 after SIGINT, SIGTERM or SIGHUP (temporary output removed first).\n");
}

/* A listing cut short by a full disk or a closed pipe is a failure, not a
 * success: check what stdout's buffer could not write. */
static int finish(int rc) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "ptwm: cannot write the output: %s\n", strerror(errno));
        return rc == CLI_OK ? CLI_BAD_INPUT : rc;
    }
    return rc;
}

/* The library reads PTWM_ISA itself and caps an unknown name at scalar; the
 * command line says so instead of running slower in silence. */
static int check_isa_env(void) {
    const char *env = getenv("PTWM_ISA");
    ptwm_isa level;
    if (!env || !*env || ptwm_isa_from_name(env, &level, NULL) == PTWM_OK) return CLI_OK;
    fprintf(stderr,
            "ptwm: PTWM_ISA='%s' is not an instruction set: use scalar, ssse3, avx2, avx512 or "
            "avx512vbmi\n",
            env);
    return CLI_USAGE;
}

int main(int argc, char **argv) {
    size_t i;
    if (check_isa_env() != CLI_OK) return CLI_USAGE;
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return finish(CLI_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ptwm %s (instruction set %s)\n", ptwm_version(), ptwm_isa_name(ptwm_isa_level()));
        return finish(CLI_OK);
    }
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const cli_command *c = commands[i];
        if (strcmp(argv[1], c->name) != 0) continue;
        {
            int j;
            for (j = 2; j < argc; j++) {
                if (!strcmp(argv[j], "--")) break;
                if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
                    c->help(stdout);
                    return finish(CLI_OK);
                }
            }
        }
        cli_signals_start();
        return cli_signals_exit(finish(c->run(argc - 1, argv + 1)));
    }
    fprintf(stderr, "ptwm: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
