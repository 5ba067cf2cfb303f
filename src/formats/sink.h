/* Internal: the sink interface and the one conversion path over it.
 *
 * A conversion copies a source (a file or a sharded directory of either
 * format, read through the source interface, source_impl.h) into a sink: a
 * kind of output file (.ptwm, sink_ptwm.c; safetensors, sink_safetensors.c).
 * convert.c plans the output files once for every direction (the source's
 * own files, each reproducing the file it records, or fresh shards packed by
 * size), writes each through the sink, then the sink's index and the
 * source's other files, staged and committed whole, or in parts. One sink
 * state serves every file of a conversion, so its threads and work memory
 * are shared across shards. */
#ifndef PTWM_SINK_H
#define PTWM_SINK_H

#include "index.h"
#include "outdir.h"
#include "ptdir_files.h"
#include "source_impl.h"

#define PTWM_ST_INDEX_NAME "model.safetensors.index.json"
/* Index metadata keys holding the source's Hugging Face index, kept byte for
 * byte so decompression gives it back unchanged. */
#define PTWM_META_SOURCE_INDEX_NAME "source_index_name"
#define PTWM_META_SOURCE_INDEX "source_index"

typedef struct ptwm_conv_progress {
    ptwm_progress_fn fn;
    void *ctx;
    uint64_t done, total;
} ptwm_conv_progress;

/* Count `bytes` more as done and tell the callback. */
void ptwm_conv_progress_add(ptwm_conv_progress *p, uint64_t bytes);

/* One input file of a conversion: a file of a source kind, open. */
typedef struct ptwm_conv_in {
    const ptwm_source_ops *ops;
    void *h;
    const char *label;          /* in messages: its path, or its name in the directory */
    const char *path;
    ptwm_file_record rec;       /* the safetensors file it reproduces (rec.json NULL: none) */
} ptwm_conv_in;

/* A source as input files; a lone file is a set of one. */
typedef struct ptwm_conv_src {
    const char *path;
    ptwm_source_kind kind;      /* of the file or directory */
    ptwm_source *opened;        /* what was opened here, or NULL (wrapped) */
    void *dir;                  /* a ptwm_shardir, or NULL */
    void *single;               /* a lone file's handle, or NULL */
    ptwm_conv_in *in;
    size_t nin;
    uint64_t total;             /* raw tensor bytes */
    char *index_name;           /* the Hugging Face index it holds or recorded, if any */
    char *index_text;
    size_t index_len;
    ptwm_link_rule links;       /* which links of a directory source are read */
    int has_links;              /* links set (ptwm_conv_src_check_links) */
} ptwm_conv_src;

typedef struct ptwm_conv_item {
    uint32_t in;                /* its input file */
    size_t local;               /* its index there */
    ptwm_tensor_info info;
} ptwm_conv_item;

/* Where every tensor goes. Output file k holds items[start[k] .. start[k+1])
 * (packing keeps them contiguous in source order), raw[k] bytes of tensors.
 * Exact plans write input file k as output file k, reproducing its record. */
typedef struct ptwm_conv_plan {
    ptwm_conv_item *items;
    size_t n, nfiles;
    size_t *shard_of, *start;
    uint64_t *raw;
    char **names;
    int exact;
    int with_index;
} ptwm_conv_plan;

/* One output file for a sink. */
typedef struct ptwm_conv_file {
    const char *path;
    const ptwm_conv_src *src;
    const ptwm_conv_item *items;
    size_t n;
    const ptwm_conv_in *exact;  /* exact plans: the input file it reproduces */
} ptwm_conv_file;

/* What a conversion is asked for, whatever the sink. */
typedef struct ptwm_conv_opts {
    ptwm_cparams cp;            /* threads; .ptwm sinks: how to code (cp.ctx NULL: one is made) */
    ptwm_conv_progress *progress;
} ptwm_conv_opts;

typedef struct ptwm_sink_ops {
    const char *ext;            /* of shard names: model-0000k-of-0000n.<ext> */
    const char *single_name;    /* a lone output file */
    const char *direction;      /* parts manifests: "compress" or "decompress" */
    int record_names;           /* exact plans name files after their records */
    /* The state every file of a conversion shares (threads, work memory). */
    ptwm_error (*open)(const ptwm_conv_opts *o, void **out, ptwm_err *err);
    /* Write f; *size receives its bytes on disk. A file is renamed into
     * place once whole (by the time close returns PTWM_OK: a sink may still
     * be finishing it while the next one is written), discarded otherwise. */
    ptwm_error (*file)(void *s, const ptwm_conv_file *f, uint64_t *size, ptwm_err *err);
    /* Free the state; err NULL when the conversion failed already. */
    ptwm_error (*close)(void *s, ptwm_err *err);
    /* Whether the plan's directory has an index (else its one file). */
    int (*with_index)(const ptwm_conv_src *s, size_t nfiles, int exact);
    /* Write the directory's own files into dir, last: the index when
     * p->with_index (sizes[k]: output file k's bytes on disk); a .ptwm
     * directory with an index or other files (`others`: each file copied,
     * its size and hash) also its file record, before the index. */
    ptwm_error (*index)(const ptwm_conv_src *s, const ptwm_conv_plan *p, const uint64_t *sizes,
                        struct ptwm_files *others, const char *dir, ptwm_err *err);
} ptwm_sink_ops;

