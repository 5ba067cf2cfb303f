/* Raw little-endian F32 and BF16 files read into F32 arrays: a whole file of
 * an exact size, or n values at any byte offset of a file of any size
 * (ptwm_raw_read_*, BF16 widened exactly), over the positioned reads of the
 * formats layer (raw_f32.c). */
#include <unistd.h>
#include "fileio.h"
#include "raw_f32.h"

/* n BF16 values at byte `off`, widened exactly into dst, a bounded piece at
 * a time. */
static ptwm_error pread_bf16(int fd, const char *path, uint64_t off, float *dst, uint64_t n,
                             ptwm_err *err) {
    uint16_t *buf;
    uint64_t done = 0;
    ptwm_error rc = ptwm_raw_check_span(path, off, n, 2, err);
    if (rc) return rc;
    buf = (uint16_t *)ptwm_malloc(PTWM_MIN(n, PTWM_RAW_PIECE) * 2 + 2);
    if (!buf) return ptwm_fail(err, PTWM_ERR_NOMEM, "file '%s': no memory for a read buffer", path);
    while (done < n) {
        uint64_t k = PTWM_MIN(n - done, PTWM_RAW_PIECE);
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
    rc = ptwm_raw_check_span(path, off, n, width, err);
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
        rc = pread_bf16(fd, path, off, dst, n, err);
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
