/* The flusher (src/platform/flusher.c): an fdatasync every PTWM_FLUSH_STEP
 * bytes on a thread of its own, and a failed flush reported by the stop
 * (a failed fdatasync may not fail the commit's fsync too). Then both
 * users: a compress whose output is large (the direct output's blocks)
 * and the restore of a large file flush while they write, and the round
 * trip gives the original file byte for byte. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flusher.h"
#include "testutil.h"

#define STEP ((size_t)PTWM_FLUSH_STEP)

/* Write `total` bytes to fd in 1 MiB pieces, telling f after each. */
static void write_told(int fd, ptwm_flusher *f, size_t total) {
    static uint8_t piece[1 << 20];
    size_t done = 0;
    memset(piece, 0x5a, sizeof(piece));
    while (done < total) {
        size_t n = total - done < sizeof(piece) ? total - done : sizeof(piece);
        CHECK(pwrite(fd, piece, n, (off_t)done) == (ssize_t)n);
        ptwm_flusher_add(f, n);
        done += n;
    }
}

static void run_flusher(void) {
    const char *path = tu_tmp_path("flush.bin");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ptwm_flusher *f = NULL;
    uint64_t before;
    ptwm_err err;
    CHECK(fd >= 0);
    /* Under a step: nothing to flush, so no flush. */
    before = ptwm_flusher_flushes();
    ptwm_flusher_start(fd, path, 0, &f);
    CHECK(f != NULL);
    write_told(fd, f, STEP - 1);
    CHECK(ptwm_flusher_stop(f, &err) == PTWM_OK);
    CHECK_MSG(ptwm_flusher_flushes() == before, "%llu flushes under a step",
              (unsigned long long)(ptwm_flusher_flushes() - before));
    /* Bytes written before the start count: one more makes a step. */
    before = ptwm_flusher_flushes();
    ptwm_flusher_start(fd, path, STEP - 1, &f);
    CHECK(f != NULL);
    write_told(fd, f, 1);
    CHECK(ptwm_flusher_stop(f, &err) == PTWM_OK);
    CHECK(ptwm_flusher_flushes() == before + 1);
    /* Three steps: at least one flush, at most three. */
    before = ptwm_flusher_flushes();
    ptwm_flusher_start(fd, path, 0, &f);
    write_told(fd, f, 3 * STEP);
    CHECK(ptwm_flusher_stop(f, &err) == PTWM_OK);
    CHECK(ptwm_flusher_flushes() > before && ptwm_flusher_flushes() <= before + 3);
    close(fd);
    unlink(path);
    /* NULL is a flusher that could not start: adding and stopping are fine. */
    ptwm_flusher_add(NULL, STEP);
    CHECK(ptwm_flusher_stop(NULL, &err) == PTWM_OK);
}

/* A flush that fails is the stop's error, naming the file. */
static void run_failing(void) {
    ptwm_flusher *f = NULL;
    ptwm_err err;
    ptwm_error rc;
    ptwm_flusher_start(-1, "gone.bin", 0, &f);
    CHECK(f != NULL);
    ptwm_flusher_add(f, STEP);
    rc = ptwm_flusher_stop(f, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_IO, "gone.bin: fdatasync");
}

/* A safetensors file of one BF16 tensor of n values (noise, so the coded
 * file is about as large). */
static void write_safetensors(const char *path, size_t n) {
    char head[256];
    size_t hl, i, bytes = n * 2;
    uint64_t st = 7, len;
    uint8_t *file;
    hl = (size_t)snprintf(head, sizeof(head),
                          "{\"w\":{\"dtype\":\"BF16\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", n,
                          bytes);
    while (hl % 8) head[hl++] = ' ';
    file = (uint8_t *)malloc(8 + hl + bytes);
    CHECK(file != NULL);
    len = hl;
    memcpy(file, &len, 8);
    memcpy(file + 8, head, hl);
    for (i = 0; i < bytes; i += 8) {
        uint64_t v = tu_rand(&st);
        memcpy(file + 8 + hl + i, &v, 8);
    }
    CHECK(tu_write_file(path, file, 8 + hl + bytes) == 0);
    free(file);
}

static void run_round_trip(void) {
    /* (tu_tmp_path's buffers are its own, four in turn) */
    const char *src = tu_tmp_path("flush_src.safetensors");
    const char *packed = tu_tmp_path("flush_packed");
    const char *restored = tu_tmp_path("flush_restored");
    char *got = NULL;
    ptwm_checkpoint_options opt = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    ptwm_err err;
    ptwm_error rc;
    uint64_t before;
    size_t len = strlen(restored) + 64;
    write_safetensors(src, (size_t)3 * STEP / 2); /* 3 steps of bytes */
    opt.force = 1;
    before = ptwm_flusher_flushes();
    rc = ptwm_compress_checkpoint(src, packed, &opt, &err);
    CHECK_MSG(rc == PTWM_OK, "compress: %s", rc ? err.message : "");
    CHECK_MSG(ptwm_flusher_flushes() > before, "compressing %zu MiB flushed nothing",
              3 * STEP >> 20);
    before = ptwm_flusher_flushes();
    rc = ptwm_decompress_checkpoint(packed, restored, &opt, &err);
    CHECK_MSG(rc == PTWM_OK, "decompress: %s", rc ? err.message : "");
    CHECK_MSG(ptwm_flusher_flushes() > before, "restoring %zu MiB flushed nothing",
              3 * STEP >> 20);
    got = (char *)malloc(len);
    CHECK(got != NULL);
    snprintf(got, len, "%s/flush_src.safetensors", restored);
    CHECK_MSG(tu_files_equal(src, got), "%s differs from %s", got, src);
    tu_sh("rm -rf '%s' '%s' '%s'", src, packed, restored);
    free(got);
}

int main(void) {
    run_flusher();
    run_failing();
    run_round_trip();
    return tu_finish("test_flusher");
}
