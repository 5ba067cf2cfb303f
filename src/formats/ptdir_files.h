/* Internal: the file record of a .ptwm directory (model.ptwm.files.json,
 * docs/SHARDING.md): the size and XXH3-128 of every file the directory
 * carries besides its shards and the record itself (the index, config,
 * tokenizer and any other file copied beside the shards), in a file that
 * ends with the XXH3-128 of its own bytes. Shards are not listed: every byte
 * of a shard that a reader uses is covered by the shard's own CRCs and
 * hashes (docs/FORMAT.md). */
#ifndef PTWM_PTDIR_FILES_H
#define PTWM_PTDIR_FILES_H

#include "common.h"

typedef struct ptwm_files_entry {
    char *name;          /* its path inside the directory, '/' between parts */
    uint64_t size;
    uint8_t hash[16];    /* XXH3-128 of its bytes, canonical order */
} ptwm_files_entry;

typedef struct ptwm_files {
    ptwm_files_entry *e; /* sorted by name (strcmp) once parsed or turned into text */
    size_t n, cap;
} ptwm_files;

void ptwm_files_free(ptwm_files *f);
ptwm_error ptwm_files_add(ptwm_files *f, const char *name, uint64_t size, const uint8_t hash[16],
                          ptwm_err *err);
/* The entry called `name`, or NULL (f sorted). */
const ptwm_files_entry *ptwm_files_find(const ptwm_files *f, const char *name);
/* The record's bytes: entries sorted by name, the record's own hash last
 * (malloc'd, ptwm_free it). A name that is not UTF-8 is PTWM_ERR_UNSUPPORTED. */
ptwm_error ptwm_files_text(ptwm_files *f, char **text, size_t *len, ptwm_err *err);
/* Write dir/model.ptwm.files.json (temporary name, then rename). */
ptwm_error ptwm_files_write(ptwm_files *f, const char *dir, ptwm_err *err);
/* Check a record's own hash, then its JSON (`label` names it in messages). */
ptwm_error ptwm_files_parse(const char *text, size_t len, const char *label, ptwm_files *out,
                            ptwm_err *err);
/* The record of directory `dir` into *out; *found 0 (*out empty) when it has none. */
ptwm_error ptwm_files_read(const char *dir, ptwm_files *out, int *found, ptwm_err *err);
/* A file of `dir` (its size and hash) against the record: PTWM_ERR_NOT_FOUND
 * when the record does not list it, PTWM_ERR_HASH when either differs; the
 * message names the file and both values. */
ptwm_error ptwm_files_check(const ptwm_files *f, const char *dir, const char *name,
                            uint64_t size, const uint8_t hash[16], ptwm_err *err);
/* The same for bytes in memory (an index read once, then parsed). */
ptwm_error ptwm_files_check_bytes(const ptwm_files *f, const char *dir, const char *name,
                                  const void *p, size_t len, ptwm_err *err);
/* XXH3-128 and size of a whole file, streaming. */
ptwm_error ptwm_hash_file(const char *path, uint8_t hash[16], uint64_t *size, ptwm_err *err);

#endif
