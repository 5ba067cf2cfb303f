/* Raw little-endian F32 (and BF16) files: whole-file reads of an exact size and
 * reads of n values at any byte offset of a file of any size. */
#include <stdlib.h>
#include <unistd.h>
#include "fileio.h"
#include "raw_f32.h"

/* Values per read: bounded so a huge request never becomes one huge syscall,
 * and so the BF16 staging buffer stays small. */
#define RAW_PIECE ((uint64_t)1 << 18)

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
        uint64_t k = PTWM_MIN(n - done, RAW_PIECE * 16);
        ptwm_error rc = ptwm_pread_full(fd, p + done * width, (size_t)(k * width),
                                        off + done * width, path, err);
        if (rc) return rc;
        done += k;
    }
    return PTWM_OK;
}

/* off + n * width must not overflow; the read itself reports a short file. */
static ptwm_error check_span(const char *path, uint64_t off, uint64_t n, unsigned width,
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
    ptwm_error rc = check_span(path, off, n, 4, err);
    if (!rc) rc = pread_elems(fd, path, off, dst, n, 4, err);
    if (!rc) ptwm_raw_le32_inplace(dst, n);
    return rc;
}

ptwm_error ptwm_raw_pread_u16(int fd, const char *path, uint64_t off, uint16_t *dst, uint64_t n,
                              ptwm_err *err) {
    ptwm_error rc = check_span(path, off, n, 2, err);
    if (!rc) rc = pread_elems(fd, path, off, dst, n, 2, err);
    if (!rc) ptwm_raw_le16_inplace(dst, n);
    return rc;
}

ptwm_error ptwm_raw_pread_bf16(int fd, const char *path, uint64_t off, float *dst, uint64_t n,
                               ptwm_err *err) {
    uint16_t *buf;
    uint64_t done = 0;
    ptwm_error rc = check_span(path, off, n, 2, err);
    if (rc) return rc;
    buf = (uint16_t *)ptwm_malloc(PTWM_MIN(n, RAW_PIECE) * 2 + 2);
    if (!buf) return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': no memory for a read buffer", path);
    while (done < n) {
        uint64_t k = PTWM_MIN(n - done, RAW_PIECE);
        rc = ptwm_raw_pread_u16(fd, path, off + done * 2, buf, k, err);
        if (rc) break;
        ptwm_bf16_to_f32(buf, dst + done, (size_t)k);
        done += k;
    }
    ptwm_free(buf);
    return rc;
}

/* Open, check that [off, off + n*width) lies inside the file, and read. */
static ptwm_error read_at(const char *path, uint64_t off, float *dst, uint64_t n, unsigned width,
                          int exact, ptwm_err *err) {
    int fd;
    uint64_t size, bytes = 0, end = 0;
    ptwm_error rc;
    if (!path || (!dst && n))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "raw read: NULL path or destination");
    rc = check_span(path, off, n, width, err);
    if (rc) return rc;
    bytes = n * width;
    end = off + bytes;
    rc = ptwm_open_read(path, &fd, &size, err);
    if (rc) return rc;
    if (exact && size != bytes) {
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                       "file '%s' has %llu bytes, expected %llu (%llu F32 values)", path,
                       (unsigned long long)size, (unsigned long long)bytes,
                       (unsigned long long)n);
    } else if (end > size) {
        rc = ptwm_fail(err, PTWM_ERR_TRUNCATED,
                       "file '%s' has %llu bytes; %llu %s values at offset %llu end at %llu",
                       path, (unsigned long long)size, (unsigned long long)n,
                       width == 4 ? "F32" : "BF16", (unsigned long long)off,
                       (unsigned long long)end);
    } else if (width == 4) {
        rc = ptwm_raw_pread_f32(fd, path, off, dst, n, err);
    } else {
        rc = ptwm_raw_pread_bf16(fd, path, off, dst, n, err);
    }
    close(fd);
    return rc;
}

ptwm_error ptwm_raw_read_f32_file(const char *path, float *dst, uint64_t n, ptwm_err *err) {
    return read_at(path, 0, dst, n, 4, 1, err);
}

ptwm_error ptwm_raw_read_f32_at(const char *path, uint64_t offset, float *dst, uint64_t n,
                                ptwm_err *err) {
    return read_at(path, offset, dst, n, 4, 0, err);
}

ptwm_error ptwm_raw_read_bf16_at(const char *path, uint64_t offset, float *dst, uint64_t n,
                                 ptwm_err *err) {
    return read_at(path, offset, dst, n, 2, 0, err);
}
