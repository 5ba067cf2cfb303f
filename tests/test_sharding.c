/* Sharded .ptwm checkpoints: the index (model.ptwm.index.json), the directory
 * reader with its hostile corpus (tests/hostile/index/MANIFEST), and whole
 * checkpoint round trips through ptwm_compress_checkpoint and
 * ptwm_decompress_checkpoint compared byte for byte. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = (char *)malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}


/* ---- the index ----------------------------------------------------------- */

static void test_index_roundtrip(void) {
    ptwm_index *idx = NULL, *back = NULL;
    ptwm_err err;
    char *path = join(tu_tmpdir(), "rt.index.json");
    const char *t, *s;
    const char *v;
    size_t len = 0, pos = 99;
    static const char meta_bytes[] = "line1\n\"quoted\" \xc3\xa9 and a NUL:\0end";
    CHECK(ptwm_index_create(1000, 600, &idx, &err) == PTWM_OK);
    CHECK(ptwm_index_add(idx, "layer.0.w", "model-00001-of-00002.ptwm", &err) == PTWM_OK);
    CHECK(ptwm_index_add(idx, "layer.0.b", "model-00001-of-00002.ptwm", &err) == PTWM_OK);
    CHECK(ptwm_index_add(idx, "emb \xe2\x9c\x93", "model-00002-of-00002.ptwm", &err) == PTWM_OK);
    CHECK_ERR(ptwm_index_add(idx, "layer.0.w", "model-00002-of-00002.ptwm", &err), &err,
              PTWM_ERR_DUPLICATE, "tensor 'layer.0.w' mapped twice");
    CHECK_ERR(ptwm_index_add(idx, "x", "../up.ptwm", &err), &err, PTWM_ERR_INVALID_ARG,
              "'../up.ptwm' is not a plain file name");
    CHECK_ERR(ptwm_index_set_meta(idx, "total_size", "1", 1, &err), &err, PTWM_ERR_INVALID_ARG,
              "reserved");
    CHECK(ptwm_index_set_meta(idx, "note", meta_bytes, sizeof meta_bytes - 1, &err) == PTWM_OK);
    CHECK(ptwm_index_write(idx, path, &err) == PTWM_OK);
    CHECK(ptwm_index_read(path, &back, &err) == PTWM_OK);
    CHECK(back && ptwm_index_count(back) == 3);
    CHECK(ptwm_index_total_size(back) == 1000 && ptwm_index_compressed_total_size(back) == 600);
    CHECK(ptwm_index_shard_count(back) == 2);
    CHECK(ptwm_index_entry(back, 2, &t, &s, NULL) == PTWM_OK && !strcmp(t, "emb \xe2\x9c\x93") &&
          !strcmp(s, "model-00002-of-00002.ptwm"));
    CHECK(ptwm_index_find(back, "layer.0.b", &pos, NULL) == PTWM_OK && pos == 1);
    CHECK(ptwm_index_find(back, "nope", &pos, NULL) == PTWM_ERR_NOT_FOUND);
    v = ptwm_index_get_meta(back, "note", &len);
    CHECK(v && len == sizeof meta_bytes - 1 && memcmp(v, meta_bytes, len) == 0);
    /* Many entries: the lookup table grows and keeps every name. */
    {
        size_t i;
        char name[32];
        for (i = 0; i < 5000; i++) {
            snprintf(name, sizeof name, "t%zu", i);
            if (ptwm_index_add(idx, name, "model.ptwm", &err) != PTWM_OK) break;
        }
        CHECK(ptwm_index_count(idx) == 5003);
        CHECK(ptwm_index_find(idx, "t4321", &pos, NULL) == PTWM_OK && pos == 4324);
    }
    /* Many shards: each name interned once, in order of first appearance. */
    {
        ptwm_index *many = NULL;
        size_t i, bad = 0;
        char name[32], shard[32];
        CHECK(ptwm_index_create(0, 0, &many, &err) == PTWM_OK);
        for (i = 0; i < 6000; i++) {
            snprintf(name, sizeof name, "w%zu", i);
            snprintf(shard, sizeof shard, "s%zu.ptwm", i % 3000);
            if (ptwm_index_add(many, name, shard, &err) != PTWM_OK) bad++;
        }
        CHECK(bad == 0 && ptwm_index_shard_count(many) == 3000);
        CHECK(ptwm_index_shard(many, 1234) && !strcmp(ptwm_index_shard(many, 1234), "s1234.ptwm"));
        CHECK(ptwm_index_entry(many, 4321, &t, &s, NULL) == PTWM_OK && !strcmp(t, "w4321") &&
              !strcmp(s, "s1321.ptwm"));
        ptwm_index_free(many);
    }
    ptwm_index_free(idx);
    ptwm_index_free(back);
    free(path);
}

