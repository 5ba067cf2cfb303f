/* Every path that hands back or writes whole tensors refuses damage it can
 * see, on real weights (the repository's sample):
 *   - a stored payload hash that does not match (the table resealed, so every
 *     CRC holds): checkpoint decompression (file and sharded directory),
 *     layout loads, piecewise loads (ptwm export), reads that run through a
 *     tensor in order, checkpoint resume, the CLI's export; only a sub-range
 *     read not starting at 0 skips the hash;
 *   - two chunks of equal coded size swapped (every plane CRC still valid),
 *     with and without plane CRCs and hashes: caught by the chunk entries'
 *     payload CRCs on every path;
 *   - what `ptwm compress` writes is restored by the library byte for byte. */
#include "records.h"
#include "testutil.h"
#include "hash.h"
#include "image.h"
#include "reader.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXT 256

static char src_path[1200];       /* the real-weights subset */
static size_t nsrc;
static uint8_t *src_bytes;        /* its bytes, as the rebuild must give them */
static size_t src_len;

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The subset compressed in chunks of `chunk` bytes, as an image in memory. */
static tu_image compressed(uint64_t chunk, int crc, int hash) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    tu_image im = {NULL, 0};
    const char *path = tu_tmp_path("subset.ptwm");
    p.chunk_size = chunk;
    p.no_plane_crc = !crc;
    p.no_payload_hash = !hash;
    CHECK_MSG(ptwm_compress_safetensors(src_path, path, &p, &err) == PTWM_OK, "%s", err.message);
    im.p = tu_read_file(path, &im.len);
    return im;
}

/* A layout of every tensor of the source, in order, and its element count. */
static size_t layout_of(ptwm_source *s, ptwm_layout_entry *e, uint64_t *count) {
    size_t i, n = ptwm_source_count(s);
    *count = 0;
    for (i = 0; i < n && i < MAXT; i++) {
        ptwm_tensor_info info;
        ptwm_source_tensor(s, i, &info, NULL);
        e[i].name = info.name;
        e[i].ndim = info.ndim;
        e[i].shape = info.shape;
        *count += info.nbytes / 2;   /* BF16 */
    }
    return n;
}

/* Load every tensor of `path` through a layout, whole and piece by piece. */
static ptwm_error layout_load(const char *path, int pieces, ptwm_err *err) {
    ptwm_source *s = NULL;
    ptwm_layout_entry e[MAXT];
    uint64_t count;
    size_t n, i;
    float *dst;
    ptwm_error rc = ptwm_source_open(path, PTWM_SOURCE_AUTO, &s, err);
    if (rc) return rc;
    n = layout_of(s, e, &count);
    dst = (float *)malloc((size_t)count * sizeof(float) + 1);
    if (!pieces) {
        rc = ptwm_load_layout(s, e, n, PTWM_CONVERT_FLOAT, dst, count, err);
    } else {
        /* As ptwm export streams a tensor: consecutive parts of 1000 values. */
        for (i = 0; i < n && !rc; i++) {
            uint64_t m = 0, done;
            ptwm_layout_elements(&e[i], 1, &m, NULL);
            for (done = 0; done < m && !rc; done += 1000)
                rc = ptwm_load_tensor_part(s, &e[i], PTWM_CONVERT_FLOAT, done, dst,
                                           PTWM_MIN(1000, m - done), err);
        }
    }
    free(dst);
    ptwm_source_close(s);
    return rc;
}

/* The index of a tensor of several chunks and its bytes' XXH3-128. */
static size_t multi_chunk_tensor(const tu_image *im, uint8_t h[16], uint64_t *nbytes) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t t, pick = 0;
    CHECK(ptwm_reader_open_memory(im->p, im->len, "x", &r, &err) == PTWM_OK);
    for (t = 0; r && t < ptwm_reader_count(r); t++) {
        uint64_t nk = 0;
        ptwm_reader_chunk_info(r, t, 0, NULL, NULL, NULL, &nk);
        if (nk >= 3) {
            ptwm_tensor_info info;
            uint8_t *b;
            ptwm_reader_tensor(r, t, &info, NULL);
            b = (uint8_t *)malloc((size_t)info.nbytes);
            CHECK(ptwm_reader_decode(r, t, b, (size_t)info.nbytes, &err) == PTWM_OK);
            ptwm_xxh128_oneshot(b, (size_t)info.nbytes, h);
            *nbytes = info.nbytes;
            free(b);
            pick = t;
            break;
        }
    }
    ptwm_reader_close(r);
    return pick;
}

