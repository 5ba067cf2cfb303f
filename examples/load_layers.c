/* Load a network layer by layer through a layout and print a checksum per
 * layer. Only one layer's floats are in memory at a time: each layer gets its
 * own array, filled by one ptwm_load_layout call and freed before the next.
 *
 *   example_load_layers SRC [DEPTH]
 *
 * DEPTH groups tensors by their first DEPTH name components (3 for
 * "model.layers.7.*" in a Hugging Face transformer); 0, the default, by the
 * name up to its last '/' or '.'.
 *
 * SRC is a safetensors file, a Hugging Face directory, a .ptwm file or a
 * .ptwm directory; the loads and the checksums are the same for all of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ptwm.h"

/* The layer's name: the part of a name ptwm_layout_group_end groups by. */
static int key_len(const char *name, unsigned depth) {
    const char *p, *cut = NULL;
    unsigned seen = 0;
    for (p = name; *p; p++) {
        if (*p != '/' && *p != '.') continue;
        if (depth == 0) cut = p;
        else if (++seen == depth) return (int)(p - name);
    }
    return (int)(cut && depth == 0 ? (size_t)(cut - name) : strlen(name));
}

/* FNV-1a over the floats' bytes: any changed bit changes it. */
static uint32_t fnv1a(const float *x, uint64_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint32_t h = 2166136261u;
    uint64_t i;
    for (i = 0; i < n * 4; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

int main(int argc, char **argv) {
    ptwm_source *src = NULL;
    ptwm_layout *layout = NULL;
    ptwm_err err;
    const ptwm_layout_entry *e;
    size_t n, start, end, layers = 0;
    uint64_t total = 0;
    unsigned depth;

    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s SRC [DEPTH]\n", argv[0]);
        return 2;
    }
    depth = argc == 3 ? (unsigned)strtoul(argv[2], NULL, 10) : 0;
    /* A real program writes its own layout (its parameters' names and shapes,
     * in its order); here the file's tensors, sorted so a layer's tensors
     * (names sharing the prefix before the last '/' or '.') are adjacent. */
    if (ptwm_source_open(argv[1], PTWM_SOURCE_AUTO, &src, &err) != PTWM_OK ||
        ptwm_layout_from_source(src, &layout, &err) != PTWM_OK) {
        fprintf(stderr, "%s: %s\n", ptwm_error_name(err.code), err.message);
        ptwm_source_close(src);
        return 1;
    }
    ptwm_layout_sort_by_name(layout);
    e = ptwm_layout_entries(layout, &n);

    for (start = 0; start < n; start = end) {
        uint64_t count, i;
        double sum = 0;
        float *w;
        end = ptwm_layout_group_end(e, n, start, depth);
        if (ptwm_layout_elements(e + start, end - start, &count, &err) != PTWM_OK) break;
        w = (float *)malloc(count ? count * sizeof(float) : 1);
        if (!w) {
            fprintf(stderr, "out of memory for %llu floats\n", (unsigned long long)count);
            break;
        }
        if (ptwm_load_layout(src, e + start, end - start, PTWM_CONVERT_FLOAT, w, count, &err) !=
            PTWM_OK) {
            fprintf(stderr, "%s: %s\n", ptwm_error_name(err.code), err.message);
            free(w);
            break;
        }
        for (i = 0; i < count; i++) sum += w[i];
        printf("%-48.*s %3zu tensors %9llu floats  sum %+.6e  fnv %08x\n",
               key_len(e[start].name, depth), e[start].name, end - start, (unsigned long long)count, sum, fnv1a(w, count));
        free(w);  /* this layer's memory is gone before the next is read */
        total += count;
        layers++;
    }
    printf("%zu layers, %llu floats from %s (%s)\n", layers, (unsigned long long)total, argv[1],
           ptwm_source_kind_name(ptwm_source_get_kind(src)));
    ptwm_layout_free(layout);
    ptwm_source_close(src);
    return start < n ? 1 : 0;
}
