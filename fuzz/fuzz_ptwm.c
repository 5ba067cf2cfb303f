/* libFuzzer harness over the .ptwm reader: open arbitrary bytes, decode
 * every tensor (whole, by ranges, streamed by verify). No crash, no overrun;
 * and for input that decodes, invariants:
 *   - a whole decode, a decode in two ranges and verify agree;
 *   - what decodes re-encodes and decodes to the same bytes;
 *   - rebuilding the safetensors file (the one it records, or a fresh one)
 *     fails when a tensor does not decode, and otherwise either fails
 *     saying why (a recorded header that disagrees with the table) or
 *     writes a file the safetensors reader accepts, holding exactly the
 *     decoded tensors.
 * Tensors claiming more than FUZZ_MAX_RAW bytes are skipped: their output
 * buffer is the harness's allocation, not the library's.
 *
 * Each input is tried as given and once more with its table and footer CRCs
 * made right, so mutations reach the table parser instead of stopping at
 * the CRC checks. Then the table is switched between its plain and its
 * zstd-packed form (section 4) and tried again, so mutations of a plain table
 * reach the parser through the packed path too (and those of a packed seed
 * through the plain one). A packed table that opens must open plain too,
 * with the same tensors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptwm.h"
#include "container_format.h"
#include "entropy.h"
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
            ptwm_free(blob);
        }
    }
    free(a);
    free(b);
}

/* Where rebuilds go: tmpfs when there is one (the commit's fsyncs cost
 * nothing there). */
static const char *rebuild_path(void) {
    static char path[128];
    if (!path[0])
        snprintf(path, sizeof path, "%s/fuzz-ptwm-%ld.safetensors",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    return path;
}

static void check_rebuild(ptwm_reader *r, int all_ok) {
    const char *path = rebuild_path();
    ptwm_err err;
    ptwm_st *st = NULL;
    size_t i, n;
    ptwm_error rc = ptwm_reader_write_safetensors(r, path, &err);
    if (rc) {
        if (err.code != rc || !err.message[0]) __builtin_trap();
        return;
    }
    if (!all_ok) __builtin_trap();   /* a tensor that does not decode was written */
    if (ptwm_st_open(path, PTWM_OPEN_PREAD, &st, &err) != PTWM_OK) __builtin_trap();
    n = ptwm_st_count(st);
    if (n != ptwm_reader_count(r)) __builtin_trap();
    for (i = 0; i < n; i++) {
        ptwm_tensor_info a, b;
        size_t j = 0;
        uint32_t d;
        uint8_t *x, *y;
        if (ptwm_st_tensor(st, i, &a, NULL) != PTWM_OK ||
            ptwm_reader_find(r, a.name, &j, NULL) != PTWM_OK ||
            ptwm_reader_tensor(r, j, &b, NULL) != PTWM_OK || a.dtype != b.dtype ||
            a.ndim != b.ndim || a.nbytes != b.nbytes)
            __builtin_trap();
        for (d = 0; d < a.ndim; d++)
            if (a.shape[d] != b.shape[d]) __builtin_trap();
        x = (uint8_t *)malloc(a.nbytes ? (size_t)a.nbytes : 1);
        y = (uint8_t *)malloc(a.nbytes ? (size_t)a.nbytes : 1);
        if (!x || !y || ptwm_st_read(st, i, 0, x, (size_t)a.nbytes, NULL) != PTWM_OK ||
            ptwm_reader_decode(r, j, y, (size_t)a.nbytes, NULL) != PTWM_OK ||
            memcmp(x, y, (size_t)a.nbytes) != 0)
            __builtin_trap();
        free(x);
        free(y);
    }
    ptwm_st_close(st);
    unlink(path);
}

/* Returns the tensor count, or -1 if the input does not open. */
static long one_input(const uint8_t *data, size_t size) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i, n;
    int all_ok = 1, skipped = 0;
    if (ptwm_reader_open_memory(data, size, "fuzz", &r, &err) != PTWM_OK) {
        if (!err.message[0]) __builtin_trap();
        return -1;
    }
    ptwm_reader_set_threads(r, 1);
    n = ptwm_reader_count(r);
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        size_t idx = (size_t)-1;
        if (ptwm_reader_tensor(r, i, &info, NULL) != PTWM_OK) __builtin_trap();
        /* Accepted tables are self-consistent: names are unique and findable. */
        if (ptwm_reader_find(r, info.name, &idx, NULL) != PTWM_OK || idx != i) __builtin_trap();
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
        check_rebuild(r, all_ok);
    }
    ptwm_reader_close(r);
    return (long)n;
}