/* A .ptwm image whose stored hash of one tensor is wrong, table resealed. */
static size_t with_bad_hash(tu_image *im, uint64_t *nbytes) {
    uint8_t h[16];
    size_t t = multi_chunk_tensor(im, h, nbytes), at = tu_image_find(im, h, 16);
    CHECK_MSG(at != 0, "stored hash not found in the table");
    if (at) im->p[at + 7] ^= 0x20;
    tu_image_reseal(im);
    return t;
}

static void test_stored_hash(void) {
    tu_image im = tu_image_plain(compressed(8192, 1, 1));
    uint64_t nbytes = 0, off;
    size_t t = with_bad_hash(&im, &nbytes);
    const char *path = tu_tmp_path("badhash.ptwm"), *out = tu_tmp_path("badhash.out");
    ptwm_reader *r = NULL;
    ptwm_err err;
    uint8_t *buf = (uint8_t *)malloc((size_t)nbytes);
    size_t i, nonzero = 0;
    CHECK(tu_write_file(path, im.p, im.len) == 0);
    /* ptwm decompress: fails, and writes no output. */
    CHECK_ERR(ptwm_decompress_checkpoint(path, out, NULL, &err), &err, PTWM_ERR_HASH, "payload XXH3-128");
    CHECK(!exists(out));
    CHECK_ERR(layout_load(path, 0, &err), &err, PTWM_ERR_HASH, "payload XXH3-128");
    CHECK_ERR(layout_load(path, 1, &err), &err, PTWM_ERR_HASH, "payload XXH3-128");
    /* decode_range: a whole read, reads in order from 0, and sub-ranges. */
    CHECK(ptwm_reader_open(path, &r, &err) == PTWM_OK);
    if (r && buf) {
        uint64_t piece = nbytes / 3 + 2;
        CHECK_ERR(ptwm_reader_decode_range(r, t, 0, buf, (size_t)nbytes, &err), &err, PTWM_ERR_HASH, "");
        for (off = 0; off + piece < nbytes; off += piece)
            CHECK(ptwm_reader_decode_range(r, t, off, buf, (size_t)piece, &err) == PTWM_OK);
        memset(buf, 0xAA, (size_t)nbytes);
        CHECK_ERR(ptwm_reader_decode_range(r, t, off, buf, (size_t)(nbytes - off), &err), &err, PTWM_ERR_HASH,
                  "payload XXH3-128");
        for (i = 0; i < nbytes - off; i++) nonzero += buf[i] != 0;
        CHECK_MSG(nonzero == 0, "%zu bytes of the last piece handed back", nonzero);
        /* An explicit sub-range cannot be checked against the hash, and is not. */
        CHECK(ptwm_reader_decode_range(r, t, 1, buf, (size_t)nbytes - 1, &err) == PTWM_OK);
        CHECK(ptwm_reader_decode_range(r, t, 0, buf, (size_t)piece, &err) == PTWM_OK);
        CHECK(ptwm_reader_decode_range(r, t, piece + 2, buf, (size_t)(nbytes - piece - 2), &err) == PTWM_OK);
    }
    ptwm_reader_close(r);
    free(buf);
    free(im.p);
}

/* Sharded directories: one shard's stored hash wrong. */
static void test_stored_hash_sharded(void) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    const char *dir = tu_tmp_path("sharded"), *out = tu_tmp_path("sharded.out");
    char shard[1300];
    ptwm_ptdir *d = NULL;
    ptwm_err err;
    tu_image im;
    uint64_t nbytes = 0;
    size_t t, g, local = 0;
    uint8_t *buf;
    o.max_shard_size = 48 << 10;
    o.chunk_size = 8192;
    CHECK_MSG(ptwm_compress_checkpoint(src_path, dir, &o, &err) == PTWM_OK, "%s", err.message);
    snprintf(shard, sizeof(shard), "%s/model-00001-of-00004.ptwm", dir);
    im.p = tu_read_file(shard, &im.len);
    CHECK_MSG(im.p != NULL, "no %s", shard);
    if (!im.p) return;
    {
        /* The plain table makes the shard longer: the index records the sum. */
        size_t before = im.len, ilen = 0;
        char index[1300], *text, *at, fixed[4096];
        unsigned long long total;
        im = tu_image_plain(im);
        snprintf(index, sizeof(index), "%s/model.ptwm.index.json", dir);
        text = (char *)tu_read_file(index, &ilen);
        at = strstr(text, "\"compressed_total_size\": ");
        CHECK(at != NULL && ilen < 3000);
        if (!at || ilen >= 3000) return;
        at += strlen("\"compressed_total_size\": ");
        total = strtoull(at, NULL, 10) + (im.len - before);
        snprintf(fixed, sizeof(fixed), "%.*s%llu%s", (int)(at - text), text, total, at + strspn(at, "0123456789"));
        CHECK(tu_write_file(index, fixed, strlen(fixed)) == 0);
        free(text);
    }
    /* The edited index listed again in the file record: this test is about
     * the payload hash behind it. */
    CHECK(tu_record_refresh(dir) == 0);
    t = with_bad_hash(&im, &nbytes);
    CHECK(tu_write_file(shard, im.p, im.len) == 0);
    CHECK_ERR(ptwm_decompress_checkpoint(dir, out, NULL, &err), &err, PTWM_ERR_HASH, "payload XXH3-128");
    CHECK(!exists(out));
    /* Python's read_sharded_ptwm reads each tensor whole through here. */
    CHECK(ptwm_ptdir_open(dir, &d, &err) == PTWM_OK);
    buf = (uint8_t *)malloc((size_t)nbytes);
    for (g = 0; d && g < ptwm_ptdir_count(d); g++)
        if (ptwm_ptdir_shard_of(d, g, &local) == 0 && local == t) break;
    if (d && buf)
        CHECK_ERR(ptwm_ptdir_decode_range(d, g, 0, buf, (size_t)nbytes, &err), &err, PTWM_ERR_HASH, "");
    free(buf);
    ptwm_ptdir_close(d);
    free(im.p);
}

