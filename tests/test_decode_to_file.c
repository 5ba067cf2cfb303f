/* Decoding straight into an output file: ptwm_reader_stream_to_file writes
 * each chunk from the decoding threads at its tensor's offset. The file must
 * hold exactly the tensors' bytes at the offsets asked for, in any tensor
 * order, from a file or an image in memory, with one thread or several; a
 * damaged payload fails the call naming the tensor; and a whole restore
 * through it (ptwm decompress) gives the source file back byte for byte.
 * A stream across several files and readers (the shards of a directory)
 * finishes each file exactly once: complete and checked, or failed. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fstream.h"
#include "image.h"
#include "testutil.h"

#define NT 5

typedef struct counted {
    uint64_t bytes;
    size_t calls;
} counted;

static ptwm_error count_sink(void *ctx, const uint8_t *p, size_t n, ptwm_err *err) {
    counted *c = (counted *)ctx;
    (void)p;
    (void)err;
    c->bytes += n;
    c->calls++;
    return PTWM_OK;
}

/* Weights-like bytes: BF16 values of a slowly varying scale. */
static void fill(uint8_t *p, size_t n, uint64_t *rng) {
    size_t i;
    for (i = 0; i + 1 < n; i += 2) {
        uint64_t r = tu_rand(rng);
        p[i] = (uint8_t)r;
        p[i + 1] = (uint8_t)(0x3c + (r >> 8) % 4 + ((r >> 16) & 1) * 0x80);
    }
    if (n & 1) p[n - 1] = (uint8_t)tu_rand(rng);
}

static const char *names[NT] = {"a.weight", "b.empty", "c.bias", "d.bytes", "e.weight"};
static const ptwm_dtype dtypes[NT] = {PTWM_DTYPE_BF16, PTWM_DTYPE_F32, PTWM_DTYPE_F32,
                                      PTWM_DTYPE_U8, PTWM_DTYPE_BF16};
static const uint64_t counts[NT] = {150000, 0, 1000, 70001, 8192};

static uint8_t *data[NT];
static uint64_t sizes[NT];

static void *build_image(size_t *len, int threads) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_writer *w = NULL;
    ptwm_err err;
    void *blob = NULL;
    size_t i;
    p.chunk_size = 16384;   /* many chunks per tensor, several in flight */
    p.threads = threads;
    CHECK(ptwm_writer_open_memory(&p, &w, &err) == PTWM_OK);
    for (i = 0; i < NT && w; i++) {
        ptwm_tensor_desc d;
        uint64_t shape[1];
        shape[0] = counts[i];
        d.name = names[i];
        d.dtype = dtypes[i];
        d.ndim = 1;
        d.shape = shape;
        d.data = data[i];
        d.nbytes = sizes[i];
        CHECK_ERR(ptwm_writer_add(w, &d, NULL, &err), &err, PTWM_OK, NULL);
    }
    CHECK_ERR(ptwm_writer_finish_memory(w, &blob, len, &err), &err, PTWM_OK, NULL);
    return blob;
}

/* Stream tensors in the order `order` to `path` at offsets with gaps between
 * them; check every tensor's bytes at its offset and zeros in the gaps. */
static void check_streamed(ptwm_reader *r, const size_t *order, const char *path, int threads,
                           const char *what) {
    uint64_t offs[NT], off = 100, end;
    size_t i, len = 0;
    counted c = {0, 0};
    ptwm_err err;
    uint8_t *got;
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    CHECK(fd >= 0);
    if (fd < 0) return;
    ptwm_reader_set_threads(r, threads);
    for (i = 0; i < NT; i++) {
        offs[i] = off;
        off += sizes[order[i]] + 7;   /* a gap that breaks every alignment */
    }
    end = off - 7;
    CHECK_ERR(ptwm_reader_stream_to_file(r, order, NT, fd, path, offs, count_sink, &c, &err), &err,
              PTWM_OK, NULL);
    close(fd);
    CHECK_MSG(c.bytes == end - 100 - 7 * (NT - 1), "%s: sink heard of %llu bytes", what,
              (unsigned long long)c.bytes);
    got = tu_read_file(path, &len);
    CHECK_MSG(got && len == end, "%s: file of %zu bytes, expected %llu", what, len,
              (unsigned long long)end);
    for (i = 0; got && len == end && i < NT; i++) {
        size_t t = order[i], k;
        CHECK_MSG(sizes[t] == 0 || memcmp(got + offs[i], data[t], sizes[t]) == 0,
                  "%s: tensor '%s' differs at offset %llu", what, names[t],
                  (unsigned long long)offs[i]);
        for (k = 0; i + 1 < NT && k < 7; k++)
            CHECK_MSG(got[offs[i] + sizes[t] + k] == 0, "%s: gap after '%s' written", what,
                      names[t]);
    }
    free(got);
}

