/* Hugging Face checkpoint directories: sharded write and read back of a
 * corpus file, single-shard and empty directories (lookups in them, and an
 * index naming a tensor an empty shard lacks), and hostile index files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"

static char *make_dir(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof(buf), "%s/%s", tu_tmpdir(), name);
    mkdir(buf, 0777);
    return buf;
}

static void put(const char *dir, const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    CHECK(tu_write_file(path, text, strlen(text)) == 0);
}

/* Shard a corpus file, read it back through the directory, compare. */
static void sharded_round_trip(void) {
    const char *src = tu_corpus_path("emotion.f32.safetensors");
    ptwm_st *st = NULL;
    ptwm_stdir *d = NULL;
    ptwm_err err = {0};
    ptwm_tensor_desc *desc;
    ptwm_kv meta[1] = {{"format", "pt"}};
    size_t n, i, idx, shard, last_shard = 0;
    uint64_t total = 0;
    char *dir, path[1200];
    uint8_t *index_text;
    size_t index_len;

    CHECK_ERR(ptwm_st_open(src, PTWM_OPEN_MMAP, &st, &err), &err, PTWM_OK, NULL);
    if (!st) return;
    n = ptwm_st_count(st);
    desc = calloc(n, sizeof(*desc));
    for (i = 0; i < n; i++) {
        ptwm_tensor_info t;
        ptwm_st_tensor(st, i, &t, NULL);
        desc[i] = (ptwm_tensor_desc){t.name, t.dtype, t.ndim, t.shape, t.data, t.nbytes};
        total += t.nbytes;
    }
    dir = make_dir("sharded");
    CHECK_ERR(ptwm_stdir_write(dir, desc, n, meta, 1, total / 3, &err), &err, PTWM_OK, NULL);
    snprintf(path, sizeof(path), "%s/model-00001-of-00004.safetensors", dir);
    CHECK_MSG(access(path, F_OK) == 0, "%s missing", path);
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    index_text = tu_read_file(path, &index_len);
    CHECK(index_text != NULL);
    if (index_text) {
        char expect[128];
        snprintf(expect, sizeof(expect), "\"total_size\": %llu", (unsigned long long)total);
        CHECK(strstr((char *)index_text, expect) != NULL);
        CHECK(strstr((char *)index_text, "\"weight_map\": {") != NULL);
        CHECK(index_text[index_len - 1] == '\n');
    }
    free(index_text);

    CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_PREAD, &d, &err), &err, PTWM_OK, NULL);
    if (d) {
        CHECK(ptwm_stdir_count(d) == n);
        CHECK(ptwm_stdir_shard_count(d) == 4);
        for (i = 0; i < n && i < ptwm_stdir_count(d); i++) {
            ptwm_tensor_info t;
            uint8_t *buf = malloc(desc[i].nbytes + 1);
            /* greedy packing in input order: index order equals input order */
            CHECK(ptwm_stdir_tensor(d, i, &t, NULL) == PTWM_OK && strcmp(t.name, desc[i].name) == 0);
            CHECK(t.nbytes == desc[i].nbytes && t.dtype == desc[i].dtype);
            CHECK_ERR(ptwm_stdir_read(d, i, 0, buf, (size_t)t.nbytes, &err), &err, PTWM_OK, NULL);
            CHECK(memcmp(buf, desc[i].data, t.nbytes) == 0);
            free(buf);
            CHECK(ptwm_stdir_find(d, desc[i].name, &idx, NULL) == PTWM_OK && idx == i);
            shard = ptwm_stdir_shard_of(d, i);
            CHECK(shard >= last_shard);
            last_shard = shard;
        }
        CHECK(strcmp(ptwm_st_metadata_get(ptwm_stdir_shard(d, 0), "format"), "pt") == 0);
        CHECK(ptwm_stdir_find(d, "absent", &idx, NULL) == PTWM_ERR_NOT_FOUND);
        CHECK(ptwm_stdir_shard(d, 4) == NULL);
        CHECK_ERR(ptwm_stdir_read(d, n, 0, NULL, 0, &err), &err, PTWM_ERR_INVALID_ARG, "out of range");
    }
    ptwm_stdir_close(d);
    d = NULL;

    /* Rewrite the same directory as one shard: model.safetensors, index gone. */
    CHECK_ERR(ptwm_stdir_write(dir, desc, n, meta, 1, total, &err), &err, PTWM_OK, NULL);
    CHECK(access(path, F_OK) != 0);
    CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_MMAP, &d, &err), &err, PTWM_OK, NULL);
    CHECK(ptwm_stdir_count(d) == n && ptwm_stdir_shard_count(d) == 1);
    ptwm_stdir_close(d);

    /* Writer refuses what a safetensors file cannot hold. */
    if (n > 1) {
        desc[1].name = desc[0].name;
        CHECK_ERR(ptwm_stdir_write(make_dir("dup"), desc, n, NULL, 0, total / 3, &err), &err,
                  PTWM_ERR_DUPLICATE, "given twice");
    }
    CHECK_ERR(ptwm_stdir_write(make_dir("zero"), desc, 1, NULL, 0, 0, &err), &err,
              PTWM_ERR_INVALID_ARG, "must be positive");
    free(desc);
    ptwm_st_close(st);
}

