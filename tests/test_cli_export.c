/* ptwm export's batched paths against the library's layout load: for
 * safetensors and .ptwm sources (small chunks, so tensors span many), at one
 * and two threads, F32 output equals ptwm_load_tensor_part of each entry and
 * BF16 output equals those floats rounded with ptwm_f32_to_bf16 (BF16
 * widened then narrowed: signalling NaNs quieted). The layout mixes small
 * tensors (batched), tensors bigger than a batch (pieces), an I32 tensor
 * that only the library converts, a tensor named twice, every stored dtype
 * the fast paths take (F32, BF16, F16) and every 16-bit pattern among them.
 * An output beside a leftover is refused naming both; a failed write is
 * reported once. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "testutil.h"

#define N_SMALL 40

typedef struct fixture {
    ptwm_tensor_desc t[N_SMALL + 5];
    uint64_t shapes[N_SMALL + 5][2];
    char names[N_SMALL + 5][32];
    void *data[N_SMALL + 5];
    size_t n;
} fixture;

static void add(fixture *f, const char *name, ptwm_dtype dt, uint64_t rows, uint64_t cols,
                uint64_t *rng) {
    ptwm_tensor_desc *t = &f->t[f->n];
    unsigned w = dt == PTWM_DTYPE_F32 || dt == PTWM_DTYPE_I32 ? 4 : 2;
    uint64_t nb = rows * cols * w, i;
    uint8_t *p = (uint8_t *)malloc(nb ? nb : 1);
    for (i = 0; i < nb; i++) p[i] = (uint8_t)tu_rand(rng);
    if (w == 2) /* every 16-bit pattern, signalling NaNs included, where there is room */
        for (i = 0; i < nb / 2 && i < 65536; i++) ((uint16_t *)(void *)p)[i] = (uint16_t)i;
    if (dt == PTWM_DTYPE_I32)
        for (i = 0; i < nb / 4; i++) ((int32_t *)(void *)p)[i] = (int32_t)(i * 7919 % 20001) - 10000;
    snprintf(f->names[f->n], sizeof f->names[0], "%s", name);
    f->shapes[f->n][0] = rows;
    f->shapes[f->n][1] = cols;
    t->name = f->names[f->n];
    t->dtype = dt;
    t->ndim = 2;
    t->shape = f->shapes[f->n];
    t->data = p;
    t->nbytes = nb;
    f->data[f->n++] = p;
}

static void make_fixture(fixture *f) {
    uint64_t rng = 20, i;
    memset(f, 0, sizeof(*f));
    add(f, "big.bf16", PTWM_DTYPE_BF16, 3000, 1024, &rng);   /* 6 MiB: pieces */
    add(f, "big.f32", PTWM_DTYPE_F32, 2048, 1024, &rng);     /* 8 MiB: pieces */
    add(f, "half", PTWM_DTYPE_F16, 256, 300, &rng);
    add(f, "ints", PTWM_DTYPE_I32, 10, 100, &rng);
    add(f, "single", PTWM_DTYPE_F32, 33, 97, &rng);
    for (i = 0; i < N_SMALL; i++) {
        char name[32];
        snprintf(name, sizeof name, "small.%llu", (unsigned long long)i);
        add(f, name, PTWM_DTYPE_BF16, 1 + i % 7, 100 + 37 * i, &rng);
    }
}

/* The layout: out of file order, "single" twice, the I32 tensor between
 * batches, a zero-sized tensor absent (the fixture has none). */
static char *layout_json(const fixture *f, ptwm_layout **l) {
    static const int order[] = {5, 2, 6, 7, 0, 8, 3, 9, 4, 1, 4};
    size_t cap = 1 << 16, len = 0, i;
    char *s = (char *)malloc(cap);
    ptwm_err err;
    len += (size_t)snprintf(s + len, cap - len, "[");
    for (i = 0; i < sizeof order / sizeof order[0] + N_SMALL - 5; i++) {
        size_t k = i < sizeof order / sizeof order[0] ? (size_t)order[i]
                                                       : i - sizeof order / sizeof order[0] + 10;
        const ptwm_tensor_desc *t = &f->t[k];
        len += (size_t)snprintf(s + len, cap - len, "%s{\"name\": \"%s\", \"shape\": [%llu, %llu]}",
                                i ? ", " : "", t->name, (unsigned long long)t->shape[0],
                                (unsigned long long)t->shape[1]);
    }
    snprintf(s + len, cap - len, "]");
    CHECK_ERR(ptwm_layout_parse_json(s, strlen(s), "export", l, &err), &err, PTWM_OK, NULL);
    return s;
}

