/* Names in checkpoints that are not what they seem (docs/SHARDING.md):
 * - a source file name recorded in a .ptwm file that is not a plain file name
 *   ("../evil.safetensors") is refused by decompression, never replaced by
 *   another; "a..b.safetensors" is plain and restored under its name; two
 *   shards recording one name are refused;
 * - the Hugging Face index a .ptwm directory keeps is checked against the
 *   restored files before it is written: a shard "../x.safetensors", a
 *   tensor sent to the other shard, one not listed, one extra, a wrong
 *   total (with and without a file record);
 * - ptwm_index_read of a directory's index checks it against the record;
 * - links in a source directory: followed when they stay inside it or lead
 *   into the blobs/ of the Hugging Face cache it is a snapshot of; any other
 *   (a config.json, a shard, the index) refused naming the link and where it
 *   leads, unless follow_symlinks (also through parts and their assembly,
 *   and --follow-symlinks on the command line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index.h"
#include "records.h"
#include "sink.h"
#include "testutil.h"

static char sample[1200];

static char *path2(const char *a, const char *b) {
    static char buf[4][1400];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", a, b);
    return buf[k];
}

/* A .ptwm file made from the sample that records its source as `name`. */
static void ptwm_recording(const char *dst, const char *name) {
    ptwm_conv_src s;
    ptwm_conv_progress pr;
    ptwm_conv_opts o;
    ptwm_err err;
    CHECK_ERR(ptwm_conv_src_open(&s, sample, PTWM_SOURCE_SAFETENSORS, &err), &err, PTWM_OK, NULL);
    s.in[0].rec.name = name;
    ptwm_conv_opts_from(NULL, &pr, &o);
    CHECK_ERR(ptwm_conv_file_write(&s, &ptwm_sink_ptwm_ops, &o, dst, &err), &err, PTWM_OK, NULL);
    ptwm_conv_src_close(&s);
}

static void test_recorded_names(void) {
    const char *tmp = tu_tmpdir();
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_reader *r = NULL;
    ptwm_err err;
    char *evil = strdup(path2(tmp, "evil.ptwm")), *dots = strdup(path2(tmp, "dots.ptwm"));
    ptwm_recording(evil, "../evil.safetensors");
    CHECK_ERR(ptwm_decompress_checkpoint(evil, path2(tmp, "evil.out"), &o, &err), &err,
              PTWM_ERR_SCHEMA, "records its source file as '../evil.safetensors'");
    CHECK(access(path2(tmp, "evil.out"), F_OK) != 0);
    CHECK(access(path2(tmp, "evil.safetensors"), F_OK) != 0);
    /* Fresh shards when asked; the file itself when the caller names it. */
    o.max_shard_size = (uint64_t)1 << 30;
    CHECK_ERR(ptwm_decompress_checkpoint(evil, path2(tmp, "evil.fresh"), &o, &err), &err, PTWM_OK,
              NULL);
    CHECK(access(path2(tmp, "evil.fresh/model.safetensors"), F_OK) == 0);
    o.max_shard_size = 0;
    CHECK_ERR(ptwm_reader_open(evil, &r, &err), &err, PTWM_OK, NULL);
    if (r) CHECK_ERR(ptwm_reader_write_safetensors(r, path2(tmp, "named.safetensors"), &err), &err,
                     PTWM_OK, NULL);
    ptwm_reader_close(r);
    CHECK(tu_files_equal(sample, path2(tmp, "named.safetensors")));
    /* A plain name with two dots in it comes back under that name. */
    ptwm_recording(dots, "pose..net.safetensors");
    CHECK_ERR(ptwm_decompress_checkpoint(dots, path2(tmp, "dots.out"), &o, &err), &err, PTWM_OK,
              NULL);
    CHECK(tu_files_equal(sample, path2(tmp, "dots.out/pose..net.safetensors")));
    free(evil);
    free(dots);
}

/* A Hugging Face directory of the sample in three shards with a config. */
static void make_hf(const char *hf) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    const char *pt = path2(tu_tmpdir(), "hf.src.ptwm");
    o.max_shard_size = (uint64_t)1 << 20;
    CHECK_ERR(ptwm_compress_checkpoint(sample, pt, &o, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_decompress_checkpoint(pt, hf, &o, &err), &err, PTWM_OK, NULL);
    CHECK(tu_write_file(path2(hf, "config.json"), "{}\n", 3) == 0);
}

