/* libFuzzer harness over layout JSON (ptwm_layout_parse_json).
 *
 * Any input must be accepted or rejected cleanly. An accepted layout must have
 * a checked element count, and written back as JSON it must parse again to
 * the same entries (names byte for byte, same shapes). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "ptwm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *to_json(const ptwm_layout_entry *e, size_t n) {
    json_t *arr = json_array();
    size_t i;
    uint32_t d;
    for (i = 0; arr && i < n; i++) {
        json_t *shape = json_array(), *obj = json_object();
        if (!shape || !obj) __builtin_trap();
        for (d = 0; d < e[i].ndim; d++) json_array_append_new(shape, json_integer((json_int_t)e[i].shape[d]));
        json_object_set_new(obj, "name", json_string(e[i].name));
        json_object_set_new(obj, "shape", shape);
        json_array_append_new(arr, obj);
    }
    return arr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ptwm_layout *l = NULL, *l2 = NULL;
    const ptwm_layout_entry *e, *e2;
    size_t n, n2, i;
    uint64_t count;
    json_t *j;
    char *text;
    if (ptwm_layout_parse_json((const char *)data, size, "fuzz", &l, NULL) != PTWM_OK) {
        if (l) __builtin_trap();
        return 0;
    }
    e = ptwm_layout_entries(l, &n);
    if (ptwm_layout_elements(e, n, &count, NULL) != PTWM_OK) __builtin_trap();
    j = to_json(e, n);
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!text) __builtin_trap();
    if (ptwm_layout_parse_json(text, strlen(text), "again", &l2, NULL) != PTWM_OK) __builtin_trap();
    e2 = ptwm_layout_entries(l2, &n2);
    if (n2 != n) __builtin_trap();
    for (i = 0; i < n; i++) {
        if (strcmp(e[i].name, e2[i].name) != 0 || e[i].ndim != e2[i].ndim) __builtin_trap();
        if (e[i].ndim && memcmp(e[i].shape, e2[i].shape, e[i].ndim * sizeof(uint64_t)) != 0)
            __builtin_trap();
    }
    /* grouping and sorting stay in bounds and keep every entry */
    for (i = 0; i < n; i = ptwm_layout_group_end(e, n, i, 0))
        if (ptwm_layout_group_end(e, n, i, 0) <= i) __builtin_trap();
    ptwm_layout_sort_by_name(l2);
    e2 = ptwm_layout_entries(l2, &n2);
    for (i = 1; i < n2; i++)
        if (strcmp(e2[i - 1].name, e2[i].name) > 0) __builtin_trap();
    free(text);
    json_decref(j);
    ptwm_layout_free(l);
    ptwm_layout_free(l2);
    return 0;
}