/* ---- the hostile corpus --------------------------------------------------- */

typedef struct fixture {
    char dir[1024];
    uint64_t raw, coded;
} fixture;

static int make_shard(const char *dir, const char *name, const char *const *tensors, size_t n,
                      uint64_t *raw, uint64_t *coded) {
    ptwm_tensor_desc d[4];
    uint64_t shape[4][1];
    static float data[4][64];
    ptwm_err err;
    char *path = join(dir, name);
    size_t i;
    size_t len = 0;
    uint8_t *bytes;
    ptwm_error rc;
    for (i = 0; i < n; i++) {
        size_t k;
        for (k = 0; k < 64; k++) data[i][k] = (float)(i * 64 + k) * 0.01f;
        shape[i][0] = 64 - 16 * i;
        d[i].name = tensors[i];
        d[i].dtype = PTWM_DTYPE_F32;
        d[i].ndim = 1;
        d[i].shape = shape[i];
        d[i].data = data[i];
        d[i].nbytes = shape[i][0] * 4;
        *raw += d[i].nbytes;
    }
    rc = ptwm_compress_file(path, d, n, NULL, NULL, &err);
    CHECK_MSG(rc == PTWM_OK, "%s: %s", path, err.message);
    bytes = tu_read_file(path, &len);
    *coded += len;
    free(bytes);
    free(path);
    return rc == PTWM_OK;
}

static char *substitute(const char *text, const fixture *fx) {
    size_t cap = strlen(text) + 64, o = 0;
    char *out = (char *)malloc(cap);
    while (*text) {
        if (!strncmp(text, "@RAW@", 5)) {
            o += (size_t)snprintf(out + o, cap - o, "%llu", (unsigned long long)fx->raw);
            text += 5;
        } else if (!strncmp(text, "@CODED@", 7)) {
            o += (size_t)snprintf(out + o, cap - o, "%llu", (unsigned long long)fx->coded);
            text += 7;
        } else {
            out[o++] = *text++;
        }
    }
    out[o] = 0;
    return out;
}

static ptwm_error code_from_name(const char *name) {
    int c;
    for (c = 0; c <= PTWM_ERR_UNSUPPORTED; c++)
        if (!strcmp(ptwm_error_name((ptwm_error)c), name)) return (ptwm_error)c;
    return (ptwm_error)-1;
}

