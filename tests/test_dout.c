/* Direct output (src/platform/dout.c) and the writer over it.
 *
 * The blocks: a file begun through its own descriptor at an unaligned end
 * is taken over, appended to in pieces of every size around the block and
 * alignment sizes, read back at ranges that lie before the takeover, in
 * blocks written long ago, in blocks in flight and in the block being
 * filled, finished, patched through the descriptor, and then holds exactly
 * the bytes given. Run through the page cache (any file system), direct
 * where the file system allows it, and with every direct write refused
 * (each block then written through the descriptor); a block that neither
 * descriptor takes is an error naming the file; PTWM_DIRECT_IO=0 turns
 * it off.
 *
 * Rooms: bytes coded in place in the staging memory (ptwm_dout_room, then
 * ptwm_dout_append_room), beside plain appends, over more than twice the
 * staging blocks, so that rooms run past the last block into the tail and
 * wrap; each room is first filled with scratch past what is appended, as
 * the codec leaves it. Every read back, of blocks a room reached into and
 * of older ones, and the file, hold exactly the bytes appended.
 *
 * The writer: a .ptwm file past the direct-output size, with payloads that
 * repeat (small ones, kept in memory; large ones, read back from blocks in
 * memory and from the disk), holds the same bytes as the in-memory image of
 * the same tensors (equal payloads shared the same way), and decodes to
 * them. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dout.h"
#include "testutil.h"

#define HEAD 12345                      /* bytes written before the takeover */
#define TOTAL ((size_t)9 << 20)         /* bytes in all: several blocks */

/* n random bytes (n a multiple of 8) from seed st. */
static uint8_t *random_bytes(size_t n, uint64_t st) {
    uint8_t *e = (uint8_t *)malloc(n);
    size_t i;
    for (i = 0; e && i < n; i += 8) {
        uint64_t v = tu_rand(&st);
        memcpy(e + i, &v, 8);
    }
    return e;
}

/* Read [off, off + len) through d and compare. */
static void check_read(ptwm_dout *d, const uint8_t *want, uint64_t off, size_t len,
                       const char *what) {
    uint8_t *got = (uint8_t *)malloc(len ? len : 1);
    ptwm_err err;
    ptwm_error rc = ptwm_dout_pread(d, got, len, off, &err);
    CHECK_MSG(rc == PTWM_OK && memcmp(got, want + off, len) == 0, "%s: %zu bytes at %llu (%s)",
              what, len, (unsigned long long)off, rc ? err.message : "bytes differ");
    free(got);
}

typedef enum { MODE_BUFFERED, MODE_DIRECT, MODE_REFUSED } mode;

