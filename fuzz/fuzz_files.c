/* libFuzzer harness over a .ptwm directory's file record (model.ptwm.files.json,
 * src/formats/ptdir_files.c) and an index checked against it.
 *
 * The input is parsed as a record as it is (the record's own hash refuses
 * nearly everything), then as the body of a record sealed with its right hash,
 * so the fuzzer reaches the JSON rules. An accepted record must list distinct
 * names in ascending order, find each by name, and come back unchanged
 * through its text. The input is also an index's bytes: a record listing
 * their hash accepts them, one listing another hash or size refuses them as
 * damaged (PTWM_ERR_HASH). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "hash.h"
#include "ptdir_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const ptwm_files *f) {
    ptwm_files copy, back;
    char *text = NULL;
    size_t i, len = 0;
    for (i = 0; i < f->n; i++) {
        if (ptwm_files_find(f, f->e[i].name) != &f->e[i]) __builtin_trap();
        if (i && strcmp(f->e[i - 1].name, f->e[i].name) >= 0) __builtin_trap();
    }
    /* Through text and back: the same entries. */
    memset(&copy, 0, sizeof copy);
    for (i = 0; i < f->n; i++)
        if (ptwm_files_add(&copy, f->e[i].name, f->e[i].size, f->e[i].hash, NULL)) __builtin_trap();
    if (ptwm_files_text(&copy, &text, &len, NULL) ||
        ptwm_files_parse(text, len, "back", &back, NULL))
        __builtin_trap();
    if (back.n != f->n) __builtin_trap();
    for (i = 0; i < f->n; i++)
        if (strcmp(back.e[i].name, f->e[i].name) || back.e[i].size != f->e[i].size ||
            memcmp(back.e[i].hash, f->e[i].hash, 16))
            __builtin_trap();
    ptwm_free(text);
    ptwm_files_free(&copy);
    ptwm_files_free(&back);
}

static void parse_sealed(const uint8_t *data, size_t size) {
    char *text = (char *)malloc(size + 64), hex[33];
    uint8_t h[16];
    ptwm_files f;
    size_t len;
    if (!text) return;
    memcpy(text, data, size);
    ptwm_xxh128_oneshot(data, size, h);
    len = size + (size_t)sprintf(text + size, "  \"record_xxh3_128\": \"%s\"\n}\n",
                                 ptwm_hex128(h, hex));
    if (ptwm_files_parse(text, len, "sealed", &f, NULL) == PTWM_OK) {
        check_accepted(&f);
        ptwm_files_free(&f);
    }
    free(text);
}

/* The input as an index's bytes against a record of its hash, then of another. */
static void check_index_bytes(const uint8_t *data, size_t size) {
    ptwm_files rec;
    uint8_t h[16];
    ptwm_err err;
    memset(&rec, 0, sizeof rec);
    ptwm_xxh128_oneshot(data, size, h);
    if (ptwm_files_add(&rec, PTWM_INDEX_NAME, size, h, NULL)) return;
    if (ptwm_files_check_bytes(&rec, "fuzz", PTWM_INDEX_NAME, data, size, &err) != PTWM_OK)
        __builtin_trap();
    rec.e[0].hash[size % 16] ^= (uint8_t)(1u << (size % 8));
    if (ptwm_files_check_bytes(&rec, "fuzz", PTWM_INDEX_NAME, data, size, &err) != PTWM_ERR_HASH)
        __builtin_trap();
    rec.e[0].hash[size % 16] ^= (uint8_t)(1u << (size % 8));
    rec.e[0].size++;
    if (ptwm_files_check_bytes(&rec, "fuzz", PTWM_INDEX_NAME, data, size, &err) != PTWM_ERR_HASH)
        __builtin_trap();
    ptwm_files_free(&rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ptwm_files f;
    if (ptwm_files_parse((const char *)data, size, "fuzz", &f, NULL) == PTWM_OK) {
        check_accepted(&f);
        ptwm_files_free(&f);
    } else if (f.n || f.e) {
        __builtin_trap();   /* a refused record leaves nothing behind */
    }
    parse_sealed(data, size);
    check_index_bytes(data, size);
    return 0;
}