/* Two shards recording one source name. */
static void test_shared_name(const char *hf) {
    const char *tmp = tu_tmpdir();
    char *pt = strdup(path2(tmp, "shared.ptwm"));
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_conv_src s;
    ptwm_conv_progress pr;
    ptwm_conv_opts co;
    ptwm_err err;
    CHECK_ERR(ptwm_conv_src_open(&s, hf, PTWM_SOURCE_SAFETENSORS, &err), &err, PTWM_OK, NULL);
    CHECK(s.nin == 3);
    if (s.nin == 3) s.in[2].rec.name = s.in[0].rec.name;
    ptwm_conv_opts_of(&o, &pr, &co);
    CHECK_ERR(ptwm_conv_staged(&s, &ptwm_sink_ptwm_ops, &co, 0, pt, hf, 0, &err), &err, PTWM_OK,
              NULL);
    ptwm_conv_src_close(&s);
    CHECK_ERR(ptwm_decompress_checkpoint(pt, path2(tmp, "shared.out"), &o, &err), &err,
              PTWM_ERR_SCHEMA, "both record source file 'model-00001-of-00003.safetensors'");
    free(pt);
}

/* The kept Hugging Face index of a fresh copy of `pt`, edited by replacing
 * `from` with `to` once; the copy's file record made to match (or removed,
 * as in a directory written before records). */
static char *edited(const char *pt, const char *from, const char *to, int record) {
    static int n;
    char *dir = strdup(path2(tu_tmpdir(), "edited.0"));
    ptwm_index *idx = NULL;
    ptwm_err err;
    const char *text;
    size_t len = 0;
    char *at, *buf;
    sprintf(dir + strlen(dir) - 1, "%d", n++);
    CHECK(tu_sh("cp -r '%s' '%s'", pt, dir) == 0);
    CHECK_ERR(ptwm_index_read_kind(path2(dir, PTWM_INDEX_NAME), PTWM_INDEX_PTWM, &idx, &err), &err,
              PTWM_OK, NULL);
    text = idx ? ptwm_index_get_meta(idx, "source_index", &len) : NULL;
    at = text ? strstr(text, from) : NULL;
    CHECK_MSG(at != NULL, "no '%s' in the kept index", from);
    if (!at) return dir;
    buf = (char *)malloc(len + strlen(to) + 1);
    sprintf(buf, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    CHECK(ptwm_index_set_meta(idx, "source_index", buf, strlen(buf), &err) == PTWM_OK);
    CHECK(ptwm_index_write(idx, path2(dir, PTWM_INDEX_NAME), &err) == PTWM_OK);
    CHECK((record ? tu_record_refresh(dir) : tu_record_strip(dir)) == 0);
    free(buf);
    ptwm_index_free(idx);
    return dir;
}

static void test_kept_index(const char *hf) {
    static const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"Const\": \"model-00003-of-00003.safetensors\"", "\"Const\": \"../x.safetensors\"",
         "maps to shard name '../x.safetensors', which contains a path separator"},
        {"\"Const\": \"model-00003-of-00003.safetensors\"",
         "\"Const\": \"model-00001-of-00003.safetensors\"",
         "maps tensor 'Const' to shard 'model-00001-of-00003.safetensors', but it is in "
         "'model-00003-of-00003.safetensors'"},
        {"\"Const\": \"model-00003-of-00003.safetensors\",", "",
         "does not list tensor 'Const' (in 'model-00003-of-00003.safetensors')"},
        {"\"Const\": ", "\"Extra\": \"model-00002-of-00003.safetensors\",\n    \"Const\": ",
         "maps tensor 'Extra' to shard 'model-00002-of-00003.safetensors', which does not hold it"},
        {"\"total_size\": 2516390", "\"total_size\": 2516391",
         "says metadata.total_size 2516391, the tensors hold 2516390 bytes"},
    };
    char *pt = strdup(path2(tu_tmpdir(), "kept.ptwm"));
    ptwm_err err;
    size_t i;
    int record;
    CHECK_ERR(ptwm_compress_checkpoint(hf, pt, NULL, &err), &err, PTWM_OK, NULL);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (record = 0; record < 2; record++) {
            char *dir = edited(pt, cases[i].from, cases[i].to, record);
            char *out = strdup(path2(tu_tmpdir(), "kept.out"));
            ptwm_error rc = ptwm_decompress_checkpoint(dir, out, NULL, &err);
            CHECK_MSG(rc == PTWM_ERR_INDEX && strstr(err.message, cases[i].msg) &&
                          strstr(err.message, "model.safetensors.index.json kept in"),
                      "case %zu (%s record): %s: %s", i, record ? "with" : "without",
                      ptwm_error_name(rc), rc ? err.message : "");
            CHECK(access(out, F_OK) != 0);
            free(out);
            free(dir);
        }
    }
    free(pt);
}