static void empty_dir_write(void) {
    ptwm_stdir *d = NULL;
    ptwm_err err = {0};
    char *dir = make_dir("empty");
    CHECK_ERR(ptwm_stdir_write(dir, NULL, 0, NULL, 0, 1000, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_MMAP, &d, &err), &err, PTWM_OK, NULL);
    CHECK(ptwm_stdir_count(d) == 0 && ptwm_stdir_shard_count(d) == 1);
    /* a lookup in a directory of no tensors finds nothing (its name table
     * is empty) */
    CHECK_ERR(ptwm_stdir_find(d, "x", NULL, &err), &err, PTWM_ERR_NOT_FOUND, "'x'");
    ptwm_stdir_close(d);
    d = NULL;
    /* an index naming a tensor its only shard, of no tensors, lacks */
    dir = make_dir("empty-shard");
    {
        char path[1200];
        snprintf(path, sizeof(path), "%s/e.safetensors", dir);
        CHECK_ERR(ptwm_st_write(path, NULL, 0, NULL, 0, &err), &err, PTWM_OK, NULL);
    }
    put(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"e.safetensors\"}}");
    CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_PREAD, &d, &err), &err, PTWM_ERR_INDEX,
              "tensor 'x' is mapped to shard 'e.safetensors', which lacks it");
    CHECK(d == NULL);
    /* an index with an empty weight_map: no shards, no tensors */
    dir = make_dir("empty-index");
    put(dir, "model.safetensors.index.json", "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {}}\n");
    CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_PREAD, &d, &err), &err, PTWM_OK, NULL);
    CHECK(ptwm_stdir_count(d) == 0 && ptwm_stdir_shard_count(d) == 0);
    ptwm_stdir_close(d);
}

/* A directory with shards a.safetensors (tensor x) and b.safetensors
 * (tensors y and x2), for hand-written index files. */
static char *fixture(const char *name) {
    static const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t s4[1] = {4};
    ptwm_tensor_desc a[1] = {{"x", PTWM_DTYPE_U8, 1, s4, bytes, 4}};
    ptwm_tensor_desc b[2] = {{"y", PTWM_DTYPE_U8, 1, s4, bytes, 4},
                             {"x2", PTWM_DTYPE_U8, 1, s4, bytes + 4, 4}};
    char *dir = make_dir(name), path[1200];
    ptwm_err err = {0};
    snprintf(path, sizeof(path), "%s/a.safetensors", dir);
    CHECK_ERR(ptwm_st_write(path, a, 1, NULL, 0, &err), &err, PTWM_OK, NULL);
    snprintf(path, sizeof(path), "%s/b.safetensors", dir);
    CHECK_ERR(ptwm_st_write(path, b, 2, NULL, 0, &err), &err, PTWM_OK, NULL);
    return dir;
}

static void index_case(const char *name, const char *index, ptwm_error code, const char *substr) {
    ptwm_stdir *d = NULL;
    ptwm_err err = {0};
    char *dir = fixture(name);
    put(dir, "model.safetensors.index.json", index);
    CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_MMAP, &d, &err), &err, code, substr);
    if (code == PTWM_OK) {
        CHECK(ptwm_stdir_count(d) == 3);
        ptwm_stdir_close(d);
    } else {
        CHECK(d == NULL);
    }
}

#define WM_OK "\"x\": \"a.safetensors\", \"y\": \"b.safetensors\", \"x2\": \"b.safetensors\""

