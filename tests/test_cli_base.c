/* `ptwm compress --base`, `ptwm decompress --base` and what `ptwm inspect`
 * shows, run as processes: a sharded checkpoint directory against its base
 * (safetensors and .ptwm directories), a training checkpoint file (params and
 * AdamW moments) against an earlier one, byte-exact restores, and the errors
 * a missing, different or damaged base gives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static const char *bin;
static char out_path[1200], err_path[1200];
#define run(...) tu_run_cli(bin, out_path, err_path, __VA_ARGS__)

enum { N = 60000 };
static uint32_t rng;
static uint32_t next(void) {
    rng ^= rng << 13; /* xorshift32: every bit varies (an LCG's low bits repeat) */
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng >> 8;
}

/* BF16 weights near 2^-6, and the same after a small fine-tune (one in 8
 * moved by one ulp, seed `tuned`; 0: the base itself). */
static void weights(uint16_t *w, size_t n, uint32_t seed, uint32_t tuned) {
    size_t i;
    rng = seed;
    for (i = 0; i < n; i++) w[i] = (uint16_t)((next() & 1u) << 15 | (118u + next() % 6) << 7 | (next() & 0x7f));
    rng = tuned;
    for (i = 0; tuned && i < n; i++)
        if (next() % 8 == 0) w[i] = (uint16_t)(w[i] + 1);
}

static const uint64_t shape[2] = {N / 200, 200};

/* A Hugging Face directory of two shards, tensors a.weight and b.weight,
 * and a config file. */
static void write_dir(const char *dir, uint32_t seed, uint32_t tuned) {
    static uint16_t a[N], b[N];
    char p[1200];
    ptwm_err err;
    ptwm_tensor_desc d;
    const char *index = "{\"metadata\": {\"total_size\": 240000}, \"weight_map\": {\"a.weight\": "
                        "\"model-00001-of-00002.safetensors\", \"b.weight\": "
                        "\"model-00002-of-00002.safetensors\"}}";
    mkdir(dir, 0755);
    weights(a, N, seed, tuned);
    weights(b, N, seed + 1, tuned ? tuned + 1 : 0);
    d = (ptwm_tensor_desc){"a.weight", PTWM_DTYPE_BF16, 2, shape, a, sizeof(a)};
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    CHECK(ptwm_st_write(p, &d, 1, NULL, 0, &err) == PTWM_OK);
    d = (ptwm_tensor_desc){"b.weight", PTWM_DTYPE_BF16, 2, shape, b, sizeof(b)};
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    CHECK(ptwm_st_write(p, &d, 1, NULL, 0, &err) == PTWM_OK);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    tu_write_file(p, index, strlen(index));
    snprintf(p, sizeof p, "%s/config.json", dir);
    tu_write_file(p, "{}\n", 3);
}

/* A training checkpoint file: param/w, adam.m/w, adam.v/w (F32 bits from
 * the BF16 weights; the moments redrawn every step, as Adam's first moment
 * nearly is). */
static void write_ckpt(const char *path, uint32_t step) {
    static uint16_t w[N];
    static uint32_t p[N], m[N], v[N];
    ptwm_tensor_desc d[3];
    ptwm_err err;
    size_t i;
    weights(w, N, 5, step);
    rng = 12345 + step;
    for (i = 0; i < N; i++) {
        p[i] = (uint32_t)w[i] << 16 | (next() & 0xffffu);
        m[i] = (uint32_t)(next() % 64 + 96) << 23 | next();
        v[i] = (uint32_t)(80 + i % 7) << 23 | (next() & 0xffff);
    }
    d[0] = (ptwm_tensor_desc){"param/w", PTWM_DTYPE_F32, 2, shape, p, sizeof(p)};
    d[1] = (ptwm_tensor_desc){"adam.m/w", PTWM_DTYPE_F32, 2, shape, m, sizeof(m)};
    d[2] = (ptwm_tensor_desc){"adam.v/w", PTWM_DTYPE_F32, 2, shape, v, sizeof(v)};
    CHECK(ptwm_st_write(path, d, 3, NULL, 0, &err) == PTWM_OK);
}

/* The size of every file under dir, added. */
static long long dir_bytes(const char *dir) {
    char p[1200];
    struct stat sb;
    long long n = 0;
    const char *names[] = {"model-00001-of-00002.ptwm", "model-00002-of-00002.ptwm", "model.ptwm"};
    size_t i;
    for (i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (stat(p, &sb) == 0) n += (long long)sb.st_size;
    }
    return n;
}

