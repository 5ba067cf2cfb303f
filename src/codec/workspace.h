/* Work memory of the codec: one workspace per worker, owned by the caller.
 *
 * A workspace holds every buffer and context the chunk codec and its
 * entropy coders need, so nothing in the codec keeps memory of its own: a
 * context (ptwm_ctx, src/container/context.h), which the caller owns as
 * zstd's ZSTD_CCtx, holds one per worker (the pool hands every job its
 * worker index). Regions grow to what the stages of a chunk ask for and are kept
 * between chunks (fresh pages cost more than coding a small chunk). A
 * workspace is used by one thread at a time.
 *
 * Entry points that take a workspace accept NULL: they then use a temporary
 * one for the call (tests and one-off callers; slower on small inputs). */
#ifndef PTWM_WORKSPACE_H
#define PTWM_WORKSPACE_H

#include "chain.h"
#include "common.h"

/* Each region has one owner and one use: no two users share a buffer, so no
 * offset into another's memory needs reasoning about. */
typedef enum ptwm_ws_region {
    PTWM_WS_PLANES,    /* chunk: the transform's planes (encode), decoded planes (decode) */
    PTWM_WS_CODED,     /* chunk encode: coded planes when dst lacks the room */
    PTWM_WS_SPARSE,    /* chunk: nonzero elements, bitmap and signs (encode), the
                        * dense elements before the zeros return (decode) */
    PTWM_WS_EXP,       /* chunk: block residuals and scales (encode), exponents
                        * restored from block or column residuals (decode) */
    PTWM_WS_COLS,      /* chunk: column residuals, scales and sums (encode), the
                        * column scales of a BF16 joint chunk (decode) */
    PTWM_WS_JOINT,     /* chunk: joint symbols, nibbles and side plane (encode),
                        * exponent and sign:mantissa planes (decode) */
    PTWM_WS_RANS_CNT1, /* rANS order-1 counts */
    PTWM_WS_RANS_ETAB1,/* rANS order-1 encoder tables */
    PTWM_WS_RANS_DTAB0,/* rANS order-0 decoder table */
    PTWM_WS_RANS_DTAB1,/* rANS order-1 decoder tables (see rans_dtab1_built) */
    PTWM_WS_RANS_FREQ1,/* rANS order-1 frequencies */
    PTWM_WS_BASE,      /* chunk encode: the differences from the base chunk */
    PTWM_WS_REGIONS
} ptwm_ws_region;

typedef struct ptwm_ws {
    uint8_t *buf[PTWM_WS_REGIONS];
    size_t cap[PTWM_WS_REGIONS];
    /* PTWM_WS_RANS_DTAB1 is zero except the tables of the contexts marked
     * here, laid out for precision rans_dtab1_prec (rans_decode.c, decode_o1). */
    uint8_t rans_dtab1_built[256];
    unsigned rans_dtab1_prec;
    unsigned rans_max_streams;   /* the chunk encoder's cap for its rANS planes (0: none) */
    void *zstd_cctx, *zstd_dctx; /* libzstd contexts, made on first use */
    ptwm_chain_cache chain;      /* the chain of the last chunk */
} ptwm_ws;

/* A workspace with no memory yet (NULL if out of memory); free(NULL) is
 * fine. */
ptwm_ws *ptwm_ws_create(void);
void ptwm_ws_free(ptwm_ws *ws);

/* Region r with room for at least size bytes (plus 64 of slack), or NULL if
 * out of memory. Its bytes are kept while it does not grow; a grown region
 * is zero when `zero` is set, else undefined. */
void *ptwm_ws_get(ptwm_ws *ws, ptwm_ws_region r, size_t size, int zero);

/* Give back regions larger than keep bytes (a huge one-off chunk should not
 * pin its memory in every worker); the chunk codec keeps PTWM_WS_KEEP. */
#define PTWM_WS_KEEP ((size_t)64 << 20)
void ptwm_ws_trim(ptwm_ws *ws, size_t keep);

/* ws itself, or a temporary workspace stored in *own (NULL when ws is
 * given); the caller frees *own when done. NULL only if out of memory. */
PTWM_INLINE ptwm_ws *ptwm_ws_or_temp(ptwm_ws *ws, ptwm_ws **own) {
    *own = ws ? NULL : ptwm_ws_create();
    return ws ? ws : *own;
}

#endif
