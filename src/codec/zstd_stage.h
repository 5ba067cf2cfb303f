/* ZSTD coder (wire id 2): one zstd frame through libzstd, its contexts in
 * the caller's workspace (zstd_stage.c). Contracts as in coder.h. */
#ifndef PTWM_ZSTD_STAGE_H
#define PTWM_ZSTD_STAGE_H

#include "common.h"
#include "workspace.h"

size_t ptwm_zstd_bound(size_t n);
ptwm_error ptwm_zstd_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level, uint8_t *dst,
                            size_t cap, size_t *out_len);
ptwm_error ptwm_zstd_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                            size_t dst_size);

#endif
