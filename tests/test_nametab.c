/* The name table (src/platform/nametab.c) that .ptwm tables, safetensors
 * headers, shard directories and indexes look names up in: every name is
 * found at its index and a missing one is not, across growth from empty;
 * names whose hashes collide (forced by passing one hash for all) are told
 * apart by their bytes; renumbering follows a permutation; the size limit is
 * refused; the hash is seeded. Then the users: a header, an index and a directory of names that
 * differ only in their last bytes reject a duplicate and find every name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "index.h"
#include "nametab.h"
#include "safetensors.h"
#include "testutil.h"

#define N 5000

typedef struct names {
    char name[N][24];
} names;

static const char *name_at(const void *owner, size_t i) {
    return ((const names *)owner)->name[i];
}

/* Insert n names (hash h when forced, else their own), growing as they
 * come, then find each and miss a few. */
static void fill_and_find(names *nm, size_t n, int forced) {
    ptwm_nametab t = {NULL, 0};
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t h = forced ? 7u : ptwm_name_hash(nm->name[i], strlen(nm->name[i]));
        uint64_t *s;
        CHECK(ptwm_nametab_reserve(&t, i + 1));
        CHECK(t.cap >= 2 * (i + 1) && (t.cap & (t.cap - 1)) == 0);
        s = ptwm_nametab_find(&t, nm, name_at, nm->name[i], h);
        CHECK_MSG(*s == 0, "name %zu found before it was added", i);
        ptwm_nametab_put(s, h, i);
    }
    for (i = 0; i < n; i++) {
        uint32_t h = forced ? 7u : ptwm_name_hash(nm->name[i], strlen(nm->name[i]));
        uint64_t s = *ptwm_nametab_find(&t, nm, name_at, nm->name[i], h);
        CHECK_MSG(s && ptwm_nametab_index(s) == i, "name %zu (%s): slot %llx", i, nm->name[i],
                  (unsigned long long)s);
    }
    {
        const char *miss[] = {"", "layer.0.weightx", "layer.99999.bias", "layer.0.weigh"};
        size_t k;
        for (k = 0; k < PTWM_ARRAY_LEN(miss); k++) {
            uint32_t h = forced ? 7u : ptwm_name_hash(miss[k], strlen(miss[k]));
            CHECK_MSG(*ptwm_nametab_find(&t, nm, name_at, miss[k], h) == 0, "'%s' found", miss[k]);
        }
    }
    /* renumbered in reverse: each name at n - 1 - its index */
    {
        size_t *map = (size_t *)malloc(n * sizeof(size_t));
        names *rev = (names *)malloc(sizeof(names));
        for (i = 0; i < n; i++) {
            map[i] = n - 1 - i;
            memcpy(rev->name[n - 1 - i], nm->name[i], sizeof(nm->name[i]));
        }
        ptwm_nametab_renumber(&t, map);
        for (i = 0; i < n; i++) {
            uint32_t h = forced ? 7u : ptwm_name_hash(rev->name[i], strlen(rev->name[i]));
            uint64_t s = *ptwm_nametab_find(&t, rev, name_at, rev->name[i], h);
            CHECK_MSG(s && ptwm_nametab_index(s) == i, "renumbered name %zu not at its place", i);
        }
        free(map);
        free(rev);
    }
    ptwm_nametab_free(&t);
    CHECK(t.slot == NULL && t.cap == 0);
}

static void check_table(void) {
    names *nm = (names *)malloc(sizeof(names));
    ptwm_nametab t = {NULL, 0};
    size_t i;
    for (i = 0; i < N; i++) snprintf(nm->name[i], sizeof(nm->name[i]), "layer.%zu.weight", i);
    fill_and_find(nm, N, 0);
    fill_and_find(nm, 300, 1);
    CHECK(ptwm_name_hash("a", 1) != ptwm_name_hash("a", 0));
    CHECK(ptwm_name_hash("layer.1.weight", 14) == ptwm_name_hash("layer.1.weight", 14));
    /* seeded: not the plain XXH3 a file's author could compute (each of
     * eight names equal by chance: 2^-32) */
    {
        int plain = 0;
        for (i = 0; i < 8; i++)
            plain += ptwm_name_hash(nm->name[i], strlen(nm->name[i])) ==
                     (uint32_t)XXH3_64bits(nm->name[i], strlen(nm->name[i]));
        CHECK_MSG(plain < 8, "the name hash is the unseeded XXH3");
    }
    CHECK(!ptwm_nametab_reserve(&t, (size_t)1 << 30));
    CHECK(t.slot == NULL && t.cap == 0);
    /* a table never grown holds nothing, and a lookup in it says so */
    CHECK(ptwm_nametab_lookup(&t, nm, name_at, "layer.0.weight") == SIZE_MAX);
    CHECK(ptwm_nametab_reserve(&t, 0) && t.cap == 0);
    CHECK(ptwm_nametab_lookup(&t, nm, name_at, "") == SIZE_MAX);
    CHECK(ptwm_nametab_reserve(&t, 1) && t.cap > 0);
    ptwm_nametab_put(ptwm_nametab_find(&t, nm, name_at, nm->name[3],
                                       ptwm_name_hash(nm->name[3], strlen(nm->name[3]))),
                     ptwm_name_hash(nm->name[3], strlen(nm->name[3])), 3);
    CHECK(ptwm_nametab_lookup(&t, nm, name_at, nm->name[3]) == 3);
    CHECK(ptwm_nametab_lookup(&t, nm, name_at, nm->name[4]) == SIZE_MAX);
    ptwm_nametab_free(&t);
    free(nm);
}

