/* libFuzzer harness over the sharded index parser (model.ptwm.index.json,
 * and model.safetensors.index.json as a .ptwm directory keeps it).
 *
 * Any input must parse or fail cleanly. An accepted index must hold only safe
 * shard names, find each tensor at its own position, and survive a write and a
 * read back unchanged (entries, shards, totals, metadata). Read as a Hugging
 * Face index, an accepted one maps every tensor as itself, and a copy with one
 * tensor sent to another shard, or one tensor fewer, is told apart
 * (ptwm_index_check_map, the check before a kept index is restored). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"
#include "index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_same(const ptwm_index *a, const ptwm_index *b) {
    size_t i;
    if (ptwm_index_count(a) != ptwm_index_count(b) ||
        ptwm_index_shard_count(a) != ptwm_index_shard_count(b) ||
        ptwm_index_total_size(a) != ptwm_index_total_size(b) ||
        ptwm_index_compressed_total_size(a) != ptwm_index_compressed_total_size(b))
        __builtin_trap();
    for (i = 0; i < ptwm_index_count(a); i++) {
        const char *ta, *sa, *tb, *sb;
        if (ptwm_index_entry(a, i, &ta, &sa, NULL) || ptwm_index_entry(b, i, &tb, &sb, NULL) ||
            strcmp(ta, tb) || strcmp(sa, sb))
            __builtin_trap();
    }
}

/* A copy of hf (of the Hugging Face kind) with tensor 0 in shard `moved`
 * (NULL: left out). */
static ptwm_index *copy_but_first(const ptwm_index *hf, const char *moved) {
    ptwm_index *c = NULL;
    size_t i;
    if (ptwm_index_new(PTWM_INDEX_SAFETENSORS, &c, NULL)) return NULL;
    for (i = 0; i < ptwm_index_count(hf); i++) {
        const char *t, *s;
        ptwm_index_entry(hf, i, &t, &s, NULL);
        if (i == 0 && !moved) continue;
        if (ptwm_index_add(c, t, i == 0 ? moved : s, NULL)) __builtin_trap();
    }
    return c;
}

static void check_hf(const uint8_t *data, size_t size) {
    ptwm_index *hf = NULL, *c;
    const char *t, *s;
    if (ptwm_index_parse_kind((const char *)data, size, "fuzz-hf", PTWM_INDEX_SAFETENSORS, &hf,
                              NULL) != PTWM_OK)
        return;
    if (ptwm_index_check_map(hf, hf, "self", NULL) != PTWM_OK) __builtin_trap();
    if (ptwm_index_count(hf) > 0) {
        ptwm_index_entry(hf, 0, &t, &s, NULL);
        /* "x" + a plain name is plain, and another name. */
        {
            char moved[4200];
            snprintf(moved, sizeof moved, "x%s", s);
            c = strlen(s) < 4000 ? copy_but_first(hf, moved) : NULL;
            if (c && ptwm_index_check_map(c, hf, "moved", NULL) != PTWM_ERR_INDEX) __builtin_trap();
            ptwm_index_free(c);
        }
        c = copy_but_first(hf, NULL);
        if (c && ptwm_index_check_map(c, hf, "fewer", NULL) != PTWM_ERR_INDEX) __builtin_trap();
        if (c && ptwm_index_check_map(hf, c, "more", NULL) != PTWM_ERR_INDEX) __builtin_trap();
        ptwm_index_free(c);
    }
    ptwm_index_free(hf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ptwm_index *idx = NULL, *back = NULL;
    char path[64];
    size_t i, pos;
    check_hf(data, size);
    if (ptwm_index_parse((const char *)data, size, "fuzz", &idx, NULL) != PTWM_OK) {
        if (idx) __builtin_trap();
        return 0;
    }
    for (i = 0; i < ptwm_index_count(idx); i++) {
        const char *t, *s;
        if (ptwm_index_entry(idx, i, &t, &s, NULL) || ptwm_index_check_shard_name(s, NULL) != 0 ||
            ptwm_index_find(idx, t, &pos, NULL) || pos != i)
            __builtin_trap();
    }
    snprintf(path, sizeof path, "/tmp/fuzz_index.%d.json", (int)getpid());
    if (ptwm_index_write(idx, path, NULL) != PTWM_OK || ptwm_index_read(path, &back, NULL) != PTWM_OK)
        __builtin_trap();
    check_same(idx, back);
    {
        const char *v;
        size_t la = 0, lb = 0;
        v = ptwm_index_get_meta(idx, "source_index", &la);
        if ((v != NULL) != (ptwm_index_get_meta(back, "source_index", &lb) != NULL) || la != lb)
            __builtin_trap();
    }
    unlink(path);
    ptwm_index_free(idx);
    ptwm_index_free(back);
    return 0;
}
