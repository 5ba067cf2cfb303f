/* Every allocation of the library: the C library's, or the allocator the
 * program set with ptwm_set_allocator before anything else. The allocator
 * is process-wide state, written once before the first allocation and only
 * read after it. Sizes above PTWM_ALLOC_CAP are refused here, so a hostile
 * header's size never reaches the allocator. */
#include <stdatomic.h>
#include <stdlib.h>
#include "common.h"
#ifdef __linux__
#include <sys/mman.h>
#endif

static ptwm_allocator g_alloc;    /* all NULL: the C library's */
static atomic_int g_allocated;    /* set by the first allocation */

ptwm_error ptwm_set_allocator(const ptwm_allocator *a, ptwm_err *err) {
    if (a && (!a->malloc_fn || !a->realloc_fn || !a->free_fn))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "ptwm_set_allocator: malloc_fn, realloc_fn and free_fn are all required");
    if (atomic_load(&g_allocated))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "ptwm_set_allocator: the library has allocated memory already (set the "
                         "allocator before calling anything else)");
    if (a) g_alloc = *a;
    else memset(&g_alloc, 0, sizeof(g_alloc));
    return PTWM_OK;
}

void *ptwm_malloc(uint64_t size) {
    if (size > PTWM_ALLOC_CAP || size > SIZE_MAX) return NULL;
    if (!size) size = 1;
    atomic_store_explicit(&g_allocated, 1, memory_order_relaxed);
    return g_alloc.malloc_fn ? g_alloc.malloc_fn(g_alloc.opaque, (size_t)size) : malloc((size_t)size);
}

void *ptwm_calloc(uint64_t n, uint64_t size) {
    uint64_t total;
    void *p;
    if (ptwm_mul_overflow(n, size, &total) || total > PTWM_ALLOC_CAP || total > SIZE_MAX)
        return NULL;
    if (!total) total = 1;
    if (!g_alloc.malloc_fn) {
        atomic_store_explicit(&g_allocated, 1, memory_order_relaxed);
        return calloc((size_t)total, 1);
    }
    if ((p = ptwm_malloc(total))) memset(p, 0, (size_t)total);
    return p;
}

void *ptwm_realloc(void *p, uint64_t size) {
    if (size > PTWM_ALLOC_CAP || size > SIZE_MAX) return NULL;
    if (!size) size = 1;
    atomic_store_explicit(&g_allocated, 1, memory_order_relaxed);
    return g_alloc.realloc_fn ? g_alloc.realloc_fn(g_alloc.opaque, p, (size_t)size)
                              : realloc(p, (size_t)size);
}

void ptwm_free(void *p) {
    if (!p) return;
    if (g_alloc.free_fn) g_alloc.free_fn(g_alloc.opaque, p);
    else free(p);
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define BIG_MIN ((uint64_t)256 << 10)
#define HUGE ((uintptr_t)2 << 20)

/* Whether a buffer of `size` bytes is mapped by ptwm_malloc_big: decided by
 * the size alone, so ptwm_free_big needs nothing else. */
static int big_mapped(uint64_t size) {
    return size >= BIG_MIN && size <= PTWM_ALLOC_CAP && !g_alloc.malloc_fn;
}

static size_t big_len(uint64_t size) {
    return (size_t)((size + HUGE - 1) & ~(uint64_t)(HUGE - 1));
}

void *ptwm_malloc_big(uint64_t size) {
    size_t len, total;
    uintptr_t base, a;
    void *m;
    if (!big_mapped(size)) return ptwm_malloc(size);
    atomic_store_explicit(&g_allocated, 1, memory_order_relaxed);
    len = big_len(size);
    total = len + HUGE;
    m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    base = (uintptr_t)m;
    a = (base + HUGE - 1) & ~(HUGE - 1);
    /* Only the aligned part stays mapped. */
    if (a > base) munmap(m, a - base);
    if (base + total > a + len) munmap((void *)(a + len), base + total - (a + len));
    (void)madvise((void *)a, len, MADV_HUGEPAGE); /* advice: 4 KiB pages otherwise */
    return (void *)a;
}

void *ptwm_calloc_big(uint64_t size) {
    return big_mapped(size) ? ptwm_malloc_big(size) : ptwm_calloc(size, 1);
}

uint64_t ptwm_big_size(uint64_t size) {
    return big_mapped(size) ? big_len(size) : size;
}

int ptwm_big_maps(uint64_t size) {
    return big_mapped(size);
}

void ptwm_free_big(void *p, uint64_t size) {
    if (!p) return;
    if (big_mapped(size)) munmap(p, big_len(size));
    else ptwm_free(p);
}
#else
void *ptwm_malloc_big(uint64_t size) {
    return ptwm_malloc(size);
}

void *ptwm_calloc_big(uint64_t size) {
    return ptwm_calloc(size, 1);
}

uint64_t ptwm_big_size(uint64_t size) {
    return size;
}

int ptwm_big_maps(uint64_t size) {
    (void)size;
    return 0;
}

void ptwm_free_big(void *p, uint64_t size) {
    (void)size;
    ptwm_free(p);
}
#endif

char *ptwm_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)ptwm_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *ptwm_strndup(const char *s, size_t max) {
    size_t n = strnlen(s, max);
    char *d = (char *)ptwm_malloc((uint64_t)n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* libzstd's contexts allocate through the same allocator. */
void *ptwm_zstd_alloc(void *opaque, size_t size) {
    (void)opaque;
    return ptwm_malloc(size);
}

void ptwm_zstd_free(void *opaque, void *p) {
    (void)opaque;
    ptwm_free(p);
}