static void run_case(const char *hdir, const fixture *fx, const char *file, const char *mode,
                     ptwm_error want, const char *substr_raw, int serial) {
    ptwm_err err;
    ptwm_error got;
    char *substr = substitute(substr_raw, fx);
    memset(&err, 0, sizeof err);
    if (!strcmp(mode, "index")) {
        ptwm_index *idx = NULL;
        char *path = join(hdir, file);
        size_t len = 0;
        char *text = (char *)tu_read_file(path, &len), *sub;
        CHECK_MSG(text != NULL, "cannot read %s", path);
        /* Substitute only when there is a placeholder: NUL bytes stay intact. */
        sub = strchr(text, '@') ? substitute(text, fx) : NULL;
        got = ptwm_index_parse(sub ? sub : text, sub ? strlen(sub) : len, file, &idx, &err);
        ptwm_index_free(idx);
        free(sub);
        free(text);
        free(path);
    } else {
        /* A fresh directory holding the shards and this index. */
        char dir[1100], cmd[4096];
        ptwm_ptdir *d = NULL;
        snprintf(dir, sizeof dir, "%s/case%d", tu_tmpdir(), serial);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s'/*.ptwm '%s'/", dir, fx->dir, dir);
        CHECK(system(cmd) == 0);
        if (strcmp(file, "(none)") == 0) {
            snprintf(cmd, sizeof cmd, "rm -f '%s'/*.ptwm", dir);
            CHECK(system(cmd) == 0);
        } else {
            size_t len = 0;
            char *path = join(hdir, file), *ipath = join(dir, "model.ptwm.index.json");
            char *text = (char *)tu_read_file(path, &len), *sub;
            CHECK_MSG(text != NULL, "cannot read %s", path);
            sub = substitute(text, fx);
            CHECK(tu_write_file(ipath, sub, strlen(sub)) == 0);
            free(sub);
            free(text);
            free(path);
            free(ipath);
        }
        got = ptwm_ptdir_open(dir, &d, &err);
        if (got == PTWM_OK) CHECK(ptwm_ptdir_count(d) == 3 && ptwm_ptdir_shard_count(d) == 2);
        ptwm_ptdir_close(d);
    }
    CHECK_MSG(got == want, "%s (%s): got %s, want %s: %s", file, mode, ptwm_error_name(got),
              ptwm_error_name(want), got ? err.message : "");
    if (want != PTWM_OK && strcmp(substr, "-") != 0)
        CHECK_MSG(strstr(err.message, substr) != NULL, "%s (%s): message '%s' lacks '%s'", file,
                  mode, err.message, substr);
    free(substr);
}

static void test_hostile(void) {
    const char *src = getenv("PTWM_SOURCE_DIR");
    char hdir[1024], *manifest;
    fixture fx;
    FILE *f;
    char line[1024];
    int cases = 0;
    static const char *const s1[] = {"a", "b"}, *const s2[] = {"c"}, *const s3[] = {"a"};
    CHECK_MSG(src != NULL, "PTWM_SOURCE_DIR is not set");
    if (!src) return;
    snprintf(hdir, sizeof hdir, "%s/tests/hostile/index", src);
    memset(&fx, 0, sizeof fx);
    snprintf(fx.dir, sizeof fx.dir, "%s/shards", tu_tmpdir());
    CHECK(mkdir(fx.dir, 0777) == 0);
    CHECK(make_shard(fx.dir, "model-00001-of-00002.ptwm", s1, 2, &fx.raw, &fx.coded));
    CHECK(make_shard(fx.dir, "model-00002-of-00002.ptwm", s2, 1, &fx.raw, &fx.coded));
    {
        /* dup.ptwm is not part of the consistent checkpoint's totals. */
        uint64_t r = 0, c = 0;
        CHECK(make_shard(fx.dir, "dup.ptwm", s3, 1, &r, &c));
    }
    manifest = join(hdir, "MANIFEST");
    f = fopen(manifest, "r");
    CHECK_MSG(f != NULL, "cannot open %s", manifest);
    while (f && fgets(line, sizeof line, f)) {
        char file[256], mode[16], code[64];
        int off = 0;
        const char *substr;
        size_t n;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%255s %15s %63s %n", file, mode, code, &off) != 3 || off == 0) {
            CHECK_MSG(0, "bad manifest line: %s", line);
            continue;
        }
        substr = line + off;
        n = strlen(substr);
        while (n && (substr[n - 1] == '\n' || substr[n - 1] == ' ')) line[off + (int)--n] = 0;
        CHECK_MSG((int)code_from_name(code) >= 0, "unknown code %s", code);
        run_case(hdir, &fx, file, mode, code_from_name(code), substr, cases);
        cases++;
    }
    if (f) fclose(f);
    free(manifest);
    CHECK_MSG(cases >= 35, "only %d hostile cases ran", cases);
}

