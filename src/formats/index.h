/* Internal: the index of a sharded checkpoint, of either kind (index.c). The
 * public ptwm_index_* functions are the .ptwm kind. */
#ifndef PTWM_INDEX_H
#define PTWM_INDEX_H

#include "common.h"

typedef enum ptwm_index_kind {
    PTWM_INDEX_PTWM = 0,        /* model.ptwm.index.json */
    PTWM_INDEX_SAFETENSORS = 1  /* model.safetensors.index.json (Hugging Face) */
} ptwm_index_kind;

/* An empty index of `kind`; a safetensors index has no total until set. */
ptwm_error ptwm_index_new(ptwm_index_kind kind, ptwm_index **out, ptwm_err *err);
ptwm_error ptwm_index_parse_kind(const char *json, size_t len, const char *label,
                                 ptwm_index_kind kind, ptwm_index **out, ptwm_err *err);
ptwm_error ptwm_index_read_kind(const char *path, ptwm_index_kind kind, ptwm_index **out,
                                ptwm_err *err);
/* The key of a .ptwm index's metadata naming the directory's file record
 * (PTWM_FILES_NAME, the only value allowed): a reader then requires it. */
#define PTWM_META_FILE_RECORD "file_record"

struct ptwm_files;
/* Read an index of `kind` in a directory whose file record is `rec` (NULL:
 * it has none): its bytes must be the ones the record lists under the file's
 * name, and a .ptwm index that names a record needs one. ptwm_index_read_kind
 * reads the file alone. */
ptwm_error ptwm_index_read_checked(const char *path, ptwm_index_kind kind,
                                   const struct ptwm_files *rec, ptwm_index **out, ptwm_err *err);
/* The text ptwm_index_write writes (final newline included; ptwm_free it);
 * `label` names the index in messages. */
ptwm_error ptwm_index_text(const ptwm_index *idx, const char *label, char **text, size_t *len,
                           ptwm_err *err);
/* `got` maps every tensor of `want` to the same shard and lists no other
 * tensor; its total_size, if it states one, is want's. PTWM_ERR_INDEX naming
 * the first difference (`label` names got). */
ptwm_error ptwm_index_check_map(const ptwm_index *want, const ptwm_index *got, const char *label,
                                ptwm_err *err);
/* 1 when the index states metadata.total_size (always for the .ptwm kind). */
int ptwm_index_has_total(const ptwm_index *idx);
/* Why `shard` cannot name a file inside the directory ("is empty", "contains
 * a path separator", "contains '..'"), or NULL when it can. */
const char *ptwm_index_bad_shard_name(const char *shard);

#endif