static void hostile_indexes(void) {
    ptwm_stdir *d = NULL;
    ptwm_err err = {0};
    index_case("good", "{\"metadata\": {\"total_size\": 12}, \"weight_map\": {" WM_OK "}}",
               PTWM_OK, NULL);
    index_case("no-total", "{\"weight_map\": {" WM_OK "}, \"extra\": [1]}", PTWM_OK, NULL);
    /* transformers' own metadata entries, of any type, are not ours to refuse */
    index_case("extra-meta",
               "{\"metadata\": {\"total_size\": 12, \"format\": \"pt\", \"n\": {\"a\": [1]}}, "
               "\"weight_map\": {" WM_OK "}}",
               PTWM_OK, NULL);
    index_case("nul-shard", "{\"weight_map\": {\"x\": \"a.safetensors\\u0000z\", \"y\": \"b.safetensors\", "
               "\"x2\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "which contains a NUL byte");
    index_case("malformed", "{\"weight_map\": {" WM_OK "}", PTWM_ERR_JSON, "is not valid JSON");
    index_case("dupkey", "{\"weight_map\": {" WM_OK ", \"x\": \"a.safetensors\"}}",
               PTWM_ERR_DUPLICATE, "duplicate");
    index_case("slash",
               "{\"weight_map\": {\"x\": \"sub/a.safetensors\", \"y\": \"b.safetensors\", "
               "\"x2\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "tensor 'x' maps to shard name 'sub/a.safetensors', which contains a path separator");
    index_case("abs",
               "{\"weight_map\": {\"x\": \"/etc/passwd\", \"y\": \"b.safetensors\", "
               "\"x2\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "contains a path separator");
    index_case("dotdot",
               "{\"weight_map\": {\"x\": \"..\", \"y\": \"b.safetensors\", \"x2\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "shard name '..', which contains '..'");
    index_case("emptyname",
               "{\"weight_map\": {\"x\": \"\", \"y\": \"b.safetensors\", \"x2\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "which is empty");
    index_case("missing",
               "{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\", "
               "\"x2\": \"b.safetensors\", \"z\": \"c.safetensors\"}}",
               PTWM_ERR_NOT_FOUND, "lists shard 'c.safetensors', which does not exist");
    index_case("lacks",
               "{\"weight_map\": {\"x\": \"b.safetensors\", \"y\": \"b.safetensors\", "
               "\"x2\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "tensor 'x' is mapped to shard 'b.safetensors', which lacks it");
    index_case("unlisted", "{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": \"b.safetensors\"}}",
               PTWM_ERR_INDEX, "shard 'b.safetensors' holds tensor 'x2', which the weight_map does not list");
    index_case("total", "{\"metadata\": {\"total_size\": 13}, \"weight_map\": {" WM_OK "}}",
               PTWM_ERR_INDEX, "metadata.total_size is 13 but the shards hold 12 bytes");
    index_case("total-type", "{\"metadata\": {\"total_size\": \"12\"}, \"weight_map\": {" WM_OK "}}",
               PTWM_ERR_SCHEMA, "total_size must be a non-negative integer, got a string");
    index_case("total-negative", "{\"metadata\": {\"total_size\": -12}, \"weight_map\": {" WM_OK "}}",
               PTWM_ERR_SCHEMA, "total_size must be a non-negative integer, got -12");
    index_case("no-map", "{\"metadata\": {}}", PTWM_ERR_SCHEMA, "no \"weight_map\" object");
    index_case("not-object", "[1, 2]", PTWM_ERR_SCHEMA, "no \"weight_map\" object");
    index_case("value-type", "{\"weight_map\": {\"x\": 3}}", PTWM_ERR_SCHEMA,
               "tensor 'x' must map to a shard file name");

    /* the same tensor in two shards */
    {
        static const uint8_t bytes[4] = {0};
        uint64_t s4[1] = {4};
        ptwm_tensor_desc t = {"x", PTWM_DTYPE_U8, 1, s4, bytes, 4};
        char *dir = fixture("two-shards"), path[1200];
        snprintf(path, sizeof(path), "%s/c.safetensors", dir);
        CHECK_ERR(ptwm_st_write(path, &t, 1, NULL, 0, &err), &err, PTWM_OK, NULL);
        put(dir, "model.safetensors.index.json",
            "{\"weight_map\": {" WM_OK ", \"q\": \"c.safetensors\"}}");
        CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_MMAP, &d, &err), &err, PTWM_ERR_DUPLICATE,
                  "tensor 'x' is in shard 'a.safetensors' and in shard 'c.safetensors'");
    }
    /* a bad shard reports the shard's own error */
    {
        char *dir = fixture("bad-shard");
        put(dir, "b.safetensors", "short");
        put(dir, "model.safetensors.index.json", "{\"weight_map\": {" WM_OK "}}");
        CHECK_ERR(ptwm_stdir_open(dir, PTWM_OPEN_MMAP, &d, &err), &err, PTWM_ERR_TRUNCATED,
                  "b.safetensors' is 5 bytes");
    }
    CHECK_ERR(ptwm_stdir_open(make_dir("nothing"), PTWM_OPEN_MMAP, &d, &err), &err,
              PTWM_ERR_NOT_FOUND, "has neither model.safetensors.index.json nor model.safetensors");
    CHECK_ERR(ptwm_stdir_open("/nonexistent/dir", PTWM_OPEN_MMAP, &d, &err), &err,
              PTWM_ERR_NOT_FOUND, "is not a directory");
    CHECK(d == NULL);
}

int main(void) {
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus directory not found (set PTWM_CORPUS)");
    if (tu_corpus_dir()) sharded_round_trip();
    empty_dir_write();
    hostile_indexes();
    return tu_finish("test_stdir");
}