/* ---- whole checkpoints ---------------------------------------------------- */

/* An HF directory from two corpus models (names prefixed so they stay
 * distinct), sharded small, with a config.json and a nested tokenizer file. */
static int build_hf_dir(const char *dir) {
    static const char *const files[] = {"faceres-deep.bf16.safetensors", "posenet.f32.safetensors"};
    static const char *const prefix[] = {"face.", "pose."};
    ptwm_st *st[2] = {NULL, NULL};
    ptwm_tensor_desc *d = NULL;
    char **names = NULL;
    size_t n = 0, i, k;
    ptwm_err err;
    int ok = 1;
    static const ptwm_kv meta[] = {{"format", "pt"}};
    for (k = 0; k < 2 && ok; k++) {
        ok = ptwm_st_open(tu_corpus_path(files[k]), PTWM_OPEN_MMAP, &st[k], &err) == PTWM_OK;
        CHECK_MSG(ok, "%s", err.message);
        if (ok) n += ptwm_st_count(st[k]);
    }
    if (ok) {
        d = (ptwm_tensor_desc *)calloc(n, sizeof *d);
        names = (char **)calloc(n, sizeof *names);
        n = 0;
        for (k = 0; k < 2; k++) {
            for (i = 0; i < ptwm_st_count(st[k]); i++, n++) {
                ptwm_tensor_info info;
                ptwm_st_tensor(st[k], i, &info, NULL);
                names[n] = (char *)malloc(strlen(info.name) + 8);
                sprintf(names[n], "%s%s", prefix[k], info.name);
                d[n].name = names[n];
                d[n].dtype = info.dtype;
                d[n].ndim = info.ndim;
                d[n].shape = info.shape;
                d[n].data = info.data;
                d[n].nbytes = info.nbytes;
            }
        }
        ok = ptwm_stdir_write(dir, d, n, meta, 1, (uint64_t)3 << 20, &err) == PTWM_OK;
        CHECK_MSG(ok, "ptwm_stdir_write: %s", err.message);
    }
    if (ok) {
        char *cfg = join(dir, "config.json"), *sub = join(dir, "tokenizer"), *tok;
        static const char cfg_text[] = "{\n  \"architectures\": [\"Test\"],\n  \"hidden\": 128\n}\n";
        CHECK(tu_write_file(cfg, cfg_text, sizeof cfg_text - 1) == 0);
        CHECK(mkdir(sub, 0777) == 0);
        tok = join(sub, "vocab.txt");
        CHECK(tu_write_file(tok, "a\nb\n", 4) == 0);
        free(cfg);
        free(sub);
        free(tok);
    }
    for (i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(d);
    ptwm_st_close(st[0]);
    ptwm_st_close(st[1]);
    return ok;
}

/* Every tensor of the safetensors directory equals the .ptwm directory's. */
static void check_same_tensors(const char *stdir, const char *ptdir) {
    ptwm_stdir *s = NULL;
    ptwm_ptdir *p = NULL;
    ptwm_err err;
    size_t i, bad = 0;
    CHECK(ptwm_stdir_open(stdir, PTWM_OPEN_MMAP, &s, &err) == PTWM_OK);
    CHECK_MSG(ptwm_ptdir_open(ptdir, &p, &err) == PTWM_OK, "%s", err.message);
    if (!s || !p) goto out;
    CHECK(ptwm_stdir_count(s) == ptwm_ptdir_count(p));
    CHECK(ptwm_ptdir_total_size(p) == ptwm_index_total_size(ptwm_ptdir_index(p)) ||
          !ptwm_ptdir_index(p));
    for (i = 0; i < ptwm_stdir_count(s); i++) {
        ptwm_tensor_info a, b;
        size_t j;
        uint8_t *buf;
        ptwm_stdir_tensor(s, i, &a, NULL);
        if (ptwm_ptdir_find(p, a.name, &j, NULL) != PTWM_OK) {
            bad++;
            continue;
        }
        ptwm_ptdir_tensor(p, j, &b, NULL);
        buf = (uint8_t *)malloc(b.nbytes + 1);
        if (a.nbytes != b.nbytes || a.dtype != b.dtype ||
            ptwm_ptdir_decode_range(p, j, 0, buf, b.nbytes, &err) != PTWM_OK ||
            memcmp(buf, a.data, a.nbytes) != 0)
            bad++;
        free(buf);
    }
    CHECK_MSG(bad == 0, "%zu tensors differ between %s and %s", bad, stdir, ptdir);
out:
    ptwm_stdir_close(s);
    ptwm_ptdir_close(p);
}

static void test_checkpoint_roundtrip(void) {
    char *hf = join(tu_tmpdir(), "hf"), *pt = join(tu_tmpdir(), "hf.ptwm"),
         *back = join(tu_tmpdir(), "hf.back"), *re = join(tu_tmpdir(), "hf.re"),
         *pt2 = join(tu_tmpdir(), "hf.ptwm2"), *back2 = join(tu_tmpdir(), "hf.back2");
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    ptwm_ptdir *p = NULL;
    char *ipath;
    if (!build_hf_dir(hf)) goto out;
    ipath = join(hf, "model.safetensors.index.json");
    {
        size_t l = 0;
        uint8_t *b = tu_read_file(ipath, &l);
        CHECK_MSG(b != NULL, "the fixture should be sharded (no %s)", ipath);
        free(b);
    }
    free(ipath);
    /* Default: one .ptwm shard per input shard; everything back byte for byte. */
    CHECK_MSG(ptwm_compress_checkpoint(hf, pt, &o, &err) == PTWM_OK, "%s", err.message);
    CHECK_MSG(ptwm_ptdir_open(pt, &p, &err) == PTWM_OK, "%s", err.message);
    CHECK(p && ptwm_ptdir_shard_count(p) >= 3 && ptwm_ptdir_index(p) != NULL);
    ptwm_ptdir_close(p);
    CHECK_MSG(ptwm_decompress_checkpoint(pt, back, &o, &err) == PTWM_OK, "%s", err.message);
    CHECK(tu_trees_equal(hf, back));
    check_same_tensors(hf, pt);
    /* An existing output needs force; force replaces it whole. */
    CHECK_ERR(ptwm_decompress_checkpoint(pt, back, &o, &err), &err, PTWM_ERR_EXISTS,
              "already exists");
    o.force = 1;
    CHECK_MSG(ptwm_decompress_checkpoint(pt, back, &o, &err) == PTWM_OK, "%s", err.message);
    CHECK(tu_trees_equal(hf, back));
    /* Output inside the source, or the source itself, is refused even with force. */
    CHECK_ERR(ptwm_compress_checkpoint(hf, hf, &o, &err), &err, PTWM_ERR_INVALID_ARG, "overlap");
    /* Re-sharding on decompress: HF layout, same tensors. */
    o.force = 0;
    o.max_shard_size = (uint64_t)1 << 20;
    CHECK_MSG(ptwm_decompress_checkpoint(pt, re, &o, &err) == PTWM_OK, "%s", err.message);
    check_same_tensors(re, pt);
    /* Re-planned .ptwm shards: tensors equal, decompression writes fresh shards. */
    o.max_shard_size = (uint64_t)2 << 20;
    CHECK_MSG(ptwm_compress_checkpoint(hf, pt2, &o, &err) == PTWM_OK, "%s", err.message);
    check_same_tensors(hf, pt2);
    o.max_shard_size = 0;
    CHECK_MSG(ptwm_decompress_checkpoint(pt2, back2, &o, &err) == PTWM_OK, "%s", err.message);
    check_same_tensors(back2, pt2);
    {
        char *c1 = join(hf, "config.json"), *c2 = join(back2, "config.json");
        CHECK(tu_files_equal(c1, c2));
        free(c1);
        free(c2);
    }
    /* A failure late in the run (a directory nested too deep to copy, found after
     * every shard was written) leaves neither the output nor its temporary directory. */
    {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/deep/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17'",
                 hf);
        CHECK(system(cmd) == 0);
        CHECK_ERR(ptwm_compress_checkpoint(hf, pt2 /* exists */, &o, &err), &err, PTWM_ERR_EXISTS,
                  "already exists");
        CHECK_ERR(ptwm_compress_checkpoint(hf, back2, &o, &err), &err, PTWM_ERR_EXISTS, "");
        o.force = 1;
        CHECK_ERR(ptwm_compress_checkpoint(hf, back2, &o, &err), &err, PTWM_ERR_LIMIT,
                  "nested deeper than 16");
        /* The old output is untouched by the failed forced run. */
        check_same_tensors(back2, pt2);
        snprintf(cmd, sizeof cmd, "ls -d '%s'/*.tmp-* 2>/dev/null | grep -q .", tu_tmpdir());
        CHECK_MSG(system(cmd) != 0, "a temporary directory was left in %s", tu_tmpdir());
    }
out:
    free(hf);
    free(pt);
    free(back);
    free(re);
    free(pt2);
    free(back2);
}

