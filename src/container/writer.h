/* Internal: what the .ptwm writer offers beyond the public header, to the
 * formats layer (the .ptwm sink) and tests. The writer's own structures are
 * writer_impl.h's. */
#ifndef PTWM_WRITER_H
#define PTWM_WRITER_H

#include "common.h"

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

#endif
