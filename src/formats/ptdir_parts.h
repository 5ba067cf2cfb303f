/* Internal: compressing a checkpoint in parts and assembling it
 * (ptdir_parts.c, docs/SCALE.md). */
#ifndef PTWM_PTDIR_PARTS_H
#define PTWM_PTDIR_PARTS_H

#include "ptdir_internal.h"

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
    uint64_t max_shard_size, chunk_size;
    int method;
    ptwm_parts_shard *shards;
    size_t nshards;
} ptwm_parts_manifest;

/* Shard k of n goes to part_of[k] (0-based): largest first, each to the part
 * with the fewest bytes so far, the lowest part on ties. */
void ptwm_parts_assign(const uint64_t *raw, size_t n, uint32_t parts, uint32_t *part_of);
/* The plan, its fingerprint and the part of each shard, for o->parts parts. */
ptwm_error ptwm_parts_plan(const ptwm_ck_src *s, const ptwm_checkpoint_options *o,
                           ptwm_ck_plan *pl, uint32_t **part_of, char fp[33], ptwm_err *err);
/* Part o->part of o->parts: its shards and its manifest, under OUTDIR. */
ptwm_error ptwm_parts_compress(const ptwm_ck_src *s, const char *outdir,
                               const ptwm_checkpoint_options *o, ptwm_err *err);
/* Every manifest in OUTDIR (none when it has no .ptwm-parts), by part. */
ptwm_error ptwm_parts_read_all(const char *outdir, ptwm_parts_manifest **out, size_t *n,
                               ptwm_err *err);
void ptwm_parts_free(ptwm_parts_manifest *m, size_t n);
/* XXH3-128 (hex) and size of a whole file, streaming. */
ptwm_error ptwm_parts_hash_file(const char *path, char hex[33], uint64_t *size, ptwm_err *err);
/* An OUTDIR with an index or a lone model.ptwm is a finished checkpoint. */
int ptwm_parts_finished(const char *outdir);

#endif
