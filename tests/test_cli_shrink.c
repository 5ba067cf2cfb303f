/* A source that shrinks while a command runs, under every command of the CLI
 * ($PTWM_BIN), bench included: inspect, verify, compress, decompress, export
 * and bench on a safetensors file, a .ptwm file and a .ptwm directory (one
 * of its shards shrinks), and index over parts whose source shrank. Each
 * command runs once whole, timed; then, for each of several moments spread
 * over that time (and before it starts), a fresh copy of its source is cut
 * to half its size at that moment. Every run must end by itself with exit
 * status 0 (it had read what it needed) or 1 with a message, never by a
 * signal (a mapped input would die of SIGBUS), and leave no temporary
 * output. The runs are real processes racing a truncate: the moments are
 * fixed fractions, not random, and the outcome holds whichever way each
 * race goes. PTWM_TEST_SHRINK_ROUNDS=N runs N rounds of moments, each after
 * the first shifted (the larger campaign run by hand). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static const char *bin;
static char sample[1200], tmp[1200];
static unsigned runs, exit0, exit1, killed;

static const double moments[] = {-1.0, 0.05, 0.15, 0.3, 0.45, 0.6, 0.8};
#define NMOMENTS (sizeof moments / sizeof moments[0])
/* PTWM_TEST_SHRINK_ROUNDS=N: N rounds of moments, each after the first
 * shifted (the larger campaign run by hand). */
static unsigned rounds = 1;

