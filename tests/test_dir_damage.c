/* Bit flips in every file of a .ptwm checkpoint directory (docs/SHARDING.md,
 * "The file record"). Two directories are made from the repository's sample:
 * a sharded one (three shards, the index keeping the Hugging Face index,
 * config.json, generation_config.json, tokenizer/vocab.txt and the file
 * record) and a one-shard one (model.ptwm, config.json, the record). Each
 * flipped copy goes through
 *   - decompression (ptwm_decompress_checkpoint): an error naming the file,
 *     or every restored file exactly the original;
 *   - the steps of `ptwm verify` (open, every shard's CRCs and hashes, every
 *     other file against the record): never all passed;
 *   - a load of every tensor through ptwm_source_* (what export and the
 *     Python loaders read): an error naming the file, or every tensor exact;
 *   - for the first flips of each file, the CLI's verify (exit 1 naming the
 *     file), decompress and export (exit 1 naming it, or exact output).
 * No silent wrong output, no crash (the sanitizer build runs this too).
 * Then files gone or added, and a directory without a record (as older
 * versions wrote): named as missing, not verified, or read as before.
 * Deterministic: a fixed seed. PTWM_TEST_FLIPS=N runs N times as many flips
 * per file (the larger campaign run by hand). */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "records.h"
#include "testutil.h"

#define MAXT 256
#define MAXF 32
#define WHY_MAX 1400   /* a name and a message */

enum { C_DECOMPRESS, C_VERIFY, C_LOAD, C_CLI_VERIFY, C_CLI_DECOMPRESS, C_CLI_EXPORT, NCONS };
static const char *const cons_name[NCONS] = {"decompress", "verify steps", "tensor loads",
                                             "ptwm verify", "ptwm decompress", "ptwm export"};

typedef struct tally {
    unsigned tries, caught, unnamed, exact, wrong;
} tally;

static const char *bin;
static char out_path[1300], err_path[1300], layout_path[1300], export_ref[1300];
static char *ref_name[MAXT];
static uint8_t *ref_data[MAXT];
static uint64_t ref_size[MAXT];
static size_t nref;
static tally total[NCONS];

#define run(...) tu_run_cli(bin, out_path, err_path, __VA_ARGS__)

static char *tmp_join(const char *a, const char *b) {
    char *p = (char *)malloc(strlen(a) + strlen(b) + 2);
    sprintf(p, "%s/%s", a, b);
    return p;
}

static void rm_tree(const char *path) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    CHECK(system(cmd) == 0);
}

/* ---- the directories ------------------------------------------------------ */

/* The sample as a Hugging Face directory: shards of at most max_shard bytes
 * (one model.safetensors when it fits), and the model's other files. */
static void make_hf(const char *sample, const char *dir, uint64_t max_shard, int tokenizer) {
    ptwm_st *st = NULL;
    ptwm_tensor_desc *d;
    ptwm_err err;
    size_t i, n;
    char *p;
    CHECK_ERR(ptwm_st_open(sample, PTWM_OPEN_MMAP, &st, &err), &err, PTWM_OK, NULL);
    if (!st) return;
    n = ptwm_st_count(st);
    d = (ptwm_tensor_desc *)calloc(n + 1, sizeof *d);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        ptwm_st_tensor(st, i, &t, NULL);
        d[i] = ptwm_desc_of(&t, t.data);
    }
    CHECK_ERR(ptwm_stdir_write(dir, d, n, NULL, 0, max_shard, &err), &err, PTWM_OK, NULL);
    free(d);
    ptwm_st_close(st);
    p = tmp_join(dir, "config.json");
    CHECK(tu_write_file(p, "{\"model_type\": \"posenet\", \"hidden_size\": 64}\n", 45) == 0);
    free(p);
    if (!tokenizer) return;
    p = tmp_join(dir, "generation_config.json");
    CHECK(tu_write_file(p, "{\"max_length\": 20}\n", 19) == 0);
    free(p);
    p = tmp_join(dir, "tokenizer");
    CHECK(mkdir(p, 0777) == 0);
    free(p);
    p = tmp_join(dir, "tokenizer/vocab.txt");
    CHECK(tu_write_file(p, "<s>\n</s>\nhello\nworld\n", 21) == 0);
    free(p);
}

