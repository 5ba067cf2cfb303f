/* File helpers: mapping, positioned reads, full writes, atomic replacement. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "tmpout.h"

ptwm_error ptwm_open_read(const char *path, int *fd, uint64_t *size, ptwm_err *err) {
    struct stat st;
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever.
     * Only regular files are accepted, and for them the flag means nothing. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0) {
        int e = errno;
        return ptwm_fail(err, e == ENOENT ? PTWM_ERR_NOT_FOUND : PTWM_ERR_IO, "%s: %s", path,
                         strerror(e));
    }
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return ptwm_fail(err, PTWM_ERR_IO, "%s: stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(f);
        return ptwm_fail(err, PTWM_ERR_IO, "%s: is a directory, expected a file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return ptwm_fail(err, PTWM_ERR_IO,
                         "%s: not a regular file (a pipe, socket or device), expected a file",
                         path);
    }
    *fd = f;
    if (size) *size = (uint64_t)st.st_size;
    return PTWM_OK;
}

ptwm_error ptwm_map_file(const char *path, ptwm_map *m, ptwm_err *err) {
    int fd = -1;
    uint64_t size = 0;
    ptwm_error rc;
    memset(m, 0, sizeof(*m));
    rc = ptwm_open_read(path, &fd, &size, err);
    if (rc) return rc;
    if (size > SIZE_MAX) {
        close(fd);
        return ptwm_fail(err, PTWM_ERR_LIMIT, "%s: %llu bytes do not fit the address space",
                         path, (unsigned long long)size);
    }
    if (size > 0) {
        void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return ptwm_fail(err, PTWM_ERR_IO, "%s: mmap of %llu bytes: %s", path,
                             (unsigned long long)size, strerror(e));
        }
        m->base = p;
        m->data = (const uint8_t *)p;
    }
    m->size = size;
    close(fd); /* the mapping keeps the file alive */
    return PTWM_OK;
}

void ptwm_advise_huge(void *p, size_t len) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + len) & ~(huge - 1);
    if (p && e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* advice: failure is fine */
#else
    (void)p;
    (void)len;
#endif
}

/* Pages already mapped (a buffer reused from call to call) are left alone:
 * populating them again still walks and pins each page, about 20 times the
 * cost of asking whether they are there (docs/SCALING.md, "A reused image"). */
#define POPULATE_PIECE 512
void ptwm_populate(void *p, size_t len) {
#ifdef MADV_POPULATE_WRITE
    const uintptr_t page = 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + len) & ~(page - 1);
    unsigned char vec[POPULATE_PIECE];
    for (; p && a < e; a += POPULATE_PIECE * page) {
        size_t n = PTWM_MIN((size_t)(e - a), POPULATE_PIECE * (size_t)page), k = 0;
        if (mincore((void *)a, n, vec) == 0)
            while (k < n / page && (vec[k] & 1)) k++;
        if (k < n / page) (void)madvise((void *)a, n, MADV_POPULATE_WRITE); /* failure is fine */
    }
#else
    (void)p;
    (void)len;
#endif
}

void ptwm_unmap(ptwm_map *m) {
    if (m && m->base) munmap(m->base, (size_t)m->size);
    if (m) memset(m, 0, sizeof(*m));
}

ptwm_error ptwm_pread_full(int fd, void *dst, size_t len, uint64_t off, const char *path,
                           ptwm_err *err) {
    uint8_t *p = (uint8_t *)dst;
    while (len > 0) {
        /* Bounded pieces: some kernels cap a single read near 2 GiB. */
        size_t piece = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t n;
        if (off > (uint64_t)INT64_MAX)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: offset %llu out of range",
                             path ? path : "(file)", (unsigned long long)off);
        n = pread(fd, p, piece, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return ptwm_fail(err, PTWM_ERR_IO, "%s: read at offset %llu: %s",
                             path ? path : "(file)", (unsigned long long)off, strerror(errno));
        }
        if (n == 0)
            return ptwm_fail(err, PTWM_ERR_TRUNCATED,
                             "%s: file ends at offset %llu, %zu more bytes expected",
                             path ? path : "(file)", (unsigned long long)off, len);
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return PTWM_OK;
}