/* What ptwm export must write: each entry loaded as F32 by the library, and
 * those floats rounded to BF16. */
static void expected(const char *src, ptwm_layout *l, float **f32, uint16_t **bf16,
                     uint64_t *count) {
    ptwm_source *s = NULL;
    ptwm_err err;
    size_t n, i;
    uint64_t pos = 0;
    const ptwm_layout_entry *e = ptwm_layout_entries(l, &n);
    CHECK_ERR(ptwm_source_open(src, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_layout_elements(e, n, count, &err), &err, PTWM_OK, NULL);
    *f32 = (float *)malloc(*count * 4);
    *bf16 = (uint16_t *)malloc(*count * 2);
    for (i = 0; i < n && s; i++) {
        uint64_t k;
        ptwm_layout_elements(&e[i], 1, &k, NULL);
        CHECK_ERR(ptwm_load_tensor_part(s, &e[i], PTWM_CONVERT_INT, 0, *f32 + pos, k, &err), &err,
                  PTWM_OK, NULL);
        pos += k;
    }
    ptwm_f32_to_bf16(*f32, *bf16, (size_t)*count);
    ptwm_source_close(s);
}

static void check_export(const char *bin, const char *src, const char *layout, ptwm_layout *l) {
    float *want = NULL;
    uint16_t *want16 = NULL;
    uint64_t count = 0;
    int threads, dt;
    char out[600], sout[600], serr[600];
    expected(src, l, &want, &want16, &count);
    if (!want || !want16) return;
    snprintf(out, sizeof out, "%s/out.raw", tu_tmpdir());
    snprintf(sout, sizeof sout, "%s/stdout", tu_tmpdir());
    snprintf(serr, sizeof serr, "%s/stderr", tu_tmpdir());
    for (threads = 1; threads <= 2; threads++) {
        for (dt = 0; dt < 2; dt++) {
            size_t len = 0;
            uint8_t *got;
            int st = tu_run_cli(bin, sout, serr,
                                "export '%s' --layout '%s' -o '%s' -f --convert int --threads %d "
                                "--dtype %s", src, layout, out, threads, dt ? "bf16" : "f32");
            CHECK_MSG(st == 0, "%s: exit %d", src, st);
            got = tu_read_file(out, &len);
            CHECK_MSG(got && len == count * (dt ? 2 : 4) &&
                          memcmp(got, dt ? (const void *)want16 : (const void *)want, len) == 0,
                      "%s, %d threads, %s: output differs from the layout load", src, threads,
                      dt ? "bf16" : "f32");
            free(got);
        }
    }
    free(want);
    free(want16);
}

/* ptwm_load_layout of the whole layout (from .ptwm: whole tensors in batches,
 * F32 decoded in place) equals the entries loaded one by one. */
static void check_layout_load(const char *src, ptwm_layout *l, int threads) {
    float *want = NULL, *got;
    uint16_t *want16 = NULL;
    uint64_t count = 0;
    size_t n;
    ptwm_source *s = NULL;
    ptwm_err err;
    const ptwm_layout_entry *e = ptwm_layout_entries(l, &n);
    expected(src, l, &want, &want16, &count);
    got = (float *)calloc(count ? count : 1, 4);
    CHECK_ERR(ptwm_source_open(src, PTWM_SOURCE_AUTO, &s, &err), &err, PTWM_OK, NULL);
    if (s && want && got) {
        ptwm_source_set_threads(s, threads);
        CHECK_ERR(ptwm_load_layout(s, e, n, PTWM_CONVERT_INT, got, count, &err), &err, PTWM_OK,
                  NULL);
        CHECK_MSG(memcmp(got, want, count * 4) == 0, "%s, %d threads: layout load differs", src,
                  threads);
    }
    ptwm_source_close(s);
    free(got);
    free(want);
    free(want16);
}

/* How many times `s` occurs in the file at path. */
static int occurrences(const char *path, const char *s) {
    size_t len = 0;
    char *text = (char *)tu_read_file(path, &len), *at;
    int n = 0;
    for (at = text; at && (at = strstr(at, s)) != NULL; at += strlen(s)) n++;
    free(text);
    return n;
}

/* An output that exists beside a leftover of an interrupted run: the refusal
 * names both and says how to replace them. A write that fails (past the file
 * size limit, as on a full disk) is reported once, and leaves nothing. */
static void check_output_errors(const char *bin, const char *src, const char *layout) {
    char out[600], left[640], sout[600], serr[600];
    struct rlimit old, lim;
    snprintf(out, sizeof out, "%s/exists.raw", tu_tmpdir());
    snprintf(left, sizeof left, "%s.tmp-Zz12Ab", out);
    snprintf(sout, sizeof sout, "%s/stdout", tu_tmpdir());
    snprintf(serr, sizeof serr, "%s/stderr", tu_tmpdir());
    CHECK(tu_write_file(out, "old", 3) == 0 && tu_write_file(left, "partial", 7) == 0);
    CHECK(tu_run_cli(bin, sout, serr, "export '%s' --layout '%s' -o '%s' --convert int", src,
                     layout, out) == 1);
    CHECK(tu_file_expect(serr, "'exists.raw.tmp-Zz12Ab'") &&
          tu_file_expect(serr, "already exists") && tu_file_expect(serr, "use --force"));
    CHECK(tu_run_cli(bin, sout, serr, "export '%s' --layout '%s' -o '%s' --convert int -f", src,
                     layout, out) == 0);
    CHECK(access(left, F_OK) != 0);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_IGN);   /* inherited: the write fails with EFBIG instead */
    lim = old;
    lim.rlim_cur = 1 << 20;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    CHECK(tu_run_cli(bin, sout, serr, "export '%s' --layout '%s' -o '%s' --convert int -f", src,
                     layout, out) == 1);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_DFL);
    CHECK_MSG(occurrences(serr, "failed: File too large") == 1, "the failed write is reported %d "
              "times", occurrences(serr, "failed: File too large"));
    CHECK(tu_count_prefixed("exists.raw.tmp-") == 0);
}

