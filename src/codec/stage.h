/* Chunk stages: the transforms between a chunk's bytes and its planes.
 *
 * A chunk payload (format version 5 on) names the stages it ran, in the
 * order the encoder applied them, each with its parameters; the decoder
 * looks each up in the registry (stages.c) and runs the inverses in reverse
 * order. A chunk of an older file has its flags byte translated into the
 * same list (ptwm_stages_from_flags), so one pipeline decodes every
 * version. docs/CHAINS.md, "Chunk stages", has the wire form and the rules;
 * docs/ARCHITECTURE.md says how to add a stage.
 *
 * Planes. The transform (SPLIT or PLANES; none: one plane, the raw bytes)
 * makes the main planes, one byte per coded element each; later stages may
 * replace main planes and add planes of their own ("side" planes). The
 * payload's planes are: the main planes, then the side planes of each stage
 * from the last stage to the first, then the tail (the bytes of the chunk
 * that do not fill an element, stored as they are). */
#ifndef PTWM_STAGE_H
#define PTWM_STAGE_H

#include "chain.h"
#include "workspace.h"

/* Stage ids of the chunk payload (never renumbered). */
#define PTWM_CSTAGE_SPLIT 1   /* width, exp_bits, man_bits: float fields */
#define PTWM_CSTAGE_PLANES 2  /* width: byte planes */
#define PTWM_CSTAGE_SPARSE 3  /* width, nonzero elements, signs (0 or 1) */
#define PTWM_CSTAGE_BLOCKS 4  /* block: exponents relative to a scale per block */
#define PTWM_CSTAGE_COLS 5    /* columns: exponents relative to a scale per column */
#define PTWM_CSTAGE_JOINT 6   /* escapes: exponent and top sign:mantissa bits as one symbol */
#define PTWM_CSTAGE_BASE 7    /* width, ordered: the difference from the base chunk */
#define PTWM_CSTAGE_IDS 8     /* ids are below this */

#define PTWM_CSTAGES_MAX 6    /* stages in one chunk */
#define PTWM_CSTAGE_PARAMS 3  /* parameters of one stage, at most */
#define PTWM_STAGE_SIDES 2    /* side planes of one stage, at most */
#define PTWM_CHUNK_PLANES (PTWM_MAX_BASE_PLANES + 3)

/* One stage as a chunk uses it. */
typedef struct ptwm_stage_use {
    uint8_t id;
    uint64_t p[PTWM_CSTAGE_PARAMS];
} ptwm_stage_use;

/* The planes a list of stages makes for a chunk of raw_len bytes, built
 * stage by stage in forward order. */
typedef struct ptwm_chunk_layout {
    size_t raw_len;
    unsigned width;              /* element bytes (1 before a transform) */
    unsigned exp_bits, man_bits; /* SPLIT's fields (0: no SPLIT) */
    size_t total;                /* elements in the chunk */
    size_t n;                    /* elements the transform codes (nonzero ones: sparse) */
    size_t tail;                 /* bytes past the last whole element */
    unsigned nmain;              /* the transform's planes */
    size_t main_len[PTWM_MAX_BASE_PLANES];
    unsigned nstages;
    ptwm_stage_use use[PTWM_CSTAGES_MAX];
    unsigned nside[PTWM_CSTAGES_MAX];                  /* side planes of stage s */
    size_t side_len[PTWM_CSTAGES_MAX][PTWM_STAGE_SIDES];
    unsigned seen;               /* bit id: the stages so far */
    /* Where each plane goes in the payload (ptwm_chunk_layout_finish). */
    unsigned count;
    size_t len[PTWM_CHUNK_PLANES];
    unsigned side_at[PTWM_CSTAGES_MAX]; /* payload index of stage s's first side plane */
    unsigned tail_at;
} ptwm_chunk_layout;

/* The planes while stages run. Decoding, main[] and side[][] point at the
 * decoded planes and each inverse turns them back into its input; encoding,
 * each forward turns its input into them. */
