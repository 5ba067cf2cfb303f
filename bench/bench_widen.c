/* Widening speed: each BF16 and F16 corpus file loaded through a layout (all
 * its tensors, memory-mapped source: PTWM_OPEN_MMAP) into one F32 array, beside a plain
 * memcpy of the same source bytes and of the output's size, in the same run.
 * Rates are source bytes per second; medians of RUNS runs.
 *
 *   bench_widen [corpus_dir] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ptwm.h"
#include "../programs/bench_time.h"

#define RUNS 21


static int bench_file(const char *dir, const char *name) {
    char path[1024];
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    const ptwm_layout_entry *e;
    size_t n, i;
    uint64_t count, src_bytes = 0;
    float *dst;
    uint8_t *a, *b;
    double t_load[RUNS], t_cpy[RUNS], t_cpy_out[RUNS];
    int r;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (ptwm_source_open_mode(path, PTWM_SOURCE_AUTO, PTWM_OPEN_MMAP, &s, &err) ||
        ptwm_layout_from_source(s, &l, &err)) {
        fprintf(stderr, "%s\n", err.message);
        ptwm_source_close(s);
        return 1;
    }
    e = ptwm_layout_entries(l, &n);
    ptwm_layout_elements(e, n, &count, &err);
    for (i = 0; i < ptwm_source_count(s); i++) {
        ptwm_tensor_info ti;
        ptwm_source_tensor(s, i, &ti, NULL);
        src_bytes += ti.nbytes;
    }
    dst = (float *)malloc(count * 4);
    a = (uint8_t *)malloc(count * 4);
    b = (uint8_t *)malloc(count * 4);
    if (!dst || !a || !b) return 1;
    memset(a, 1, count * 4);
    memset(b, 2, count * 4);
    memset(dst, 0, count * 4);
    for (r = 0; r < RUNS; r++) {
        double t0 = bench_now();
        if (ptwm_load_layout(s, e, n, PTWM_CONVERT_FLOAT, dst, count, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        t_load[r] = bench_now() - t0;
        t0 = bench_now();
        memcpy(b, a, src_bytes);
        t_cpy[r] = bench_now() - t0;
        t0 = bench_now();
        memcpy(b, a, count * 4);
        t_cpy_out[r] = bench_now() - t0;
        a[r] ^= b[count * 4 - 1 - r];  /* keep the copies observable */
    }
    {
        double gl = (double)src_bytes / bench_median(t_load, RUNS) / 1e9;
        double gc = (double)src_bytes / bench_median(t_cpy, RUNS) / 1e9;
        double go = (double)src_bytes / bench_median(t_cpy_out, RUNS) / 1e9;
        printf("%-36s %8.2f MB  load %6.2f GB/s  memcpy(src) %6.2f GB/s  "
               "memcpy(dst size) %6.2f GB/s  load/memcpy %.2f\n",
               name, (double)src_bytes / 1e6, gl, gc, go, gl / gc);
    }
    free(dst);
    free(a);
    free(b);
    ptwm_layout_free(l);
    ptwm_source_close(s);
    return 0;
}

int main(int argc, char **argv) {
    static const char *const files[] = {
        "emotion.bf16.safetensors",       "faceres-deep.bf16.safetensors",
        "handskeleton.bf16.safetensors",  "posenet.bf16.safetensors",
        "handlandmark-full.f16.safetensors", "movenet-thunder.f16.safetensors"};
    const char *dir = argc > 1 ? argv[1] : getenv("PTWM_CORPUS");
    size_t i;
    int bad = 0;
    if (!dir) dir = "build-corpus";
    printf("widening through ptwm_load_layout vs memcpy; rates in source bytes/s, median of %d\n",
           RUNS);
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) bad |= bench_file(dir, files[i]);
    return bad;
}
