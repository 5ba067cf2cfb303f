/* libFuzzer harness over the .ptwm reader: open arbitrary bytes, decode
 * every tensor (whole, by ranges, streamed by verify). No crash, no overrun;
 * and for input that decodes, invariants:
 *   - a whole decode, a decode in two ranges and verify agree;
 *   - what decodes re-encodes and decodes to the same bytes.
 * Tensors claiming more than FUZZ_MAX_RAW bytes are skipped: their output
 * buffer is the harness's allocation, not the library's.
 *
 * Each input is tried as given and once more with its table and footer CRCs
 * made right, so mutations reach the table parser instead of stopping at
 * the CRC checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptwm.h"
#include "container_format.h"
#include "hash.h"

#define FUZZ_MAX_RAW ((uint64_t)4 << 20)

static void check_tensor(ptwm_reader *r, size_t i, const ptwm_tensor_info *info, int *all_ok) {
    ptwm_err err;
    size_t n = (size_t)info->nbytes, half = n / 2;
    uint8_t *a = (uint8_t *)malloc(n ? n : 1), *b = (uint8_t *)malloc(n ? n : 1);
    ptwm_error rc;
    if (!a || !b) __builtin_trap();
    rc = ptwm_reader_decode(r, i, a, n, &err);
    if (rc) {
        *all_ok = 0;
        if (err.code != rc || !err.message[0]) __builtin_trap();   /* every failure says why */
    } else {
        /* Ranges skip the payload hash, so they may succeed where the whole
         * failed, but never differ where the whole succeeded. */
        if (ptwm_reader_decode_range(r, i, 0, b, half, &err) == PTWM_OK &&
            ptwm_reader_decode_range(r, i, half, b + half, n - half, &err) == PTWM_OK) {
            if (memcmp(a, b, n) != 0) __builtin_trap();
        } else {
            __builtin_trap();
        }
        /* Re-encode what decoded: the writer must accept it and round-trip it. */
        {
            ptwm_tensor_desc d = {info->name, info->dtype, info->ndim, info->shape, a, info->nbytes};
            ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
            ptwm_reader *r2 = NULL;
            void *blob = NULL;
            size_t len = 0;
            p.threads = 1;
            p.chunk_size = 4096;
            if (ptwm_compress_blob(&d, 1, NULL, &p, &blob, &len, &err) != PTWM_OK) __builtin_trap();
            if (ptwm_reader_open_memory(blob, len, "re", &r2, &err) != PTWM_OK) __builtin_trap();
            memset(b, 0, n);
            if (ptwm_reader_decode(r2, 0, b, n, &err) != PTWM_OK || memcmp(a, b, n) != 0) __builtin_trap();
            ptwm_reader_close(r2);
            free(blob);
        }
    }
    free(a);
    free(b);
}

static void one_input(const uint8_t *data, size_t size) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i, n;
    int all_ok = 1, skipped = 0;
    if (ptwm_reader_open_memory(data, size, "fuzz", &r, &err) != PTWM_OK) {
        if (!err.message[0]) __builtin_trap();
        return;
    }
    ptwm_reader_set_threads(r, 1);
    n = ptwm_reader_count(r);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        size_t idx = (size_t)-1;
        if (ptwm_reader_tensor(r, i, &info) != PTWM_OK) __builtin_trap();
        /* Accepted tables are self-consistent: names are unique and findable. */
        if (ptwm_reader_find(r, info.name, &idx) != PTWM_OK || idx != i) __builtin_trap();
        if (info.coded_bytes > size) __builtin_trap();
        if (info.nbytes > FUZZ_MAX_RAW) {
            skipped = 1;
            continue;
        }
        check_tensor(r, i, &info, &all_ok);
    }
    if (!skipped) {
        ptwm_error rc = ptwm_reader_verify(r, &err);
        if (all_ok && rc != PTWM_OK) __builtin_trap();
        if (!all_ok && rc == PTWM_OK) __builtin_trap();
    }
    ptwm_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    if (size >= PTWM_FMT_HEAD_SIZE + PTWM_FMT_FOOT_SIZE) {
        uint8_t *copy = (uint8_t *)malloc(size);
        uint8_t *foot = copy + size - PTWM_FMT_FOOT_SIZE;
        uint64_t off, len;
        if (!copy) __builtin_trap();
        memcpy(copy, data, size);
        off = ptwm_load_le64(foot + PTWM_FOOT_TABLE_OFFSET);
        len = ptwm_load_le64(foot + PTWM_FOOT_TABLE_SIZE);
        if (off <= size && len <= size - off)
            ptwm_store_le32(foot + PTWM_FOOT_TABLE_CRC, ptwm_crc32(0, copy + off, (size_t)len));
        ptwm_store_le32(foot + PTWM_FOOT_CRC, ptwm_crc32(0, foot, PTWM_FOOT_CRC));
        one_input(copy, size);
        free(copy);
    }
    return 0;
}
