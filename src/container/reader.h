/* Internal: what the .ptwm reader offers beyond the public header, to the
 * formats layer (the .ptwm source, conversions), tools and tests. The
 * reader's own structures are reader_impl.h's. */
#ifndef PTWM_READER_H
#define PTWM_READER_H

#include "common.h"
#include "container_base.h"

/* The decoding threads set (0 = all cores). */
int ptwm_reader_get_threads(const ptwm_reader *r);
/* Label for messages: the path, or the label given to open_memory. */
const char *ptwm_reader_label(const ptwm_reader *r);
/* Size of the source file recorded with the source header (0 if none). */
uint64_t ptwm_reader_source_file_size(const ptwm_reader *r);
/* The payload hash tensor `index` records, into hash: 1, or 0 if it records
 * none. */
int ptwm_reader_tensor_hash(const ptwm_reader *r, size_t index, uint8_t hash[16]);
/* Where chunk `chunk` of tensor `index` lies in the file (for tests and
 * tools): PTWM_ERR_NOT_FOUND if there is no such chunk. */
ptwm_error ptwm_reader_chunk_info(const ptwm_reader *r, size_t index, uint64_t chunk,
                                  uint64_t *offset, uint32_t *coded, uint32_t *raw,
                                  uint64_t *nchunks);
/* The base tensors coded against one decode with (docs/DELTA.md; not
 * owned: it outlives the reader's use); NULL or base->ops NULL removes it.
 * Each such tensor's base tensor is looked up now (name, dtype and shape,
 * recorded payload hash); a tensor whose base tensor is missing or differs
 * fails when decoded, naming the tensor and the hashes. The public
 * ptwm_reader_set_base fills `base` in from a source (formats layer). */
ptwm_error ptwm_reader_use_base(ptwm_reader *r, const ptwm_base *base, ptwm_err *err);

#endif
