/* Internal wire constants of the .ptwm container (docs/FORMAT.md is the
 * specification; keep the two in step). Everything is little-endian.
 *
 *   file    = head(16) | chunk payloads ... | table | foot(48)
 *   head    = magic "\x89PTWM\r\n\x1a" | u32 version | u32 flags (0)
 *   table   = sections: u8 id | u64 length | body, or one packed section
 *             (id 4: u64 raw_size | zstd frame of those sections)
 *   foot    = u64 table_offset | u64 table_size | u32 table_crc | u32 version |
 *             u64 file_size | u32 reserved (0) | u32 foot_crc | end magic "PTWMEND\x1a"
 */
#ifndef PTWM_CONTAINER_FORMAT_H
#define PTWM_CONTAINER_FORMAT_H

#include "common.h"

#define PTWM_FMT_VERSION 5u              /* written by this library (2: column-relative
                                          * exponents in chunk payloads; 3: signed
                                          * zeros in sparse chunks; 4: a CRC32 of the
                                          * payload in every chunk entry; 5: chunk
                                          * payloads name their stages) */
#define PTWM_FMT_BASE_VERSION 6u         /* written when the writer has a base: tensors
                                          * coded against a base tensor (tensor flag 4,
                                          * the base's hashes) */
#define PTWM_FMT_X2_VERSION 7u           /* written when a chunk has a rANS plane in two
                                          * streams (CHAINS.md, "RANS"); else 5 or 6 */
#define PTWM_FMT_X4_VERSION 8u           /* written when a chunk has a rANS plane in four
                                          * streams */
#define PTWM_FMT_MAX_VERSION 8u          /* newest version read */
#define PTWM_FMT_MIN_VERSION 1u          /* oldest version read */

#define PTWM_FMT_HEAD_SIZE 16u
#define PTWM_FMT_FOOT_SIZE 48u
#define PTWM_FMT_MAGIC "\x89PTWM\r\n\x1a"
#define PTWM_FMT_END_MAGIC "PTWMEND\x1a"
#define PTWM_FMT_MAGIC_LEN 8u

/* Footer field offsets. */
#define PTWM_FOOT_TABLE_OFFSET 0
#define PTWM_FOOT_TABLE_SIZE 8
#define PTWM_FOOT_TABLE_CRC 16
#define PTWM_FOOT_VERSION 20
#define PTWM_FOOT_FILE_SIZE 24
#define PTWM_FOOT_RESERVED 32
#define PTWM_FOOT_CRC 36            /* CRC32 of foot bytes [0, 36) */
#define PTWM_FOOT_END_MAGIC 40

/* Table section ids. */
#define PTWM_SEC_TENSORS 1
#define PTWM_SEC_METADATA 2
#define PTWM_SEC_SOURCE 3
#define PTWM_SEC_PACKED 4        /* the only section: u64 raw_size | zstd frame */

/* Packed tables: the writer packs when that is smaller and within the
 * reader's caps (raw_size <= 64 x stored table bytes and <= 1 GiB), which
 * bound what a reader allocates by the file's size. */
#define PTWM_FMT_PACK_LEVEL 1      /* packing is a serial tail of every run: higher
                                    * levels took longer for a few bytes (docs/FORMAT.md,
                                    * "Section 4: packed table") */
#define PTWM_FMT_PACK_RATIO 64u
#define PTWM_FMT_PACK_MAX ((uint64_t)1 << 30)
#define PTWM_FMT_SECTION_HEAD 9u     /* u8 id, u64 length */

/* Tensor flags. */
#define PTWM_TF_PAYLOAD_HASH 0x01u
#define PTWM_TF_PLANE_CRC 0x02u
#define PTWM_TF_KNOWN (PTWM_TF_PAYLOAD_HASH | PTWM_TF_PLANE_CRC)
#define PTWM_TF_BASE 0x04u          /* version 6 on: coded against a base tensor */

/* Sizes of fixed parts, for caps derived from the table size. */
#define PTWM_FMT_CHUNK_ENTRY 17u     /* u64 offset, u32 coded, u32 raw, u8 chain */
#define PTWM_FMT_CHUNK_ENTRY_V4 21u  /* from version 4: then u32 CRC32 of the payload */
#define PTWM_FMT_ENTRY_CRC_VERSION 4u
#define PTWM_FMT_CHUNK_ENTRY_BASE 26u /* a base tensor's: then u8 based, u32 base chunk CRC32 */
#define PTWM_FMT_TENSOR_MIN 32u      /* name_len..nchunks with empty name, one empty chain */
#define PTWM_FMT_MAX_CHAINS 16u      /* candidate chains per tensor */

/* Chunk sizes: raw bytes per chunk are a multiple of the granule
 * (32 elements = dtype bits * 4 bytes) and at most this. */
#define PTWM_FMT_MIN_CHUNK ((unsigned)PTWM_MIN_CHUNK)
#define PTWM_FMT_MAX_CHUNK PTWM_MAX_CHUNK

/* Bytes of one 32-element granule of a dtype (0 for an invalid dtype). */
PTWM_INLINE uint64_t ptwm_fmt_granule(ptwm_dtype dtype) {
    return (uint64_t)ptwm_dtype_bits(dtype) * 4u;
}

/* The chunk size a writer uses for a tensor of a valid `dtype` given
 * `chunk` raw bytes a chunk: a whole number of granules, at least one. */
PTWM_INLINE uint64_t ptwm_fmt_tensor_chunk(uint64_t chunk, ptwm_dtype dtype) {
    uint64_t granule = ptwm_fmt_granule(dtype), size = chunk / granule * granule;
    return size < granule ? granule : size;
}

#endif