/* Every tensor of the original, and a layout naming them all for export. */
static void load_reference(const char *hf) {
    ptwm_source *s = NULL;
    ptwm_err err;
    size_t i;
    CHECK_ERR(ptwm_source_open(hf, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    if (!s) return;
    nref = ptwm_source_count(s);
    CHECK(nref > 0 && nref <= MAXT);
    for (i = 0; i < nref && i < MAXT; i++) {
        ptwm_tensor_info t;
        ptwm_source_tensor(s, i, &t, NULL);
        ref_name[i] = strdup(t.name);
        ref_size[i] = t.nbytes;
        ref_data[i] = (uint8_t *)malloc(t.nbytes + 1);
        CHECK_ERR(ptwm_source_read(s, i, 0, ref_data[i], t.nbytes, &err), &err, PTWM_OK, NULL);
    }
    ptwm_source_close(s);
    CHECK(tu_write_layout(hf, layout_path) == 0);
}

/* ---- what each consumer makes of a flipped directory ---------------------- */

static void count(int c, int failed, int named, int exact, const char *what) {
    tally *t = &total[c];
    t->tries++;
    if (failed) {
        t->caught++;
        if (!named) {
            t->unnamed++;
            fprintf(stderr, "%s: %s failed without naming the file\n", what, cons_name[c]);
        }
    } else if (exact) {
        t->exact++;
    } else {
        t->wrong++;
        fprintf(stderr, "%s: %s passed it or gave wrong output without an error\n", what,
                cons_name[c]);
    }
}

static int names(const char *msg, const char *file) {
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    return strstr(msg, base) != NULL;
}

static void on_file(void *ctx, const char *name, ptwm_file_check result, const ptwm_err *err) {
    char *why = (char *)ctx;
    if (result == PTWM_FILE_OK || why[0]) return;
    snprintf(why, WHY_MAX, "%s: %s", name, err ? err->message : "not verified");
}

/* What `ptwm verify` does: "" when everything passed, else why not. */
static void verify_steps(const char *dir, char why[WHY_MAX]) {
    ptwm_ptdir *d = NULL;
    ptwm_err err;
    size_t i;
    why[0] = 0;
    if (ptwm_ptdir_open(dir, &d, &err) != PTWM_OK) {
        snprintf(why, WHY_MAX, "%s", err.message);
        return;
    }
    for (i = 0; i < ptwm_ptdir_shard_count(d) && !why[0]; i++)
        if (ptwm_reader_verify(ptwm_ptdir_shard(d, i), &err) != PTWM_OK)
            snprintf(why, WHY_MAX, "%s: %s", ptwm_ptdir_shard_name(d, i), err.message);
    if (!why[0] && ptwm_ptdir_check_files(d, on_file, why, &err) != PTWM_OK)
        snprintf(why, WHY_MAX, "%s", err.message);
    ptwm_ptdir_close(d);
}

/* Every tensor through a source; 0 and *exact, or the error. */
static ptwm_error load_all(const char *dir, int *exact, ptwm_err *err) {
    ptwm_source *s = NULL;
    size_t i, j;
    ptwm_error rc = ptwm_source_open(dir, PTWM_SOURCE_AUTO, &s, err);
    *exact = !rc && ptwm_source_count(s) == nref;
    for (i = 0; !rc && i < ptwm_source_count(s); i++) {
        ptwm_tensor_info t;
        uint8_t *buf;
        ptwm_source_tensor(s, i, &t, NULL);
        for (j = 0; j < nref && strcmp(ref_name[j], t.name) != 0; j++) continue;
        buf = (uint8_t *)malloc(t.nbytes + 1);
        rc = ptwm_source_read(s, i, 0, buf, t.nbytes, err);
        if (!rc)
            *exact &= j < nref && ref_size[j] == t.nbytes && !memcmp(buf, ref_data[j], t.nbytes);
        free(buf);
    }
    ptwm_source_close(s);
    return rc;
}

static int err_names(const char *file) {
    size_t n = 0;
    char *text = (char *)tu_read_file(err_path, &n);
    int yes = text && names(text, file);
    free(text);
    return yes;
}

static void one_try(const char *pt, const char *hf, const char *file, int cli, const char *what) {
    char *out = tmp_join(tu_tmpdir(), "restored"), *f32 = tmp_join(tu_tmpdir(), "export.f32");
    char why[WHY_MAX];
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    ptwm_error rc;
    int exact = 0;
    o.threads = 2;
    rc = ptwm_decompress_checkpoint(pt, out, &o, &err);
    count(C_DECOMPRESS, rc != PTWM_OK, rc && names(err.message, file),
          !rc && tu_trees_equal(hf, out), what);
    rm_tree(out);
    verify_steps(pt, why);
    count(C_VERIFY, why[0] != 0, names(why, file), 0, what);
    rc = load_all(pt, &exact, &err);
    /* A file no load reads (config.json) may be damaged while every tensor loads. */
    count(C_LOAD, rc != PTWM_OK, rc && names(err.message, file), exact, what);
    if (cli) {
        int st = run("verify '%s' -q", pt);
        CHECK_MSG(st == 0 || st == 1, "%s: ptwm verify exited %d", what, st);
        count(C_CLI_VERIFY, st == 1, err_names(file), 0, what);
        st = run("decompress '%s' -o '%s' -q", pt, out);
        CHECK_MSG(st == 0 || st == 1, "%s: ptwm decompress exited %d", what, st);
        count(C_CLI_DECOMPRESS, st == 1, err_names(file), st == 0 && tu_trees_equal(hf, out), what);
        rm_tree(out);
        st = run("export '%s' --layout '%s' -o '%s'", pt, layout_path, f32);
        CHECK_MSG(st == 0 || st == 1, "%s: ptwm export exited %d", what, st);
        count(C_CLI_EXPORT, st == 1, st == 1 && err_names(file),
              st == 0 && tu_files_equal(f32, export_ref), what);
        unlink(f32);
    }
    free(out);
    free(f32);
}

/* ---- the campaign --------------------------------------------------------- */

static size_t list_files(const char *dir, const char *rel, char **out, size_t n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < MAXF) {
        char *p, *r;
        struct stat sb;
        if (e->d_name[0] == '.') continue;
        p = tmp_join(dir, e->d_name);
        r = rel ? tmp_join(rel, e->d_name) : strdup(e->d_name);
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            n = list_files(p, r, out, n);
            free(r);
        } else {
            out[n++] = r;
        }
        free(p);
    }
    if (d) closedir(d);
    return n;
}

