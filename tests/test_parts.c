/* Compression in parts: with 1, 2, 3 and 7 parts (run in any order) and
 * ptwm_assemble_checkpoint, the directory is the unpartitioned run's, byte for
 * byte; and every fault gives a clear error or an idempotent success, never a
 * wrong index: an index before all parts, a part killed mid-write, a part run
 * twice, a part of another plan, a damaged or missing shard, a source changed
 * between the parts, a manifest that lists a shard it does not own. The same
 * for decompression in parts (restored files and fresh shards). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char src_dir[4096], whole[4096];

static const char *path2(const char *dir, const char *name) {
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Part k of n of a compression (or a decompression). */
static ptwm_error part_of(int decompress, const char *src, const char *out, uint32_t k,
                          uint32_t n, uint64_t max_shard, ptwm_err *err) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    o.max_shard_size = max_shard;
    o.threads = 2;
    o.part = k;
    o.parts = n;
    return decompress ? ptwm_decompress_checkpoint(src, out, &o, err)
                      : ptwm_compress_checkpoint(src, out, &o, err);
}

static ptwm_error run_part(const char *src, const char *out, uint32_t k, uint32_t n,
                           uint64_t max_shard, ptwm_err *err) {
    return part_of(0, src, out, k, n, max_shard, err);
}

/* A Hugging Face directory of a corpus file in 100 kB shards, with a config
 * and a nested file, and its unpartitioned compression. */
static void make_source(void) {
    ptwm_st *st = NULL;
    ptwm_tensor_desc *d;
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    size_t i, n;
    snprintf(src_dir, sizeof src_dir, "%s", tu_tmp_path("hf"));
    snprintf(whole, sizeof whole, "%s", tu_tmp_path("whole"));
    CHECK_ERR(ptwm_st_open(tu_corpus_path("emotion.f32.safetensors"), PTWM_OPEN_MMAP, &st, &err),
              &err, PTWM_OK, NULL);
    if (!st) return;
    n = ptwm_st_count(st);
    d = (ptwm_tensor_desc *)calloc(n, sizeof *d);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        ptwm_st_tensor(st, i, &t, NULL);
        d[i] = (ptwm_tensor_desc){t.name, t.dtype, t.ndim, t.shape, t.data, t.nbytes};
    }
    CHECK_ERR(ptwm_stdir_write(src_dir, d, n, NULL, 0, 100000, &err), &err, PTWM_OK, NULL);
    CHECK(tu_write_file(path2(src_dir, "config.json"), "{\"model\": 1}\n", 13) == 0);
    mkdir(path2(src_dir, "tok"), 0777);
    CHECK(tu_write_file(path2(src_dir, "tok/vocab.txt"), "a\nb\n", 4) == 0);
    free(d);
    ptwm_st_close(st);
    o.threads = 2;
    CHECK_ERR(ptwm_compress_checkpoint(src_dir, whole, &o, &err), &err, PTWM_OK, NULL);
}