/* ptwm_index_read (Python's PtwmIndex.read) of a directory's index checks it
 * against the file record beside it; a copy under another name is a file
 * alone. */
static void test_index_read(const char *pt) {
    char *dir = strdup(path2(tu_tmpdir(), "readidx")), *copy = strdup(path2(tu_tmpdir(), "i.json"));
    ptwm_index *idx = NULL;
    ptwm_err err;
    CHECK(tu_sh("cp -r '%s' '%s' && cp '%s/%s' '%s'", pt, dir, pt, PTWM_INDEX_NAME, copy) == 0);
    CHECK_ERR(ptwm_index_read(path2(dir, PTWM_INDEX_NAME), &idx, &err), &err, PTWM_OK, NULL);
    ptwm_index_free(idx);
    CHECK(tu_sh("printf x | dd of='%s/%s' bs=1 seek=40 conv=notrunc 2>/dev/null", dir,
                PTWM_INDEX_NAME) == 0);
    CHECK_ERR(ptwm_index_read(path2(dir, PTWM_INDEX_NAME), &idx, &err), &err, PTWM_ERR_HASH,
              "file 'model.ptwm.index.json' is damaged");
    CHECK(tu_sh("cp '%s' '%s/%s' && rm '%s/%s'", copy, dir, PTWM_INDEX_NAME, dir,
                PTWM_FILES_NAME) == 0);
    CHECK_ERR(ptwm_index_read(path2(dir, PTWM_INDEX_NAME), &idx, &err), &err, PTWM_ERR_NOT_FOUND,
              "names the directory's file record model.ptwm.files.json, which is missing");
    CHECK_ERR(ptwm_index_read(copy, &idx, &err), &err, PTWM_OK, NULL);
    ptwm_index_free(idx);
    free(dir);
    free(copy);
}

/* ---- links ---------------------------------------------------------------- */

static void test_links(const char *hf) {
    const char *tmp = tu_tmpdir();
    char *src = strdup(path2(tmp, "links")), *out = strdup(path2(tmp, "links.ptwm"));
    char *outside = strdup(path2(tmp, "outside.json"));
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    CHECK(tu_write_file(outside, "{\"secret\": 1}", 13) == 0);
    CHECK(tu_sh("cp -r '%s' '%s' && rm '%s/config.json' && ln -s '%s' '%s/config.json' && "
                "ln -s model-00001-of-00003.safetensors '%s/inside.link'",
                hf, src, src, outside, src, src) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_ERR_UNSUPPORTED,
              "config.json' is a symbolic link to '");
    CHECK(strstr(err.message, "outside.json'") && strstr(err.message, "--follow-symlinks"));
    CHECK(access(out, F_OK) != 0 && tu_count_prefixed("links.ptwm.tmp-") == 0);
    o.follow_symlinks = 1;
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_OK, NULL);
    CHECK(tu_files_equal(outside, path2(out, "config.json")));
    CHECK(tu_files_equal(path2(hf, "model-00001-of-00003.safetensors"), path2(out, "inside.link")));
    /* A shard or the index leading outside. */
    o.follow_symlinks = 0;
    o.force = 1;
    CHECK(tu_sh("cd '%s' && rm config.json && cp '%s' config.json && mv "
                "model-00002-of-00003.safetensors ../moved.safetensors && ln -s "
                "'%s/moved.safetensors' model-00002-of-00003.safetensors",
                src, outside, tmp) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_ERR_UNSUPPORTED,
              "model-00002-of-00003.safetensors' is a symbolic link to");
    CHECK(tu_sh("cd '%s' && rm model-00002-of-00003.safetensors && mv ../moved.safetensors "
                "model-00002-of-00003.safetensors && mv model.safetensors.index.json "
                "../moved.json && ln -s '%s/moved.json' model.safetensors.index.json",
                src, tmp) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_ERR_UNSUPPORTED,
              "model.safetensors.index.json' is a symbolic link to");
    /* A .ptwm directory's config linked outside is refused by decompress. */
    CHECK(tu_sh("cd '%s' && rm model.safetensors.index.json && mv ../moved.json "
                "model.safetensors.index.json && rm -f config.json && cp '%s' config.json",
                src, outside) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_OK, NULL);
    CHECK(tu_sh("cd '%s' && mv config.json ../moved2.json && ln -s '%s/moved2.json' config.json",
                out, tmp) == 0);
    CHECK_ERR(ptwm_decompress_checkpoint(out, path2(tmp, "links.back"), &o, &err), &err,
              PTWM_ERR_UNSUPPORTED, "config.json' is a symbolic link to");
    free(src);
    free(out);
    free(outside);
}

