/* The framing of a chunk payload: the header that names the stages and the
 * coded planes (docs/CHAINS.md section 3). Version 5 writes
 *   u8 flags | u8 nstages | stages (u8 id, varint params) |
 *   per plane: u8 coder, varint coded length, [u32 CRC32] | coded planes
 * and versions 1-4 are read as they were written (a flags byte of
 * modelling choices, raw lengths in each entry) and turned into the same
 * stage list. */
#ifndef PTWM_CHUNK_FRAME_H
#define PTWM_CHUNK_FRAME_H

#include "stage.h"

#define PTWM_CHUNK_FLAG_CRC 1u /* a CRC32 of each coded plane follows its entry */

/* A parsed header: the stages, their layout, and each plane's coder, coded
 * length and CRC; the coded planes start at body (body_len bytes, their
 * lengths summed). */
typedef struct ptwm_chunk_head {
    unsigned flags;
    unsigned nuse;
    ptwm_stage_use use[PTWM_CSTAGES_MAX];
    ptwm_chunk_layout L;
    int coder[PTWM_CHUNK_PLANES];
    size_t coded[PTWM_CHUNK_PLANES];
    uint32_t crc[PTWM_CHUNK_PLANES];
    const uint8_t *body;
    size_t body_len;
} ptwm_chunk_head;

/* Parse and check a header against a chunk of raw_len bytes; version < 5
 * reads the old form through the chain c. Checks every stage, every plane's
 * coder and lengths, and that the coded planes end exactly at src_len. */
ptwm_error ptwm_chunk_head_parse(unsigned version, const ptwm_chain_info *c, const uint8_t *src,
                                 size_t src_len, size_t raw_len, ptwm_chunk_head *h,
                                 ptwm_err *err);

/* Header bytes for these stages and coded lengths (count planes). */
size_t ptwm_chunk_head_size(const ptwm_stage_use *use, unsigned nuse, unsigned count,
                            const size_t *coded, int crc);

/* Write the header and the coded bytes `body` to dst (body may lie in dst
 * itself, behind the header's room). */
ptwm_error ptwm_chunk_frame(unsigned flags, const ptwm_stage_use *use, unsigned nuse,
                            unsigned count, const int *coder, const size_t *coded,
                            const uint8_t *body, size_t body_len, uint8_t *dst, size_t cap,
                            size_t *out_len, ptwm_err *err);

/* v as a minimal LEB128 varint at p (at most 10 bytes); returns its length. */
size_t ptwm_put_varint(uint8_t *p, uint64_t v);

/* The name of a coder id for messages ("const" for 0). */
const char *ptwm_coder_label(int coder);

#endif