int main(void) {
    const char *bin = getenv("PTWM_BIN");
    char st[600], pt[600], layout[600];
    static fixture f;
    ptwm_layout *l = NULL;
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    uint16_t snan = 0x7f81, quieted;
    float wide;
    char *json;
    size_t i;
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    if (!bin) return tu_finish("test_cli_export");
    snprintf(st, sizeof st, "%s/src.safetensors", tu_tmpdir());
    snprintf(pt, sizeof pt, "%s/src.ptwm", tu_tmpdir());
    snprintf(layout, sizeof layout, "%s/layout.json", tu_tmpdir());
    /* the reference quiets a signalling NaN: the copy path must do so too */
    ptwm_bf16_to_f32(&snan, &wide, 1);
    ptwm_f32_to_bf16(&wide, &quieted, 1);
    CHECK(quieted == 0x7fc1);
    make_fixture(&f);
    json = layout_json(&f, &l);
    CHECK(tu_write_file(layout, json, strlen(json)) == 0);
    CHECK_ERR(ptwm_st_write(st, f.t, f.n, NULL, 0, &err), &err, PTWM_OK, NULL);
    p.chunk_size = 64 << 10;
    CHECK_ERR(ptwm_compress_file(pt, f.t, f.n, NULL, &p, &err), &err, PTWM_OK, NULL);
    if (l) {
        check_export(bin, st, layout, l);
        check_export(bin, pt, layout, l);
        check_layout_load(st, l, 1);
        check_layout_load(pt, l, 1);
        check_layout_load(pt, l, 2);
        check_output_errors(bin, pt, layout);
    }
    ptwm_layout_free(l);
    free(json);
    for (i = 0; i < f.n; i++) free(f.data[i]);
    return tu_finish("test_cli_export");
}