/* Copying a model directory's other files follows file links but refuses a
 * link to a directory: one to "/" would copy the whole file system, one to
 * "." would recurse until the depth cap. */
static void test_directory_symlink_refused(void) {
    char *src = join(tu_tmpdir(), "linked"), *out = join(tu_tmpdir(), "linked.ptwm"),
         *model = join(src, "model.safetensors"), *cfg = join(src, "config.json");
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    ptwm_ptdir *p = NULL;
    char cmd[4096];
    size_t len = 0;
    uint8_t *b = tu_read_file(tu_corpus_path("handtrack.u8.safetensors"), &len);
    CHECK(b != NULL);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", src, src);
    CHECK(system(cmd) == 0);
    if (b) CHECK(tu_write_file(model, b, len) == 0);
    free(b);
    CHECK(tu_write_file(cfg, "{}", 2) == 0);
    snprintf(cmd, sizeof cmd, "ln -s config.json '%s/config.link.json' && ln -s / '%s/root'", src,
             src);
    CHECK(system(cmd) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_ERR_UNSUPPORTED,
              "is a symbolic link to a directory");
    CHECK(strstr(err.message, "/root'") != NULL);
    snprintf(cmd, sizeof cmd, "rm '%s/root' && ln -s . '%s/self'", src, src);
    CHECK(system(cmd) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_ERR_UNSUPPORTED,
              "/self'");
    /* Without the directory link it goes through, the file link copied as a file. */
    snprintf(cmd, sizeof cmd, "rm '%s/self'", src);
    CHECK(system(cmd) == 0);
    CHECK_MSG(ptwm_compress_checkpoint(src, out, &o, &err) == PTWM_OK, "%s", err.message);
    CHECK_MSG(ptwm_ptdir_open(out, &p, &err) == PTWM_OK, "%s", err.message);
    ptwm_ptdir_close(p);
    {
        char *copied = join(out, "config.link.json");
        CHECK(tu_files_equal(cfg, copied));
        free(copied);
    }
    free(src);
    free(out);
    free(model);
    free(cfg);
}

