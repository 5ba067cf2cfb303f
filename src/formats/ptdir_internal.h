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

#endif