static void flip_bit(const char *path, uint64_t bit) {
    FILE *f = fopen(path, "r+b");
    int c;
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, (long)(bit / 8), SEEK_SET);
    c = fgetc(f);
    fseek(f, (long)(bit / 8), SEEK_SET);
    fputc(c ^ (1 << (bit % 8)), f);
    fclose(f);
}

/* Flips in each file of pt: its first and last bytes, then bytes at random. */
static void campaign(const char *pt, const char *hf, unsigned scale) {
    char *files[MAXF];
    size_t nf = list_files(pt, NULL, files, 0), i;
    uint64_t seed = 0x36d1f;
    CHECK(nf >= 3);
    for (i = 0; i < nf; i++) {
        char *path = tmp_join(pt, files[i]);
        struct stat sb;
        unsigned k, flips, cli_flips = 3;
        CHECK(stat(path, &sb) == 0);
        flips = 24 * scale;
        for (k = 0; k < flips && sb.st_size > 0; k++) {
            uint64_t byte = k == 0 ? 0 : k == 1 ? (uint64_t)sb.st_size - 1
                                                : tu_rand(&seed) % (uint64_t)sb.st_size;
            uint64_t bit = byte * 8 + tu_rand(&seed) % 8;
            char what[1400];
            snprintf(what, sizeof what, "%s: bit %llu of %s", pt, (unsigned long long)bit,
                     files[i]);
            flip_bit(path, bit);
            one_try(pt, hf, files[i], k < cli_flips, what);
            flip_bit(path, bit);
        }
        free(path);
        free(files[i]);
    }
}

static void tally_files(void *ctx, const char *name, ptwm_file_check result, const ptwm_err *err) {
    unsigned *n = (unsigned *)ctx;
    (void)name;
    (void)err;
    n[result]++;
}

/* What ptwm_ptdir_check_files counts in dir: n[result], and whether it opened. */
static int check_counts(const char *dir, unsigned n[4]) {
    ptwm_ptdir *d = NULL;
    ptwm_err err;
    memset(n, 0, 4 * sizeof *n);
    if (ptwm_ptdir_open(dir, &d, &err) != PTWM_OK) return 0;
    CHECK_ERR(ptwm_ptdir_check_files(d, tally_files, n, &err), &err, PTWM_OK, NULL);
    ptwm_ptdir_close(d);
    return 1;
}

/* Files gone, added, or a directory without a record (as older versions
 * wrote): what each reader says. */