ptwm_error ptwm_pwrite_full(int fd, const void *src, size_t len, uint64_t off, const char *path,
                            ptwm_err *err) {
    const uint8_t *p = (const uint8_t *)src;
    while (len > 0) {
        size_t piece = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t n;
        if (off > (uint64_t)INT64_MAX - piece)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: offset %llu out of range",
                             path ? path : "(file)", (unsigned long long)off);
        n = pwrite(fd, p, piece, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return ptwm_fail(err, PTWM_ERR_IO, "%s: write at offset %llu: %s",
                             path ? path : "(file)", (unsigned long long)off, strerror(errno));
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return PTWM_OK;
}

ptwm_error ptwm_pwritev_full(int fd, void *const *bufs, const size_t *lens, size_t n, uint64_t off,
                             const char *path, ptwm_err *err) {
    struct iovec iov[PTWM_WRITEV_MAX];
    size_t i, first = 0, total = 0;
    if (n > PTWM_WRITEV_MAX)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: %zu pieces in one write (max %d)",
                         path ? path : "(file)", n, PTWM_WRITEV_MAX);
    for (i = 0; i < n; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = lens[i];
        total += lens[i];
    }
    if (off > (uint64_t)INT64_MAX - total)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: offset %llu out of range",
                         path ? path : "(file)", (unsigned long long)off);
    /* A call writes at most about 2 GiB (Linux); the loop takes short writes. */
    while (first < n) {
        ssize_t got = pwritev(fd, iov + first, (int)(n - first), (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return ptwm_fail(err, PTWM_ERR_IO, "%s: write at offset %llu: %s",
                             path ? path : "(file)", (unsigned long long)off, strerror(errno));
        }
        if (got == 0 && total)
            return ptwm_fail(err, PTWM_ERR_IO, "%s: write at offset %llu wrote nothing",
                             path ? path : "(file)", (unsigned long long)off);
        off += (uint64_t)got;
        total -= (size_t)got;
        while (first < n && (size_t)got >= iov[first].iov_len) got -= (ssize_t)iov[first++].iov_len;
        if (first < n) {
            iov[first].iov_base = (uint8_t *)iov[first].iov_base + got;
            iov[first].iov_len -= (size_t)got;
        }
    }
    return PTWM_OK;
}

void ptwm_allocate_range(int fd, uint64_t off, uint64_t len) {
#if defined(__linux__)
    if (len && off <= (uint64_t)INT64_MAX && len <= (uint64_t)INT64_MAX - off)
        (void)fallocate(fd, 0, (off_t)off, (off_t)len);
#else
    (void)fd;
    (void)off;
    (void)len;
#endif
}

void ptwm_start_writeback(int fd, uint64_t off, uint64_t len) {
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    /* Advice only: an error here shows again at the fsync that counts. */
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
    (void)off;
    (void)len;
#endif
}