extern const ptwm_sink_ops ptwm_sink_ptwm_ops;          /* sink_ptwm.c */
extern const ptwm_sink_ops ptwm_sink_safetensors_ops;   /* sink_safetensors.c */

/* Open `path` (a file or directory of `family`'s format: PTWM_SOURCE_PTWM or
 * PTWM_SOURCE_SAFETENSORS) as input files, read with pread. */
ptwm_error ptwm_conv_src_open(ptwm_conv_src *s, const char *path, ptwm_source_kind family,
                              ptwm_err *err);
/* An open file of kind `ops` as a set of one (the caller keeps it). */
ptwm_error ptwm_conv_src_wrap(ptwm_conv_src *s, const ptwm_source_ops *ops, void *h,
                              const char *path, ptwm_err *err);
void ptwm_conv_src_close(ptwm_conv_src *s);

/* The plan for max_shard_size (0: the source's own files), for `sink`. */
ptwm_error ptwm_conv_plan_make(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                               uint64_t max_shard_size, ptwm_conv_plan *p, ptwm_err *err);
void ptwm_conv_plan_free(ptwm_conv_plan *p);
/* Write the output files k with wanted[k] (all when NULL) into dir through
 * one sink state; sizes[k] receives each one's bytes on disk. */
/* Threads for a conversion of `raw` input bytes left to the library
 * (threads 0): one per PTWM_CONV_BYTES_A_THREAD begun, at most the cores.
 * On files of a few MB a second thread costs more than it codes (its
 * start, its fresh buffers, unmapping them): docs/SCALING.md, "Small files".
 * A restore (`restore`) takes one decoding thread where that gives two:
 * its writing thread is the second. */
#define PTWM_CONV_BYTES_A_THREAD ((uint64_t)32 << 20)
int ptwm_conv_auto_threads(uint64_t raw, int restore);
ptwm_error ptwm_conv_write(const ptwm_conv_src *s, const ptwm_conv_plan *p,
                           const ptwm_sink_ops *sink, const ptwm_conv_opts *o, const char *dir,
                           const uint8_t *wanted, uint64_t *sizes, ptwm_err *err);
/* The plan for max_shard_size, every file, the source's other files when
 * `others`, and last the index, into dir; *with_index (if not NULL) says
 * whether there is one. */
ptwm_error ptwm_conv_run(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                         const ptwm_conv_opts *o, uint64_t max_shard_size, const char *dir,
                         int others, int *with_index, ptwm_err *err);
/* ptwm_conv_run into a directory built beside outdir and committed whole
 * (outdir.h; src, if not NULL, must not overlap it). */
ptwm_error ptwm_conv_staged(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                            const ptwm_conv_opts *o, uint64_t max_shard_size, const char *outdir,
                            const char *src, int force, ptwm_err *err);
/* The source, one output file for it (its plan with the source's own
 * files) written at `dst`. */
ptwm_error ptwm_conv_file_write(const ptwm_conv_src *s, const ptwm_sink_ops *sink,
                                const ptwm_conv_opts *o, const char *dst, ptwm_err *err);
/* Check the links of a directory source's index, file record and shards
 * against the rule for `follow` (outdir.h), and keep the rule for copying its
 * other files. Nothing to do for a file source. */
ptwm_error ptwm_conv_src_check_links(ptwm_conv_src *s, int follow, ptwm_err *err);
/* Copy the source directory's other files (config, tokenizer...) into dir: a
 * .ptwm directory's checked against its file record (a damaged or missing
 * one is an error naming it); each copied file added to `out` (NULL: not). */
ptwm_error ptwm_conv_copy_other_files(const ptwm_conv_src *s, const char *dir,
                                      struct ptwm_files *out, ptwm_err *err);
/* The conversion options of coding parameters (NULL: defaults), their
 * progress callback reported through p; and of checkpoint options. */
void ptwm_conv_opts_from(const ptwm_cparams *cp, ptwm_conv_progress *p, ptwm_conv_opts *out);
void ptwm_conv_opts_of(const ptwm_checkpoint_options *o, ptwm_conv_progress *p,
                       ptwm_conv_opts *out);

/* The sinks' shared steps: the index of a plan (either kind: every tensor
 * and its file, the totals; a .ptwm index of an exact plan keeps the Hugging
 * Face index it reproduces) written at dir/name, and the metadata an output
 * file carries (its record's input's, or its first tensor's), as *n entries
 * at *kv (ptwm_free it). */
ptwm_error ptwm_conv_index(ptwm_index_kind kind, const ptwm_conv_src *s, const ptwm_conv_plan *p,
                           const uint64_t *sizes, const char *dir, const char *name,
                           ptwm_err *err);
/* That index, built and not written (`name` labels it in messages). */
ptwm_error ptwm_conv_index_build(ptwm_index_kind kind, const ptwm_conv_src *s,
                                 const ptwm_conv_plan *p, const uint64_t *sizes, const char *name,
                                 ptwm_index **out, ptwm_err *err);
ptwm_error ptwm_conv_metadata(const ptwm_conv_file *f, ptwm_kv **kv, size_t *n, ptwm_err *err);

#endif
