/* Crash safety of the CLI's output, run as processes ($PTWM_BIN) on the
 * repository's samples/posenet.bf16.safetensors:
 * - a kill (SIGKILL) at every step of a `compress --force` run, injected with
 *   the PTWM_TEST_KILL_AT test hook, never leaves OUTDIR missing: it holds the
 *   complete old or the complete new output; without an atomic exchange
 *   (PTWM_TEST_NO_EXCHANGE) the one step that leaves it missing is repaired by
 *   the next run;
 * - kill -9 at random moments of real runs: the same;
 * - SIGINT, SIGTERM and SIGHUP remove the temporary output and exit 130, 143,
 *   129 (compress at known steps and at random moments; export's single file
 *   at random moments);
 * - export names a leftover OUT.tmp-* and --force removes it;
 * - a leftover OUTDIR.tmp-* is named by the next run and removed by --force. */
#include <dirent.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static const char *bin, *sample;
static char out_path[1200], err_path[1200];
static char outdir[1200];
static uint8_t *old_bytes, *new_bytes;
static size_t old_len, new_len;
#define run(...) tu_run_cli(bin, out_path, err_path, __VA_ARGS__)

/* Run "ptwm ARGS" with the test hook PTWM_TEST_KILL_AT=at in the environment
 * (and PTWM_TEST_NO_EXCHANGE=1 if no_exchange). */
