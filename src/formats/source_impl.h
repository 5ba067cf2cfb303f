/* Internal: the source interface. Every kind of weights file or directory
 * implements these operations on a handle of its own (a ptwm_st, a
 * ptwm_reader, a raw file, a sharded directory); ptwm_source_* (source.c)
 * forwards to them, and the directory layer (shardir.c) opens and reads its
 * shards through them, whatever their format. A new operation is one more
 * slot: NULL where a kind has nothing to do, and source.c decides what NULL
 * means. */
#ifndef PTWM_SOURCE_IMPL_H
#define PTWM_SOURCE_IMPL_H

#include "common.h"

/* The safetensors file a file reproduces byte for byte: its header JSON
 * (without the 8-byte length before it), file name and size (0: not
 * recorded). A safetensors file reproduces itself; a .ptwm file the file it
 * was compressed from, if it recorded one. */
typedef struct ptwm_file_record {
    const char *json;
    size_t len;
    const char *name;
    uint64_t size;
} ptwm_file_record;

struct ptwm_fstream;

typedef struct ptwm_source_ops {
    ptwm_source_kind kind;
    /* Open `path`; `mode` is how safetensors files read tensor bytes (other
     * kinds ignore it). On failure *out is NULL. */
    ptwm_error (*open)(const char *path, ptwm_open_mode mode, void **out, ptwm_err *err);
    void (*close)(void *h);
    size_t (*count)(const void *h);
    ptwm_error (*tensor)(const void *h, size_t index, ptwm_tensor_info *out, ptwm_err *err);
    /* PTWM_ERR_NOT_FOUND if absent; the caller words the message. */
    ptwm_error (*find)(const void *h, const char *name, size_t *index, ptwm_err *err);
    ptwm_error (*read)(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                       ptwm_err *err);
    /* Whole tensors, their chunks sharing the decoding threads and every
     * payload hash checked (ptwm_source_read_many). NULL: one read each. */
    ptwm_error (*read_many)(void *h, const size_t *indices, void *const *dsts,
                            const size_t *sizes, size_t n, ptwm_err *err);
    /* Metadata entries in file order ({NULL, NULL} past the end). */
    size_t (*metadata_count)(const void *h);
    ptwm_kv (*metadata)(const void *h, size_t i);
    /* Bytes of the file on disk (directories sum them over the shards). */
    uint64_t (*file_size)(const void *h);
    /* Decoding threads (0 = all cores); NULL for kinds that do not decode. */
    void (*set_threads)(void *h, int threads);
    /* The base tensors coded against a base decode with (docs/DELTA.md);
     * NULL for kinds that hold none. */
    ptwm_error (*set_base)(void *h, ptwm_source *base, ptwm_err *err);
    /* The payload hash the file records for a tensor: 1, or 0 if none (no
     * data is read); NULL for kinds that record none. */
    int (*tensor_hash)(const void *h, size_t index, uint8_t hash[16]);
    /* The file's record (out->json NULL: none); a damaged record is an error
     * naming `label`. NULL for kinds that reproduce no safetensors file. */
    ptwm_error (*record)(const void *h, const char *label, ptwm_file_record *out, ptwm_err *err);
    /* Tensors indices[0..n) decoded by the stream's threads straight into its
     * current file, tensor i at offset offs[i]. NULL: the caller reads and
     * writes them. */
    ptwm_error (*stream_into)(void *h, struct ptwm_fstream *s, const size_t *indices, size_t n,
                              const uint64_t *offs, ptwm_err *err);
    /* 1: `read` may run on several threads at once (a writer then reads each
     * chunk on the thread that codes it: ptwm_writer_add_pulled). */
    int read_concurrent;
} ptwm_source_ops;

/* One table per kind, each beside its reader. */
extern const ptwm_source_ops ptwm_source_st_ops;      /* safetensors_source.c */
extern const ptwm_source_ops ptwm_source_ptwm_ops;    /* ptwm_source.c */
extern const ptwm_source_ops ptwm_source_raw_ops;     /* raw_f32_source.c */
extern const ptwm_source_ops ptwm_source_stdir_ops;   /* shardir.c */
extern const ptwm_source_ops ptwm_source_ptdir_ops;   /* shardir.c */

/* Tensors the caller holds in memory, with metadata (memory_source.c): the
 * source a directory or checkpoint is saved from. Borrowed, not copied. */
typedef struct ptwm_memory_source {
    const ptwm_tensor_desc *t;
    size_t n;
    const ptwm_kv *meta;
    size_t nmeta;
} ptwm_memory_source;
extern const ptwm_source_ops ptwm_source_memory_ops;

/* A source's own handle, and the table of its kind. */
void *ptwm_source_impl(const ptwm_source *s, const ptwm_source_ops **ops);

/* The payload hash a source's tensor records, without reading its data: 1,
 * or 0 if its kind records none (only .ptwm kinds do). */
int ptwm_source_tensor_hash(const ptwm_source *s, size_t index, uint8_t hash[16]);

/* The table of `kind`; NULL for AUTO and unknown values. */
const ptwm_source_ops *ptwm_source_ops_of(ptwm_source_kind kind);

#endif
