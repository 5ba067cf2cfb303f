/* Internal: compressing a checkpoint in parts and assembling it
 * (ptdir_parts.c, docs/SCALE.md). */
#ifndef PTWM_PTDIR_PARTS_H
#define PTWM_PTDIR_PARTS_H

#include "hash.h"
#include "sink.h"

#define PTWM_PARTS_MAX 100000u

/* One shard as a part's manifest records it. */
typedef struct ptwm_parts_shard {
    size_t index;               /* in the plan, 0-based */
    char *name;
    uint64_t raw_bytes, file_bytes;
    char xxh3[33];              /* of the whole file, hex */
} ptwm_parts_shard;

/* OUTDIR/.ptwm-parts/part-KKKKK-of-NNNNN.json */
typedef struct ptwm_parts_manifest {
    char *file;
    char plan[33];
    uint32_t part, parts;
    char *source;
    char *direction;            /* "compress" or "decompress" */
    char *base;                 /* the base's path (absolute), or NULL for none */
    int follow_symlinks;        /* the parts followed links anywhere in the source */
    uint64_t max_shard_size, chunk_size;
    int method;
    ptwm_parts_shard *shards;
    size_t nshards;
} ptwm_parts_manifest;

/* Shard k of n goes to part_of[k] (0-based): largest first, each to the part
 * with the fewest bytes so far, the lowest part on ties. */
void ptwm_parts_assign(const uint64_t *raw, size_t n, uint32_t parts, uint32_t *part_of);
/* The files a partitioned run writes, in plan order: name, raw bytes and
 * the part (0-based) that writes each. */
typedef struct ptwm_parts_files {
    size_t n;
    uint32_t parts;
    char **name;
    uint64_t *raw;
    uint32_t *part_of;
} ptwm_parts_files;

ptwm_error ptwm_parts_files_new(size_t n, uint32_t parts, ptwm_parts_files *f, ptwm_err *err);
ptwm_error ptwm_parts_files_name(ptwm_parts_files *f, size_t k, const char *name, ptwm_err *err);
/* Fill part_of from raw (nothing for parts 0). */
void ptwm_parts_files_assign(ptwm_parts_files *f);
void ptwm_parts_files_free(ptwm_parts_files *f);

/* A conversion's plan into `sink`, its fingerprint and its files, for o->parts parts. */
ptwm_error ptwm_parts_plan(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                           const ptwm_checkpoint_options *o, ptwm_conv_plan *pl,
                           ptwm_parts_files *f, char fp[33], ptwm_err *err);
/* o->part and o->parts name a part (or none: both 0). */
ptwm_error ptwm_parts_check(const ptwm_checkpoint_options *o, ptwm_err *err);
/* Before a part writes: OUTDIR new, empty or holding parts of the plan `fp`;
 * *files_dir receives where the part writes its files. */
ptwm_error ptwm_parts_begin(const char *outdir, const char *src, const char *fp,
                            const ptwm_checkpoint_options *o, char **files_dir, ptwm_err *err);
/* After: the manifest of part o->part, with the size and hash of its files. */
ptwm_error ptwm_parts_write_manifest(const char *outdir, const char *src, const char *fp,
                                     const char *direction, const ptwm_checkpoint_options *o,
                                     const ptwm_parts_files *f, ptwm_err *err);
/* At assembly: every manifest lists exactly its part's files of the plan
 * (file_bytes[k] receives each file's size), and every file has the size
 * and hash its manifest recorded. */
ptwm_error ptwm_parts_verify(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                             const ptwm_parts_files *f, uint64_t *file_bytes, ptwm_err *err);
/* Move the files into OUTDIR: all but `last` (NULL: all), or only `last`. */
ptwm_error ptwm_parts_publish(const char *outdir, const ptwm_parts_manifest *m, size_t n,
                              const char *last, int only_last, ptwm_err *err);
/* PTWM_ERR_MISMATCH: the source gives plan `fp`, not the parts' plan. */
ptwm_error ptwm_parts_changed(const char *outdir, const ptwm_parts_manifest *m, const char *fp,
                              ptwm_err *err);
/* Remove OUTDIR/.ptwm-parts once the checkpoint is whole. */
void ptwm_parts_done(const char *outdir);
/* Part o->part of o->parts: its shards and its manifest, under OUTDIR. */
ptwm_error ptwm_parts_convert(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                              const char *outdir, const ptwm_checkpoint_options *o,
                              ptwm_err *err);
/* Every manifest in OUTDIR (none when it has no .ptwm-parts), by part. */
ptwm_error ptwm_parts_read_all(const char *outdir, ptwm_parts_manifest **out, size_t *n,
                               ptwm_err *err);
void ptwm_parts_free(ptwm_parts_manifest *m, size_t n);
/* Pieces of a plan's fingerprint (its hex form: ptwm_hex128). */
void ptwm_parts_hash_u64(ptwm_xxh128 *h, uint64_t v);
void ptwm_parts_hash_str(ptwm_xxh128 *h, const char *s);
/* XXH3-128 (hex) and size of a whole file, streaming. */
ptwm_error ptwm_parts_hash_file(const char *path, char hex[33], uint64_t *size, ptwm_err *err);
/* OUTDIR holds files but no parts: a finished checkpoint (or not ours). */
int ptwm_parts_finished(const char *outdir);

#endif