typedef struct ptwm_pipe {
    const uint8_t *main[PTWM_MAX_BASE_PLANES];
    const uint8_t *side[PTWM_CSTAGES_MAX][PTWM_STAGE_SIDES];
    const uint8_t *src;  /* encode: the elements the transform splits */
    uint8_t *el;         /* decode: where the transform's elements go (the raw
                          * bytes, or the sparse stage's region) */
    uint8_t *raw;        /* decode: the chunk */
    int merged;          /* decode: the elements are assembled already (a stage
                          * fused its inverse with the transform's); 2: and
                          * the column scales below it applied */
    const uint32_t *ex_hist; /* encode: counts of plane 0 (JOINT picks its map) */
    const uint8_t *base; /* the base chunk (BASE's other input), or NULL: none */
    size_t base_len;
} ptwm_pipe;

typedef struct ptwm_stage {
    uint8_t id;
    const char *name;
    unsigned nparams;
    /* Check u's parameters against the stages before (L) and lay out its
     * planes; errors (PTWM_ERR_CORRUPT) name the stage and the numbers. */
    ptwm_error (*plan)(const ptwm_stage_use *u, unsigned s, ptwm_chunk_layout *L, ptwm_err *err);
    /* Encode: from the planes of the stages before (L, which does not hold
     * this stage yet) to its own (s: its position); writes the parameters
     * the data decides (counts) into u, and is then added to L. */
    ptwm_error (*forward)(ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L, ptwm_pipe *P,
                          ptwm_ws *ws);
    /* Decode: back from its planes to its input. */
    ptwm_error (*inverse)(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                          ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err);
} ptwm_stage;

/* The registry: the stage of an id, or NULL. */
const ptwm_stage *ptwm_stage_find(unsigned id);

/* Lay out a chunk of raw_len bytes through stages use[0..n), checking every
 * stage and its order. */
ptwm_error ptwm_chunk_layout_make(const ptwm_stage_use *use, unsigned n, size_t raw_len,
                            ptwm_chunk_layout *L, ptwm_err *err);
/* Start a layout (no stages), add one stage, and fix the payload order. */
void ptwm_chunk_layout_start(size_t raw_len, ptwm_chunk_layout *L);
ptwm_error ptwm_chunk_layout_add(const ptwm_stage_use *u, ptwm_chunk_layout *L, ptwm_err *err);
void ptwm_chunk_layout_finish(ptwm_chunk_layout *L);

/* Whether L holds a stage of this id; its position in *s. */
int ptwm_chunk_layout_has(const ptwm_chunk_layout *L, unsigned id, unsigned *s);

/* The stages of a format version 1-4 chunk: its flags byte and its planes'
 * raw lengths (rawl[0..count)) with the tensor's chain give the list the
 * same chunk would name in version 5. */
ptwm_error ptwm_stages_from_flags(unsigned version, unsigned flags, const ptwm_chain_info *c,
                                  const uint64_t *rawl, unsigned count, ptwm_stage_use *use,
                                  unsigned *n, ptwm_err *err);

/* For BLOCKS and COLS: a split exponent of one byte before, not yet relative
 * to scales, and no joint symbols yet. */
ptwm_error ptwm_stage_needs_exponent(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                                     ptwm_err *err);

/* COLS's scales at the BF16 exponent field (ptwm_colscale_s7) for `cols`
 * columns, in the workspace: for COLS's own inverse and for JOINT's merge,
 * which finishes them when COLS is right below it. NULL: out of memory
 * (err says so). */
uint16_t *ptwm_stage_cols_s7(ptwm_ws *ws, size_t cols, ptwm_err *err);

/* Stage definitions (one file each). */
extern const ptwm_stage ptwm_stage_split, ptwm_stage_planes, ptwm_stage_sparse,
    ptwm_stage_blocks, ptwm_stage_cols, ptwm_stage_joint, ptwm_stage_base;

/* A plan's error: "chunk payload: stage S (name): ..." */
ptwm_error ptwm_stage_fail(ptwm_err *err, unsigned s, const ptwm_stage_use *u, const char *fmt,
                           ...) PTWM_PRINTF(4, 5);

#endif
