/* Raw little-endian F32/BF16 files: exact-size whole reads, reads at offsets
 * past 4 GiB (sparse files: no disk used), and the size errors. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

#define GIB ((uint64_t)1 << 30)

static int write_at(const char *path, uint64_t off, const void *p, size_t len) {
    int fd = open(path, O_WRONLY);
    ssize_t w;
    if (fd < 0) return -1;
    w = pwrite(fd, p, len, (off_t)off);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

int main(void) {
    char path[512], big[512];
    float vals[1000], got[1000];
    uint16_t bf[1000];
    ptwm_err err;
    ptwm_error rc;
    size_t i;
    int fd;

    for (i = 0; i < 1000; i++) {
        uint32_t b;
        vals[i] = (float)i * 0.37f - 100.0f;
        memcpy(&b, &vals[i], 4);
        bf[i] = (uint16_t)(b >> 16);  /* truncated: exactly representable as BF16 */
    }

    /* Whole file of exactly n floats. */
    snprintf(path, sizeof(path), "%s/small.f32", tu_tmpdir());
    CHECK(tu_write_file(path, vals, sizeof(vals)) == 0);
    memset(got, 0, sizeof(got));
    rc = ptwm_raw_read_f32_file(path, got, 1000, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    CHECK(memcmp(got, vals, sizeof(vals)) == 0);
    rc = ptwm_raw_read_f32_file(path, got, 999, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "has 4000 bytes, expected 3996");
    rc = ptwm_raw_read_f32_file(path, got, 1001, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "has 4000 bytes, expected 4004");
    rc = ptwm_raw_read_f32_at(path, 8, got, 10, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    CHECK(memcmp(got, vals + 2, 40) == 0);
    /* Unaligned offsets are fine: a tensor inside a larger file. */
    rc = ptwm_raw_read_f32_at(path, 3996, got, 2, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_TRUNCATED, "has 4000 bytes; 2 F32 values at offset 3996 end at 4004");
    rc = ptwm_raw_read_f32_at(path, UINT64_MAX - 3, got, 2, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_INVALID_ARG, "overflow");
    rc = ptwm_raw_read_f32_file("/nonexistent/x.f32", got, 1, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_NOT_FOUND, "/nonexistent/x.f32");

    /* A sparse 5 GiB file with values at 4.5 GiB + 2 (odd offset). */
    snprintf(big, sizeof(big), "%s/big.raw", tu_tmpdir());
    fd = open(big, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(ftruncate(fd, (off_t)(5 * GIB)) == 0);
        close(fd);
    }
    {
        uint64_t off = 4 * GIB + GIB / 2 + 2;
        uint64_t off_bf = off + sizeof(vals) + 6;
        CHECK(write_at(big, off, vals, sizeof(vals)) == 0);
        CHECK(write_at(big, off_bf, bf, sizeof(bf)) == 0);
        memset(got, 0, sizeof(got));
        rc = ptwm_raw_read_f32_at(big, off, got, 1000, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        CHECK(memcmp(got, vals, sizeof(vals)) == 0);
        memset(got, 0, sizeof(got));
        rc = ptwm_raw_read_bf16_at(big, off_bf, got, 1000, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        for (i = 0; i < 1000; i++) {
            uint32_t b;
            memcpy(&b, &got[i], 4);
            if (b != (uint32_t)bf[i] << 16) break;
        }
        CHECK_MSG(i == 1000, "BF16 value %zu widened wrongly", i);
        /* The zeros in the hole read as zeros. */
        rc = ptwm_raw_read_f32_at(big, 4 * GIB + 4, got, 4, &err);
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        CHECK(got[0] == 0.0f && got[3] == 0.0f);
        /* Past the end of a file larger than 4 GiB; sizes print in full. */
        rc = ptwm_raw_read_bf16_at(big, 5 * GIB - 2, got, 2, &err);
        CHECK_ERR(rc, &err, PTWM_ERR_TRUNCATED,
                  "has 5368709120 bytes; 2 BF16 values at offset 5368709118 end at 5368709122");
        rc = ptwm_raw_read_f32_file(big, got, 1000, &err);
        CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "has 5368709120 bytes, expected 4000");
        /* A count whose byte size needs more than 32 bits is checked, not wrapped. */
        rc = ptwm_raw_read_f32_at(big, 0, got, (uint64_t)1 << 31, &err);
        CHECK_ERR(rc, &err, PTWM_ERR_TRUNCATED, "end at 8589934592");
    }
    return tu_finish("test_raw_f32");
}
