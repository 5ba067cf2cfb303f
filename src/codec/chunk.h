/* One chunk of one tensor through a chain.
 *
 * The container cuts each tensor's raw bytes into chunks and hands each chunk
 * here; this layer applies the chain's transforms (field splits, byte planes,
 * MICROSCALE block-relative exponents, constant-plane dropping), codes every
 * plane with an entropy stage, and frames the planes (with a CRC32 per coded
 * plane when asked) into one self-contained chunk payload. The container owns
 * everything around it: file layout, chunk index, payload hashes, threads.
 *
 * Thread-safety: the functions keep no state of their own; their work memory
 * is the workspace passed in (workspace.h: one per worker, NULL for a
 * temporary one), so the container calls them from many threads at once,
 * each with its own workspace. */
#ifndef PTWM_CHUNK_H
#define PTWM_CHUNK_H

#include "common.h"
#include "workspace.h"

typedef struct ptwm_chunk_params {
    int method;       /* ptwm_method: fills stages the chain leaves open */
    int zstd_level;   /* 0 = 3 */
    int emit_crc;     /* CRC32 per coded plane */
    size_t columns;   /* the tensor's last dimension (0: none): chunks may
                       * code exponents relative to per-column scales */
    unsigned max_streams; /* streams a rANS plane may take: 1, 2 or 4 (0: 4);
                           * below 4 the payload needs no PTWM_CHUNK_X4_VERSION,
                           * at 1 no PTWM_CHUNK_X2_VERSION */
} ptwm_chunk_params;

/* Worst-case payload size for raw_len raw bytes (any chain): raw_len plus 14
 * bytes, since a chunk whose planes do not beat its raw bytes is stored
 * raw. Chunk size: 1 MiB, the best size and speed measured (docs/FORMAT.md,
 * "Chunk size measurements"); a workspace grows to about 7x the chunk size
 * while encoding, 2x while decoding (docs/CHAINS.md). */
size_t ptwm_chunk_bound(size_t raw_len);

/* A dst of at least this many bytes lets ptwm_chunk_encode code the planes in
 * place (no copy from the workspace); the payload is still at most
 * ptwm_chunk_bound. Smaller buffers work too, through the workspace. */
size_t ptwm_chunk_work_bound(size_t raw_len);

/* Encode raw[0..raw_len) (a whole number of elements of dtype, except for
 * sub-byte dtypes, which are coded as bytes). */
ptwm_error ptwm_chunk_encode(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                             ptwm_dtype dtype, const ptwm_chunk_params *p, const uint8_t *raw,
                             size_t raw_len, uint8_t *dst, size_t cap, size_t *out_len,
                             ptwm_err *err);

/* Encode raw[0..raw_len) against base[0..raw_len), the same chunk of a base
 * tensor (docs/DELTA.md): the BASE stage (the elements' ordered or integer
 * difference) and byte planes, coded with the entropy settings of the
 * chain's first plane. The caller keeps it or the plain coding, whichever
 * is smaller; decoding it needs the same base chunk. */
ptwm_error ptwm_chunk_encode_base(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                                  ptwm_dtype dtype, const ptwm_chunk_params *p,
                                  const uint8_t *raw, const uint8_t *base, size_t raw_len,
                                  uint8_t *dst, size_t cap, size_t *out_len, ptwm_err *err);

/* Decode a payload into exactly raw_len bytes, checking every plane CRC that
 * is present before decoding that plane. Errors name the stage or plane and
 * the numbers; the container prefixes tensor and chunk. Payloads are read as
 * the container format version that holds them: from version 5 they name
 * their stages (stage.h), from version 7 a rANS plane may be two streams and
 * from version 8 four;
 * versions 1-4 have a flags byte (version 1 knows flag bits 0-4, version 2
 * adds bit 5, column-relative exponents, version 3 bit 6, signed zeros in
 * sparse chunks), read as the same stages. */
#define PTWM_CHUNK_VERSION 8u    /* the newest a payload of ptwm_chunk_encode needs */
#define PTWM_CHUNK_X2_VERSION 7u /* rANS planes in two streams (rans.c, mode 4) */
#define PTWM_CHUNK_X4_VERSION 8u /* rANS planes in four streams (rans.c, mode 5) */
ptwm_error ptwm_chunk_decode_version(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                     size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                     size_t src_len, uint8_t *raw, size_t raw_len, ptwm_err *err);
/* The same for a payload whose every byte the caller has checked already (a
 * version 4 chunk entry carries the payload's CRC32): the plane CRCs, over a
 * subset of those bytes, are not computed again. */
ptwm_error ptwm_chunk_decode_checked(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                     size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                     size_t src_len, uint8_t *raw, size_t raw_len, ptwm_err *err);
/* Either of the two above (checked: the caller checked every byte), with
 * the base chunk base[0..raw_len) for a payload that names the BASE stage
 * (NULL: none; such a payload is then PTWM_ERR_BASE_MISSING). */
ptwm_error ptwm_chunk_decode_base(ptwm_ws *ws, unsigned version, const uint8_t *chain,
                                  size_t chain_len, ptwm_dtype dtype, const uint8_t *src,
                                  size_t src_len, const uint8_t *base, uint8_t *raw,
                                  size_t raw_len, int checked, ptwm_err *err);
/* The container version a payload of ptwm_chunk_encode (for raw_len bytes)
 * needs for its planes: PTWM_CHUNK_X4_VERSION or PTWM_CHUNK_X2_VERSION
 * where a rANS plane has four or two streams, else 0. The container writes
 * the largest its chunks need, and version 5 (or 6) where none does, which
 * older readers read. */
unsigned ptwm_chunk_min_version(const uint8_t *src, size_t src_len, size_t raw_len);
/* The same, as PTWM_CHUNK_VERSION. */
ptwm_error ptwm_chunk_decode(ptwm_ws *ws, const uint8_t *chain, size_t chain_len,
                             ptwm_dtype dtype, const uint8_t *src, size_t src_len, uint8_t *raw,
                             size_t raw_len, ptwm_err *err);

#endif
