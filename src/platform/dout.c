/* Direct output (see dout.h). */
#include "dout.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include "fileio.h"
#include "flusher.h"
#include "iothread.h"

/* Offsets, lengths and addresses of direct writes are multiples of this
 * (the largest logical block size in common use). */
#define DOUT_ALIGN ((size_t)4096)
#define DOUT_HUGE ((size_t)2 << 20)
/* One block fills while the others are on their way to the disk. */
#define DOUT_NBUF 8

typedef struct dblock {
    struct ptwm_dout *d;
    uint8_t *p;
    size_t len;
    uint64_t off;
    int fd;              /* the descriptor its write went to */
    int busy;            /* queued and not yet written (cleared with a release store) */
    ptwm_error rc;       /* its write's failure, read once busy is 0 */
    ptwm_err err;
} dblock;

struct ptwm_dout {
    int fd, dfd;         /* the caller's descriptor; the direct one (-1: none) */
    const char *path;
    int direct;          /* 0 once a direct write was refused (atomic) */
    ptwm_io *io;
    ptwm_flusher *fl;    /* flushes what the blocks wrote as the file grows */
    void *raw;           /* the allocation the aligned blocks (and the tail) are cut from */
    uint8_t *tail;       /* after the last block: what a room past it holds */
    dblock blk[DOUT_NBUF];
    int cur;             /* the block being filled */
    size_t fill;         /* its bytes so far, from file offset blk[cur].off */
};

/* On the writing thread: a refused direct write is written through the
 * page cache, and so is every later block; a failure there is the file's. */
static void block_done(void *arg, ptwm_error rc, const ptwm_err *e) {
    dblock *b = (dblock *)arg;
    ptwm_dout *d = b->d;
    if (rc && b->fd == d->dfd) {
        __atomic_store_n(&d->direct, 0, __ATOMIC_RELAXED);
        rc = ptwm_pwrite_full(d->fd, b->p, b->len, b->off, d->path, &b->err);
    } else if (rc) {
        b->err = *e;
    }
    if (!rc) ptwm_flusher_add(d->fl, b->len);
    b->rc = rc;
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

/* Wait for block i's write; its failure, if any (reported once). */
static ptwm_error block_wait(ptwm_dout *d, int i, ptwm_err *err) {
    dblock *b = &d->blk[i];
    ptwm_error rc;
    ptwm_io_wait(d->io, &b->busy);
    rc = b->rc;
    if (rc && err) *err = b->err;
    b->rc = PTWM_OK;
    return rc;
}

static ptwm_error wait_all(ptwm_dout *d, ptwm_err *err) {
    ptwm_error rc = PTWM_OK, r;
    int i;
    for (i = 0; i < DOUT_NBUF; i++)
        if ((r = block_wait(d, i, rc ? NULL : err)) && !rc) rc = r;
    return rc;
}

/* Queue the first len bytes of the current block (len a multiple of DOUT_ALIGN). */
static ptwm_error submit(ptwm_dout *d, size_t len, ptwm_err *err) {
    dblock *b = &d->blk[d->cur];
    void *p = b->p;
    int fd = __atomic_load_n(&d->direct, __ATOMIC_RELAXED) ? d->dfd : d->fd;
    ptwm_error rc;
    b->fd = fd;
    b->len = len;
    b->busy = 1;
    if ((rc = ptwm_io_put(d->io, fd, d->path, &p, &len, 1, b->off, block_done, b, err))) {
        b->busy = 0;
        return rc;
    }
    return PTWM_OK;
}

/* flags: the direct descriptor's open flags beyond O_WRONLY. */
static ptwm_error dout_open(int fd, const char *open_path, const char *name, uint64_t pos,
                            int flags, ptwm_dout **out, ptwm_err *err) {
    ptwm_dout *d;
    uint8_t *p;
    uint64_t start = pos & ~(uint64_t)(DOUT_ALIGN - 1);
    ptwm_error rc;
    int i;
    *out = NULL;
    if (!(d = (ptwm_dout *)ptwm_calloc(1, sizeof(*d))))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "%s: out of memory", name);
    d->fd = fd;
    d->path = name;
    d->direct = 1;
    /* A file system without direct writes refuses the flag here. */
    if ((d->dfd = flags < 0 ? -1 : open(open_path, O_WRONLY | O_CLOEXEC | flags)) < 0) {
        ptwm_free(d);
        return PTWM_OK;
    }
    /* Blocks on huge pages: a direct write pins its block's pages, one
     * at a time (1.4% of a one-thread compress on 4 KiB pages). */
    if (!(d->raw = ptwm_malloc(DOUT_NBUF * PTWM_DOUT_BLOCK + PTWM_DOUT_TAIL + DOUT_HUGE)) ||
        ptwm_io_start(&d->io, NULL)) {
        ptwm_dout_free(d);
        return PTWM_OK;
    }
    p = (uint8_t *)d->raw + (DOUT_HUGE - (uintptr_t)d->raw % DOUT_HUGE) % DOUT_HUGE;
    ptwm_advise_huge(p, DOUT_NBUF * PTWM_DOUT_BLOCK + PTWM_DOUT_TAIL);
    for (i = 0; i < DOUT_NBUF; i++) {
        d->blk[i].d = d;
        d->blk[i].p = p + (size_t)i * PTWM_DOUT_BLOCK;
    }
    d->tail = p + (size_t)DOUT_NBUF * PTWM_DOUT_BLOCK;
    d->blk[0].off = start;
    d->fill = (size_t)(pos - start);
    if ((rc = ptwm_pread_full(fd, d->blk[0].p, d->fill, start, name, err))) {
        ptwm_dout_free(d);
        return rc;
    }
    ptwm_flusher_start(fd, name, pos, &d->fl);
    *out = d;
    return PTWM_OK;
}

