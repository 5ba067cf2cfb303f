/* Raw little-endian F32 (and BF16) files: positioned reads of n values at any
 * byte offset of a file of any size, in bounded pieces (the load layer's
 * raw_read.c widens BF16 and reads whole files through them). */
#include <stdlib.h>
#include <unistd.h>
#include "fileio.h"
#include "raw_f32.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
void ptwm_raw_le32_inplace(void *p, uint64_t n) {
    uint32_t *w = (uint32_t *)p;
    uint64_t i;
    for (i = 0; i < n; i++) w[i] = __builtin_bswap32(w[i]);
}
void ptwm_raw_le16_inplace(void *p, uint64_t n) {
    uint16_t *w = (uint16_t *)p;
    uint64_t i;
    for (i = 0; i < n; i++) w[i] = __builtin_bswap16(w[i]);
}
#else
void ptwm_raw_le32_inplace(void *p, uint64_t n) {
    (void)p;
    (void)n;
}
void ptwm_raw_le16_inplace(void *p, uint64_t n) {
    (void)p;
    (void)n;
}
#endif

/* n elements of `width` bytes at off straight into dst, piece by piece. */
static ptwm_error pread_elems(int fd, const char *path, uint64_t off, void *dst, uint64_t n,
                              unsigned width, ptwm_err *err) {
    uint8_t *p = (uint8_t *)dst;
    uint64_t done = 0;
    while (done < n) {
        uint64_t k = PTWM_MIN(n - done, PTWM_RAW_PIECE * 16);
        ptwm_error rc = ptwm_pread_full(fd, p + done * width, (size_t)(k * width),
                                        off + done * width, path, err);
        if (rc) return rc;
        done += k;
    }
    return PTWM_OK;
}

ptwm_error ptwm_raw_check_span(const char *path, uint64_t off, uint64_t n, unsigned width,
                               ptwm_err *err) {
    uint64_t bytes, end;
    if (ptwm_mul_overflow(n, width, &bytes) || ptwm_add_overflow(off, bytes, &end) ||
        end > (uint64_t)INT64_MAX)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "file '%s': %llu values of %u bytes at offset %llu overflow a file offset",
                         path, (unsigned long long)n, width, (unsigned long long)off);
    return PTWM_OK;
}

ptwm_error ptwm_raw_pread_f32(int fd, const char *path, uint64_t off, float *dst, uint64_t n,
                              ptwm_err *err) {
    ptwm_error rc = ptwm_raw_check_span(path, off, n, 4, err);
    if (!rc) rc = pread_elems(fd, path, off, dst, n, 4, err);
    if (!rc) ptwm_raw_le32_inplace(dst, n);
    return rc;
}

ptwm_error ptwm_raw_pread_u16(int fd, const char *path, uint64_t off, uint16_t *dst, uint64_t n,
                              ptwm_err *err) {
    ptwm_error rc = ptwm_raw_check_span(path, off, n, 2, err);
    if (!rc) rc = pread_elems(fd, path, off, dst, n, 2, err);
    if (!rc) ptwm_raw_le16_inplace(dst, n);
    return rc;
}