/* Checkpoint resume: a saved state whose parameters' hash is wrong. */
static void test_stored_hash_resume(void) {
    enum { N = 24000 };
    static float params[N], back[N];
    uint64_t shape[1] = {N};
    ptwm_layout_entry e = {"w", 1, shape};
    ptwm_optim_state st, got;
    const char *path = tu_tmp_path("state.ptwm");
    uint8_t h[16];
    size_t i, at;
    ptwm_err err;
    tu_image im;
    uint64_t seed = 5;
    for (i = 0; i < N; i++) params[i] = (float)((int)(tu_rand(&seed) % 2001) - 1000) / 1024.0f;
    memset(&st, 0, sizeof st);
    st.kind = PTWM_OPT_SGD;
    st.n_params = N;
    st.params = params;
    st.lr = 0.01f;
    got = st;
    got.params = back;
    CHECK_MSG(ptwm_ckpt_save(path, PTWM_CKPT_PTWM, &e, 1, &st, &err) == PTWM_OK, "%s", err.message);
    CHECK(ptwm_ckpt_load(path, PTWM_CKPT_PTWM, &e, 1, &got, &err) == PTWM_OK &&
          memcmp(params, back, sizeof params) == 0);
    im.p = tu_read_file(path, &im.len);
    if (!im.p) return;
    im = tu_image_plain(im);
    ptwm_xxh128_oneshot(params, sizeof params, h);   /* F32 little-endian as stored */
    at = tu_image_find(&im, h, 16);
    CHECK_MSG(at != 0, "parameters' hash not found in the table");
    if (at) im.p[at] ^= 1;
    tu_image_reseal(&im);
    CHECK(tu_write_file(path, im.p, im.len) == 0);
    CHECK_ERR(ptwm_ckpt_load(path, PTWM_CKPT_PTWM, &e, 1, &got, &err), &err, PTWM_ERR_HASH, "'param/w'");
    free(im.p);
}

/* ptwm export, run as the CLI, on a file whose stored hash is wrong. */
static void test_stored_hash_export(void) {
    const char *bin = getenv("PTWM_BIN"), *path = tu_tmp_path("export.ptwm");
    const char *layout = tu_tmp_path("export.json"), *out = tu_tmp_path("export.bin");
    char json[1024], errp[1300], outp[1300];
    ptwm_reader *r = NULL;
    ptwm_tensor_info info;
    ptwm_err err;
    uint64_t nbytes = 0;
    tu_image im = tu_image_plain(compressed(8192, 1, 1));
    size_t t = with_bad_hash(&im, &nbytes);
    CHECK_MSG(bin != NULL, "PTWM_BIN is not set (run through ctest)");
    CHECK(tu_write_file(path, im.p, im.len) == 0);
    CHECK(ptwm_reader_open(path, &r, &err) == PTWM_OK);
    if (!bin || !r) {
        ptwm_reader_close(r);
        free(im.p);
        return;
    }
    ptwm_reader_tensor(r, t, &info, NULL);
    {
        size_t used = (size_t)snprintf(json, sizeof(json), "[{\"name\": \"%s\", \"shape\": [", info.name);
        uint32_t k;
        for (k = 0; k < info.ndim; k++)
            used += (size_t)snprintf(json + used, sizeof(json) - used, "%s%llu", k ? ", " : "",
                                     (unsigned long long)info.shape[k]);
        snprintf(json + used, sizeof(json) - used, "]}]");
    }
    CHECK(tu_write_file(layout, json, strlen(json)) == 0);
    snprintf(outp, sizeof(outp), "%s/export.stdout", tu_tmpdir());
    snprintf(errp, sizeof(errp), "%s/export.stderr", tu_tmpdir());
    CHECK(tu_run_cli(bin, outp, errp, "export '%s' --layout '%s' -o '%s'", path, layout, out) == 1);
    CHECK(!exists(out));
    {
        size_t len = 0;
        char *e = (char *)tu_read_file(errp, &len);
        CHECK_MSG(strstr(e, "payload XXH3-128") != NULL, "export said: %s", e);
        free(e);
    }
    ptwm_reader_close(r);
    free(im.p);
}