/* Fix the table and footer CRCs in place (sizes as the footer says). */
static void reseal(uint8_t *p, size_t size) {
    uint8_t *foot = p + size - PTWM_FMT_FOOT_SIZE;
    uint64_t off = ptwm_load_le64(foot + PTWM_FOOT_TABLE_OFFSET);
    uint64_t len = ptwm_load_le64(foot + PTWM_FOOT_TABLE_SIZE);
    if (off <= size && len <= size - off)
        ptwm_store_le32(foot + PTWM_FOOT_TABLE_CRC, ptwm_crc32(0, p + off, (size_t)len));
    ptwm_store_le32(foot + PTWM_FOOT_CRC, ptwm_crc32(0, foot, PTWM_FOOT_CRC));
}

/* The file with table bytes `tab` in place of its table; NULL if unusable. */
static uint8_t *swap_table(const uint8_t *p, size_t size, uint64_t off, const uint8_t *tab, size_t n,
                           size_t *out_size) {
    size_t total = (size_t)off + n + PTWM_FMT_FOOT_SIZE;
    uint8_t *q = (uint8_t *)malloc(total), *foot;
    if (!q) __builtin_trap();
    memcpy(q, p, (size_t)off);
    memcpy(q + off, tab, n);
    memcpy(q + off + n, p + size - PTWM_FMT_FOOT_SIZE, PTWM_FMT_FOOT_SIZE);
    foot = q + total - PTWM_FMT_FOOT_SIZE;
    ptwm_store_le64(foot + PTWM_FOOT_TABLE_SIZE, n);
    ptwm_store_le64(foot + PTWM_FOOT_FILE_SIZE, total);
    reseal(q, total);
    *out_size = total;
    return q;
}

/* Try `p` (CRCs right) with its table in the other form. */
static void other_form(const uint8_t *p, size_t size, long opened) {
    const uint8_t *foot = p + size - PTWM_FMT_FOOT_SIZE;
    uint64_t off = ptwm_load_le64(foot + PTWM_FOOT_TABLE_OFFSET);
    uint64_t len = ptwm_load_le64(foot + PTWM_FOOT_TABLE_SIZE);
    const uint8_t *tab;
    uint8_t *t = NULL, *q;
    size_t n = 0, qsize = 0;
    if (off < PTWM_FMT_HEAD_SIZE || off > size - PTWM_FMT_FOOT_SIZE || len != size - PTWM_FMT_FOOT_SIZE - off ||
        len < PTWM_FMT_SECTION_HEAD || ptwm_load_le64(foot + PTWM_FOOT_FILE_SIZE) != size)
        return;   /* swap_table rewrites the sizes: only a file whose sizes are right */
    tab = p + off;
    if (tab[0] == PTWM_SEC_PACKED) {
        uint64_t raw;
        if (len < PTWM_FMT_SECTION_HEAD + 8) return;
        raw = ptwm_load_le64(tab + PTWM_FMT_SECTION_HEAD);
        if (raw > ((uint64_t)1 << 20)) return;
        t = (uint8_t *)malloc(raw ? (size_t)raw : 1);
        if (!t) __builtin_trap();
        if (ptwm_zstd_decode(NULL, tab + PTWM_FMT_SECTION_HEAD + 8, (size_t)len - PTWM_FMT_SECTION_HEAD - 8, t,
                             (size_t)raw) != PTWM_OK) {
            if (opened >= 0) __builtin_trap();   /* it opened, so the frame was good */
            free(t);
            return;
        }
        n = (size_t)raw;
        q = swap_table(p, size, off, t, n, &qsize);
        if (one_input(q, qsize) != opened && opened >= 0) __builtin_trap();
    } else {
        size_t cap = ptwm_zstd_bound((size_t)len) + PTWM_FMT_SECTION_HEAD + 8, zlen = 0;
        t = (uint8_t *)malloc(cap);
        if (!t) __builtin_trap();
        if (ptwm_zstd_encode(NULL, tab, (size_t)len, 3, t + PTWM_FMT_SECTION_HEAD + 8, cap - PTWM_FMT_SECTION_HEAD - 8,
                             &zlen) != PTWM_OK)
            __builtin_trap();
        t[0] = PTWM_SEC_PACKED;
        ptwm_store_le64(t + 1, 8 + (uint64_t)zlen);
        ptwm_store_le64(t + PTWM_FMT_SECTION_HEAD, len);
        n = PTWM_FMT_SECTION_HEAD + 8 + zlen;
        q = swap_table(p, size, off, t, n, &qsize);
        {
            long packed = one_input(q, qsize);
            if (packed >= 0 && packed != opened) __builtin_trap();
        }
    }
    free(q);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    if (size >= PTWM_FMT_HEAD_SIZE + PTWM_FMT_FOOT_SIZE) {
        uint8_t *copy = (uint8_t *)malloc(size);
        long opened;
        if (!copy) __builtin_trap();
        memcpy(copy, data, size);
        reseal(copy, size);
        opened = one_input(copy, size);
        other_form(copy, size, opened);
        free(copy);
    }
    return 0;
}