/* The Hugging Face index written by ptwm_stdir_write and the one decompress
 * writes when it re-shards are one format (transformers': indent 2, sorted
 * keys, ASCII with \u escapes, final newline; jansson writes the escapes' hex
 * in upper case where Python writes lower): the same shards give the same
 * bytes, non-ASCII names included. */
static void test_hf_index_writers_agree(void) {
    static const uint8_t data[3][4096];
    static const uint64_t shape[1] = {4096};
    ptwm_tensor_desc t[3] = {{"caf\xc3\xa9.weight", PTWM_DTYPE_U8, 1, shape, data[0], 4096},
                             {"b", PTWM_DTYPE_U8, 1, shape, data[1], 4096},
                             {"\xe6\x9d\x83", PTWM_DTYPE_U8, 1, shape, data[2], 4096}};
    char *hf = join(tu_tmpdir(), "agree.hf"), *pt = join(tu_tmpdir(), "agree.ptwm"),
         *back = join(tu_tmpdir(), "agree.back"), *i1 = join(hf, "model.safetensors.index.json"),
         *i2 = join(back, "model.safetensors.index.json");
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    size_t len = 0;
    char *text;
    CHECK_MSG(ptwm_stdir_write(hf, t, 3, NULL, 0, 5000, &err) == PTWM_OK, "%s", err.message);
    CHECK_MSG(ptwm_compress_checkpoint(hf, pt, &o, &err) == PTWM_OK, "%s", err.message);
    o.max_shard_size = 5000;
    CHECK_MSG(ptwm_decompress_checkpoint(pt, back, &o, &err) == PTWM_OK, "%s", err.message);
    CHECK(tu_files_equal(i1, i2));
    text = (char *)tu_read_file(i2, &len);
    CHECK(text && len > 2 && text[len - 1] == '\n');
    if (text) {
        CHECK_MSG(strstr(text, "\"caf\\u00E9.weight\"") != NULL, "%s", text);
        CHECK_MSG(strstr(text, "\"\\u6743\"") != NULL, "%s", text);
    }
    free(text);
    free(hf);
    free(pt);
    free(back);
    free(i1);
    free(i2);
}

