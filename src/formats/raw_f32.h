/* Positioned reads of little-endian F32 and 16-bit arrays from an open file,
 * in bounded pieces (sizes and offsets are 64-bit everywhere). Shared by the
 * raw-file loads (src/load/raw_read.c), raw sources and raw training
 * checkpoints. */
#ifndef PTWM_RAW_F32_H
#define PTWM_RAW_F32_H

#include "common.h"

/* Values per read: bounded so a huge request never becomes one huge syscall,
 * and so a staging buffer (BF16 widened into F32) stays small. */
#define PTWM_RAW_PIECE ((uint64_t)1 << 18)

/* n F32 values at byte `off` into dst (byte-swapped on big-endian hosts). */
ptwm_error ptwm_raw_pread_f32(int fd, const char *path, uint64_t off, float *dst, uint64_t n,
                              ptwm_err *err);
/* off + n * width must not overflow a file offset (PTWM_ERR_INVALID_ARG
 * naming the file); the read itself reports a short file. */
ptwm_error ptwm_raw_check_span(const char *path, uint64_t off, uint64_t n, unsigned width,
                               ptwm_err *err);
/* n 16-bit values at byte `off` into dst as they are (host order). */
ptwm_error ptwm_raw_pread_u16(int fd, const char *path, uint64_t off, uint16_t *dst, uint64_t n,
                              ptwm_err *err);
/* Host-order values to little-endian in place (a no-op on little-endian hosts). */
void ptwm_raw_le32_inplace(void *p, uint64_t n);
void ptwm_raw_le16_inplace(void *p, uint64_t n);

#endif