#define EXPECT(status, stream, text)                                                          \
    do {                                                                                      \
        CHECK(tu_file_expect(stream, text));                    \
        (void)(status);                                                                       \
    } while (0)

/* The path of `name` in the test's directory, kept (tu_tmp_path rotates four). */
static const char *tmp_keep(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s", tu_tmp_path(name));
    return buf;
}

static int absent(const char *name) {
    struct stat sb;
    return stat(tu_tmp_path(name), &sb) != 0;
}

/* A run that exits 1 with `text` in its error. */
#define FAILS(text, ...)                                                                      \
    do {                                                                                      \
        int st_ = run(__VA_ARGS__);                                                           \
        CHECK(st_ == 1);                                                                      \
        EXPECT(st_, err_path, text);                                                          \
    } while (0)

/* `ptwm compress SRC.ptwm`: a .ptwm checkpoint re-coded against a base
 * (step 2 saved whole, then against step 1), whole again from its own base
 * (--src-base), and the errors of a missing, damaged or different base.
 * Every output decompresses to step 2's bytes; a failed run leaves no output. */
static void recode(void) {
    char s1[1200], s2[1200], c1[1200], w2[1200], d2[1200], bad[1200], p[1300];
    tmp_keep(s1, sizeof s1, "step1.safetensors");
    tmp_keep(s2, sizeof s2, "step2.safetensors");
    tmp_keep(c1, sizeof c1, "c1");
    tmp_keep(w2, sizeof w2, "w2");
    tmp_keep(d2, sizeof d2, "d2");
    tmp_keep(bad, sizeof bad, "c1bad.ptwm");
    CHECK(run("compress -q %s -o %s", s1, c1) == 0);
    CHECK(run("compress -q %s -o %s", s2, w2) == 0);
    FAILS("is already a .ptwm checkpoint (decompress it instead, or give a base",
          "compress -q %s -o %s", w2, tu_tmp_path("x0"));
    /* Against the previous checkpoint, given as .ptwm: smaller, same bytes back. */
    CHECK(run("compress -q %s/model.ptwm -o %s --base %s", w2, d2, c1) == 0);
    printf("re-coded against step 1: %lld bytes, whole %lld\n", dir_bytes(d2), dir_bytes(w2));
    CHECK(dir_bytes(d2) < dir_bytes(w2));
    CHECK(run("inspect %s", d2) == 0);
    EXPECT(0, out_path, "needs a base");
    CHECK(run("decompress -q %s -o %s --base %s", d2, tu_tmp_path("b2"), s1) == 0);
    snprintf(p, sizeof p, "%s/step2.safetensors", tu_tmp_path("b2"));
    CHECK(tu_files_equal(p, s2));
    /* Whole again from its own base: the same file as compressing step 2. */
    CHECK(run("compress -q %s -o %s --src-base %s", d2, tu_tmp_path("w2b"), c1) == 0);
    CHECK(tu_trees_equal(tu_tmp_path("w2b"), w2));
    /* Its own base missing, different, damaged; the new base damaged or
     * absent: exit 1, no output. */
    FAILS("base required", "compress -q %s -o %s --base %s", d2, tu_tmp_path("x1"), s1);
    FAILS("base chunk damaged", "compress -q %s -o %s --src-base %s", d2, tu_tmp_path("x2"),
          s2);
    FAILS("base tensor differs", "compress -q %s -o %s --src-base %s", d2, tu_tmp_path("x3"),
          w2);
    {
        size_t len;
        uint8_t *f;
        snprintf(p, sizeof p, "%s/model.ptwm", c1);
        f = tu_read_file(p, &len);
        f[3000] ^= 0x40;   /* in the first tensor's chunk, param/w: coded on its base */
        tu_write_file(bad, f, len);
        free(f);
    }
    FAILS("reading its base's bytes", "compress -q %s -o %s --base %s", w2, tu_tmp_path("x4"),
          bad);
    FAILS(": its base '", "compress -q %s -o %s --src-base %s", d2, tu_tmp_path("x5"), bad);
    FAILS("not found", "compress -q %s -o %s --base %s", w2, tu_tmp_path("x6"),
          tu_tmp_path("nowhere"));
    CHECK(absent("x1") && absent("x2") && absent("x3") && absent("x4") && absent("x5") &&
          absent("x6"));
    /* decompress takes no --src-base. */
    CHECK(run("decompress -q %s -o %s --src-base %s", d2, tu_tmp_path("x7"), c1) == 2);
}