ptwm_error ptwm_write_full(int fd, const void *src, size_t len, const char *path, ptwm_err *err) {
    const uint8_t *p = (const uint8_t *)src;
    while (len > 0) {
        size_t piece = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
        ssize_t n = write(fd, p, piece);
        if (n < 0) {
            if (errno == EINTR) continue;
            return ptwm_fail(err, PTWM_ERR_IO, "%s: write: %s", path ? path : "(file)",
                             strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
    return PTWM_OK;
}

char *ptwm_realpath(const char *path) {
    char *r = realpath(path, NULL), *out;
    int e = errno;
    if (!r) return NULL;
    out = ptwm_strdup(r);
    free(r); /* realpath's buffer is the C library's */
    errno = out ? e : ENOMEM;
    return out;
}

char *ptwm_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *out = ptwm_malloc(a + (size_t)slash + b + 1);
    if (!out) return NULL;
    memcpy(out, dir, a);
    if (slash) out[a] = '/';
    memcpy(out + a + (size_t)slash, name, b + 1);
    return out;
}

ptwm_error ptwm_atomic_open(const char *path, ptwm_atomic_file *f, ptwm_err *err) {
    size_t n = strlen(path);
    int e;
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    f->final_path = ptwm_malloc(n + 1);
    f->tmp_path = ptwm_malloc(n + 16);
    if (!f->final_path || !f->tmp_path) {
        ptwm_atomic_abort(f);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(f->final_path, path, n + 1);
    /* Same directory as the target, so rename() is atomic (same filesystem). */
    snprintf(f->tmp_path, n + 16, "%s.tmp-XXXXXX", path);
    if ((e = ptwm_tmp_create(f->tmp_path, &f->fd)) != 0) {
        ptwm_free(f->tmp_path);
        f->tmp_path = NULL;
        ptwm_atomic_abort(f);
        return ptwm_fail(err, e == ENOMEM ? PTWM_ERR_NOMEM : PTWM_ERR_IO,
                         "%s: cannot create temporary file: %s", path,
                         e == EINTR ? "interrupted by a signal" : strerror(e));
    }
    /* mkstemp creates 0600; give the file the usual permissions. */
    {
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(f->fd, 0666 & ~mask) != 0) { /* not fatal: the file is still correct */ }
    }
    return PTWM_OK;
}

/* fsync an open file or directory; file systems that cannot sync a directory say EINVAL. */
static int sync_fd(int fd) {
    return fsync(fd) == 0 || errno == EINVAL || errno == EROFS ? 0 : -1;
}

ptwm_error ptwm_sync_path(const char *path, ptwm_err *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), e;
    if (fd < 0 || sync_fd(fd) != 0) {
        e = errno;
        if (fd >= 0) close(fd);
        return ptwm_fail(err, PTWM_ERR_IO, "%s: fsync: %s", path, strerror(e));
    }
    close(fd);
    return PTWM_OK;
}

char *ptwm_parent_dir(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    size_t n = slash == path ? 1 : slash ? (size_t)(slash - path) : 1;
    char *dir = (char *)ptwm_malloc(n + 1);
    if (!dir) return NULL;
    memcpy(dir, slash ? path : ".", n);
    dir[n] = 0;
    if (base) *base = slash ? slash + 1 : path;
    return dir;
}

ptwm_error ptwm_sync_parent(const char *path, ptwm_err *err) {
    char *dir = ptwm_parent_dir(path, NULL);
    ptwm_error rc;
    if (!dir) return ptwm_fail(err, PTWM_ERR_NOMEM, "%s: out of memory", path);
    rc = ptwm_sync_path(dir, err);
    ptwm_free(dir);
    return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void ptwm_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode))
        nftw(path, remove_entry, 32, FTW_DEPTH | FTW_PHYS);
    else
        unlink(path);
}

ptwm_error ptwm_atomic_commit(ptwm_atomic_file *f, ptwm_err *err) {
    ptwm_error rc = PTWM_OK;
    /* Data on disk before the name: after a crash the target is old or whole. */
    if (sync_fd(f->fd) != 0)
        rc = ptwm_fail(err, PTWM_ERR_IO, "%s: fsync: %s", f->final_path, strerror(errno));
    if (close(f->fd) != 0 && rc == PTWM_OK)
        rc = ptwm_fail(err, PTWM_ERR_IO, "%s: close: %s", f->final_path, strerror(errno));
    f->fd = -1;
    if (rc) {
        ptwm_atomic_abort(f);
        return rc;
    }
    ptwm_tmp_lock();
    if (ptwm_tmp_cancelled())
        rc = ptwm_fail(err, PTWM_ERR_IO, "%s: interrupted by a signal", f->final_path);
    else if (rename(f->tmp_path, f->final_path) != 0)
        rc = ptwm_fail(err, PTWM_ERR_IO, "%s: rename from %s: %s", f->final_path, f->tmp_path,
                       strerror(errno));
    else
        ptwm_tmp_drop(f->tmp_path);
    ptwm_tmp_unlock();
    if (rc) {
        ptwm_atomic_abort(f);
        return rc;
    }
    ptwm_free(f->tmp_path);
    f->tmp_path = NULL;
    rc = ptwm_sync_parent(f->final_path, err);
    ptwm_free(f->final_path);
    f->final_path = NULL;
    return rc;
}