static int run_hooked(const char *at, int no_exchange, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int run_hooked(const char *at, int no_exchange, const char *fmt, ...) {
    char args[4096];
    va_list ap;
    int rc;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    setenv("PTWM_TEST_KILL_AT", at, 1);
    if (no_exchange) setenv("PTWM_TEST_NO_EXCHANGE", "1", 1);
    rc = run("%s", args);
    unsetenv("PTWM_TEST_KILL_AT");
    unsetenv("PTWM_TEST_NO_EXCHANGE");
    return rc;
}

/* Exit status of a run the hook killed: the shell may report it as 128 + 9. */
static int killed(int rc) { return rc == -1 || rc == 128 + SIGKILL; }

static int err_has(const char *s) { return tu_file_expect(err_path, s); }

/* Entries named OUTDIR.tmp-* or OUTDIR.old-*. */
static int leftovers(void) { return tu_count_prefixed("out.tmp-") + tu_count_prefixed("out.old-"); }

/* 'o' if OUTDIR holds exactly the old output, 'n' the new one, 0 if it is
 * missing or holds anything else. */
static int outdir_state(void) {
    char p[1300];
    size_t len = 0;
    uint8_t *b;
    int r = 0;
    DIR *d = opendir(outdir);
    struct dirent *e;
    int files = 0;
    while (d && (e = readdir(d)) != NULL) files += e->d_name[0] != '.';
    if (d) closedir(d);
    snprintf(p, sizeof p, "%s/model.ptwm", outdir);
    b = tu_read_file(p, &len);
    if (b && files == 1 && len == old_len && !memcmp(b, old_bytes, len)) r = 'o';
    if (b && files == 1 && len == new_len && !memcmp(b, new_bytes, len)) r = 'n';
    free(b);
    return r;
}

/* OUTDIR back to the old output, leftovers gone. */
static void reset_old(void) {
    CHECK(run("compress '%s' -o '%s' -q -f --method zstd", sample, outdir) == 0);
    CHECK(outdir_state() == 'o' && leftovers() == 0);
}

/* From the old output, a `compress --force` killed at `step`: OUTDIR's state after. */
static int kill_at(const char *step, int no_exchange) {
    int rc;
    reset_old();
    rc = run_hooked(step, no_exchange, "compress '%s' -o '%s' -q -f", sample, outdir);
    CHECK_MSG(killed(rc), "step %s%s: exit %d, expected a kill", step,
              no_exchange ? " (no exchange)" : "", rc);
    return outdir_state();
}

static void kill_every_step(void) {
    static const char *const exchange_steps[] = {"begin", "synced", "exchanged", "done"};
    static const char *const fallback_steps[] = {"begin", "synced", "parked", "renamed", "done"};
    size_t i;
    for (i = 0; i < sizeof exchange_steps / sizeof exchange_steps[0]; i++) {
        int st = kill_at(exchange_steps[i], 0);
        CHECK_MSG(st == 'o' || st == 'n', "step %s: OUTDIR missing or incomplete",
                  exchange_steps[i]);
        /* The old output goes away only once the new one is in place. */
        CHECK(st == (i < 2 ? 'o' : 'n'));
        if (i < 3) {
            CHECK_MSG(leftovers() == 1, "step %s: %d leftovers", exchange_steps[i], leftovers());
            CHECK(run("compress '%s' -o '%s' -q", sample, outdir) == 1);
            CHECK(err_has("left over from an interrupted run: 'out.tmp-"));
            CHECK(err_has("force removes them"));
        }
    }
    /* Without RENAME_EXCHANGE: two renames, and between them OUTDIR is
     * missing; the next run puts the old output back before anything else. */
    for (i = 0; i < sizeof fallback_steps / sizeof fallback_steps[0]; i++) {
        int st = kill_at(fallback_steps[i], 1);
        if (!strcmp(fallback_steps[i], "parked")) {
            CHECK(st == 0);
            CHECK(run("compress '%s' -o '%s' -q", sample, outdir) == 1);
            CHECK(err_has("put back from where an interrupted run had moved it"));
            st = outdir_state();
            CHECK(st == 'o');
        }
        CHECK_MSG(st == 'o' || st == 'n', "fallback step %s: OUTDIR missing or incomplete",
                  fallback_steps[i]);
    }
    reset_old();
    CHECK(run("compress '%s' -o '%s' -q -f", sample, outdir) == 0);
    CHECK(outdir_state() == 'n' && leftovers() == 0);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Start "ptwm compress SAMPLE -o OUTDIR -q -f [--method zstd]" with output
 * discarded; returns its pid. */
static pid_t start(int old_method) {
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        if (old_method)
            execl(bin, bin, "compress", sample, "-o", outdir, "-q", "-f", "--method", "zstd",
                  (char *)NULL);
        else
            execl(bin, bin, "compress", sample, "-o", outdir, "-q", "-f", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* What a run sent `sig` may end with: it finished first (exit 0), it removed
 * its temporary output and exited 128 + sig, or the signal came before the
 * program had set up its handling (killed by it, before writing anything). */
static int signal_outcome(int status, int sig) {
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 128 + sig;
    return WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

/* Signal a real run at random moments (spread over one run's duration). */
static void signal_at_random(int sig, int rounds) {
    uint64_t seed = 0x5eedu + (uint64_t)sig;
    double t0 = now(), span;
    int status, i;
    reset_old();
    waitpid(start(0), &status, 0);
    span = now() - t0;
    for (i = 0; i < rounds; i++) {
        pid_t pid = start(i & 1);
        int st;
        usleep((useconds_t)((double)(tu_rand(&seed) % 1000) / 1000.0 * span * 1.2e6));
        kill(pid, sig);
        waitpid(pid, &status, 0);
        st = outdir_state();
        CHECK_MSG(st == 'o' || st == 'n', "signal %d round %d: OUTDIR missing or incomplete", sig,
                  i);
        if (sig == SIGKILL) {
            CHECK(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
            if (leftovers()) reset_old();
        } else {
            CHECK_MSG(signal_outcome(status, sig), "signal %d round %d: status %d", sig, i,
                      status);
            CHECK_MSG(leftovers() == 0, "signal %d round %d: %d leftovers", sig, i, leftovers());
        }
    }
}

/* A signal at a known step: exit code and no temporary output left. */
static void signals_clean_up(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    static const char *const steps[] = {"begin", "synced"};
    size_t i, j;
    char fresh[1300];
    snprintf(fresh, sizeof fresh, "%s/fresh", tu_tmpdir());
    for (i = 0; i < 3; i++) {
        for (j = 0; j < 2; j++) {
            struct stat sb;
            char at[64];
            int rc;
            reset_old();
            snprintf(at, sizeof at, "%s:%d", steps[j], sigs[i]);
            rc = run_hooked(at, 0, "compress '%s' -o '%s' -q -f", sample, outdir);
            CHECK_MSG(rc == 128 + sigs[i], "signal %d at %s: exit %d", sigs[i], steps[j], rc);
            CHECK(outdir_state() == 'o' && leftovers() == 0);
            rc = run_hooked(at, 0, "compress '%s' -o '%s' -q", sample, fresh);
            CHECK(rc == 128 + sigs[i]);
            CHECK(stat(fresh, &sb) != 0);
        }
    }
}

/* ptwm export's single output file: a signal at a random moment of a real
 * run either finds it done or removes the temporary file and exits 128 + sig;
 * the output is never left partial. The source is a sparse 32 MiB raw F32
 * file, so a run lasts long enough to be interrupted. */
static void export_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    char raw[1300], layout[1300], out[1300];
    static const char json[] = "[{\"name\": \"\", \"shape\": [8388608]}]";
    uint64_t seed = 0xe4;
    double t0, span = 0;
    int status, i, interrupted = 0;
    FILE *f;
    snprintf(raw, sizeof raw, "%s/big.f32", tu_tmpdir());
    snprintf(layout, sizeof layout, "%s/big.json", tu_tmpdir());
    snprintf(out, sizeof out, "%s/out.f32", tu_tmpdir());
    f = fopen(raw, "wb");
    CHECK(f && ftruncate(fileno(f), (off_t)32 << 20) == 0);
    if (f) fclose(f);
    CHECK(tu_write_file(layout, json, strlen(json)) == 0);
    for (i = 0; i < 12; i++) {
        int sig = sigs[i % 3];
        struct stat sb;
        pid_t pid;
        t0 = now();
        pid = fork();
        if (pid == 0) {
            freopen("/dev/null", "w", stdout);
            freopen("/dev/null", "w", stderr);
            execl(bin, bin, "export", raw, "--raw", "--layout", layout, "-o", out, "-f",
                  (char *)NULL);
            _exit(127);
        }
        if (i == 0) { /* the first run is timed, not signalled */
            waitpid(pid, &status, 0);
            span = now() - t0;
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            unlink(out);
            continue;
        }
        usleep((useconds_t)((double)(tu_rand(&seed) % 1000) / 1000.0 * span * 1.2e6));
        kill(pid, sig);
        waitpid(pid, &status, 0);
        CHECK_MSG(signal_outcome(status, sig), "export, signal %d: status %d", sig, status);
        interrupted += WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig;
        CHECK(stat(out, &sb) != 0 || sb.st_size == (off_t)32 << 20);
        CHECK_MSG(tu_count_prefixed("out.f32.tmp-") == 0, "export, signal %d: temporary file left",
                  sig);
        unlink(out);
    }
    CHECK_MSG(interrupted > 0, "no export run was interrupted");
    /* What a kill -9 leaves, OUT.tmp-XXXXXX, is named by the next run and
     * removed by --force. */
    snprintf(out, sizeof out, "%s/out.f32.tmp-Ab12Cd", tu_tmpdir());
    CHECK(tu_write_file(out, "partial", 7) == 0);
    snprintf(out, sizeof out, "%s/out.f32", tu_tmpdir());
    CHECK(run("export '%s' --raw --layout '%s' -o '%s'", raw, layout, out) == 1);
    CHECK(err_has("left over from an interrupted run: 'out.f32.tmp-Ab12Cd'"));
    CHECK(access(out, F_OK) != 0);
    CHECK(run("export '%s' --raw --layout '%s' -o '%s' -f", raw, layout, out) == 0);
    CHECK(tu_count_prefixed("out.f32.tmp-") == 0);
}

int main(void) {
    char src[1200], ref[1300], p[1400];
    const char *root = getenv("PTWM_SOURCE_DIR");
    const char *tmp = tu_tmpdir();
    bin = getenv("PTWM_BIN");
    snprintf(src, sizeof src, "%s/samples/posenet.bf16.safetensors", root ? root : ".");
    sample = src;
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    CHECK_MSG(access(src, R_OK) == 0, "cannot read %s (PTWM_SOURCE_DIR)", src);
    if (!bin || access(src, R_OK) != 0) return tu_finish("cli_crash");
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", tmp);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", tmp);
    snprintf(outdir, sizeof outdir, "%s/out", tmp);
    /* The two outputs a run may leave: old (zstd) and new (the default method). */
    snprintf(ref, sizeof ref, "%s/ref-old", tmp);
    CHECK(run("compress '%s' -o '%s' -q --method zstd", sample, ref) == 0);
    snprintf(p, sizeof p, "%s/model.ptwm", ref);
    old_bytes = tu_read_file(p, &old_len);
    snprintf(ref, sizeof ref, "%s/ref-new", tmp);
    CHECK(run("compress '%s' -o '%s' -q", sample, ref) == 0);
    snprintf(p, sizeof p, "%s/model.ptwm", ref);
    new_bytes = tu_read_file(p, &new_len);
    CHECK(old_bytes && new_bytes && (old_len != new_len || memcmp(old_bytes, new_bytes, old_len)));
    if (!old_bytes || !new_bytes) return tu_finish("cli_crash");
    kill_every_step();
    signals_clean_up();
    signal_at_random(SIGKILL, 8);
    signal_at_random(SIGTERM, 4);
    export_signals();
    free(old_bytes);
    free(new_bytes);
    return tu_finish("cli_crash");
}
