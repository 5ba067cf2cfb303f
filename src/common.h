/* Internal portability and safety helpers shared by every source file.
 * Nothing here is part of the public API. */
#ifndef PTWM_COMMON_H
#define PTWM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdarg.h>
#include "ptwm.h"

#if defined(__GNUC__) || defined(__clang__)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define PTWM_INLINE static inline __attribute__((always_inline))
#define PTWM_NOINLINE __attribute__((noinline))
#define PTWM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define likely(x) (x)
#define unlikely(x) (x)
#define PTWM_INLINE static inline
#define PTWM_NOINLINE
#define PTWM_PRINTF(a, b)
#endif

#define PTWM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PTWM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PTWM_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Every decoder check goes through this: on failure it returns PTWM_ERR_CORRUPT
 * (libdeflate's SAFETY_CHECK idea), so a hostile input never gets further. */
#define PTWM_CHECK(cond)                         \
    do {                                         \
        if (unlikely(!(cond))) return PTWM_ERR_CORRUPT; \
    } while (0)

/* Checked 64-bit arithmetic: return 1 on overflow, 0 and *out on success. */
/* A writer's description of a tensor a reader described; `data` is its bytes,
 * or any non-NULL pointer where only a header is built from it. */
PTWM_INLINE ptwm_tensor_desc ptwm_desc_of(const ptwm_tensor_info *t, const void *data) {
    ptwm_tensor_desc d;
    d.name = t->name;
    d.dtype = t->dtype;
    d.ndim = t->ndim;
    d.shape = t->shape;
    d.data = data;
    d.nbytes = t->nbytes;
    return d;
}

PTWM_INLINE int ptwm_add_overflow(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}
PTWM_INLINE int ptwm_mul_overflow(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

/* Explicit little-endian loads and stores: the wire format is little-endian
 * whatever the host is, and unaligned access goes through memcpy. */
PTWM_INLINE uint16_t ptwm_load_le16(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint16_t)(b[0] | (b[1] << 8));
}
PTWM_INLINE uint32_t ptwm_load_le32(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
PTWM_INLINE uint64_t ptwm_load_le64(const void *p) {
    return (uint64_t)ptwm_load_le32(p) | ((uint64_t)ptwm_load_le32((const uint8_t *)p + 4) << 32);
}
PTWM_INLINE void ptwm_store_le16(void *p, uint16_t v) {
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}
PTWM_INLINE void ptwm_store_le32(void *p, uint32_t v) {
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}
PTWM_INLINE void ptwm_store_le64(void *p, uint64_t v) {
    ptwm_store_le32(p, (uint32_t)v);
    ptwm_store_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* Fill *err (if non-NULL) with a code and a formatted message; returns code so
 * callers can write `return ptwm_fail(err, PTWM_ERR_X, "...", ...);`. */
ptwm_error ptwm_fail(ptwm_err *err, ptwm_error code, const char *fmt, ...) PTWM_PRINTF(3, 4);
/* The two failures of the lookups by position and by name, worded alike
 * everywhere: "WHERE: tensor index I out of range (N tensors)" (INVALID_ARG)
 * and "WHERE: no tensor 'NAME'" (NOT_FOUND). */
ptwm_error ptwm_fail_index(ptwm_err *err, const char *where, size_t index, size_t n);
ptwm_error ptwm_fail_name(ptwm_err *err, const char *where, const char *name);
/* Prefix an existing message (e.g. with the file or tensor name). */
void ptwm_err_prefix(ptwm_err *err, const char *fmt, ...) PTWM_PRINTF(2, 3);
/* "[3, 5]" into buf (cut short if it does not fit; dtype.c). */
void ptwm_format_shape(const uint64_t *shape, uint32_t ndim, char *buf, size_t cap);

/* Allocation wrappers that fail cleanly on absurd sizes (caps what a hostile
 * header can make us allocate). */
#define PTWM_ALLOC_CAP ((uint64_t)1 << 40)
/* The library's allocator (src/platform/memory.c): the C library's, or the
 * one set with ptwm_set_allocator. Every allocation and release in the
 * library goes through these (ptwm_free releases); NULL past PTWM_ALLOC_CAP. */
void *ptwm_malloc(uint64_t size);
void *ptwm_calloc(uint64_t n, uint64_t size);
void *ptwm_realloc(void *p, uint64_t size);
/* Work buffers of 256 KiB or more (codec workspaces, chunk buffers):
 * with the C library's allocator on Linux, mapped on 2 MiB boundaries with
 * transparent huge pages asked for, since a fresh 4 KiB page took 10-13 us
 * to fault in on a virtual machine here (docs/SCALING.md, "Fresh memory");
 * else ptwm_malloc. Zeroed where mapped. Released by ptwm_free_big with the
 * same size. */
void *ptwm_malloc_big(uint64_t size);
void *ptwm_calloc_big(uint64_t size);
void ptwm_free_big(void *p, uint64_t size);
/* The bytes an allocation of `size` by ptwm_malloc_big holds (a mapping is
 * whole 2 MiB pages): asking for that much instead costs nothing more. */
uint64_t ptwm_big_size(uint64_t size);
/* Whether ptwm_malloc_big maps a buffer of `size` bytes (else it is
 * ptwm_malloc's). */
int ptwm_big_maps(uint64_t size);
char *ptwm_strdup(const char *s);
char *ptwm_strndup(const char *s, size_t max);
/* ZSTD_customMem functions over the same allocator. */
void *ptwm_zstd_alloc(void *opaque, size_t size);
void ptwm_zstd_free(void *opaque, void *p);
/* Room for `need` elements of `size` bytes in the array *buf of *cap elements,
 * doubling (from 64): 1, or 0 when out of memory (*buf and *cap unchanged). */
int ptwm_grow(void **buf, size_t *cap, size_t need, size_t size);
/* Free an array of n key/value pairs whose strings were malloc'd, and the array. */
void ptwm_kv_free(ptwm_kv *kv, size_t n);

#endif