void ptwm_atomic_abort(ptwm_atomic_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp_path) ptwm_tmp_remove(f->tmp_path);
    ptwm_free(f->tmp_path);
    ptwm_free(f->final_path);
    f->tmp_path = NULL;
    f->final_path = NULL;
}

ptwm_error ptwm_read_small_file(const char *path, uint64_t max, char **out, size_t *len,
                                ptwm_err *err) {
    int fd = -1;
    uint64_t size = 0;
    char *buf;
    ptwm_error rc = ptwm_open_read(path, &fd, &size, err);
    *out = NULL;
    if (rc) return rc;
    if (size > max) {
        close(fd);
        return ptwm_fail(err, PTWM_ERR_LIMIT, "%s: %llu bytes, more than the %llu allowed", path,
                         (unsigned long long)size, (unsigned long long)max);
    }
    buf = ptwm_malloc(size + 1);
    if (!buf) {
        close(fd);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "%s: out of memory", path);
    }
    rc = ptwm_pread_full(fd, buf, (size_t)size, 0, path, err);
    close(fd);
    if (rc) {
        ptwm_free(buf);
        return rc;
    }
    buf[size] = 0;
    *out = buf;
    if (len) *len = (size_t)size;
    return PTWM_OK;
}

ptwm_error ptwm_write_small_file(const char *path, const void *data, size_t len, const char *tail,
                                 ptwm_err *err) {
    ptwm_atomic_file f;
    ptwm_error rc = ptwm_atomic_open(path, &f, err);
    if (!rc) rc = ptwm_write_full(f.fd, data, len, path, err);
    if (!rc && tail) rc = ptwm_write_full(f.fd, tail, strlen(tail), path, err);
    if (!rc) rc = ptwm_atomic_commit(&f, err);
    ptwm_atomic_abort(&f);
    return rc;
}

int ptwm_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ptwm_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int ptwm_file_state(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOTDIR ? ENOENT : errno;
    return S_ISREG(st.st_mode) ? 0 : S_ISDIR(st.st_mode) ? EISDIR : ENOENT;
}

ptwm_error ptwm_find_file(const char *path, int *found, ptwm_err *err) {
    int e = ptwm_file_state(path);
    *found = e == 0;
    if (e == 0 || e == ENOENT) return PTWM_OK;
    return ptwm_fail(err, PTWM_ERR_IO, "'%s': %s", path, strerror(e));
}

ptwm_error ptwm_fail_shrunk(ptwm_err *err, int fd, const char *path, uint64_t expected) {
    struct stat st;
    unsigned long long now = fstat(fd, &st) == 0 ? (unsigned long long)st.st_size : 0;
    return ptwm_fail(err, PTWM_ERR_TRUNCATED,
                     "file '%s' is %llu bytes, expected %llu (it shrank while open)", path, now,
                     (unsigned long long)expected);
}

/* The cores this process may run on (as nproc counts them, so taskset and
 * cpusets are honoured). sched_getaffinity is one cheap system call, where
 * sysconf(_SC_NPROCESSORS_ONLN) opened and read /sys files on every call,
 * a cost every writer paid (docs/ARCHITECTURE.md, "Measurements behind the
 * code"). */
int ptwm_cpu_count(void) {
    long n = 0;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 256 ? 256 : (int)n);
}