/* What a stream's done callback saw for one file. */
typedef struct seen {
    int calls;
    ptwm_error rc;
    int fd;
} seen;

static ptwm_error note_done(void *ctx, ptwm_error rc, ptwm_err *err) {
    seen *s = (seen *)ctx;
    (void)err;
    s->calls++;
    s->rc = rc;
    return rc;
}

/* Files through one stream: A from reader `a`, B from `b` then `a`, C of no
 * chunks, D begun after B's failure when `b` is damaged. */
static void check_fstream(ptwm_reader *a, ptwm_reader *b, int damaged, const char *dir_a,
                          const char *dir_b) {
    static const size_t first[2] = {0, 4}, rest[2] = {3, 2}, empty[1] = {1};
    uint64_t offs_a[2], offs_b[2], offs_b2[2], zero[1] = {0};
    seen sa = {0, PTWM_OK, -1}, sb = {0, PTWM_OK, -1}, sc = {0, PTWM_OK, -1}, sd = {0, PTWM_OK, -1};
    ptwm_fstream *s = NULL;
    ptwm_err err;
    ptwm_error rc;
    size_t len = 0;
    uint8_t *got;
    sa.fd = open(dir_a, O_CREAT | O_TRUNC | O_RDWR, 0644);
    sb.fd = open(dir_b, O_CREAT | O_TRUNC | O_RDWR, 0644);
    CHECK(sa.fd >= 0 && sb.fd >= 0);
    offs_a[0] = 0;
    offs_a[1] = sizes[0];
    offs_b[0] = 0;
    offs_b[1] = sizes[3];
    offs_b2[0] = sizes[3] + sizes[2];
    offs_b2[1] = offs_b2[0] + sizes[3];
    CHECK_ERR(ptwm_fstream_open(2, NULL, NULL, &s, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_fstream_begin(s, sa.fd, dir_a, note_done, &sa, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_fstream_add(s, a, first, 2, offs_a, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_fstream_end(s, &err), &err, PTWM_OK, NULL);
    rc = ptwm_fstream_begin(s, sb.fd, dir_b, note_done, &sb, &err);
    if (!rc) rc = ptwm_fstream_add(s, b, rest, 2, offs_b, &err);
    if (!rc) rc = ptwm_fstream_add(s, a, rest, 2, offs_b2, &err);
    if (!rc) rc = ptwm_fstream_end(s, &err);
    if (!damaged) {
        CHECK_ERR(rc, &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_fstream_begin(s, sa.fd, dir_a, note_done, &sc, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_fstream_add(s, b, empty, 1, zero, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_fstream_end(s, &err), &err, PTWM_OK, NULL);
        CHECK_MSG(sc.calls == 1 && sc.rc == PTWM_OK, "a file of no chunks finishes at once: %d calls",
                  sc.calls);
        CHECK_ERR(ptwm_fstream_close(s, &err), &err, PTWM_OK, NULL);
    } else {
        /* The damage may surface in any call from B's first addition on. */
        if (!rc) rc = ptwm_fstream_close(s, &err);
        else ptwm_fstream_close(s, NULL);
        CHECK_ERR(rc, &err, PTWM_ERR_CRC, "tensor 'd.bytes' chunk 2 of");
        CHECK_MSG(sb.calls == 1 && sb.rc == PTWM_ERR_CRC, "damaged file B: %d calls, rc %d", sb.calls,
                  (int)sb.rc);
        s = NULL;
        CHECK_ERR(ptwm_fstream_open(1, NULL, NULL, &s, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_fstream_begin(s, sb.fd, dir_b, note_done, &sd, &err), &err, PTWM_OK, NULL);
        rc = ptwm_fstream_add(s, b, rest, 2, offs_b, &err);
        if (!rc) rc = ptwm_fstream_end(s, &err);
        /* Wherever the failure surfaced, close reports it. */
        (void)rc;
        CHECK_ERR(ptwm_fstream_close(s, &err), &err, PTWM_ERR_CRC, "d.bytes");
        CHECK_MSG(sd.calls == 1 && sd.rc == PTWM_ERR_CRC, "one thread: %d calls, rc %d", sd.calls,
                  (int)sd.rc);
    }
    CHECK_MSG(sa.calls == 1 && sa.rc == PTWM_OK, "file A: %d calls, rc %d", sa.calls, (int)sa.rc);
    close(sa.fd);
    close(sb.fd);
    got = tu_read_file(dir_a, &len);
    CHECK(got && len == sizes[0] + sizes[4] && memcmp(got, data[0], sizes[0]) == 0 &&
          memcmp(got + sizes[0], data[4], sizes[4]) == 0);
    free(got);
    if (!damaged) {
        CHECK_MSG(sb.calls == 1 && sb.rc == PTWM_OK, "file B: %d calls, rc %d", sb.calls, (int)sb.rc);
        got = tu_read_file(dir_b, &len);
        CHECK(got && len == offs_b2[1] + sizes[2] && memcmp(got, data[3], sizes[3]) == 0 &&
              memcmp(got + sizes[3], data[2], sizes[2]) == 0 &&
              memcmp(got + offs_b2[0], data[3], sizes[3]) == 0 &&
              memcmp(got + offs_b2[1], data[2], sizes[2]) == 0);
        free(got);
    }
}

int main(void) {
    static const size_t forward[NT] = {0, 1, 2, 3, 4}, shuffled[NT] = {3, 1, 4, 0, 2};
    const char *img_path = tu_tmp_path("streamed.ptwm"), *out = tu_tmp_path("streamed.bin");
    uint64_t rng = 2026, off;
    uint32_t coded;
    size_t i, len = 0;
    int threads;
    void *blob;
    ptwm_reader *r = NULL;
    ptwm_err err;
    counted c = {0, 0};

    for (i = 0; i < NT; i++) {
        sizes[i] = counts[i] * (ptwm_dtype_bits(dtypes[i]) / 8);
        data[i] = (uint8_t *)malloc(sizes[i] ? sizes[i] : 1);
        fill(data[i], sizes[i], &rng);
    }
    blob = build_image(&len, 2);
    CHECK(blob && tu_write_file(img_path, blob, len) == 0);

    /* From the file (each worker reads its chunk) and from memory, with one
     * thread and two, in table order and shuffled. */
    for (threads = 1; threads <= 2; threads++) {
        CHECK_ERR(ptwm_reader_open(img_path, &r, &err), &err, PTWM_OK, NULL);
        if (r) {
            check_streamed(r, forward, out, threads, "file, table order");
            check_streamed(r, shuffled, out, threads, "file, shuffled");
            ptwm_reader_close(r);
        }
        CHECK_ERR(ptwm_reader_open_memory(blob, len, "image", &r, &err), &err, PTWM_OK, NULL);
        if (r) {
            check_streamed(r, shuffled, out, threads, "memory, shuffled");
            ptwm_reader_close(r);
        }
    }

    /* Bad arguments are refused before anything is written. */
    CHECK_ERR(ptwm_reader_open_memory(blob, len, "image", &r, &err), &err, PTWM_OK, NULL);
    if (r) {
        uint64_t offs[NT] = {0};
        size_t bad[1] = {NT};
        CHECK_ERR(ptwm_reader_stream_to_file(r, forward, NT, -1, out, offs, NULL, NULL, &err), &err,
                  PTWM_ERR_INVALID_ARG, "no file");
        CHECK_ERR(ptwm_reader_stream_to_file(r, bad, 1, 1, out, offs, NULL, NULL, &err), &err,
                  PTWM_ERR_NOT_FOUND, "no tensor 5 (of 5)");
        ptwm_reader_close(r);
    }

    /* A stream across files and readers, clean and with B's reader damaged. */
    {
        tu_image im = {(uint8_t *)blob, len}, bad = tu_image_copy(&im);
        ptwm_reader *other = NULL, *broken = NULL;
        tu_image_chunk_at(&bad, 3, 2, &off, &coded);
        bad.p[off + coded / 2] ^= 0x10;
        CHECK_ERR(ptwm_reader_open(img_path, &r, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_reader_open_memory(blob, len, "other", &other, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_reader_open_memory(bad.p, bad.len, "broken", &broken, &err), &err, PTWM_OK,
                  NULL);
        if (r && other && broken) {
            check_fstream(r, other, 0, tu_tmp_path("fs-a.bin"), tu_tmp_path("fs-b.bin"));
            check_fstream(r, broken, 1, tu_tmp_path("fs-a.bin"), tu_tmp_path("fs-b.bin"));
        }
        ptwm_reader_close(r);
        ptwm_reader_close(other);
        ptwm_reader_close(broken);
        free(bad.p);
    }

    /* A damaged payload in the middle of a tensor: the call fails naming the
     * tensor and chunk, after streaming the tensors before it. */
    {
        tu_image im = {(uint8_t *)blob, len}, bad = tu_image_copy(&im);
        int fd = open(out, O_CREAT | O_TRUNC | O_RDWR, 0644);
        uint64_t offs[NT] = {0, 0, 0, 0, 0};
        tu_image_chunk_at(&bad, 3, 2, &off, &coded);
        bad.p[off + coded / 2] ^= 0x10;
        CHECK_ERR(ptwm_reader_open_memory(bad.p, bad.len, "damaged", &r, &err), &err, PTWM_OK, NULL);
        CHECK(fd >= 0);
        if (r && fd >= 0) {
            ptwm_reader_set_threads(r, 2);
            CHECK_ERR(ptwm_reader_stream_to_file(r, forward, NT, fd, out, offs, count_sink, &c, &err),
                      &err, PTWM_ERR_CRC, "tensor 'd.bytes' chunk 2 of");
        }
        if (fd >= 0) close(fd);
        ptwm_reader_close(r);
        free(bad.p);
    }

    /* A write that fails (past the file size limit: EFBIG) fails the call
     * naming the file and offset, with one thread (whose writes run on a
     * writing thread where a core is free) and with two. */
    {
        struct rlimit old, lim;
        uint64_t offs[NT];
        char *big = strdup(tu_tmp_path("efbig.bin"));
        CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
        signal(SIGXFSZ, SIG_IGN);
        for (i = 0, off = 0; i < NT; i++) {
            offs[i] = off;
            off += sizes[i];
        }
        for (threads = 1; threads <= 2; threads++) {
            int fd = open(big, O_CREAT | O_TRUNC | O_RDWR, 0644);
            CHECK_ERR(ptwm_reader_open_memory(blob, len, "image", &r, &err), &err, PTWM_OK, NULL);
            CHECK(fd >= 0);
            if (r && fd >= 0) {
                ptwm_reader_set_threads(r, threads);
                lim = old;
                lim.rlim_cur = 200000;   /* inside the first tensor's chunks */
                CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
                CHECK_ERR(ptwm_reader_stream_to_file(r, forward, NT, fd, big, offs, NULL, NULL, &err),
                          &err, PTWM_ERR_IO, "write at offset");
                CHECK_MSG(strstr(err.message, big) != NULL, "%d threads: '%s' names no file", threads,
                          err.message);
                CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
            }
            if (fd >= 0) close(fd);
            ptwm_reader_close(r);
        }
        signal(SIGXFSZ, SIG_DFL);
        free(big);
    }

    /* The whole restore path: a safetensors file compressed and decompressed
     * through the library comes back byte for byte. */
    {
        const char *src = tu_tmp_path("whole.safetensors"), *pt = tu_tmp_path("whole.ptwm.d"),
                   *back = tu_tmp_path("whole.back");
        ptwm_checkpoint_options o = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
        ptwm_tensor_desc d[NT];
        uint64_t shapes[NT][1];
        uint8_t *a, *b;
        size_t la = 0, lb = 0;
        char *restored;
        for (i = 0; i < NT; i++) {
            shapes[i][0] = counts[i];
            d[i].name = names[i];
            d[i].dtype = dtypes[i];
            d[i].ndim = 1;
            d[i].shape = shapes[i];
            d[i].data = data[i];
            d[i].nbytes = sizes[i];
        }
        CHECK_ERR(ptwm_st_write(src, d, NT, NULL, 0, &err), &err, PTWM_OK, NULL);
        o.threads = 2;
        o.force = 1;
        CHECK_ERR(ptwm_compress_checkpoint(src, pt, &o, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_decompress_checkpoint(pt, back, &o, &err), &err, PTWM_OK, NULL);
        restored = (char *)malloc(strlen(back) + 40);
        sprintf(restored, "%s/whole.safetensors", back);
        a = tu_read_file(src, &la);
        b = tu_read_file(restored, &lb);
        CHECK_MSG(a && b && la == lb && memcmp(a, b, la) == 0, "restored file differs (%zu, %zu bytes)",
                  la, lb);
        free(a);
        free(b);
        free(restored);
    }

    free(blob);
    for (i = 0; i < NT; i++) free(data[i]);
    return tu_finish("test_decode_to_file");
}