static void run_blocks(mode m, const uint8_t *want) {
    static const size_t pieces[] = {1, 4095, 4096, 4097, 100000, (2 << 20) + 3, 7, (2 << 20) - 7};
    const char *names[] = {"page cache", "direct", "refused"};
    char *path = tu_tmp_path("dout.bin");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ptwm_dout *d = NULL;
    ptwm_err err;
    ptwm_error rc;
    size_t pos = HEAD, k = 0;
    uint8_t *back;
    size_t len;
    uint8_t v[4] = {0xde, 0xad, 0xbe, 0xef};
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, want, HEAD) == HEAD);
    rc = m == MODE_BUFFERED ? ptwm_dout_open_buffered(fd, path, "dout.bin", HEAD, &d, &err)
                            : ptwm_dout_open(fd, path, "dout.bin", HEAD, &d, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (!d) {
        /* Only direct writes may be missing, on a file system without them;
         * the page-cache run covers the blocks there. */
        CHECK_MSG(m != MODE_BUFFERED, "the page-cache blocks could not be had");
        fprintf(stderr, "note: no direct writes on this file system (%s run not made)\n",
                names[m]);
        close(fd);
        return;
    }
    if (m == MODE_REFUSED) ptwm_dout_refuse_direct(d);
    check_read(d, want, 100, 1000, "before the takeover");
    check_read(d, want, 8000, HEAD - 8000, "across the takeover, staged");
    while (pos < TOTAL) {
        size_t n = pieces[k++ % (sizeof(pieces) / sizeof(pieces[0]))];
        n = PTWM_MIN(n, TOTAL - pos);
        CHECK_ERR(ptwm_dout_append(d, want + pos, n, &err), &err, PTWM_OK, NULL);
        pos += n;
        if (pos > (6 << 20) && pos - n <= (6 << 20)) {
            check_read(d, want, 10, 3 << 20, "from before the takeover into older blocks");
            check_read(d, want, (1 << 20) + 5, 1 << 20, "a block written long ago");
            check_read(d, want, pos - (3 << 20), 3 << 20, "blocks in flight and staged");
            check_read(d, want, pos - 10, 10, "the last bytes");
        }
    }
    check_read(d, want, 0, TOTAL, "everything, before finishing");
    CHECK_ERR(ptwm_dout_finish(d, &err), &err, PTWM_OK, NULL);
    check_read(d, want, TOTAL - 5000, 5000, "the tail, after finishing");
    CHECK_ERR(ptwm_dout_pread(d, v, 2, TOTAL - 1, &err), &err, PTWM_ERR_INVALID_ARG, "past the end");
    ptwm_dout_free(d);
    /* The descriptor writes anywhere afterwards (a header patched last). */
    CHECK(pwrite(fd, v, 4, 8) == 4);
    close(fd);
    back = tu_read_file(path, &len);
    CHECK_MSG(back && len == TOTAL, "%s: file is %zu bytes, expected %zu", names[m], len, TOTAL);
    if (back && len == TOTAL) {
        CHECK(memcmp(back + 8, v, 4) == 0);
        CHECK_MSG(memcmp(back, want, 8) == 0 && memcmp(back + 12, want + 12, TOTAL - 12) == 0,
                  "%s: file bytes differ from those appended", names[m]);
    }
    free(back);
    unlink(path);
}

#define ROOM_TOTAL ((size_t)40 << 20)

static void run_rooms(mode m) {
    static const size_t pieces[] = {700000, 1, 3 << 20, 4096, 1234567, (2 << 20) - 5, 99};
    uint8_t *want = random_bytes(ROOM_TOTAL, 99);
    char *path = tu_tmp_path("dout-room.bin");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ptwm_dout *d = NULL;
    ptwm_err err;
    size_t pos = HEAD, k = 0, rooms = 0, wrapped = 0, len;
    uint8_t *back;
    CHECK(fd >= 0 && want);
    if (fd < 0 || !want) return;
    CHECK(write(fd, want, HEAD) == HEAD);
    CHECK_ERR(m == MODE_BUFFERED ? ptwm_dout_open_buffered(fd, path, "dout-room.bin", HEAD, &d, &err)
                                 : ptwm_dout_open(fd, path, "dout-room.bin", HEAD, &d, &err),
              &err, PTWM_OK, NULL);
    if (!d) {
        CHECK(m != MODE_BUFFERED);
        close(fd);
        free(want);
        return;
    }
    while (pos < ROOM_TOTAL) {
        size_t n = PTWM_MIN(pieces[k % (sizeof(pieces) / sizeof(pieces[0]))], ROOM_TOTAL - pos);
        if (k++ % 3 != 2) {
            uint8_t *at = NULL, *second;
            size_t room = 0, want_room = n + ((size_t)3 << 20);
            CHECK_ERR(ptwm_dout_room(d, want_room, &at, &room, &err), &err, PTWM_OK, NULL);
            if (!at || room < n) {
                CHECK_MSG(room >= PTWM_MIN(want_room, PTWM_DOUT_TAIL), "a room of %zu bytes", room);
                CHECK_ERR(ptwm_dout_append(d, want + pos, n, &err), &err, PTWM_OK, NULL);
            } else {
                memset(at, 0xA5, room); /* scratch, as the stages leave it */
                memcpy(at, want + pos, n);
                /* a second call gives the same place (nothing appended between) */
                CHECK(ptwm_dout_room(d, n, &second, &room, &err) == PTWM_OK && second == at);
                CHECK_ERR(ptwm_dout_append_room(d, n, &err), &err, PTWM_OK, NULL);
                rooms++;
                /* the staging blocks start at HEAD's page, eight of 2 MiB */
                wrapped += (pos - (HEAD & ~4095)) / (16 << 20) !=
                           (pos + n - 1 - (HEAD & ~4095)) / (16 << 20);
            }
        } else {
            CHECK_ERR(ptwm_dout_append(d, want + pos, n, &err), &err, PTWM_OK, NULL);
        }
        pos += n;
        check_read(d, want, pos - PTWM_MIN(pos, (size_t)5 << 20), PTWM_MIN(pos, (size_t)5 << 20),
                   "the last 5 MiB, after a room");
        if (k % 5 == 0) check_read(d, want, pos / 3, PTWM_MIN(pos - pos / 3, (size_t)3 << 20), "older blocks");
    }
    CHECK_MSG(rooms > 20 && wrapped > 0, "%zu rooms, %zu past the last block", rooms, wrapped);
    CHECK_ERR(ptwm_dout_finish(d, &err), &err, PTWM_OK, NULL);
    ptwm_dout_free(d);
    close(fd);
    back = tu_read_file(path, &len);
    CHECK_MSG(back && len == ROOM_TOTAL && memcmp(back, want, ROOM_TOTAL) == 0,
              "rooms: the file differs from the bytes appended (%zu bytes)", len);
    free(back);
    free(want);
    unlink(path);
}

