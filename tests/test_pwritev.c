/* ptwm_pwritev_full: pieces written back to back from an offset (empty
 * pieces among them), the file position left alone, bytes around them kept,
 * more pieces than one call takes refused, and a failing write reported
 * with the path and offset. ptwm_allocate_range: the file grows to the
 * range's end (Linux) and keeps its bytes; nothing changes when it is
 * already as long. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fileio.h"
#include "testutil.h"

int main(void) {
    const char *path = tu_tmp_path("pieces.bin");
    uint8_t want[300000], *got;
    void *bufs[PTWM_WRITEV_MAX + 1];
    size_t lens[PTWM_WRITEV_MAX + 1], len = 0, i, at = 0;
    uint64_t rng = 7;
    ptwm_err err;
    int fd;
    for (i = 0; i < sizeof(want); i++) want[i] = (uint8_t)tu_rand(&rng);
    CHECK(tu_write_file(path, want, sizeof(want)) == 0);
    fd = open(path, O_WRONLY);
    CHECK(fd >= 0);
    /* 64 pieces of 0..4000 bytes over [1000, ...), from a reversed copy */
    {
        static uint8_t src[300000];
        for (i = 0; i < sizeof(src); i++) src[i] = (uint8_t)(255 - want[i]);
        for (i = 0; i < PTWM_WRITEV_MAX; i++) {
            lens[i] = i % 5 == 3 ? 0 : (size_t)(tu_rand(&rng) % 4000);
            bufs[i] = src + 1000 + at;
            at += lens[i];
        }
        CHECK(lseek(fd, 123, SEEK_SET) == 123);
        CHECK_ERR(ptwm_pwritev_full(fd, bufs, lens, PTWM_WRITEV_MAX, 1000, path, &err), &err, PTWM_OK,
                  NULL);
        CHECK(lseek(fd, 0, SEEK_CUR) == 123);
        memcpy(want + 1000, src + 1000, at);
    }
    CHECK_ERR(ptwm_pwritev_full(fd, bufs, lens, PTWM_WRITEV_MAX + 1, 0, path, &err), &err,
              PTWM_ERR_INVALID_ARG, "65 pieces in one write (max 64)");
    close(fd);
    got = tu_read_file(path, &len);
    CHECK(got && len == sizeof(want) && memcmp(got, want, len) == 0);
    free(got);
    /* a descriptor open for reading only: the write fails, naming the file */
    fd = open(path, O_RDONLY);
    CHECK_ERR(ptwm_pwritev_full(fd, bufs, lens, 2, 77, path, &err), &err, PTWM_ERR_IO,
              "write at offset 77");
    CHECK(strstr(err.message, "pieces.bin") != NULL);
    close(fd);
    {
        const char *grown = tu_tmp_path("grown.bin");
        CHECK(tu_write_file(grown, want, 1000) == 0);
        fd = open(grown, O_RDWR);
        ptwm_allocate_range(fd, 500, 300);     /* inside: no change */
        CHECK(lseek(fd, 0, SEEK_END) == 1000);
        ptwm_allocate_range(fd, 4096, 65536);
#if defined(__linux__)
        CHECK(lseek(fd, 0, SEEK_END) == 4096 + 65536);
#endif
        close(fd);
        got = tu_read_file(grown, &len);
        CHECK(got && len >= 1000 && memcmp(got, want, 1000) == 0);
        for (i = 1000; got && i < len; i++)
            if (got[i]) break;
        CHECK(got && i == len);   /* the new bytes read as zeros */
        free(got);
    }
    return tu_finish("pwritev");
}
