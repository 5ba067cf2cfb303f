/* Internal parts of the .ptwm reader and writer shared with the safetensors
 * rebuild (compress_safetensors.c) and the checkpoint code (ptdir_*.c). */
#ifndef PTWM_CONTAINER_READ_H
#define PTWM_CONTAINER_READ_H

#include "common.h"

/* Called with each decoded window of a tensor, in order. */
typedef ptwm_error (*ptwm_sink_fn)(void *ctx, const uint8_t *p, size_t n, ptwm_err *err);

/* Decode every tensor in table order, chunk by chunk (threads, bounded
 * memory: a ring of chunks), checking each payload hash when its tensor
 * ends, and hand the bytes to `sink` in order (NULL: decode and check only). */
ptwm_error ptwm_reader_stream_all(ptwm_reader *r, ptwm_sink_fn sink, void *ctx, ptwm_err *err);
/* As stream_all, for tensors indices[0..n) in that order, each written from
 * the decoding threads at offset offs[i] of the open file fd (positional
 * writes: the file position is not used). `sink`, if any, hears of each
 * chunk, in order, after it is in the file (progress). On failure the file
 * may hold some of the bytes: the caller discards it. */
ptwm_error ptwm_reader_stream_to_file(ptwm_reader *r, const size_t *indices, size_t n, int fd,
                                      const char *path, const uint64_t *offs, ptwm_sink_fn sink,
                                      void *ctx, ptwm_err *err);
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
/* Writer side (container_write.c): the size of the file the source header
 * came from, recorded with it so a rebuild can check it writes exactly that
 * many bytes. Whoever records a source header records its size too. */
void ptwm_writer_set_source_size(ptwm_writer *w, uint64_t size);
/* As ptwm_writer_set_source_header, given the JSON without its 8-byte length,
 * which the writer borrows instead of copying (a source header may be
 * 100 MB): the caller keeps it unchanged until the writer is finished or
 * freed. */
ptwm_error ptwm_writer_borrow_source_json(ptwm_writer *w, const char *json, size_t json_len,
                                          const char *file_name, ptwm_err *err);

#endif
