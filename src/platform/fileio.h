/* File helpers: mapping, positioned reads, full writes, atomic replacement.
 * Every function reports errno text and the path through ptwm_err. */
#ifndef PTWM_FILEIO_H
#define PTWM_FILEIO_H

#include "common.h"

typedef struct ptwm_map {
    const uint8_t *data;  /* NULL for an empty file */
    uint64_t size;
    void *base;           /* what munmap takes; NULL if nothing mapped */
} ptwm_map;

/* Map a whole file read-only. */
ptwm_error ptwm_map_file(const char *path, ptwm_map *m, ptwm_err *err);
void ptwm_unmap(ptwm_map *m);
/* Ask for huge pages over the 2 MiB-aligned part of [p, p + len) (Linux
 * transparent huge pages in madvise mode; a no-op elsewhere): a fresh
 * multi-megabyte output image otherwise takes a page fault per 4 KiB. */
void ptwm_advise_huge(void *p, size_t len);
/* Fault in the whole pages of [p, p + len) for writing, leaving their bytes
 * as they are (Linux MADV_POPULATE_WRITE; a no-op elsewhere or on failure):
 * a thread that will copy there while holding a lock then finds them mapped,
 * and the kernel's zeroing of fresh pages runs outside the lock. Pieces
 * whose pages are all mapped already are skipped. */
void ptwm_populate(void *p, size_t len);

/* Open a regular file for reading (a directory, pipe, socket or device is
 * PTWM_ERR_IO, without waiting on a FIFO); *size receives the file size. */
ptwm_error ptwm_open_read(const char *path, int *fd, uint64_t *size, ptwm_err *err);
/* Read exactly len bytes at off (loops over short reads; offsets past 4 GiB fine).
 * PTWM_ERR_TRUNCATED if the file ends first. */
ptwm_error ptwm_pread_full(int fd, void *dst, size_t len, uint64_t off, const char *path,
                           ptwm_err *err);
/* Write exactly len bytes. */
ptwm_error ptwm_write_full(int fd, const void *src, size_t len, const char *path, ptwm_err *err);
/* Write exactly len bytes at off (positional: threads may write one file at
 * once, and the file position is left alone). */
ptwm_error ptwm_pwrite_full(int fd, const void *src, size_t len, uint64_t off, const char *path,
                            ptwm_err *err);
/* Write n pieces back to back from offset off: one pwritev call for many
 * small pieces where a call per piece cost a system call and a lock of the
 * file each (loops over short writes; n up to PTWM_WRITEV_MAX). */
#define PTWM_WRITEV_MAX 64
ptwm_error ptwm_pwritev_full(int fd, void *const *bufs, const size_t *lens, size_t n, uint64_t off,
                             const char *path, ptwm_err *err);
/* Start writing bytes [off, off + len) of fd back to the disk, without
 * waiting (len 0: to the end), so the fsync that makes a file durable finds
 * little left to write. A no-op where the system has no such call. */
void ptwm_start_writeback(int fd, uint64_t off, uint64_t len);
/* Allocate the disk blocks of bytes [off, off + len) of fd, extending the
 * file to off + len if it is shorter, before they are written (Linux
 * fallocate; a no-op elsewhere or where the file system cannot). Advice
 * only: a failure shows again when the bytes are written. Writes into
 * allocated blocks skip ext4's per-block delayed allocation, and writes
 * past the end of the file the size updates. */
void ptwm_allocate_range(int fd, uint64_t off, uint64_t len);
/* Writers of large files start writeback after every this many bytes. */
#define PTWM_WRITEBACK_STEP ((uint64_t)8 << 20)

/* A file written under a temporary name in the target's directory and renamed
 * over the target on commit, so the target is never seen half-written. */
typedef struct ptwm_atomic_file {
    int fd;
    char *tmp_path;
    char *final_path;
} ptwm_atomic_file;

ptwm_error ptwm_atomic_open(const char *path, ptwm_atomic_file *f, ptwm_err *err);
/* fsync, close, rename into place, fsync the directory: durable before visible.
 * The temporary file is registered (tmpout.h) while it exists. */
ptwm_error ptwm_atomic_commit(ptwm_atomic_file *f, ptwm_err *err);
/* Close and remove the temporary file (safe after commit or on a zeroed struct). */
void ptwm_atomic_abort(ptwm_atomic_file *f);

/* Read a whole (small) file into a malloc'd buffer, NUL-terminated, capped at max bytes. */
ptwm_error ptwm_read_small_file(const char *path, uint64_t max, char **out, size_t *len,
                                ptwm_err *err);
/* Write a whole small file atomically (temporary name, then rename): `len`
 * bytes of data, then `tail` (NUL-terminated; NULL for none), such as the
 * final newline after JSON text. */
ptwm_error ptwm_write_small_file(const char *path, const void *data, size_t len, const char *tail,
                                 ptwm_err *err);
/* Join dir and name into a malloc'd path. */
char *ptwm_path_join(const char *dir, const char *name);
/* realpath(path, NULL) in the library's allocator (ptwm_free it); NULL with
 * errno set on failure. */
char *ptwm_realpath(const char *path);
int ptwm_is_dir(const char *path);
int ptwm_file_exists(const char *path);
/* 0 if path (following links) is a regular file; else an errno: ENOENT when
 * nothing is there (or not a file), EISDIR, ELOOP, EACCES... */
int ptwm_file_state(const char *path);
/* Whether path (following links) is a regular file (*found 1) or nothing is
 * there (*found 0); something there that cannot be used (a link to itself, no
 * permission, a directory) is PTWM_ERR_IO naming the path and why. */
ptwm_error ptwm_find_file(const char *path, int *found, ptwm_err *err);
/* Remove a file or a directory tree (best effort). */
void ptwm_remove_tree(const char *path);
/* The directory holding `path` ("." for a bare name; malloc'd, NULL on no
 * memory) and, in *base, where its last part starts. */
char *ptwm_parent_dir(const char *path, const char **base);
/* fsync a file or directory by name. */
ptwm_error ptwm_sync_path(const char *path, ptwm_err *err);
/* fsync the directory holding `path`, so a rename into it is durable. */
ptwm_error ptwm_sync_parent(const char *path, ptwm_err *err);
/* PTWM_ERR_TRUNCATED: "file 'X' is N bytes, expected M", N from fstat(fd). */
ptwm_error ptwm_fail_shrunk(ptwm_err *err, int fd, const char *path, uint64_t expected);

/* Number of online cores (at least 1). */
int ptwm_cpu_count(void);

#endif
