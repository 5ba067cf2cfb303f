/* The file record of a .ptwm directory (src/formats/ptdir_files.c,
 * docs/SHARDING.md): its text round-trips and is the same whatever order
 * files were added in; every single-bit flip of a record is refused before
 * its JSON is read; hand-made records that carry a right hash are checked
 * strictly (each rule below, with its error); files are compared by size and
 * hash, naming the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "hash.h"
#include "ptdir_files.h"
#include "testutil.h"

static void hash_of(const char *s, uint8_t h[16]) { ptwm_xxh128_oneshot(s, strlen(s), h); }

static void add(ptwm_files *f, const char *name, const char *content) {
    uint8_t h[16];
    ptwm_err err;
    hash_of(content, h);
    CHECK_ERR(ptwm_files_add(f, name, strlen(content), h, &err), &err, PTWM_OK, NULL);
}

/* Three files added in two orders: the same text, which parses back to them. */
static void test_round_trip(void) {
    ptwm_files a = {NULL, 0, 0}, b = {NULL, 0, 0}, back;
    char *ta = NULL, *tb = NULL;
    size_t la = 0, lb = 0;
    ptwm_err err;
    const ptwm_files_entry *e;
    add(&a, "config.json", "{}");
    add(&a, "tokenizer/vocab.txt", "a b c");
    add(&a, "model.ptwm.index.json", "{\"weight_map\": {}}");
    add(&b, "tokenizer/vocab.txt", "a b c");
    add(&b, "model.ptwm.index.json", "{\"weight_map\": {}}");
    add(&b, "config.json", "{}");
    CHECK_ERR(ptwm_files_text(&a, &ta, &la, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_files_text(&b, &tb, &lb, &err), &err, PTWM_OK, NULL);
    CHECK(ta && tb && la == lb && memcmp(ta, tb, la) == 0);
    CHECK(ta && la > 60 && !memcmp(ta + la - 4, "\"\n}\n", 4));
    CHECK_ERR(ptwm_files_parse(ta, la, "round trip", &back, &err), &err, PTWM_OK, NULL);
    CHECK(back.n == 3);
    e = ptwm_files_find(&back, "tokenizer/vocab.txt");
    CHECK(e && e->size == 5);
    CHECK(ptwm_files_find(&back, "vocab.txt") == NULL);
    {
        uint8_t h[16];
        hash_of("{}", h);
        CHECK_ERR(ptwm_files_check(&back, "D", "config.json", 2, h, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_files_check(&back, "D", "config.json", 3, h, &err), &err, PTWM_ERR_HASH,
                  "file 'config.json' is damaged: 3 bytes");
        h[15] ^= 1;
        CHECK_ERR(ptwm_files_check(&back, "D", "config.json", 2, h, &err), &err, PTWM_ERR_HASH,
                  "directory 'D': file 'config.json' is damaged");
        CHECK_ERR(ptwm_files_check(&back, "D", "other.json", 2, h, &err), &err,
                  PTWM_ERR_NOT_FOUND, "'other.json' is not in its file record");
        CHECK_ERR(ptwm_files_check_bytes(&back, "D", "config.json", "{}", 2, &err), &err, PTWM_OK,
                  NULL);
    }
    /* An empty record is a record too. */
    {
        ptwm_files none = {NULL, 0, 0}, got;
        char *t = NULL;
        size_t l = 0;
        CHECK_ERR(ptwm_files_text(&none, &t, &l, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_files_parse(t, l, "empty", &got, &err), &err, PTWM_OK, NULL);
        CHECK(got.n == 0);
        ptwm_free(t);
    }
    ptwm_free(ta);
    ptwm_free(tb);
    ptwm_files_free(&a);
    ptwm_files_free(&b);
    ptwm_files_free(&back);
}

/* Every single-bit flip anywhere in a record is refused, and refused as
 * damage (its own hash), never read as another list of files. */
static void test_every_bit_flip(void) {
    ptwm_files f = {NULL, 0, 0}, got;
    char *t = NULL;
    size_t len = 0, i, refused = 0, tries = 0;
    ptwm_err err;
    add(&f, "config.json", "{\"hidden_size\": 64}");
    add(&f, "model.ptwm.index.json", "{}");
    CHECK_ERR(ptwm_files_text(&f, &t, &len, &err), &err, PTWM_OK, NULL);
    for (i = 0; t && i < len * 8; i++) {
        ptwm_error rc;
        t[i / 8] ^= (char)(1 << (i % 8));
        rc = ptwm_files_parse(t, len, "flipped", &got, &err);
        tries++;
        refused += rc == PTWM_ERR_HASH;
        if (rc == PTWM_OK) ptwm_files_free(&got);
        t[i / 8] ^= (char)(1 << (i % 8));
    }
    CHECK_MSG(refused == tries, "%zu of %zu flipped records refused as damaged", refused, tries);
    /* Cut short by any number of bytes. */
    for (i = 1; t && i < len; i += 7)
        CHECK_ERR(ptwm_files_parse(t, len - i, "short", &got, &err), &err, PTWM_ERR_HASH,
                  "file record 'short'");
    ptwm_free(t);
    ptwm_files_free(&f);
}

/* `body` (a record's text up to its last line) with the line holding its
 * hash: what a writer of hand-made records would produce. */
static char *sealed(const char *body, size_t *len) {
    uint8_t h[16];
    char hex[33], *out = (char *)malloc(strlen(body) + 64);
    ptwm_xxh128_oneshot(body, strlen(body), h);
    sprintf(out, "%s  \"record_xxh3_128\": \"%s\"\n}\n", body, ptwm_hex128(h, hex));
    *len = strlen(out);
    return out;
}

#define H32 "0123456789abcdef0123456789abcdef"
#define ENTRY(name) "{\"name\": " name ", \"size\": 1, \"xxh3_128\": \"" H32 "\"}"

/* Hand-made records with a right hash, one rule each. */
static void test_hostile(void) {
    static const struct {
        const char *body;
        ptwm_error want;
        const char *msg;
    } cases[] = {
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"a\"") "],\n",
         PTWM_OK, NULL},
        {"{\"format\": \"ptwm-files\", \"version\": 2, \"files\": [],\n", PTWM_ERR_VERSION,
         "version other than 1"},
        {"{\"format\": \"ptwm-part\", \"version\": 1, \"files\": [],\n", PTWM_ERR_SCHEMA,
         "needs exactly format"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": {},\n", PTWM_ERR_SCHEMA,
         "files (an array)"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [], \"extra\": 1,\n",
         PTWM_ERR_SCHEMA, "needs exactly"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"format\": \"x\", \"files\": [],\n",
         PTWM_ERR_JSON, "duplicate"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"../x\"") "],\n",
         PTWM_ERR_SCHEMA, "a name is a path inside the directory"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"a//b\"") "],\n",
         PTWM_ERR_SCHEMA, "(files[0])"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"a/\"") "],\n",
         PTWM_ERR_SCHEMA, "a name is a path"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"/etc/x\"") "],\n",
         PTWM_ERR_SCHEMA, "a name is a path"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"a\\\\b\"") "],\n",
         PTWM_ERR_SCHEMA, "a name is a path"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"./a\"") "],\n",
         PTWM_ERR_SCHEMA, "a name is a path"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"\"") "],\n",
         PTWM_ERR_SCHEMA, "a name is a path"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"a\\u0000b\"") "],\n",
         PTWM_ERR_JSON, "is not allowed"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"b\"") ", " ENTRY(
             "\"a\"") "],\n",
         PTWM_ERR_SCHEMA, "ascending byte order (files[1])"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [" ENTRY("\"a\"") ", " ENTRY(
             "\"a\"") "],\n",
         PTWM_ERR_SCHEMA, "listed once each"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [{\"name\": \"a\", \"size\": -1, "
         "\"xxh3_128\": \"" H32 "\"}],\n",
         PTWM_ERR_SCHEMA, "a size is not negative"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [{\"name\": \"a\", "
         "\"size\": 1.5, \"xxh3_128\": \"" H32 "\"}],\n",
         PTWM_ERR_SCHEMA, "exactly \"name\", \"size\""},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [{\"name\": \"a\", \"size\": 1, "
         "\"xxh3_128\": \"0123456789ABCDEF0123456789abcdef\"}],\n",
         PTWM_ERR_SCHEMA, "32 lowercase hex digits"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [{\"name\": \"a\", \"size\": 1, "
         "\"xxh3_128\": \"" H32 "\", \"mode\": 1}],\n",
         PTWM_ERR_SCHEMA, "exactly"},
        {"{\"format\": \"ptwm-files\", \"version\": 1, \"files\": [[]],\n", PTWM_ERR_SCHEMA,
         "exactly"},
        {"[1,\n", PTWM_ERR_JSON, "file record 'hostile'"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = 0;
        char *text = sealed(cases[i].body, &len);
        ptwm_files got;
        ptwm_err err;
        ptwm_error rc = ptwm_files_parse(text, len, "hostile", &got, &err);
        CHECK_MSG(rc == cases[i].want && (!cases[i].msg || strstr(err.message, cases[i].msg)),
                  "case %zu: %s: %s", i, ptwm_error_name(rc), rc ? err.message : "");
        if (!rc) ptwm_files_free(&got);
        free(text);
    }
}

/* The writer refuses what it could not write or a reader would refuse. */
static void test_writer_refuses(void) {
    ptwm_files f = {NULL, 0, 0};
    char *t = NULL;
    size_t len = 0;
    ptwm_err err;
    add(&f, "caf\xe9.json", "{}");   /* Latin-1, not UTF-8 */
    CHECK_ERR(ptwm_files_text(&f, &t, &len, &err), &err, PTWM_ERR_UNSUPPORTED, "not UTF-8");
    ptwm_files_free(&f);
    add(&f, "a", "1");
    add(&f, "a", "2");
    CHECK_ERR(ptwm_files_text(&f, &t, &len, &err), &err, PTWM_ERR_DUPLICATE, "'a' recorded twice");
    ptwm_files_free(&f);
    CHECK(t == NULL);
}

/* Written into a directory, read back; a directory without one says so. */
static void test_read_write(void) {
    ptwm_files f = {NULL, 0, 0}, got;
    ptwm_err err;
    int found = 1;
    const char *dir = tu_tmpdir();
    CHECK_ERR(ptwm_files_read(dir, &got, &found, &err), &err, PTWM_OK, NULL);
    CHECK(found == 0 && got.n == 0);
    add(&f, "config.json", "{}");
    CHECK_ERR(ptwm_files_write(&f, dir, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_files_read(dir, &got, &found, &err), &err, PTWM_OK, NULL);
    CHECK(found == 1 && got.n == 1);
    ptwm_files_free(&got);
    ptwm_files_free(&f);
    {
        uint8_t h[16], want[16];
        uint64_t size = 0;
        CHECK(tu_write_file(tu_tmp_path("x.txt"), "hello", 5) == 0);
        hash_of("hello", want);
        CHECK_ERR(ptwm_hash_file(tu_tmp_path("x.txt"), h, &size, &err), &err, PTWM_OK, NULL);
        CHECK(size == 5 && memcmp(h, want, 16) == 0);
    }
}

int main(void) {
    test_round_trip();
    test_every_bit_flip();
    test_hostile();
    test_writer_refuses();
    test_read_write();
    return tu_finish("test_ptdir_files");
}