/* Moment m of round r: a fraction of the whole run, or < 0 for before it. */
static double moment(unsigned r, size_t m) {
    double t;
    if (r == 0) return moments[m];
    t = (m ? moments[m] : 0.0) + 0.0837 * r;
    return t - 0.9 * (double)(unsigned)(t / 0.9);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define sh tu_sh

/* Start `ptwm ARGV...` with its output in tmp/run.out and tmp/run.err. */
static pid_t start(char *const *argv) {
    pid_t pid = fork();
    if (pid == 0) {
        char o[1300], e[1300];
        snprintf(o, sizeof o, "%s/run.out", tmp);
        snprintf(e, sizeof e, "%s/run.err", tmp);
        if (!freopen(o, "w", stdout) || !freopen(e, "w", stderr)) _exit(126);
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

static void cut_half(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0) CHECK(truncate(path, sb.st_size / 2) == 0);
}

/* The inputs, fresh: the sample, its .ptwm file, a .ptwm directory of three
 * shards, and a directory compressed in one part, not yet assembled. */
static void fresh_inputs(void) {
    CHECK(sh("cd '%s' && rm -rf in out* && mkdir in && cp '%s' in/src.safetensors && "
             "cp pt.ptwm in/src.ptwm && cp -r ptdir in/ptdir && cp -r hf in/hf",
             tmp, sample) == 0);
}

/* Leftovers of an interrupted write beside the outputs. */
static int leftovers(void) {
    return sh("cd '%s' && ls -d out*.tmp-* out*/*.tmp-* 2>/dev/null | grep -q .", tmp) == 0;
}

/* Run the command `argv`, cutting `victim` at each moment of its run. */
static void shrink_under(const char *what, char *const *argv, const char *victim,
                         const char *setup) {
    double t0, span;
    int status;
    size_t k;
    fresh_inputs();
    if (setup) CHECK(sh("cd '%s' && %s", tmp, setup) == 0);
    t0 = now();
    waitpid(start(argv), &status, 0);
    span = now() - t0;
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: whole run exited %d", what,
              status);
    for (k = 0; k < rounds * NMOMENTS; k++) {
        double at = moment((unsigned)(k / NMOMENTS), k % NMOMENTS);
        char path[1300];
        pid_t pid;
        fresh_inputs();
        if (setup) CHECK(sh("cd '%s' && %s", tmp, setup) == 0);
        snprintf(path, sizeof path, "%s/%s", tmp, victim);
        if (at < 0) cut_half(path);
        pid = start(argv);
        if (at >= 0) {
            usleep((useconds_t)(at * span * 1e6));
            cut_half(path);
        }
        waitpid(pid, &status, 0);
        runs++;
        killed += !WIFEXITED(status);
        CHECK_MSG(WIFEXITED(status), "%s, cut at %.0f%% of its run: killed by signal %d", what,
                  at * 100, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        if (!WIFEXITED(status)) continue;
        CHECK_MSG(WEXITSTATUS(status) <= 1, "%s, cut at %.0f%%: exit %d", what, at * 100,
                  WEXITSTATUS(status));
        exit0 += WEXITSTATUS(status) == 0;
        exit1 += WEXITSTATUS(status) == 1;
        if (WEXITSTATUS(status) == 1) {
            char e[1300];
            snprintf(e, sizeof e, "%s/run.err", tmp);
            CHECK_MSG(tu_file_has(e, "ptwm"), "%s, cut at %.0f%%: exit 1 without a message",
                      what, at * 100);
        }
        CHECK_MSG(!leftovers(), "%s, cut at %.0f%%: temporary output left", what,
                  at * 100);
    }
}

#define CMD(...) ((char *const[]){(char *)bin, __VA_ARGS__, NULL})

int main(void) {
    const char *root = getenv("PTWM_SOURCE_DIR");
    const char *r = getenv("PTWM_TEST_SHRINK_ROUNDS");
    bin = getenv("PTWM_BIN");
    if (r && atoi(r) > 0) rounds = (unsigned)atoi(r);
    CHECK_MSG(root && bin, "PTWM_SOURCE_DIR and PTWM_BIN must be set (ctest sets them)");
    if (!root || !bin) return tu_finish("test_cli_shrink");
    snprintf(sample, sizeof sample, "%s/samples/posenet.bf16.safetensors", root);
    snprintf(tmp, sizeof tmp, "%s", tu_tmpdir());
    /* The .ptwm inputs, made once; copied fresh for every run. */
    CHECK(sh("cd '%s' && '%s' compress '%s' -o one -q && mv one/model.ptwm pt.ptwm && "
             "'%s' compress '%s' -o ptdir -q --max-shard-size 1MB && "
             "'%s' decompress ptdir -o hf -q --max-shard-size 1MB && echo '{}' > hf/config.json",
             tmp, bin, sample, bin, sample, bin) == 0);
    CHECK(chdir(tmp) == 0);
    CHECK(tu_write_layout(sample, "layout.json") == 0);
    shrink_under("inspect safetensors", CMD("inspect", "in/src.safetensors"), "in/src.safetensors",
                 NULL);
    shrink_under("inspect .ptwm", CMD("inspect", "in/src.ptwm"), "in/src.ptwm", NULL);
    shrink_under("verify safetensors", CMD("verify", "in/src.safetensors"), "in/src.safetensors",
                 NULL);
    shrink_under("verify .ptwm", CMD("verify", "in/src.ptwm"), "in/src.ptwm", NULL);
    shrink_under("verify directory", CMD("verify", "in/ptdir"),
                 "in/ptdir/model-00002-of-00003.ptwm", NULL);
    shrink_under("compress file", CMD("compress", "in/src.safetensors", "-o", "out", "-q"),
                 "in/src.safetensors", NULL);
    shrink_under("compress directory", CMD("compress", "in/hf", "-o", "out", "-q"),
                 "in/hf/model-00002-of-00003.safetensors", NULL);
    shrink_under("decompress file", CMD("decompress", "in/src.ptwm", "-o", "out", "-q"),
                 "in/src.ptwm", NULL);
    shrink_under("decompress directory", CMD("decompress", "in/ptdir", "-o", "out", "-q"),
                 "in/ptdir/model-00002-of-00003.ptwm", NULL);
    shrink_under("export safetensors",
                 CMD("export", "in/src.safetensors", "--layout", "layout.json", "-o", "out.f32"),
                 "in/src.safetensors", NULL);
    shrink_under("export directory",
                 CMD("export", "in/ptdir", "--layout", "layout.json", "-o", "out.f32"),
                 "in/ptdir/model-00003-of-00003.ptwm", NULL);
    shrink_under("bench safetensors", CMD("bench", "in/src.safetensors", "--runs", "9"),
                 "in/src.safetensors", NULL);
    shrink_under("bench .ptwm", CMD("bench", "in/src.ptwm", "--runs", "9"), "in/src.ptwm", NULL);
    shrink_under("index", CMD("index", "out"), "in/hf/model-00001-of-00003.safetensors",
                 "\"$PTWM_BIN\" compress in/hf -o out --part 1/1 -q");
    printf("%u runs cut short: %u exited 0 (read before the cut), %u exited 1, %u killed by a "
           "signal\n", runs, exit0, exit1, killed);
    return tu_finish("test_cli_shrink");
}
