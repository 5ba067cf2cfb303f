/* Internal: what the checkpoint writer and restorer share. */
#ifndef PTWM_PTDIR_INTERNAL_H
#define PTWM_PTDIR_INTERNAL_H

#include "common.h"

#define PTWM_ST_INDEX_NAME "model.safetensors.index.json"
/* Index metadata keys holding the source's Hugging Face index, kept byte for
 * byte so decompression gives it back unchanged. */
#define PTWM_META_SOURCE_INDEX_NAME "source_index_name"
#define PTWM_META_SOURCE_INDEX "source_index"

typedef struct ptwm_ck_progress {
    ptwm_progress_fn fn;
    void *ctx;
    uint64_t done, total;
} ptwm_ck_progress;

/* Count `bytes` more as done and tell the callback. */
void ptwm_ck_progress_add(ptwm_ck_progress *p, uint64_t bytes);

/* The source of a compression: a safetensors file or a Hugging Face
 * checkpoint directory, read with pread. */
typedef struct ptwm_ck_src {
    const char *path;
    ptwm_st *single;          /* a lone .safetensors file */
    ptwm_stdir *dir;          /* or a checkpoint directory */
    char *hf_index;           /* model.safetensors.index.json bytes, if the directory has one */
    size_t hf_index_len;
    uint64_t total;           /* raw tensor bytes */
} ptwm_ck_src;

ptwm_error ptwm_ck_src_open(ptwm_ck_src *s, const char *path, ptwm_err *err);

/* Into a .ptwm writer, from a safetensors file open in pread mode (it stays
 * open until the writer is finished): its header, file name and size, for a
 * byte-exact rebuild; its __metadata__; tensor `local`, pulled chunk by
 * chunk. */
ptwm_error ptwm_ck_record_source(ptwm_writer *w, const ptwm_st *st, ptwm_err *err);
ptwm_error ptwm_ck_record_metadata(ptwm_writer *w, const ptwm_st *st, ptwm_err *err);
ptwm_error ptwm_ck_add_tensor(ptwm_writer *w, const ptwm_st *st, size_t local, ptwm_err *err);
void ptwm_ck_src_close(ptwm_ck_src *s);

typedef struct ptwm_ck_item {
    const ptwm_st *st;
    size_t local;
} ptwm_ck_item;

/* Where every tensor of a compression goes. Shard k holds the tensors
 * items[start[k] .. start[k+1]) (greedy packing keeps them contiguous in
 * source order) and raw[k] bytes of them. */
typedef struct ptwm_ck_plan {
    ptwm_ck_item *items;
    size_t *shard_of, *start;
    uint64_t *raw;
    size_t n, nshards;
    int exact;                /* one shard per source file, each recording its header */
    int with_index;           /* model.ptwm.index.json, else a lone model.ptwm */
} ptwm_ck_plan;

/* The plan for max_shard_size (0: the source's own files). */
ptwm_error ptwm_ck_plan_make(const ptwm_ck_src *s, uint64_t max_shard_size, ptwm_ck_plan *p,
                             ptwm_err *err);
void ptwm_ck_plan_free(ptwm_ck_plan *p);
/* The file name of shard k. */
ptwm_error ptwm_ck_shard_name(const ptwm_ck_plan *p, size_t k, char name[64], ptwm_err *err);
/* Write the shards k with wanted[k] set (all when wanted is NULL) into dir;
 * coded[k] receives each one's size on disk. */
ptwm_error ptwm_ck_write_shards(const ptwm_ck_src *s, const ptwm_ck_plan *pl,
                                const ptwm_checkpoint_options *o, const char *dir,
                                const uint8_t *wanted, uint64_t *coded, ptwm_err *err);
/* Copy the source directory's other files (config, tokenizer...) into dir. */
ptwm_error ptwm_ck_copy_other_files(const ptwm_ck_src *s, const char *dir, ptwm_err *err);
/* Write dir/model.ptwm.index.json for the plan (nothing for a lone model.ptwm). */
ptwm_error ptwm_ck_write_index(const ptwm_ck_src *s, const ptwm_ck_plan *pl,
                               const uint64_t *coded, const char *dir, ptwm_err *err);

#endif
