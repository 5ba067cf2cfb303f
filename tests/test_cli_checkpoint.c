/* End-to-end tests of the checkpoint commands run as processes ($PTWM_BIN):
 * exit codes (0 ok, 1 bad input or failed check, 2 usage), --help for every
 * option, --force, quiet output, byte-identical round trips of a Hugging
 * Face directory, damage caught by verify and decompress. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "records.h"
#include "testutil.h"

static const char *bin;
static char out_path[1200], err_path[1200];
/* Run "ptwm ARGS" with stdout and stderr captured; returns the exit status. */
#define run(...) tu_run_cli(bin, out_path, err_path, __VA_ARGS__)

#define sh tu_sh

#define FMT_CAPPED 7 /* the version --format-version 7 gives a file of large tensors */

static int out_has(const char *s) { return tu_file_expect(out_path, s); }
static int err_has(const char *s) { return tu_file_expect(err_path, s); }

static int file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int)sb.st_size : -1;
}

static void test_help(void) {
    static const char *const compress_opts[] = {"-o, --output", "--max-shard-size", "--method",
                                                "--threads", "--chunk", "--format-version",
                                                "--force", "--quiet", "--help", NULL};
    static const char *const decompress_opts[] = {"-o, --output", "--max-shard-size",
                                                  "--threads", "--force", "--quiet", "--help",
                                                  NULL};
    static const char *const verify_opts[] = {"--threads", "--quiet", "--help", NULL};
    static const char *const inspect_opts[] = {"--json", "--help", NULL};
    static const char *const export_opts[] = {"--layout", "-o, --output", "--dtype", "--convert",
                                              "--raw", "--threads", "--force", "--help", NULL};
    static const struct {
        const char *cmd;
        const char *const *opts;
    } cmds[] = {{"compress", compress_opts}, {"decompress", decompress_opts},
                {"verify", verify_opts}, {"inspect", inspect_opts}, {"export", export_opts}};
    size_t i, j;
    /* The top level lists every command and its own two options. */
    CHECK(run("--help") == 0);
    CHECK(out_has("--version") && out_has("--help"));
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) CHECK(out_has(cmds[i].cmd));
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char usage[64];
        CHECK_MSG(run("%s --help", cmds[i].cmd) == 0, "%s --help", cmds[i].cmd);
        snprintf(usage, sizeof usage, "usage: ptwm %s", cmds[i].cmd);
        CHECK(out_has(usage));
        for (j = 0; cmds[i].opts[j]; j++) CHECK(out_has(cmds[i].opts[j]));
        CHECK_MSG(run("%s", cmds[i].cmd) == 2, "%s without arguments", cmds[i].cmd);
        CHECK(err_has("--help"));
        CHECK_MSG(run("%s --no-such-option x", cmds[i].cmd) == 2, "%s unknown option",
                  cmds[i].cmd);
        CHECK(err_has("unknown option '--no-such-option'"));
    }
}

static void test_usage_errors(const char *file, const char *tmp) {
    CHECK(run("compress '%s'", file) == 2 && err_has("missing -o OUTDIR"));
    CHECK(run("compress '%s' -o", file) == 2 && err_has("-o needs a value"));
    CHECK(run("compress '%s' -o '%s/u' --max-shard-size 12XB", file, tmp) == 2 &&
          err_has("--max-shard-size"));
    CHECK(run("compress '%s' -o '%s/u' --threads -3", file, tmp) == 2 && err_has("--threads"));
    /* A chunk size the writer would refuse is a usage error, said before any work. */
    CHECK(run("compress '%s' -o '%s/u' --chunk 1", file, tmp) == 2 &&
          err_has("--chunk: 1 bytes is outside 4096"));
    CHECK(run("compress '%s' -o '%s/u' --chunk 99TB", file, tmp) == 2 && err_has("256MiB"));
    CHECK(run("bench '%s' --chunk 1KiB", file) == 2 && err_has("--chunk"));
    CHECK(run("compress '%s' -o '%s/u' --format-version 4", file, tmp) == 2 &&
          err_has("--format-version: '4' is not a version this ptwm writes (5 to 8)"));
    CHECK(run("compress '%s' -o '%s/u' --format-version 9", file, tmp) == 2 &&
          err_has("(5 to 8)"));
    CHECK(run("decompress '%s' -o '%s/u' --format-version 7", file, tmp) == 2);
    CHECK(run("compress '%s' -o '%s/u' --method lzma", file, tmp) == 2 &&
          err_has("unknown method 'lzma'"));
    CHECK(run("compress '%s' extra -o '%s/u'", file, tmp) == 2 &&
          err_has("unexpected argument 'extra'"));
    CHECK(run("decompress '%s' -o '%s/u' --method zstd", file, tmp) == 2);
    CHECK(run("verify a b") == 2);
    /* Bad input is 1 and names the file. */
    CHECK(run("compress '%s/missing.safetensors' -o '%s/u'", tmp, tmp) == 1 &&
          err_has("missing.safetensors"));
    CHECK(run("verify '%s/missing.ptwm'", tmp) == 1 && err_has("missing.ptwm"));
    CHECK(run("decompress '%s' -o '%s/u'", file, tmp) == 1 && err_has("not a .ptwm file"));
    CHECK(sh("test ! -e '%s/u'", tmp) == 0);
}

