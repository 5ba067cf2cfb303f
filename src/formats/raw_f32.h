/* Positioned reads of little-endian F32 and BF16 arrays from an open file,
 * in bounded pieces (sizes and offsets are 64-bit everywhere). Shared by the
 * raw-file functions, raw sources and raw training checkpoints. */
#ifndef PTWM_RAW_F32_H
#define PTWM_RAW_F32_H

#include "common.h"

/* n F32 values at byte `off` into dst (byte-swapped on big-endian hosts). */
ptwm_error ptwm_raw_pread_f32(int fd, const char *path, uint64_t off, float *dst, uint64_t n,
                              ptwm_err *err);
/* n BF16 values at byte `off`, widened exactly into dst. */
ptwm_error ptwm_raw_pread_bf16(int fd, const char *path, uint64_t off, float *dst, uint64_t n,
                               ptwm_err *err);
/* n 16-bit values at byte `off` into dst as they are (host order). */
ptwm_error ptwm_raw_pread_u16(int fd, const char *path, uint64_t off, uint16_t *dst, uint64_t n,
                              ptwm_err *err);
/* Host-order values to little-endian in place (a no-op on little-endian hosts). */
void ptwm_raw_le32_inplace(void *p, uint64_t n);
void ptwm_raw_le16_inplace(void *p, uint64_t n);

#endif