ptwm_error ptwm_dout_open(int fd, const char *open_path, const char *name, uint64_t pos,
                          ptwm_dout **out, ptwm_err *err) {
#ifdef O_DIRECT
    const char *env = getenv("PTWM_DIRECT_IO");
    return dout_open(fd, open_path, name, pos, env && strcmp(env, "0") == 0 ? -1 : O_DIRECT, out,
                     err);
#else
    return dout_open(fd, open_path, name, pos, -1, out, err);
#endif
}

ptwm_error ptwm_dout_open_buffered(int fd, const char *open_path, const char *name, uint64_t pos,
                                   ptwm_dout **out, ptwm_err *err) {
    return dout_open(fd, open_path, name, pos, 0, out, err);
}

void ptwm_dout_refuse_direct(ptwm_dout *d) {
    int ro = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ro >= 0) {
        dup2(ro, d->dfd);
        close(ro);
    }
}

ptwm_error ptwm_dout_append(ptwm_dout *d, const void *src, size_t n, ptwm_err *err) {
    const uint8_t *s = (const uint8_t *)src;
    ptwm_error rc;
    while (n) {
        size_t take = PTWM_MIN(n, PTWM_DOUT_BLOCK - d->fill);
        uint64_t next_off;
        uint8_t *to = d->blk[d->cur].p + d->fill;
        if (to != s) memcpy(to, s, take); /* (equal: written there by a room's user) */
        d->fill += take;
        s += take;
        n -= take;
        if (d->fill < PTWM_DOUT_BLOCK) break;
        if ((rc = submit(d, PTWM_DOUT_BLOCK, err))) return rc;
        next_off = d->blk[d->cur].off + PTWM_DOUT_BLOCK;
        d->cur = (d->cur + 1) % DOUT_NBUF;
        d->fill = 0;
        rc = block_wait(d, d->cur, err);
        d->blk[d->cur].off = next_off;
        if (rc) return rc;
    }
    return PTWM_OK;
}