static void test_roundtrip(const char *tmp) {
    const char *file = tu_corpus_path("faceres-deep.bf16.safetensors");
    char *idx;
    /* A Hugging Face directory made by the CLI itself: re-sharded decompression. */
    CHECK(run("compress '%s' -o '%s/one' -q", file, tmp) == 0);
    CHECK(file_size(out_path) == 0 && file_size(err_path) == 0);
    CHECK(run("decompress '%s/one' -o '%s/hf' --max-shard-size 1MiB -q", tmp, tmp) == 0);
    CHECK(sh("test -f '%s/hf/model.safetensors.index.json' && test -f "
             "'%s/hf/model-00002-of-00010.safetensors'", tmp, tmp) == 0);
    CHECK(sh("printf '{\"hidden\": 8}\\n' > '%s/hf/config.json' && mkdir '%s/hf/tok' && "
             "printf 'a b\\n' > '%s/hf/tok/vocab.txt'", tmp, tmp, tmp) == 0);
    /* Directory round trip: every file byte-identical. */
    CHECK(run("compress '%s/hf' -o '%s/pt' --threads 2", tmp, tmp) == 0);
    CHECK(out_has("72 tensors in 10 shards"));
    CHECK(file_size(err_path) == 0);   /* no progress bar when stderr is not a terminal */
    CHECK(sh("test -f '%s/pt/model.ptwm.index.json' && test -f '%s/pt/config.json' && "
             "test -f '%s/pt/tok/vocab.txt' && test ! -e '%s/pt/model.safetensors.index.json'",
             tmp, tmp, tmp, tmp) == 0);
    CHECK(run("decompress '%s/pt' -o '%s/back'", tmp, tmp) == 0);
    CHECK_MSG(sh("diff -r '%s/hf' '%s/back' >&2", tmp, tmp) == 0, "round trip differs");
    CHECK(sh("cd '%s/hf' && sha256sum model-*.safetensors > ../sums && cd ../back && "
             "sha256sum -c --quiet ../sums", tmp) == 0);
    /* An existing output is refused (exit 1) and left alone; --force replaces it. */
    CHECK(run("compress '%s/hf' -o '%s/pt'", tmp, tmp) == 1 && err_has("already exists") &&
          err_has("--force"));
    CHECK(run("compress '%s/hf' -o '%s/pt' --force --quiet --method huffman --chunk 256KiB", tmp,
              tmp) == 0);
    CHECK(run("decompress '%s/pt' -o '%s/back' -f -q", tmp, tmp) == 0);
    CHECK(sh("diff -r '%s/hf' '%s/back' >&2", tmp, tmp) == 0);
    CHECK(sh("ls -d '%s'/*.tmp-* 2>/dev/null | grep -q .", tmp) != 0);   /* nothing left behind */
    /* Held to version 7: faceres-deep's tensors of 256K elements stay in two
     * streams (the header's version at byte 8 is 7, not 8), the same bytes back. */
    CHECK(run("compress '%s' -o '%s/v7' -q --format-version 7", file, tmp) == 0);
    CHECK(sh("test \"$(od -An -tu4 -j8 -N4 '%s/v7/model.ptwm' | tr -d ' ')\" = %d && "
             "test \"$(od -An -tu4 -j8 -N4 '%s/one/model.ptwm' | tr -d ' ')\" = 8", tmp,
             FMT_CAPPED, tmp) == 0);
    CHECK(run("decompress '%s/v7' -o '%s/v7back' -q", tmp, tmp) == 0);
    CHECK(sh("cmp '%s' '%s/v7back/faceres-deep.bf16.safetensors'", file, tmp) == 0);
    /* verify: clean, then damaged. */
    CHECK(run("verify '%s/pt'", tmp) == 0 && out_has("10 shards verified"));
    CHECK(run("compress '%s/pt' -o '%s/twice'", tmp, tmp) == 1 &&
          err_has("is already a .ptwm checkpoint"));
    CHECK(run("compress '%s/one/model.ptwm' -o '%s/twice'", tmp, tmp) == 1 &&
          err_has("is already a .ptwm checkpoint"));
    CHECK(run("verify '%s/one/model.ptwm' -q", tmp) == 0);
    CHECK(sh("cp -r '%s/pt' '%s/bad' && printf '\\377\\377\\377\\377' | dd "
             "of='%s/bad/model-00004-of-00010.ptwm' bs=1 seek=3000 conv=notrunc 2>/dev/null",
             tmp, tmp, tmp) == 0);
    CHECK(run("verify '%s/bad'", tmp) == 1 && err_has("model-00004-of-00010.ptwm: FAILED") &&
          err_has("tensor '") && err_has("1 of 10 shards damaged"));
    CHECK(run("decompress '%s/bad' -o '%s/badout'", tmp, tmp) == 1 && err_has("tensor '"));
    CHECK(sh("test ! -e '%s/badout' && ! ls -d '%s'/badout.tmp-* 2>/dev/null | grep -q .", tmp,
             tmp) == 0);
    /* An index whose totals disagree with its shards: the file record names
     * the edited index as damaged; without a record (a directory written
     * before them), the totals are checked against the shards. */
    idx = (char *)malloc(strlen(tmp) + 64);
    sprintf(idx, "%s/bad/model.ptwm.index.json", tmp);
    CHECK(sh("cp -r '%s/pt/.' '%s/bad/' && sed -i 's/\"total_size\": [0-9]*/\"total_size\": 5/' "
             "'%s'", tmp, tmp, idx) == 0);
    CHECK(run("verify '%s/bad'", tmp) == 1 && err_has("file 'model.ptwm.index.json' is damaged"));
    sprintf(idx, "%s/bad", tmp);
    CHECK(tu_record_strip(idx) == 0);
    CHECK(run("verify '%s/bad'", tmp) == 1 && err_has("says total_size 5"));
    CHECK(run("inspect '%s/bad'", tmp) == 1 && err_has("says total_size 5"));
    free(idx);
    /* Re-planned shards on compress, and back to a single safetensors file. */
    CHECK(run("compress '%s/hf' -o '%s/pt3' --max-shard-size 3MB -q", tmp, tmp) == 0);
    CHECK(sh("test -f '%s/pt3/model-00003-of-00003.ptwm'", tmp) == 0);
    CHECK(run("decompress '%s/pt3' -o '%s/flat' --max-shard-size 100MB -q", tmp, tmp) == 0);
    CHECK(sh("test -f '%s/flat/model.safetensors' && test -f '%s/flat/config.json'", tmp, tmp) ==
          0);
    CHECK(run("verify '%s/flat' -q", tmp) == 0);
    /* Single file: restored under its own name. */
    CHECK(run("decompress '%s/one/model.ptwm' -o '%s/new/parents/onefile/' -q", tmp, tmp) == 0);
    CHECK(sh("cmp '%s' '%s/new/parents/onefile/faceres-deep.bf16.safetensors'", file, tmp) == 0);
    /* inspect on each kind. */
    CHECK(run("inspect '%s/pt'", tmp) == 0 && out_has("BF16") && out_has("ratio"));
    CHECK(run("inspect '%s/pt' --json", tmp) == 0 && out_has("\"tensors\"") &&
          out_has("\"coded_bytes\""));
    CHECK(run("inspect '%s/hf'", tmp) == 0 && out_has("72 tensors"));
    CHECK(run("inspect '%s/one/model.ptwm'", tmp) == 0 && out_has("BF16"));
    CHECK(run("inspect '%s'", file) == 0 && out_has("BF16"));
}

int main(void) {
    const char *tmp = tu_tmpdir();
    bin = getenv("PTWM_BIN");
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus not found (set PTWM_CORPUS)");
    if (!bin || !tu_corpus_dir()) return tu_finish("cli_checkpoint");
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", tmp);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", tmp);
    test_help();
    test_usage_errors(tu_corpus_path("posenet.bf16.safetensors"), tmp);
    test_roundtrip(tmp);
    return tu_finish("cli_checkpoint");
}
