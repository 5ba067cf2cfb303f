/* Direct output: the bytes appended to a file written past the page cache
 * (Linux O_DIRECT), in aligned blocks on a writing thread. A file that is
 * fsynced before it is used pays the kernel's copy into the page cache and
 * its page bookkeeping for nothing (a tenth of a one-thread compress);
 * written direct, the disk takes the blocks while the caller goes on
 * (docs/ARCHITECTURE.md, "Writing outputs past the page cache").
 *
 * Appends are staged in blocks of PTWM_DOUT_BLOCK bytes at aligned offsets;
 * whole blocks go to the disk direct, the last part block through the
 * file's own descriptor at ptwm_dout_finish. Where the file system refuses
 * direct writes (at open or at a write), the same blocks are written through
 * the page cache instead: the file's bytes never depend on it. */
#ifndef PTWM_DOUT_H
#define PTWM_DOUT_H

#include "common.h"

#define PTWM_DOUT_BLOCK ((size_t)2 << 20)
/* Files (and remaining outputs) shorter than this are not worth a thread. */
#define PTWM_DOUT_MIN ((uint64_t)8 << 20)

typedef struct ptwm_dout ptwm_dout;

/* Take over appending to `fd` (the file at open_path, which opens the
 * second, direct descriptor; errors name it `name`) from offset `pos`, its
 * current end: the bytes from the aligned offset below pos are read back to
 * start the first block. *out is NULL, with PTWM_OK, where direct writes,
 * or memory for the blocks, or their thread, cannot be had, or the
 * environment says PTWM_DIRECT_IO=0 (a file read back at once is then still
 * in the page cache): the caller goes on writing fd itself. The only error
 * is that read's. */
ptwm_error ptwm_dout_open(int fd, const char *open_path, const char *name, uint64_t pos,
                          ptwm_dout **out, ptwm_err *err);
/* Append n bytes (copied: src is the caller's again on return). A failed
 * block write is returned by this or a later call. */
ptwm_error ptwm_dout_append(ptwm_dout *d, const void *src, size_t n, ptwm_err *err);
/* Room to code the next bytes in place: into *at where they go, in the
 * staging memory, and into *room how many of up to `want` bytes are free
 * there (the blocks after the current one that it reaches are waited for;
 * past the last block a tail of PTWM_DOUT_TAIL bytes takes what wraps).
 * The caller writes its bytes there and appends them with
 * ptwm_dout_append_room, before any other append; bytes past those may be
 * written too, as scratch. The failure of a block write it waited for is
 * returned (*at NULL, *room 0). */
#define PTWM_DOUT_TAIL (((size_t)4 << 20) + ((size_t)128 << 10))
ptwm_error ptwm_dout_room(ptwm_dout *d, size_t want, uint8_t **at, size_t *room, ptwm_err *err);
/* Append the n bytes written at ptwm_dout_room's position (n <= its room):
 * the part in the tail is copied to the first block, the rest is not. */
ptwm_error ptwm_dout_append_room(ptwm_dout *d, size_t n, ptwm_err *err);
/* Read len bytes at off of what was appended (written or still staged). */
ptwm_error ptwm_dout_pread(ptwm_dout *d, void *dst, size_t len, uint64_t off, ptwm_err *err);
/* Write what is staged and wait for every block: the file then holds every
 * byte appended, and fd may be written anywhere (nothing is appended after). */
ptwm_error ptwm_dout_finish(ptwm_dout *d, ptwm_err *err);
/* Wait for blocks in flight, stop the thread, close the direct descriptor
 * (NULL is fine). */
void ptwm_dout_free(ptwm_dout *d);
/* Tests: the same blocks and thread, the second descriptor without
 * O_DIRECT, so the block logic is tested on any file system. */
ptwm_error ptwm_dout_open_buffered(int fd, const char *open_path, const char *name, uint64_t pos,
                                   ptwm_dout **out, ptwm_err *err);
/* Tests: make the direct descriptor refuse writes, as a file system that
 * takes the flag but not the writes would (the blocks then go through fd). */
void ptwm_dout_refuse_direct(ptwm_dout *d);

#endif