/* A block neither descriptor takes (the caller's is read-only here): the
 * write's failure comes back from an append or the finish, naming the
 * file, and freeing afterwards is safe. Every byte lies in whole aligned
 * blocks, so the failure can only be a block's. */
static void run_failing(const uint8_t *want) {
    char *path = tu_tmp_path("dout-ro.bin");
    int fd;
    ptwm_dout *d = NULL;
    ptwm_err err;
    ptwm_error rc = PTWM_OK;
    size_t pos = 8192;
    CHECK(tu_write_file(path, want, pos) == 0);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK_ERR(ptwm_dout_open_buffered(fd, path, "dout-ro.bin", pos, &d, &err), &err, PTWM_OK, NULL);
    CHECK(d != NULL);
    if (d) {
        ptwm_dout_refuse_direct(d);
        while (!rc && pos + (1 << 20) <= TOTAL) {
            rc = ptwm_dout_append(d, want + pos, 1 << 20, &err);
            pos += 1 << 20;
        }
        if (!rc) rc = ptwm_dout_finish(d, &err);
        CHECK_ERR(rc, &err, PTWM_ERR_IO, "dout-ro.bin: write at offset");
        ptwm_dout_free(d);
    }
    close(fd);
}

/* ---- the writer ----------------------------------------------------------- */

#define NT 64
#define UNIQUE 250000                   /* most tensors: 8 MiB of them by tensor 34 */
#define NOISE ((size_t)16 << 20)
#define LARGE_AT 14600000               /* past every unique tensor's bytes */
#define SMALL_AT 15700000

typedef struct wtensors {
    ptwm_tensor_desc d[NT];
    char names[NT][16];
    uint64_t shape[NT][1];
} wtensors;

/* U8 tensors of noise (stored as they are), past PTWM_DOUT_MIN, with a
 * small and a 1 MiB tensor first seen past it and then repeated: the
 * small one's repeats are compared from memory, the large one's from the
 * blocks still in memory (tensor 37) and from the disk (tensor 63). */