ptwm_error ptwm_dout_room(ptwm_dout *d, size_t want, uint8_t **at, size_t *room, ptwm_err *err) {
    uint8_t *p = d->blk[d->cur].p + d->fill, *end = d->tail + PTWM_DOUT_TAIL;
    size_t r = PTWM_MIN(want, (size_t)(end - p));
    int i;
    *at = NULL;
    *room = 0;
    /* The blocks the room reaches into: their writes done, and what they
     * held no longer read from them (ptwm_dout_pread goes to the file). */
    for (i = d->cur + 1; i < DOUT_NBUF && d->blk[i].p < p + r; i++) {
        ptwm_error rc = block_wait(d, i, err);
        d->blk[i].len = 0;
        if (rc) return rc;
    }
    *at = p;
    *room = r;
    return PTWM_OK;
}

ptwm_error ptwm_dout_append_room(ptwm_dout *d, size_t n, ptwm_err *err) {
    return ptwm_dout_append(d, d->blk[d->cur].p + d->fill, n, err);
}

/* The bytes block i holds: every block but the current one keeps what it
 * was last given until it is reused. */
static size_t block_held(const ptwm_dout *d, int i) {
    return i == d->cur ? d->fill : d->blk[i].len;
}

/* The block holding file offset `at`, or -1 if none does any more (its
 * buffer was reused: the write of those bytes is done). */
static int block_at(const ptwm_dout *d, uint64_t at) {
    int i;
    for (i = 0; i < DOUT_NBUF; i++)
        if (at >= d->blk[i].off && at - d->blk[i].off < block_held(d, i)) return i;
    return -1;
}

ptwm_error ptwm_dout_pread(ptwm_dout *d, void *dst, size_t len, uint64_t off, ptwm_err *err) {
    uint8_t *out = (uint8_t *)dst;
    uint64_t end = d->blk[d->cur].off + d->fill;
    ptwm_error rc;
    if (off > end || len > end - off)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: read of %zu bytes at %llu past the end",
                         d->path, len, (unsigned long long)off);
    /* From the blocks still in memory where they hold it (no waiting, no
     * disk), else from the file, whose older blocks are all written. */
    while (len) {
        int i = block_at(d, off);
        size_t take;
        if (i >= 0) {
            const dblock *b = &d->blk[i];
            size_t at = (size_t)(off - b->off);
            take = PTWM_MIN(len, block_held(d, i) - at);
            memcpy(out, b->p + at, take);
        } else {
            uint64_t next = end;
            int k;
            for (k = 0; k < DOUT_NBUF; k++)
                if (d->blk[k].off > off && d->blk[k].off < next) next = d->blk[k].off;
            take = (size_t)PTWM_MIN((uint64_t)len, next - off);
            if ((rc = ptwm_pread_full(d->fd, out, take, off, d->path, err))) return rc;
        }
        out += take;
        off += take;
        len -= take;
    }
    return PTWM_OK;
}

ptwm_error ptwm_dout_finish(ptwm_dout *d, ptwm_err *err) {
    size_t whole = d->fill & ~(DOUT_ALIGN - 1);
    dblock *b = &d->blk[d->cur];
    ptwm_error rc = PTWM_OK, r;
    if (whole) rc = submit(d, whole, err);
    if ((r = wait_all(d, rc ? NULL : err)) && !rc) rc = r;
    if ((r = ptwm_flusher_stop(d->fl, rc ? NULL : err)) && !rc) rc = r;
    d->fl = NULL;
    /* The last part of a block goes through the page cache. */
    if (!rc && d->fill > whole)
        rc = ptwm_pwrite_full(d->fd, b->p + whole, d->fill - whole, b->off + whole, d->path, err);
    if (!rc) {
        b->off += d->fill;
        d->fill = 0;
    }
    return rc;
}

void ptwm_dout_free(ptwm_dout *d) {
    if (!d) return;
    if (d->io) {
        (void)wait_all(d, NULL);
        ptwm_io_stop(d->io);
        (void)ptwm_flusher_stop(d->fl, NULL);
    }
    if (d->dfd >= 0) close(d->dfd);
    ptwm_free(d->raw);
    ptwm_free(d);
}