int main(void) {
    char base[1100], tuned[1100], other[1100], out[1100], plain[1100], res[1100], basep[1100],
        otherp[1100], damaged[1100], p[1200];
    int st;
    bin = getenv("PTWM_BIN");
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    if (!bin) return tu_finish("test_cli_base");
    snprintf(out_path, sizeof out_path, "%s", tu_tmp_path("stdout"));
    snprintf(err_path, sizeof err_path, "%s", tu_tmp_path("stderr"));
    snprintf(base, sizeof base, "%s", tu_tmp_path("base"));
    snprintf(tuned, sizeof tuned, "%s", tu_tmp_path("tuned"));
    snprintf(other, sizeof other, "%s", tu_tmp_path("other"));
    snprintf(out, sizeof out, "%s", tu_tmp_path("out"));
    write_dir(base, 1, 0);
    write_dir(tuned, 1, 99);
    write_dir(other, 7, 0);
    snprintf(plain, sizeof plain, "%s", tu_tmp_path("plain"));
    snprintf(res, sizeof res, "%s", tu_tmp_path("res"));
    snprintf(basep, sizeof basep, "%s", tu_tmp_path("basep"));
    snprintf(otherp, sizeof otherp, "%s", tu_tmp_path("otherp"));

    /* A sharded directory against a safetensors directory base. */
    CHECK(run("compress -q %s -o %s --base %s", tuned, out, base) == 0);
    CHECK(run("compress -q %s -o %s", tuned, plain) == 0);
    printf("with the base %lld bytes, without %lld\n", dir_bytes(out), dir_bytes(plain));
    CHECK(dir_bytes(out) * 2 < dir_bytes(plain));
    CHECK(run("inspect %s", out) == 0);
    EXPECT(0, out_path, "needs a base: 2 tensors coded against base tensors");
    EXPECT(0, out_path, " chunks on it)");
    CHECK(run("inspect --json %s", out) == 0);
    EXPECT(0, out_path, "\"base_tensors\": 2");
    CHECK(run("inspect %s", plain) == 0);
    CHECK(!tu_file_has(out_path, "needs a base"));
    CHECK(run("decompress -q %s -o %s --base %s", out, res, base) == 0);
    CHECK(tu_trees_equal(tuned, res) && tu_trees_equal(res, tuned));
    CHECK(run("verify -q %s --base %s", out, base) == 0);
    CHECK(run("verify -q %s", out) == 1);
    EXPECT(1, err_path, "FAILED: PTWM_ERR_BASE_MISSING");
    /* The same base as .ptwm shards. */
    CHECK(run("compress -q %s -o %s", base, basep) == 0);
    CHECK(run("decompress -q -f %s -o %s --base %s", out, res, basep) == 0);
    CHECK(tu_trees_equal(tuned, res) && tu_trees_equal(res, tuned));

    /* Without the base, with a different one (safetensors: the chunk CRC;
     * .ptwm: its recorded hash), with a damaged one: exit 1, no output. */
    st = run("decompress -q %s -o %s", out, tu_tmp_path("nobase"));
    CHECK(st == 1);
    EXPECT(st, err_path, "base required");
    EXPECT(st, err_path, "tensor 'a.weight' chunk 0 of 1: coded against a base tensor of XXH3-128");
    CHECK(!tu_files_equal(tu_tmp_path("nobase/config.json"), tu_tmp_path("tuned/config.json")));
    st = run("decompress -q %s -o %s --base %s", out, tu_tmp_path("o1"), other);
    CHECK(st == 1);
    EXPECT(st, err_path, "base chunk damaged");
    EXPECT(st, err_path, "this chunk was coded against CRC32");
    CHECK(run("compress -q %s -o %s", other, otherp) == 0);
    st = run("decompress -q %s -o %s --base %s", out, tu_tmp_path("o2"), otherp);
    CHECK(st == 1);
    EXPECT(st, err_path, "base tensor differs");
    EXPECT(st, err_path, "(a different base)");
    snprintf(damaged, sizeof damaged, "%s", tu_tmp_path("damaged"));
    write_dir(damaged, 1, 0);
    {
        size_t len;
        uint8_t *f;
        snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", damaged);
        f = tu_read_file(p, &len);
        f[len - 1000] ^= 0x10;
        tu_write_file(p, f, len);
        free(f);
    }
    st = run("decompress -q %s -o %s --base %s", out, tu_tmp_path("o3"), damaged);
    CHECK(st == 1);
    EXPECT(st, err_path, "tensor 'b.weight' chunk 0 of 1: the base");
    st = run("decompress -q %s -o %s --base %s", out, tu_tmp_path("o4"), tu_tmp_path("missing"));
    CHECK(st == 1);
    EXPECT(st, err_path, "missing");

    /* export reads through the base too: the fine-tune's values, or the
     * base error without it. */
    {
        const char *layout = "[{\"name\": \"b.weight\", \"shape\": [300, 200]}, "
                             "{\"name\": \"a.weight\", \"shape\": [300, 200]}]";
        tu_write_file(tu_tmp_path("layout.json"), layout, strlen(layout));
        CHECK(run("export %s --layout %s -o %s --base %s", out, tu_tmp_path("layout.json"),
                  tu_tmp_path("ex.f32"), base) == 0);
        CHECK(run("export %s --layout %s -o %s", tuned, tu_tmp_path("layout.json"),
                  tu_tmp_path("want.f32")) == 0);
        CHECK(tu_files_equal(tu_tmp_path("ex.f32"), tu_tmp_path("want.f32")));
        st = run("export %s --layout %s -o %s", out, tu_tmp_path("layout.json"),
                 tu_tmp_path("ex2.f32"));
        CHECK(st == 1);
        EXPECT(st, err_path, "base required");
        CHECK(!tu_files_equal(tu_tmp_path("ex2.f32"), tu_tmp_path("want.f32")));
        st = run("export %s --layout %s -o %s --base %s", out, tu_tmp_path("layout.json"),
                 tu_tmp_path("ex3.f32"), otherp);
        CHECK(st == 1);
        EXPECT(st, err_path, "base tensor differs");
    }

    /* In parts: the base is part of the plan. Two parts with the base
     * assemble into the directory one run writes; a part with another base
     * is refused as another plan; and the parts of a decompression need it
     * as the parts of a compression do. */
    CHECK(run("compress -q %s -o %s --base %s --part 2/2", tuned, tu_tmp_path("pc"), base) == 0);
    st = run("compress -q %s -o %s --base %s --part 1/2", tuned, tu_tmp_path("pc"), other);
    CHECK(st == 1);
    EXPECT(st, err_path, "another plan");
    CHECK(run("compress -q %s -o %s --base %s --part 1/2", tuned, tu_tmp_path("pc"), base) == 0);
    CHECK(run("index %s", tu_tmp_path("pc")) == 0);
    CHECK(tu_trees_equal(out, tu_tmp_path("pc")) && tu_trees_equal(tu_tmp_path("pc"), out));
    CHECK(tu_file_has(tu_tmp_path("pc/model.ptwm.index.json"), "weight_map"));
    CHECK(run("decompress -q %s -o %s --base %s --part 1/2", out, tu_tmp_path("pd"), base) == 0);
    CHECK(run("decompress -q %s -o %s --base %s --part 2/2", out, tu_tmp_path("pd"), base) == 0);
    CHECK(run("index %s", tu_tmp_path("pd")) == 0);
    CHECK(tu_trees_equal(tuned, tu_tmp_path("pd")) && tu_trees_equal(tu_tmp_path("pd"), tuned));

    /* A training checkpoint (weights and AdamW moments) against the one
     * before it, a single file. */
    write_ckpt(tu_tmp_path("step1.safetensors"), 0);
    write_ckpt(tu_tmp_path("step2.safetensors"), 41);
    CHECK(run("compress -q %s -o %s --base %s", tu_tmp_path("step2.safetensors"),
              tu_tmp_path("c2"), tu_tmp_path("step1.safetensors")) == 0);
    CHECK(run("decompress -q %s -o %s --base %s", tu_tmp_path("c2"), tu_tmp_path("r2"),
              tu_tmp_path("step1.safetensors")) == 0);
    CHECK(tu_files_equal(tu_tmp_path("r2/step2.safetensors"), tu_tmp_path("step2.safetensors")));
    CHECK(run("inspect %s", tu_tmp_path("c2")) == 0);
    EXPECT(0, out_path, "param/w");
    CHECK(tu_file_has(out_path, "needs a base"));
    recode();
    return tu_finish("test_cli_base");
}
