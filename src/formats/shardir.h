/* Internal: the one sharded-directory reader (shardir.c), over shards of
 * either format. A directory is read through the source interface
 * (ptwm_source_stdir_ops, ptwm_source_ptdir_ops in source_impl.h); here are
 * opening and what only a directory has: shards, the index, totals.
 * ptwm_stdir_* (stdir.c) and ptwm_ptdir_* (ptdir.c) are thin wrappers. */
#ifndef PTWM_SHARDIR_H
#define PTWM_SHARDIR_H

#include "source_impl.h"

typedef struct ptwm_shardir ptwm_shardir;

/* kind: PTWM_SOURCE_SAFETENSORS_DIR (model.safetensors.index.json or a lone
 * model.safetensors; shards in name order, each opened in `mode`) or
 * PTWM_SOURCE_PTWM_DIR (model.ptwm.index.json or a lone model.ptwm; shards in
 * the index's order). The index must agree with the shards both ways.
 * Tensors are numbered shard by shard, each shard's in its own order. */
ptwm_error ptwm_shardir_open(const char *dir, ptwm_source_kind kind, ptwm_open_mode mode,
                             ptwm_shardir **out, ptwm_err *err);
void ptwm_shardir_close(ptwm_shardir *d);
size_t ptwm_shardir_shard_count(const ptwm_shardir *d);
/* The shard's own handle (a ptwm_st or a ptwm_reader), and its file name. */
void *ptwm_shardir_shard(const ptwm_shardir *d, size_t i);
const char *ptwm_shardir_shard_name(const ptwm_shardir *d, size_t i);
/* The source operations of its shards. */
const ptwm_source_ops *ptwm_shardir_shard_ops(const ptwm_shardir *d);
/* The shard holding tensor `index` and its index there; (size_t)-1 past the end. */
size_t ptwm_shardir_shard_of(const ptwm_shardir *d, size_t index, size_t *local);
/* The .ptwm index (NULL for a lone model.ptwm and for safetensors directories). */
const ptwm_index *ptwm_shardir_index(const ptwm_shardir *d);
/* The .ptwm kind's file record (ptdir_files.h), NULL when the directory has
 * none; the index was checked against it at open. */
struct ptwm_files;
const struct ptwm_files *ptwm_shardir_files(const ptwm_shardir *d);
/* The directory's path as opened. */
const char *ptwm_shardir_path(const ptwm_shardir *d);
/* Sums over the shards: tensor bytes and file bytes. */
uint64_t ptwm_shardir_total_size(const ptwm_shardir *d);
uint64_t ptwm_shardir_compressed_total_size(const ptwm_shardir *d);

#endif
