/* Internal: whole tensors of .ptwm readers streamed, chunk by chunk through
 * one ring of decoding threads (read_stream.c), to a callback or into
 * files; what the safetensors sink and the .ptwm source decode with. */
#ifndef PTWM_FSTREAM_H
#define PTWM_FSTREAM_H

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
/* Streaming into several files through one ring of chunks and one set of
 * threads, across readers (the shards of a directory): a file's last chunks
 * decode while the next file's first ones do, so small files leave no thread
 * idle, and memory stays at the ring (threads x chunk).
 *   open; then per file: begin(fd, done), add(reader, tensors, offsets)...,
 *   end; then close.
 * `done(ctx, rc, err)` is called exactly once for every begin, on the calling
 * thread, from inside a later call: with PTWM_OK once every chunk of the file
 * has been written and every payload hash it completes has matched (the owner
 * commits the file then and returns the result, naming it in err), or with
 * the failure (the owner discards the file; err is NULL then). After a
 * failure every call returns it; close drains the ring and returns the first
 * failure. `progress`, if any, hears of each chunk, in order, once it is in
 * its file. */
typedef struct ptwm_fstream ptwm_fstream;
typedef ptwm_error (*ptwm_fstream_done_fn)(void *ctx, ptwm_error rc, ptwm_err *err);
ptwm_error ptwm_fstream_open(int threads, ptwm_sink_fn progress, void *ctx, ptwm_fstream **out,
                             ptwm_err *err);
ptwm_error ptwm_fstream_begin(ptwm_fstream *s, int fd, const char *path, ptwm_fstream_done_fn done,
                              void *ctx, ptwm_err *err);
/* Tensors indices[0..n) of r, tensor i to offset offs[i] of the current file
 * (positional writes from the decoding threads). */
ptwm_error ptwm_fstream_add(ptwm_fstream *s, ptwm_reader *r, const size_t *indices, size_t n,
                            const uint64_t *offs, ptwm_err *err);
ptwm_error ptwm_fstream_end(ptwm_fstream *s, ptwm_err *err);
ptwm_error ptwm_fstream_close(ptwm_fstream *s, ptwm_err *err);

#endif
