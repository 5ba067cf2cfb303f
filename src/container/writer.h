/* Internal: what the .ptwm writer offers beyond the public header, to the
 * formats layer (the .ptwm sink) and tests. The writer's own structures are
 * writer_impl.h's. */
#ifndef PTWM_WRITER_H
#define PTWM_WRITER_H

#include "common.h"
#include "container_base.h"

/* The size of the file the source header came from, recorded with it so a
 * rebuild can check it writes exactly that many bytes. Whoever records a
 * source header records its size too. */
void ptwm_writer_set_source_size(ptwm_writer *w, uint64_t size);
/* As ptwm_writer_set_source_header, given the JSON without its 8-byte length,
 * which the writer borrows instead of copying (a source header may be
 * 100 MB): the caller keeps it unchanged until the writer is finished or
 * freed. */
ptwm_error ptwm_writer_borrow_source_json(ptwm_writer *w, const char *json, size_t json_len,
                                          const char *file_name, ptwm_err *err);
/* ptwm_writer_open_file, ptwm_writer_open_memory, ptwm_compress_blob and
 * ptwm_compress_file with the base given as the container's table (NULL or
 * base->ops NULL: none). params->base, a source, is not read: the public
 * calls fill `base` in from it (formats layer). */
ptwm_error ptwm_writer_open_file_base(const char *path, const ptwm_cparams *params,
                                      const ptwm_base *base, ptwm_writer **out, ptwm_err *err);
ptwm_error ptwm_writer_open_memory_base(const ptwm_cparams *params, const ptwm_base *base,
                                        ptwm_writer **out, ptwm_err *err);
ptwm_error ptwm_compress_blob_base(const ptwm_tensor_desc *tensors, size_t n,
                                   const ptwm_chain_list *chains, const ptwm_cparams *params,
                                   const ptwm_base *base, void **out, size_t *len, ptwm_err *err);
/* Tests: each batch of placed payloads (write_append.c) is copied `us`
 * microseconds after leaving the append lock (0: at once), so that an image
 * growing, or a payload compared, while a copy runs happens on every run. */
void ptwm_writer_slow_copies(unsigned us);
/* A read of bytes [offset, offset + len) of tensor `key` of `h` (as a
 * source's read). */
typedef ptwm_error (*ptwm_keyed_read_fn)(void *h, size_t key, uint64_t offset, void *dst,
                                         size_t len, ptwm_err *err);
/* As ptwm_writer_add_stream, with each chunk read on the thread that codes
 * it (it stays in that core's cache, and reads run in parallel): `read` is
 * called from several threads at once, and `h` stays valid until the writer
 * is finished or freed. A failed read fails the writer (reported by a later
 * call, as a coding failure is). */
ptwm_error ptwm_writer_add_pulled(ptwm_writer *w, const ptwm_tensor_desc *desc,
                                  const ptwm_chain_list *chains, ptwm_keyed_read_fn read, void *h,
                                  size_t key, ptwm_err *err);
ptwm_error ptwm_compress_into_base(const ptwm_tensor_desc *tensors, size_t n,
                                   const ptwm_chain_list *chains, const ptwm_cparams *params,
                                   const ptwm_base *base, void *dst, size_t cap, size_t *len,
                                   ptwm_err *err);
ptwm_error ptwm_compress_file_base(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                                   const ptwm_chain_list *chains, const ptwm_cparams *params,
                                   const ptwm_base *base, ptwm_err *err);

#endif
