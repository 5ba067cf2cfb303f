/* Internal parts of the .ptwm reader and writer shared with the
 * safetensors sink (sink_safetensors.c) and the conversions (convert.c). */
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
/* The decoding threads set (0 = all cores). */
int ptwm_reader_get_threads(const ptwm_reader *r);
/* Size of the source file recorded with the source header (0 if none). */
uint64_t ptwm_reader_source_file_size(const ptwm_reader *r);
/* Where chunk `chunk` of tensor `index` lies in the file (for tests and
 * tools): PTWM_ERR_NOT_FOUND if there is no such chunk. */
ptwm_error ptwm_reader_chunk_info(const ptwm_reader *r, size_t index, uint64_t chunk,
                                  uint64_t *offset, uint32_t *coded, uint32_t *raw,
                                  uint64_t *nchunks);
/* The payload hash tensor `index` records, into hash: 1, or 0 if it records
 * none. */
int ptwm_reader_tensor_hash(const ptwm_reader *r, size_t index, uint8_t hash[16]);
/* The same for a source's tensor: .ptwm kinds give the hash their table
 * records (no data read); other kinds record none (0). */
int ptwm_source_tensor_hash(const ptwm_source *s, size_t index, uint8_t hash[16]);
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
/* A writer's finish that returns while its file is completed behind the
 * caller: given a context (cparams.ctx), the writer's last chunks code on
 * the context's threads while the caller fills the next writer of that
 * context, then its table and footer are appended, and it is fsynced,
 * renamed and its directory fsynced on the context's committer thread (in
 * the order files were finished). The file is visible only once whole and
 * durable, as with ptwm_writer_finish; *file_size is set then (at the
 * latest when ptwm_ctx_commit_wait returns), and what the writer borrows
 * (ptwm_writer_borrow_source_json) must stay valid until then. A failure is
 * returned by the next open or finish of a writer on the context and by
 * ptwm_ctx_commit_wait, with its message naming the file; the failed file
 * is not written. Until ptwm_ctx_commit_wait, the context serves writers
 * only. Without a context, the same as ptwm_writer_finish. Frees w. */
ptwm_error ptwm_writer_finish_later(ptwm_writer *w, uint64_t *file_size, ptwm_err *err);
/* Wait for every commit ptwm_writer_finish_later left to ctx; the first
 * failure (its message names the file), or PTWM_OK. */
ptwm_error ptwm_ctx_commit_wait(ptwm_ctx *ctx, ptwm_err *err);

#endif