/* A Hugging Face cache: snapshots/REV/name -> ../../blobs/HASH. */
static void test_hf_cache(const char *hf) {
    const char *tmp = tu_tmpdir();
    char *snap = strdup(path2(tmp, "hub/models--x--y/snapshots/0123abc"));
    char *out = strdup(path2(tmp, "cache.ptwm")), *back = strdup(path2(tmp, "cache.back"));
    ptwm_err err;
    CHECK(tu_sh("mkdir -p '%s/hub/models--x--y/blobs' '%s' && cd '%s' && for f in *; do "
                "b=$(sha256sum \"$f\" | cut -c1-64); cp \"$f\" \"%s/hub/models--x--y/blobs/$b\"; "
                "ln -s \"../../blobs/$b\" \"%s/$f\"; done",
                tmp, snap, hf, tmp, snap) == 0);
    CHECK_ERR(ptwm_compress_checkpoint(snap, out, NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_decompress_checkpoint(out, back, NULL, &err), &err, PTWM_OK, NULL);
    CHECK(tu_trees_equal(hf, back));
    /* The same links from a directory that is not a snapshot lead outside it. */
    CHECK(tu_sh("mkdir -p '%s/hub/models--x--y/other/0123abc' && cp -P '%s'/* "
                "'%s/hub/models--x--y/other/0123abc/'",
                tmp, snap, tmp) == 0);
    {
        ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
        o.force = 1;
        CHECK_ERR(ptwm_compress_checkpoint(path2(tmp, "hub/models--x--y/other/0123abc"), out, &o,
                                           &err),
                  &err, PTWM_ERR_UNSUPPORTED, "is a symbolic link to");
    }
    free(snap);
    free(out);
    free(back);
}

/* Parts that followed links: their assembly follows them too (the manifest
 * says so); the assembly of parts that did not is refused at the link. */
static void test_parts_follow(const char *hf) {
    const char *tmp = tu_tmpdir();
    char *src = strdup(path2(tmp, "plinks")), *out = strdup(path2(tmp, "plinks.ptwm"));
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    CHECK(tu_sh("cp -r '%s' '%s' && rm '%s/config.json' && ln -s '%s/outside.json' "
                "'%s/config.json'",
                hf, src, src, tmp, src) == 0);
    o.parts = 2;
    o.follow_symlinks = 1;
    for (o.part = 1; o.part <= 2; o.part++)
        CHECK_ERR(ptwm_compress_checkpoint(src, out, &o, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(out, &err), &err, PTWM_OK, NULL);
    CHECK(tu_files_equal(path2(tmp, "outside.json"), path2(out, "config.json")));
    CHECK(tu_sh("'%s' verify '%s' -q", getenv("PTWM_BIN"), out) == 0);
    o.follow_symlinks = 0;
    for (o.part = 1; o.part <= 2; o.part++)
        CHECK_ERR(ptwm_compress_checkpoint(src, path2(tmp, "plinks2"), &o, &err), &err, PTWM_OK,
                  NULL);
    CHECK_ERR(ptwm_assemble_checkpoint(path2(tmp, "plinks2"), &err), &err, PTWM_ERR_UNSUPPORTED,
              "config.json' is a symbolic link to");
    CHECK(access(path2(tmp, "plinks2/" PTWM_INDEX_NAME), F_OK) != 0);
    /* From the command line. */
    CHECK(tu_sh("'%s' compress '%s' -o '%s/plinks3' -q 2>/dev/null", getenv("PTWM_BIN"), src,
                tmp) != 0);
    CHECK(tu_sh("'%s' compress '%s' -o '%s/plinks3' -q --follow-symlinks", getenv("PTWM_BIN"), src,
                tmp) == 0);
    free(src);
    free(out);
}

int main(void) {
    const char *root = getenv("PTWM_SOURCE_DIR");
    char *hf;
    CHECK_MSG(root && getenv("PTWM_BIN"), "PTWM_SOURCE_DIR and PTWM_BIN must be set (ctest)");
    if (!root || !getenv("PTWM_BIN")) return tu_finish("test_dir_names");
    snprintf(sample, sizeof sample, "%s/samples/posenet.bf16.safetensors", root);
    hf = strdup(path2(tu_tmpdir(), "hf"));
    test_recorded_names();
    make_hf(hf);
    test_shared_name(hf);
    test_kept_index(hf);
    test_index_read(path2(tu_tmpdir(), "kept.ptwm"));
    test_links(hf);
    test_hf_cache(hf);
    test_parts_follow(hf);
    free(hf);
    return tu_finish("test_dir_names");
}
