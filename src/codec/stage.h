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

/* Decoding, the data between two inverses is in one of two forms: the main
 * planes (ptwm_pipe.main, a byte an element each, as the transform and the
 * stages after it made them), or whole elements (at ptwm_pipe.el: the
 * transform's merge is done). Each stage says which forms its inverse takes
 * and gives (ptwm_stage.gives) and the decode plan picks one per stage
 * (ptwm_decode_plan_make), so an inverse learns the form of its input from
 * the plan, never from the stage that ran before it. */
#define PTWM_FORM_PLANES 1u
#define PTWM_FORM_ELEMENTS 2u

struct ptwm_pipe;
/* An inverse run strip by strip inside the one of a stage above it (see
 * ptwm_stage.strip): el[0..len) are elements at..at+len of the chunk. */
typedef struct ptwm_strip {
    void (*fn)(const struct ptwm_pipe *P, unsigned s, uint8_t *el, size_t len, size_t at);
    unsigned s;
} ptwm_strip;

/* The planes while stages run. Decoding, main[] and side[][] point at the
 * decoded planes and each inverse turns them back into its input; encoding,
 * each forward turns its input into them. */
typedef struct ptwm_pipe {
    const uint8_t *main[PTWM_MAX_BASE_PLANES];
    const uint8_t *side[PTWM_CSTAGES_MAX][PTWM_STAGE_SIDES];
    const uint8_t *src;  /* encode: the elements the transform splits */
    uint8_t *el;         /* decode: where the transform's elements go (the raw
                          * bytes, or a region a stage's prepare gives) */
    uint8_t *raw;        /* decode: the chunk */
    /* Decode: the forms the running inverse takes and must give (the
     * plan's), and the inverses it runs on each strip of elements it gives
     * (ptwm_pipe_strips), with what they prepared (strip_begin). */
    unsigned in, out;
    unsigned nstrips;
    ptwm_strip strips[PTWM_CSTAGES_MAX];
    const void *strip_tab[PTWM_CSTAGES_MAX];
    size_t strip_span[PTWM_CSTAGES_MAX];
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
    /* Decode: back from its planes to its input, taking the data in form
     * P->in and leaving it in form P->out. */
    ptwm_error (*inverse)(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                          ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err);
    /* Decode: the forms (a mask of PTWM_FORM_*) its inverse can give when it
     * takes the data in form `in`, for layout L; 0: it cannot take `in`. */
    unsigned (*gives)(const ptwm_chunk_layout *L, unsigned s, unsigned in);
    /* Decode, optional (NULL: none): its inverse on elements a strip at a
     * time, run inside the inverse of a stage above it that gives elements
     * strip by strip (strips_out), while each strip is in cache.
     * strip_begin prepares what every strip needs (into P->strip_tab[s] and
     * P->strip_span[s]); strip finishes one. */
    ptwm_error (*strip_begin)(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                              ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err);
    void (*strip)(const ptwm_pipe *P, unsigned s, uint8_t *el, size_t len, size_t at);
    /* Decode, optional (NULL: none): set the pipe up before any inverse
     * runs (SPARSE: the transform's elements go to a region of their own,
     * P->el, which its inverse spreads out into the chunk at P->raw). */
    ptwm_error (*prepare)(const ptwm_stage_use *u, unsigned s, const ptwm_chunk_layout *L,
                          ptwm_pipe *P, ptwm_ws *ws, ptwm_err *err);
    /* Its inverse, giving elements, hands each strip of them to the
     * inverses in P->strips (ptwm_pipe_strips). */
    uint8_t strips_out;
} ptwm_stage;

/* The decode plan of a layout: each stage's forms, and which inverse runs it
 * (its own, or that of a stage above it running it strip by strip). */
typedef struct ptwm_decode_plan {
    uint8_t in[PTWM_CSTAGES_MAX], out[PTWM_CSTAGES_MAX];
    uint8_t host[PTWM_CSTAGES_MAX];
} ptwm_decode_plan;

/* Plan the inverses of L's stages: the one that runs first (the last
 * stage's) takes the decoded planes, the one that runs last (the first
 * stage's) gives the chunk's elements, and each gives elements as soon as
 * the stages below it can take them (a merge fused into the stage above it
 * saves a pass over the chunk). PTWM_ERR_CORRUPT if the stages cannot be
 * undone. */
ptwm_error ptwm_decode_plan_make(const ptwm_chunk_layout *L, ptwm_decode_plan *D,
                                 ptwm_err *err);
/* Run the inverses in P->strips on el[0..len), elements at.. of the chunk
 * (a ptwm_pipe as ctx, for a merge loop that does not know the pipe). */
void ptwm_pipe_strips(void *ctx, uint8_t *el, size_t len, size_t at);

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

/* Whether L's split makes BF16 fields (2-byte elements, an 8-bit exponent
 * in bits 7-14): the planes a merge can write as whole elements at once. */
PTWM_INLINE int ptwm_chunk_layout_bf16(const ptwm_chunk_layout *L) {
    return L->width == 2 && L->exp_bits == 8 && L->man_bits == 7;
}

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

/* ptwm_stage.gives of the stages whose inverse keeps the form: one that
 * works on the planes only, and one that takes and gives whole elements. */
unsigned ptwm_stage_gives_planes(const ptwm_chunk_layout *L, unsigned s, unsigned in);
unsigned ptwm_stage_gives_elements(const ptwm_chunk_layout *L, unsigned s, unsigned in);

/* Stage definitions (one file each). */
extern const ptwm_stage ptwm_stage_split, ptwm_stage_planes, ptwm_stage_sparse,
    ptwm_stage_blocks, ptwm_stage_cols, ptwm_stage_joint, ptwm_stage_base;

/* A plan's error: "chunk payload: stage S (name): ..." */
ptwm_error ptwm_stage_fail(ptwm_err *err, unsigned s, const ptwm_stage_use *u, const char *fmt,
                           ...) PTWM_PRINTF(4, 5);

#endif