static void make_tensors(wtensors *t, const uint8_t *noise) {
    size_t i, off = 0;
    for (i = 0; i < NT; i++) {
        int small = i == 40 || i == 41 || i == 50 || i == 62, large = i == 36 || i == 37 || i == 63;
        size_t n = small ? 1000 : large ? (size_t)1 << 20 : UNIQUE;
        snprintf(t->names[i], sizeof(t->names[i]), "t%02zu", i);
        t->shape[i][0] = n;
        memset(&t->d[i], 0, sizeof(t->d[i]));
        t->d[i].name = t->names[i];
        t->d[i].dtype = PTWM_DTYPE_U8;
        t->d[i].ndim = 1;
        t->d[i].shape = t->shape[i];
        t->d[i].nbytes = n;
        t->d[i].data = noise + (small ? SMALL_AT : large ? LARGE_AT : off);
        if (!small && !large) off += n;
    }
}

static void run_writer(void) {
    wtensors t;
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_writer *w;
    ptwm_err err;
    void *img = NULL;
    size_t img_len = 0, len = 0, i, raw = 0;
    uint8_t *file, *noise = random_bytes(NOISE, 11);
    char *path = tu_tmp_path("dout.ptwm");
    make_tensors(&t, noise);
    for (i = 0; i < NT; i++) raw += t.d[i].nbytes;
    p.threads = 2;
    CHECK_ERR(ptwm_compress_blob(t.d, NT, NULL, &p, &img, &img_len, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_open_file(path, &p, &w, &err), &err, PTWM_OK, NULL);
    for (i = 0; i < NT; i++)
        CHECK_ERR(ptwm_writer_add(w, &t.d[i], NULL, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_writer_finish(w, &err), &err, PTWM_OK, NULL);
    file = tu_read_file(path, &len);
    CHECK_MSG(file && len == img_len && memcmp(file, img, len) == 0,
              "file of %zu bytes, image of %zu: not the same bytes", len, img_len);
    /* The large repeats' 2 MiB are not in the file again (the small ones'
     * sharing shows in the bytes equal to the image's, shared in memory). */
    CHECK_MSG(len > PTWM_DOUT_MIN && len < raw - (2 << 20) + (64 << 10),
              "file of %zu bytes from %zu: repeated payloads written again", len, raw);
    {
        ptwm_reader *r = NULL;
        CHECK_ERR(ptwm_reader_open(path, &r, &err), &err, PTWM_OK, NULL);
        for (i = 0; r && i < NT; i++) {
            uint8_t *out = (uint8_t *)malloc(t.d[i].nbytes);
            CHECK_ERR(ptwm_reader_decode(r, i, out, t.d[i].nbytes, &err), &err, PTWM_OK, NULL);
            CHECK_MSG(memcmp(out, t.d[i].data, t.d[i].nbytes) == 0, "tensor %zu decodes wrong", i);
            free(out);
        }
        ptwm_reader_close(r);
    }
    free(file);
    free(noise);
    ptwm_free(img);
}

/* PTWM_DIRECT_IO=0 keeps every write in the page cache: no direct output
 * is opened, whatever the file system. */
static void run_env_off(const uint8_t *want) {
    char *path = tu_tmp_path("dout-env.bin");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ptwm_dout *d = (ptwm_dout *)1;
    ptwm_err err;
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, want, HEAD) == HEAD);
    setenv("PTWM_DIRECT_IO", "0", 1);
    CHECK_ERR(ptwm_dout_open(fd, path, "dout-env.bin", HEAD, &d, &err), &err, PTWM_OK, NULL);
    CHECK_MSG(d == NULL, "PTWM_DIRECT_IO=0 and a direct output was opened");
    ptwm_dout_free(d == (ptwm_dout *)1 ? NULL : d);
    unsetenv("PTWM_DIRECT_IO");
    close(fd);
}

int main(void) {
    uint8_t *want = random_bytes(TOTAL, 7);
    run_blocks(MODE_BUFFERED, want);
    run_blocks(MODE_DIRECT, want);
    run_blocks(MODE_REFUSED, want);
    run_rooms(MODE_BUFFERED);
    run_rooms(MODE_DIRECT);
    run_failing(want);
    run_env_off(want);
    run_writer();
    free(want);
    return tu_finish("dout");
}