/* The writer refuses an index the reader would refuse (over 64 MiB, here
 * through one huge metadata value), naming the sizes, and leaves no file. */
static void test_index_write_size_cap(void) {
    size_t big = ((size_t)64 << 20) + 1;
    char *value = (char *)malloc(big), *path = join(tu_tmpdir(), "huge.ptwm.index.json");
    ptwm_index *idx = NULL;
    ptwm_err err;
    CHECK(value != NULL);
    if (!value) return;
    memset(value, 'x', big);
    CHECK(ptwm_index_create(1, 1, &idx, &err) == PTWM_OK);
    CHECK(ptwm_index_add(idx, "w", "model.ptwm", &err) == PTWM_OK);
    CHECK(ptwm_index_set_meta(idx, "source_index", value, big, &err) == PTWM_OK);
    unlink(path);
    CHECK_ERR(ptwm_index_write(idx, path, &err), &err, PTWM_ERR_LIMIT,
              "over the 67108864 bytes a reader accepts");
    CHECK(access(path, F_OK) != 0);
    ptwm_index_free(idx);
    free(value);
    free(path);
}

/* A single file: OUTDIR/model.ptwm, restored under its own name. */
static void test_single_file(void) {
    const char *name = "handtrack.u8.safetensors";
    char *out = join(tu_tmpdir(), "single"), *back = join(tu_tmpdir(), "single.back"), *restored;
    ptwm_err err;
    CHECK_MSG(ptwm_compress_checkpoint(tu_corpus_path(name), out, NULL, &err) == PTWM_OK, "%s",
              err.message);
    CHECK_MSG(ptwm_decompress_checkpoint(out, back, NULL, &err) == PTWM_OK, "%s", err.message);
    restored = join(back, name);
    CHECK(tu_files_equal(tu_corpus_path(name), restored));
    free(restored);
    free(out);
    free(back);
}

int main(void) {
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus not found (set PTWM_CORPUS)");
    test_index_roundtrip();
    test_index_write_size_cap();
    test_hostile();
    if (tu_corpus_dir()) {
        test_checkpoint_roundtrip();
        test_single_file();
        test_directory_symlink_refused();
        test_hf_index_writers_agree();
    }
    return tu_finish("sharding");
}