/* Two chunks of equal coded size swapped: every decode path refuses it. */
static void test_swapped_chunks(int crc, int hash) {
    tu_image good = compressed(4096, crc, hash), im;
    const char *path = tu_tmp_path("swapped.ptwm"), *out = tu_tmp_path(crc ? "swapped-crc.out" : "swapped.out");
    const char *st = tu_tmp_path(crc ? "swapped-crc.safetensors" : "swapped.safetensors");
    uint64_t a = 0, b = 0;
    uint32_t coded = 0;
    ptwm_reader *r = NULL;
    ptwm_err err;
    void *dsts[MAXT];
    size_t idx[MAXT], sizes[MAXT], i, n = 0;
    int found = tu_image_equal_chunks(&good, 0, &a, &b, &coded);
    CHECK_MSG(found, "no two chunks of equal coded size to swap");
    if (!found) {
        free(good.p);
        return;
    }
    im = tu_image_copy(&good);
    tu_image_swap(&im, a, b, coded);
    CHECK(tu_write_file(path, im.p, im.len) == 0);
    CHECK(ptwm_reader_open(path, &r, &err) == PTWM_OK);
    for (i = 0; r && i < ptwm_reader_count(r) && i < MAXT; i++, n++) {
        ptwm_tensor_info info;
        ptwm_reader_tensor(r, i, &info, NULL);
        idx[i] = i;
        sizes[i] = (size_t)info.nbytes;
        dsts[i] = malloc(sizes[i] + 1);
    }
    if (r) {
        CHECK_ERR(ptwm_reader_decode_many(r, idx, dsts, sizes, n, &err), &err, PTWM_ERR_CRC,
                  "its chunk entry records");
        CHECK_ERR(ptwm_reader_write_safetensors(r, st, &err), &err, PTWM_ERR_CRC, "its chunk entry records");
        CHECK(!exists(st));
    }
    CHECK_ERR(ptwm_decompress_checkpoint(path, out, NULL, &err), &err, PTWM_ERR_CRC, "its chunk entry records");
    CHECK(!exists(out));
    CHECK_ERR(layout_load(path, 0, &err), &err, PTWM_ERR_CRC, "its chunk entry records");
    CHECK_ERR(layout_load(path, 1, &err), &err, PTWM_ERR_CRC, "its chunk entry records");
    for (i = 0; i < n; i++) free(dsts[i]);
    ptwm_reader_close(r);
    free(im.p);
    free(good.p);
}

/* What `ptwm compress` writes (ptwm_compress_checkpoint on a safetensors
 * file) is restored byte for byte by the library's safetensors rebuild. */
static void test_cli_output_restored(void) {
    ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    const char *dir = tu_tmp_path("cli"), *back = tu_tmp_path("cli.safetensors");
    char model[1300];
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t len = 0, slen = 0;
    uint8_t *got, *want = tu_read_file(tu_sample_path(), &slen);
    CHECK_MSG(ptwm_compress_checkpoint(tu_sample_path(), dir, &o, &err) == PTWM_OK, "%s", err.message);
    snprintf(model, sizeof(model), "%s/model.ptwm", dir);
    CHECK(ptwm_reader_open(model, &r, &err) == PTWM_OK);
    if (r) CHECK_MSG(ptwm_reader_write_safetensors(r, back, &err) == PTWM_OK, "%s", err.message);
    got = tu_read_file(back, &len);
    CHECK_MSG(got && want && len == slen && memcmp(got, want, len) == 0, "rebuild differs from the source");
    ptwm_reader_close(r);
    free(got);
    free(want);
}

int main(void) {
    snprintf(src_path, sizeof(src_path), "%s/subset.safetensors", tu_tmpdir());
    nsrc = tu_sample_subset(src_path, 160 << 10);
    CHECK_MSG(nsrc > 3, "cannot cut a subset of %s", tu_sample_path());
    if (nsrc <= 3) return tu_finish("integrity_paths");
    src_bytes = tu_read_file(src_path, &src_len);
    test_stored_hash();
    test_stored_hash_sharded();
    test_stored_hash_resume();
    test_stored_hash_export();
    test_swapped_chunks(1, 1);
    test_swapped_chunks(0, 0);
    test_cli_output_restored();
    free(src_bytes);
    return tu_finish("integrity_paths");
}