/* N parts in the order `order` (1-based part numbers), then assembly. */
static void parts_equal_whole(const char *name, uint32_t n, const uint32_t *order) {
    const char *out = tu_tmp_path(name);
    ptwm_err err;
    uint32_t i;
    for (i = 0; i < n; i++)
        CHECK_ERR(run_part(src_dir, out, order[i], n, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(tu_trees_equal(whole, out), "%u parts differ from the whole run", (unsigned)n);
    /* Assembling a finished directory does nothing. */
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(whole, out));
}

static void identical_to_whole(void) {
    static const uint32_t one[] = {1}, two[] = {2, 1}, three[] = {1, 2, 3},
                          seven[] = {7, 3, 5, 1, 6, 2, 4};
    parts_equal_whole("p1", 1, one);
    parts_equal_whole("p2", 2, two);
    parts_equal_whole("p3", 3, three);
    parts_equal_whole("p7", 7, seven);
}

/* A single safetensors file: one model.ptwm, published last by assembly. */
static void single_file(void) {
    const char *src = tu_corpus_path("emotion.bf16.safetensors");
    const char *ref = tu_tmp_path("single-whole"), *out = tu_tmp_path("single-parts");
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    CHECK_ERR(ptwm_compress_checkpoint(src, ref, &o, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(run_part(src, out, 2, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(run_part(src, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK(access(path2(out, PTWM_SINGLE_NAME), F_OK) != 0); /* not visible before assembly */
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(ref, out));
}

/* Until every part is there: no index, and the missing part is named. */
static void early_index_and_rerun(void) {
    const char *out = tu_tmp_path("early");
    ptwm_source *s = NULL;
    ptwm_err err;
    CHECK_ERR(ptwm_assemble_checkpoint(tu_tmp_path("absent"), &err), &err, PTWM_ERR_NOT_FOUND,
              "not a directory");
    CHECK_ERR(run_part(src_dir, out, 1, 3, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(run_part(src_dir, out, 3, 3, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_NOT_FOUND,
              "part 2 of 3 is missing");
    CHECK(access(path2(out, PTWM_INDEX_NAME), F_OK) != 0);
    CHECK(ptwm_source_open(out, PTWM_SOURCE_AUTO, &s, &err) != PTWM_OK && s == NULL);
    /* Part 3 again, and part 2: the same result as if each ran once. */
    CHECK_ERR(run_part(src_dir, out, 3, 3, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(run_part(src_dir, out, 2, 3, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(whole, out));
    /* A finished directory takes no more parts. */
    CHECK_ERR(run_part(src_dir, out, 1, 3, 0, &err), &err, PTWM_ERR_EXISTS,
              "already a finished checkpoint");
    CHECK(tu_trees_equal(whole, out));
}

/* Parts of different plans never meet in one index. */
static void foreign_parts(void) {
    const char *out = tu_tmp_path("foreign"), *other = tu_tmp_path("other");
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    char cmd[9000];
    CHECK_ERR(run_part(src_dir, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    /* Another part count, another shard size: refused before any work. */
    CHECK_ERR(run_part(src_dir, out, 2, 3, 0, &err), &err, PTWM_ERR_MISMATCH,
              "of another plan");
    CHECK_ERR(run_part(src_dir, out, 2, 2, 50000, &err), &err, PTWM_ERR_MISMATCH,
              "of another plan");
    /* A manifest of another plan copied in by hand: assembly names both. */
    CHECK_ERR(run_part(src_dir, other, 2, 2, 50000, &err), &err, PTWM_OK, NULL);
    snprintf(cmd, sizeof cmd, "cp '%s/.ptwm-parts/part-00002-of-00002.json' '%s/.ptwm-parts/'",
             other, out);
    CHECK(system(cmd) == 0);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_MISMATCH,
              "come from different plans");
    CHECK(access(path2(out, PTWM_INDEX_NAME), F_OK) != 0);
    /* Bad arguments. */
    o.part = 3;
    o.parts = 2;
    CHECK_ERR(ptwm_compress_checkpoint(src_dir, out, &o, &err), &err, PTWM_ERR_INVALID_ARG,
              "part 3 of 2");
    o.part = 1;
    o.force = 1;
    CHECK_ERR(ptwm_compress_checkpoint(src_dir, out, &o, &err), &err, PTWM_ERR_INVALID_ARG,
              "force cannot be combined");
}

/* A shard damaged, removed or claimed by the wrong part; a changed source. */
static void damaged_parts(void) {
    const char *out = tu_tmp_path("damaged"), *src2 = tu_tmp_path("hf2");
    const char *shard = NULL;
    ptwm_err err;
    char path[4400], cmd[9000], *text;
    size_t len = 0;
    FILE *f;
    CHECK_ERR(run_part(src_dir, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(run_part(src_dir, out, 2, 2, 0, &err), &err, PTWM_OK, NULL);
    shard = path2(out, ".ptwm-parts/shards/model-00002-of-00009.ptwm");
    snprintf(path, sizeof path, "%s", shard);
    /* One flipped byte. */
    f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 100, SEEK_SET);
        fputc(0x5a ^ 0xff, f);
        fclose(f);
    }
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_HASH, "model-00002-of-00009");
    CHECK(access(path2(out, PTWM_INDEX_NAME), F_OK) != 0);
    /* Gone. */
    unlink(path);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_IO, "model-00002-of-00009");
    /* Rerunning the part that owns it repairs the directory. */
    CHECK_ERR(run_part(src_dir, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    if (access(path, F_OK) != 0)
        CHECK_ERR(run_part(src_dir, out, 2, 2, 0, &err), &err, PTWM_OK, NULL);
    /* A manifest claiming a shard of the other part. */
    snprintf(cmd, sizeof cmd, "%s/.ptwm-parts/part-00001-of-00002.json", out);
    text = (char *)tu_read_file(cmd, &len);
    CHECK(text != NULL);
    if (text) {
        char *idx = strstr(text, "\"index\": ");
        CHECK(idx != NULL);
        if (idx) idx[9] = idx[9] == '8' ? '7' : '8';
        CHECK(tu_write_file(cmd, text, len) == 0);
        CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_INDEX,
                  "which the plan does not give it");
        free(text);
    }
    CHECK_ERR(run_part(src_dir, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(whole, out));
    /* A copy of the source elsewhere is the same plan (machines may mount it
     * at different paths); a source whose files changed is not. */
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", src_dir, src2);
    CHECK(system(cmd) == 0);
    out = tu_tmp_path("changed");
    CHECK_ERR(run_part(src2, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(run_part(src_dir, out, 2, 2, 0, &err), &err, PTWM_OK, NULL);
    /* The Hugging Face index is kept byte for byte, so a changed one is
     * another plan: found at assembly, which reads part 1's source. */
    snprintf(cmd, sizeof cmd, "printf ' ' >> '%s/model.safetensors.index.json'", src2);
    CHECK(system(cmd) == 0);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_MISMATCH,
              "changed since the parts ran");
    CHECK(access(path2(out, PTWM_INDEX_NAME), F_OK) != 0);
    snprintf(cmd, sizeof cmd, "cp '%s/model.safetensors.index.json' '%s/'", src_dir, src2);
    CHECK(system(cmd) == 0);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(whole, out));
}

/* `ptwm compress --part` killed at random moments: afterwards assembly either
 * names a missing part or gives the whole run's directory, and a rerun of the
 * part always ends in the whole run's directory. */
static void killed_parts(void) {
    const char *bin = getenv("PTWM_BIN"), *out = tu_tmp_path("killed");
    uint64_t rng = 42;
    ptwm_err err;
    int round;
    CHECK(bin != NULL);
    if (!bin) return;
    CHECK_ERR(run_part(src_dir, out, 2, 2, 0, &err), &err, PTWM_OK, NULL);
    for (round = 0; round < 6; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", 1);
            dup2(null, 1);
            dup2(null, 2);
            execl(bin, bin, "compress", src_dir, "-o", out, "--part", "1/2", "--threads", "1",
                  "-q", (char *)NULL);
            _exit(127);
        }
        usleep((useconds_t)(tu_rand(&rng) % 30000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        {
            ptwm_error rc = ptwm_assemble_checkpoint(out, &err);
            CHECK_MSG(rc == PTWM_OK || rc == PTWM_ERR_NOT_FOUND, "round %d: %s", round,
                      err.message);
            if (rc == PTWM_OK) {
                CHECK(tu_trees_equal(whole, out));
                return;
            }
            CHECK(access(path2(out, PTWM_INDEX_NAME), F_OK) != 0);
        }
    }
    CHECK_ERR(run_part(src_dir, out, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(whole, out));
}

static ptwm_error run_dpart(const char *src, const char *out, uint32_t k, uint32_t n,
                            uint64_t max_shard, ptwm_err *err) {
    return part_of(1, src, out, k, n, max_shard, err);
}

/* Decompression in parts: the original files (restored, with the source's
 * index and other files) or fresh shards, equal to one process's output. */
static void decompress_parts(void) {
    static const uint64_t shard_sizes[2] = {0, 150000};
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    char ref[1200], out[1200], cmd[4000];
    int v;
    uint32_t n, k;
    for (v = 0; v < 2; v++) {
        snprintf(ref, sizeof ref, "%s", tu_tmp_path(v ? "dk-ref-fresh" : "dk-ref"));
        o.max_shard_size = shard_sizes[v];
        CHECK_ERR(ptwm_decompress_checkpoint(whole, ref, &o, &err), &err, PTWM_OK, NULL);
        for (n = 1; n <= 3; n++) {
            snprintf(out, sizeof out, "%s-%u", tu_tmp_path(v ? "dk-fresh" : "dk"), (unsigned)n);
            for (k = n; k >= 1; k--)
                CHECK_ERR(run_dpart(whole, out, k, n, shard_sizes[v], &err), &err, PTWM_OK, NULL);
            CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
            CHECK_MSG(tu_trees_equal(ref, out), "decompression in %u parts (%s) differs",
                      (unsigned)n, v ? "fresh shards" : "restored files");
        }
    }
    CHECK(tu_trees_equal(src_dir, tu_tmp_path("dk-3")));
    /* Before every part: the missing one named, nothing published. */
    snprintf(out, sizeof out, "%s", tu_tmp_path("dk-early"));
    CHECK_ERR(run_dpart(whole, out, 2, 2, 0, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_NOT_FOUND,
              "part 1 of 2 is missing");
    CHECK(access(path2(out, "model.safetensors.index.json"), F_OK) != 0);
    /* A compression's part among decompression parts: different plans. */
    snprintf(cmd, sizeof cmd, "%s", tu_tmp_path("dk-mixed"));
    CHECK_ERR(run_part(src_dir, cmd, 1, 2, 0, &err), &err, PTWM_OK, NULL);
    snprintf(cmd, sizeof cmd, "cp '%s/.ptwm-parts/part-00001-of-00002.json' '%s/.ptwm-parts/'",
             tu_tmp_path("dk-mixed"), out);
    CHECK(system(cmd) == 0);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_ERR_MISMATCH,
              "come from different plans");
    CHECK_ERR(run_dpart(whole, out, 1, 2, 0, &err), &err, PTWM_ERR_MISMATCH, "of another plan");
}


/* The command line: --part K/N and auto, ptwm index. */
static void cli_parts(void) {
    const char *bin = getenv("PTWM_BIN");
    char out[1200], errp[1200], dir[1200];
    static const char *const bad[] = {"0/3", "4/3", "1/0", "a/3", "3", "1/3x", "/3", "-1/3"};
    size_t i;
    if (!bin) return;
    snprintf(out, sizeof out, "%s", tu_tmp_path("cli.out"));
    snprintf(errp, sizeof errp, "%s", tu_tmp_path("cli.err"));
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("cli-parts"));
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part '%s'", src_dir, dir,
                             bad[i]) == 2,
                  "--part %s", bad[i]);
        CHECK(tu_file_expect(errp, "give K/N with 1 <= K <= N"));
    }
    CHECK(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part 1/2 --force", src_dir, dir) ==
          2);
    CHECK(tu_file_expect(errp, "--force cannot be combined with --part"));
    unsetenv("SLURM_ARRAY_TASK_ID");
    unsetenv("JOB_COMPLETION_INDEX");
    CHECK(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part auto", src_dir, dir) == 2);
    CHECK(tu_file_expect(errp, "no Slurm job array"));
    /* A Slurm array --array=1-2: task 2 is part 2 of 2. */
    setenv("SLURM_ARRAY_TASK_ID", "2", 1);
    setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "2", 1);
    CHECK(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part auto", src_dir, dir) == 0);
    CHECK(tu_file_expect(out, "part 2 of 2"));
    setenv("SLURM_ARRAY_TASK_ID", "3", 1);
    CHECK(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part auto", src_dir, dir) == 2);
    CHECK(tu_file_expect(errp, "not a task of a contiguous array"));
    unsetenv("SLURM_ARRAY_TASK_ID");
    /* index before part 1: exit 1, the part named, no index. */
    CHECK(tu_run_cli(bin, out, errp, "index '%s'", dir) == 1);
    CHECK(tu_file_expect(errp, "part 1 of 2 is missing"));
    /* A Kubernetes indexed Job: completion index 0 is part 1. */
    setenv("JOB_COMPLETION_INDEX", "0", 1);
    setenv("PTWM_PARTS", "2", 1);
    CHECK(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part auto", src_dir, dir) == 0);
    CHECK(tu_file_expect(out, "part 1 of 2"));
    setenv("JOB_COMPLETION_INDEX", "2", 1);
    CHECK(tu_run_cli(bin, out, errp, "compress '%s' -o '%s' --part auto", src_dir, dir) == 2);
    CHECK(tu_file_expect(errp, "must be below PTWM_PARTS=2"));
    unsetenv("JOB_COMPLETION_INDEX");
    CHECK(tu_run_cli(bin, out, errp, "index") == 2);
    CHECK(tu_run_cli(bin, out, errp, "index '%s' extra", dir) == 2);
    CHECK(tu_run_cli(bin, out, errp, "index '%s'", dir) == 0);
    CHECK(tu_file_expect(out, "assembled"));
    CHECK(tu_trees_equal(whole, dir));
    CHECK(tu_run_cli(bin, out, errp, "index --help") == 0);
    CHECK(tu_file_expect(out, "usage: ptwm index OUTDIR"));
}

int main(void) {
    make_source();
    identical_to_whole();
    single_file();
    early_index_and_rerun();
    foreign_parts();
    damaged_parts();
    killed_parts();
    decompress_parts();
    cli_parts();
    return tu_finish("parts");
}
