/* Large work buffers (ptwm_malloc_big, memory.c) and the context's record
 * of them (context.c). A buffer of 256 KiB or more is mapped in whole
 * 2 MiB pages, aligned, where the C library's allocator is in use on Linux
 * (elsewhere, or under ptwm_set_allocator, it is the plain allocation:
 * test_memory runs that path); every byte of its size is writable, the
 * zeroing form reads back zeros, and its size says what it holds. A
 * context hands a mapped buffer out again for a smaller or larger request
 * within its size, and one given back with the smaller size its taker
 * asked for is still counted (and later released) at its mapped size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "testutil.h"

#define HUGE ((uint64_t)2 << 20)

static void check_sizes(void) {
    static const uint64_t sizes[] = {1, 4096, (256 << 10) - 1, 256 << 10, 300000, HUGE - 1, HUGE,
                                     HUGE + 1, 5 * HUGE + 12345};
    size_t i, k;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i], got = ptwm_big_size(n);
        uint8_t *p = (uint8_t *)ptwm_malloc_big(n), *z = (uint8_t *)ptwm_calloc_big(n);
        int mapped = got != n;
        CHECK_MSG(got >= n, "size %llu holds %llu", (unsigned long long)n, (unsigned long long)got);
        CHECK_MSG(!mapped || (got % HUGE == 0 && n >= (256 << 10)),
                  "size %llu mapped as %llu", (unsigned long long)n, (unsigned long long)got);
        CHECK(p != NULL && z != NULL);
        if (!p || !z) continue;
        CHECK_MSG(!mapped || ((uintptr_t)p % HUGE == 0 && (uintptr_t)z % HUGE == 0),
                  "size %llu not on a 2 MiB boundary", (unsigned long long)n);
        for (k = 0; k < got && z[k] == 0; k++) {
        }
        CHECK_MSG(k == got, "size %llu: byte %zu of the zeroed buffer is %u", (unsigned long long)n,
                  k, k < got ? z[k] : 0);
        memset(p, 0xa5, (size_t)got); /* every byte it says it holds */
        memset(z, 0x5a, (size_t)got);
        ptwm_free_big(p, got);
        ptwm_free_big(z, n);  /* the size asked for or the size held: the same pages */
    }
    ptwm_free_big(NULL, HUGE);
}

static void check_context(void) {
    ptwm_ctx *ctx = NULL;
    ptwm_err err;
    size_t asked = 300000, got = 0, held = (size_t)ptwm_big_size(asked);
    uint8_t *p, *q;
    CHECK_ERR(ptwm_ctx_create(&ctx, &err), &err, PTWM_OK, NULL);
    if (!ctx) return;
    p = (uint8_t *)ptwm_ctx_take(ctx, asked);
    CHECK(p != NULL);
    memset(p, 1, held);
    ptwm_ctx_give(ctx, p, asked);
    CHECK_MSG(ptwm_ctx_size(ctx) == held, "kept %zu bytes, the buffer holds %zu",
              ptwm_ctx_size(ctx), held);
    /* A larger request within its size gets it back, with its size. */
    q = (uint8_t *)ptwm_ctx_take_fit(ctx, held > asked ? held - 1 : asked, &got);
    CHECK(q == p && got == held);
    CHECK(ptwm_ctx_size(ctx) == 0);
    memset(q, 2, got);
    ptwm_ctx_give(ctx, q, 4096); /* its taker's own idea of its size */
    CHECK(ptwm_ctx_size(ctx) == held);
    /* A size of whole 2 MiB pages is mapped too (its own size held). */
    if (ptwm_big_maps(2 * HUGE)) {
        q = (uint8_t *)ptwm_ctx_take_fit(ctx, 2 * held, &got);
        CHECK(q != NULL && q != p && got == 2 * held && (uintptr_t)q % HUGE == 0);
        if (q) ptwm_ctx_give(ctx, q, 2 * held);
        CHECK(ptwm_ctx_size(ctx) == 3 * held);
    }
    ptwm_ctx_free(ctx);
}

int main(void) {
    check_sizes();
    check_context();
    return tu_finish("test_big_alloc");
}
