/* Internal parts of the .ptwm reader shared by container_read.c and
 * compress_safetensors.c (the safetensors rebuild). */
#ifndef PTWM_CONTAINER_READ_H
#define PTWM_CONTAINER_READ_H

#include "common.h"

/* Called with each decoded window of a tensor, in order. */
typedef ptwm_error (*ptwm_sink_fn)(void *ctx, const uint8_t *p, size_t n, ptwm_err *err);

/* Decode every tensor in table order, chunk by chunk (threads, bounded
 * memory: a ring of chunks), checking each payload hash when its tensor
 * ends, and hand the bytes to `sink` in order (NULL: decode and check only). */
ptwm_error ptwm_reader_stream_all(ptwm_reader *r, ptwm_sink_fn sink, void *ctx, ptwm_err *err);
/* Size of the source file recorded with the source header (0 if none). */
uint64_t ptwm_reader_source_file_size(const ptwm_reader *r);
/* Where chunk `chunk` of tensor `index` lies in the file (for tests and
 * tools): PTWM_ERR_NOT_FOUND if there is no such chunk. */
ptwm_error ptwm_reader_chunk_info(const ptwm_reader *r, size_t index, uint64_t chunk,
                                  uint64_t *offset, uint32_t *coded, uint32_t *raw,
                                  uint64_t *nchunks);
/* Free the reader's thread pool now (it is made again when next needed). */
void ptwm_reader_release_pool(ptwm_reader *r);
/* Label for messages: the path, or the label given to open_memory. */
const char *ptwm_reader_label(const ptwm_reader *r);

#endif