static void test_missing_and_extra(const char *pt, const char *hf) {
    char *dir = tmp_join(tu_tmpdir(), "gone"), *out = tmp_join(tu_tmpdir(), "gone.out");
    unsigned n[4];
    ptwm_err err;
    CHECK(tu_sh("cp -r '%s' '%s' && rm '%s/tokenizer/vocab.txt' && echo hi > '%s/README'", pt,
                dir, dir, dir) == 0);
    CHECK(check_counts(dir, n) && n[PTWM_FILE_MISSING] == 1 && n[PTWM_FILE_UNRECORDED] == 1 &&
          n[PTWM_FILE_OK] == 3 && n[PTWM_FILE_DAMAGED] == 0);
    CHECK_ERR(ptwm_decompress_checkpoint(dir, out, NULL, &err), &err, PTWM_ERR_NOT_FOUND,
              "file 'tokenizer/vocab.txt' of its file record (model.ptwm.files.json) is missing");
    CHECK(run("verify '%s'", dir) == 1 && tu_file_expect(err_path, "tokenizer/vocab.txt: FAILED") &&
          tu_file_expect(err_path, "README: NOT VERIFIED: not listed in the file record"));
    /* An unlisted file is copied as it is; verify cannot vouch for it. */
    CHECK(tu_sh("cp '%s/tokenizer/vocab.txt' '%s/tokenizer/'", pt, dir) == 0);
    CHECK_ERR(ptwm_decompress_checkpoint(dir, out, NULL, &err), &err, PTWM_OK, NULL);
    {
        char *a = tmp_join(dir, "README"), *b = tmp_join(out, "README");
        CHECK(tu_files_equal(a, b));
        free(a);
        free(b);
    }
    rm_tree(out);
    /* The index gone, a model.ptwm in its place: the record still lists it. */
    CHECK(tu_sh("cd '%s' && rm README model.ptwm.index.json && cp model-00001-of-00003.ptwm "
                "model.ptwm", dir) == 0);
    CHECK_ERR(ptwm_decompress_checkpoint(dir, out, NULL, &err), &err, PTWM_ERR_NOT_FOUND,
              "model.ptwm.index.json is missing, its file record (model.ptwm.files.json) lists it");
    /* No record at all: everything reads, nothing beside the shards is vouched for. */
    CHECK(tu_sh("rm -rf '%s' && cp -r '%s' '%s'", dir, pt, dir) == 0);
    CHECK(tu_record_strip(dir) == 0);
    CHECK(check_counts(dir, n) && n[PTWM_FILE_UNRECORDED] == 4 && n[PTWM_FILE_OK] == 0);
    CHECK(run("verify '%s'", dir) == 1 &&
          tu_file_expect(err_path, "model.ptwm.index.json: NOT VERIFIED: the directory has no "
                                   "file record") &&
          tu_file_expect(err_path, "4 of 4 other files could not be verified"));
    CHECK(run("decompress '%s' -o '%s' -q", dir, out) == 0 &&
          tu_file_expect(err_path, "has no file record"));
    CHECK(tu_trees_equal(hf, out));
    free(dir);
    free(out);
}

int main(void) {
    const char *root = getenv("PTWM_SOURCE_DIR");
    const char *flips = getenv("PTWM_TEST_FLIPS");
    unsigned scale = flips && atoi(flips) > 0 ? (unsigned)atoi(flips) : 1;
    char sample[1200], *hf, *pt, *hf1, *pt1;
    ptwm_err err;
    int c;
    bin = getenv("PTWM_BIN");
    CHECK_MSG(root && bin, "PTWM_SOURCE_DIR and PTWM_BIN must be set (ctest sets them)");
    if (!root || !bin) return tu_finish("test_dir_damage");
    snprintf(sample, sizeof sample, "%s/samples/posenet.bf16.safetensors", root);
    snprintf(out_path, sizeof out_path, "%s/cli.out", tu_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/cli.err", tu_tmpdir());
    snprintf(layout_path, sizeof layout_path, "%s/layout.json", tu_tmpdir());
    snprintf(export_ref, sizeof export_ref, "%s/reference.f32", tu_tmpdir());
    hf = tmp_join(tu_tmpdir(), "hf");
    pt = tmp_join(tu_tmpdir(), "pt");
    hf1 = tmp_join(tu_tmpdir(), "hf1");
    pt1 = tmp_join(tu_tmpdir(), "pt1");
    make_hf(sample, hf, (uint64_t)1 << 20, 1);
    make_hf(sample, hf1, (uint64_t)1 << 30, 0);
    load_reference(hf);
    CHECK_ERR(ptwm_compress_checkpoint(hf, pt, NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_compress_checkpoint(hf1, pt1, NULL, &err), &err, PTWM_OK, NULL);
    /* Undamaged: everything passes, and export's output to compare with. */
    CHECK(run("verify '%s' -q", pt) == 0);
    CHECK(run("verify '%s' -q", pt1) == 0);
    CHECK(run("export '%s' --layout '%s' -o '%s'", pt, layout_path, export_ref) == 0);
    campaign(pt, hf, scale);
    campaign(pt1, hf1, scale);
    test_missing_and_extra(pt, hf);
    for (c = 0; c < NCONS; c++) {
        const tally *t = &total[c];
        printf("%-16s %4u flips: %4u caught (%u not naming the file), %4u exact, %u wrong\n",
               cons_name[c], t->tries, t->caught, t->unnamed, t->exact, t->wrong);
        CHECK_MSG(t->wrong == 0, "%s: %u silent wrong outputs", cons_name[c], t->wrong);
        CHECK_MSG(t->unnamed == 0, "%s: %u failures not naming the file", cons_name[c], t->unnamed);
        CHECK(t->tries > 0);
    }
    free(hf);
    free(pt);
    free(hf1);
    free(pt1);
    return tu_finish("test_dir_damage");
}