/* A header of 3000 tensors whose names differ in their last bytes: each is
 * found at its place in file order; the same header with one name repeated
 * is refused naming it. */
static void check_header(void) {
    size_t cap = 3000 * 128 + 64, len = 0, i;
    char *json = (char *)malloc(cap);
    ptwm_st_parsed p;
    ptwm_err err;
    len += (size_t)snprintf(json + len, cap - len, "{");
    /* written in reverse file order, so sorting moves every entry */
    for (i = 3000; i-- > 0;)
        len += (size_t)snprintf(json + len, cap - len,
                                "%s\"t.%04zu\":{\"dtype\":\"U8\",\"shape\":[1],"
                                "\"data_offsets\":[%zu,%zu]}",
                                i == 2999 ? "" : ",", i, i, i + 1);
    len += (size_t)snprintf(json + len, cap - len, "}");
    CHECK_MSG(ptwm_st_parse_header(json, len, "h", &p, &err) == PTWM_OK, "%s", err.message);
    CHECK(p.n == 3000);
    for (i = 0; i < 3000 && p.n == 3000; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t.%04zu", i);
        CHECK_MSG(ptwm_st_parsed_find(&p, name) == (ptrdiff_t)i, "%s at %td", name,
                  ptwm_st_parsed_find(&p, name));
        CHECK(strcmp(p.t[i].name, name) == 0);
    }
    CHECK(ptwm_st_parsed_find(&p, "t.3000") == -1);
    CHECK(ptwm_st_parsed_find(&p, "t.000") == -1);
    ptwm_st_parsed_free(&p);
    memcpy(strstr(json, "\"t.1234\""), "\"t.1233\"", 8);
    CHECK_ERR(ptwm_st_parse_header(json, len, "h", &p, &err), &err, PTWM_ERR_DUPLICATE,
              "tensor 't.1233' appears twice");
    free(json);
}

/* An index of 3000 tensors over 40 shards: each tensor maps to its shard,
 * a second mapping of one is refused naming both shards. */
static void check_index(void) {
    ptwm_index *idx = NULL;
    ptwm_err err;
    size_t i, pos;
    char t[32], s[64];
    CHECK(ptwm_index_new(PTWM_INDEX_SAFETENSORS, &idx, &err) == PTWM_OK);
    for (i = 0; i < 3000 && idx; i++) {
        snprintf(t, sizeof(t), "model.layers.%zu.w", i);
        snprintf(s, sizeof(s), "model-%05zu-of-00040.safetensors", i % 40 + 1);
        CHECK_MSG(ptwm_index_add(idx, t, s, &err) == PTWM_OK, "%s", err.message);
    }
    CHECK(ptwm_index_count(idx) == 3000 && ptwm_index_shard_count(idx) == 40);
    for (i = 0; i < 3000; i++) {
        const char *got_t, *got_s;
        snprintf(t, sizeof(t), "model.layers.%zu.w", i);
        snprintf(s, sizeof(s), "model-%05zu-of-00040.safetensors", i % 40 + 1);
        CHECK(ptwm_index_find(idx, t, &pos, &err) == PTWM_OK && pos == i);
        CHECK(ptwm_index_entry(idx, pos, &got_t, &got_s, &err) == PTWM_OK &&
              strcmp(got_t, t) == 0 && strcmp(got_s, s) == 0);
    }
    CHECK_ERR(ptwm_index_find(idx, "model.layers.3000.w", &pos, &err), &err,
              PTWM_ERR_NOT_FOUND, "model.layers.3000.w");
    CHECK_ERR(ptwm_index_add(idx, "model.layers.17.w", "model-00001-of-00040.safetensors", &err),
              &err, PTWM_ERR_DUPLICATE,
              "'model.layers.17.w' mapped twice (to 'model-00018-of-00040.safetensors' and "
              "'model-00001-of-00040.safetensors')");
    ptwm_index_free(idx);
}

int main(void) {
    check_table();
    check_header();
    check_index();
    return tu_finish("nametab");
}
