/* The stage registry, chunk layouts, and the translation of the flags of
 * format versions 1-4 into stage lists (see stage.h). */
#include <stdarg.h>
#include <stdio.h>
#include "planes.h"
#include "stage.h"

/* A new stage: its definition in a file of its own, its id in stage.h, and
 * one line here. */
static const ptwm_stage *const registry[PTWM_CSTAGE_IDS] = {
    NULL,
    &ptwm_stage_split,  /* 1 */
    &ptwm_stage_planes, /* 2 */
    &ptwm_stage_sparse, /* 3 */
    &ptwm_stage_blocks, /* 4 */
    &ptwm_stage_cols,   /* 5 */
    &ptwm_stage_joint,  /* 6 */
    &ptwm_stage_base,   /* 7 */
};

const ptwm_stage *ptwm_stage_find(unsigned id) {
    return id < PTWM_CSTAGE_IDS ? registry[id] : NULL;
}

ptwm_error ptwm_stage_fail(ptwm_err *err, unsigned s, const ptwm_stage_use *u, const char *fmt,
                           ...) {
    char msg[PTWM_ERR_MESSAGE_MAX];
    const ptwm_stage *st = ptwm_stage_find(u->id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: stage %u (%s): %s", s,
                     st ? st->name : "?", msg);
}

void ptwm_chunk_layout_start(size_t raw_len, ptwm_chunk_layout *L) {
    memset(L, 0, sizeof(*L));
    L->raw_len = raw_len;
    L->width = 1;
    L->total = L->n = raw_len;
    L->nmain = 1; /* no transform: one plane, the raw bytes */
    L->main_len[0] = raw_len;
}

ptwm_error ptwm_chunk_layout_add(const ptwm_stage_use *u, ptwm_chunk_layout *L, ptwm_err *err) {
    const ptwm_stage *st = ptwm_stage_find(u->id);
    unsigned s = L->nstages;
    ptwm_error e;
    if (!st)
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "chunk payload: stage %u: unknown id %u", s,
                         (unsigned)u->id);
    if (s >= PTWM_CSTAGES_MAX)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: more than %d stages",
                         PTWM_CSTAGES_MAX);
    if (L->seen & (1u << u->id))
        return ptwm_stage_fail(err, s, u, "named twice");
    L->use[s] = *u;
    e = st->plan(u, s, L, err);
    if (e) return e;
    L->seen |= 1u << u->id;
    L->nstages = s + 1;
    return PTWM_OK;
}

void ptwm_chunk_layout_finish(ptwm_chunk_layout *L) {
    unsigned k, s;
    L->count = 0;
    for (k = 0; k < L->nmain; k++) L->len[L->count++] = L->main_len[k];
    for (s = L->nstages; s-- > 0;) {
        L->side_at[s] = L->count;
        for (k = 0; k < L->nside[s]; k++) L->len[L->count++] = L->side_len[s][k];
    }
    L->tail_at = L->count;
    if (L->tail) L->len[L->count++] = L->tail;
}

ptwm_error ptwm_chunk_layout_make(const ptwm_stage_use *use, unsigned n, size_t raw_len,
                            ptwm_chunk_layout *L, ptwm_err *err) {
    unsigned s;
    ptwm_error e;
    ptwm_chunk_layout_start(raw_len, L);
    if (n > PTWM_CSTAGES_MAX)
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: %u stages (at most %d)", n,
                         PTWM_CSTAGES_MAX);
    for (s = 0; s < n; s++)
        if ((e = ptwm_chunk_layout_add(&use[s], L, err))) return e;
    /* A sparse or base stage hands its elements to a transform. */
    if ((L->seen & ((1u << PTWM_CSTAGE_SPARSE) | (1u << PTWM_CSTAGE_BASE))) &&
        !(L->seen & ((1u << PTWM_CSTAGE_SPLIT) | (1u << PTWM_CSTAGE_PLANES))))
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: %s elements, but no transform stage follows",
                         (L->seen & (1u << PTWM_CSTAGE_SPARSE)) ? "sparse" : "base difference");
    ptwm_chunk_layout_finish(L);
    return PTWM_OK;
}

int ptwm_chunk_layout_has(const ptwm_chunk_layout *L, unsigned id, unsigned *s) {
    unsigned k;
    for (k = 0; k < L->nstages; k++)
        if (L->use[k].id == id) {
            if (s) *s = k;
            return 1;
        }
    return 0;
}

/* ---- decode plans ------------------------------------------------------ */

ptwm_error ptwm_decode_plan_make(const ptwm_chunk_layout *L, ptwm_decode_plan *D,
                                 ptwm_err *err) {
    /* need[s]: the forms stage s's inverse may give so that the inverses
     * below it end with the chunk's elements. */
    unsigned need[PTWM_CSTAGES_MAX + 1], s, t, f, in = PTWM_FORM_PLANES;
    const ptwm_stage *st[PTWM_CSTAGES_MAX];
    memset(D, 0, sizeof(*D));
    need[0] = PTWM_FORM_ELEMENTS;
    for (s = 0; s < L->nstages; s++) {
        st[s] = ptwm_stage_find(L->use[s].id);
        need[s + 1] = 0;
        for (f = PTWM_FORM_PLANES; f <= PTWM_FORM_ELEMENTS; f <<= 1)
            if (st[s]->gives(L, s, f) & need[s]) need[s + 1] |= f;
    }
    if (!(need[L->nstages] & PTWM_FORM_PLANES))
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: its %u stages cannot be undone from its planes",
                         L->nstages);
    for (s = L->nstages; s-- > 0;) {
        unsigned can = st[s]->gives(L, s, in) & need[s];
        D->in[s] = (uint8_t)in;
        D->out[s] = (uint8_t)(in = (can & PTWM_FORM_ELEMENTS) ? PTWM_FORM_ELEMENTS
                                                             : PTWM_FORM_PLANES);
        D->host[s] = (uint8_t)s;
    }
    /* The inverses right below a stage that gives elements strip by strip,
     * and can take them so, run inside its inverse. */
    for (s = L->nstages; s-- > 0;) {
        if (D->host[s] != s || !st[s]->strips_out || D->out[s] != PTWM_FORM_ELEMENTS) continue;
        for (t = s; t-- > 0 && st[t]->strip && D->in[t] == PTWM_FORM_ELEMENTS;)
            D->host[t] = (uint8_t)s;
    }
    return PTWM_OK;
}

unsigned ptwm_stage_gives_planes(const ptwm_chunk_layout *L, unsigned s, unsigned in) {
    (void)L, (void)s;
    return in == PTWM_FORM_PLANES ? PTWM_FORM_PLANES : 0;
}

unsigned ptwm_stage_gives_elements(const ptwm_chunk_layout *L, unsigned s, unsigned in) {
    (void)L, (void)s;
    return in == PTWM_FORM_ELEMENTS ? PTWM_FORM_ELEMENTS : 0;
}

void ptwm_pipe_strips(void *ctx, uint8_t *el, size_t len, size_t at) {
    const ptwm_pipe *P = (const ptwm_pipe *)ctx;
    unsigned k;
    for (k = 0; k < P->nstrips; k++) P->strips[k].fn(P, P->strips[k].s, el, len, at);
}

/* ---- format versions 1-4 ----------------------------------------------- */

#define FLAG_CRC 1u
#define FLAG_MICRO 2u
#define FLAG_RAW 4u
#define FLAG_SPARSE 8u
#define FLAG_JOINT 16u
#define FLAG_COLS 32u
#define FLAG_SIGNS 64u

static ptwm_error check_flags(unsigned version, unsigned flags, const ptwm_chain_info *c,
                              ptwm_err *err) {
    if ((flags & FLAG_SIGNS) && version < 3)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: flag 0x%02x (signed zeros) in a version %u file (from "
                         "version 3 on)",
                         FLAG_SIGNS, version);
    if ((flags & FLAG_COLS) && version < 2)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: flag 0x%02x (column-relative exponents) in a version %u "
                         "file (from version 2 on)",
                         FLAG_COLS, version);
    if (flags & ~(FLAG_CRC | FLAG_MICRO | FLAG_RAW | FLAG_SPARSE | FLAG_JOINT | FLAG_COLS |
                  FLAG_SIGNS) ||
        ((flags & FLAG_RAW) && (flags & (FLAG_MICRO | FLAG_SPARSE | FLAG_JOINT | FLAG_COLS))) ||
        ((flags & FLAG_JOINT) && (flags & FLAG_MICRO)) ||
        ((flags & FLAG_COLS) && (flags & (FLAG_MICRO | FLAG_SPARSE))) ||
        ((flags & FLAG_SIGNS) && !(flags & FLAG_SPARSE)))
        return ptwm_fail(err, PTWM_ERR_CORRUPT, "chunk payload: unknown flags 0x%02x", flags);
    if ((flags & FLAG_JOINT) &&
        !(c->xform == PTWM_XFORM_SPLIT && c->exp_bits <= 8 && (c->man_bits + 1) % 8 == 0))
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: joint exponent planes, but the chain has no split with "
                         "a one-byte exponent and whole sign:mantissa bytes");
    if ((flags & (FLAG_MICRO | FLAG_COLS)) && !c->micro_block)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: %s-relative exponents, but the chain has no microscale",
                         (flags & FLAG_MICRO) ? "block" : "column");
    if ((flags & FLAG_SPARSE) && c->xform == PTWM_XFORM_BYTES)
        return ptwm_fail(err, PTWM_ERR_CORRUPT,
                         "chunk payload: sparse elements, but the chain has no transform");
    return PTWM_OK;
}

/* Raw length of plane k, or 0 past the planes (a layout check then fails). */
static uint64_t rawl_at(const uint64_t *rawl, unsigned count, unsigned k) {
    return k < count ? rawl[k] : 0;
}

ptwm_error ptwm_stages_from_flags(unsigned version, unsigned flags, const ptwm_chain_info *c,
                                  const uint64_t *rawl, unsigned count, ptwm_stage_use *use,
                                  unsigned *n, ptwm_err *err) {
    ptwm_error e = check_flags(version, flags, c, err);
    unsigned k = 0, side = c->nplanes;
    if (e) return e;
    memset(use, 0, PTWM_CSTAGES_MAX * sizeof(*use));
    *n = 0;
    if (flags & FLAG_RAW) return PTWM_OK; /* bypassed: the raw bytes */
    if (flags & FLAG_SPARSE) {
        use[k].id = PTWM_CSTAGE_SPARSE;
        use[k].p[0] = c->width;
        use[k].p[1] = rawl_at(rawl, count, 0); /* plane 0 holds the nonzero elements */
        use[k++].p[2] = (flags & FLAG_SIGNS) != 0;
    }
    if (c->xform == PTWM_XFORM_SPLIT) {
        use[k].id = PTWM_CSTAGE_SPLIT;
        use[k].p[0] = c->width;
        use[k].p[1] = c->exp_bits;
        use[k++].p[2] = c->man_bits;
    } else if (c->xform == PTWM_XFORM_PLANES) {
        use[k].id = PTWM_CSTAGE_PLANES;
        use[k++].p[0] = c->width;
    }
    /* The side plane comes first after the transform's, then the scales. */
    if (flags & FLAG_JOINT) side++;
    if (flags & FLAG_MICRO) {
        use[k].id = PTWM_CSTAGE_BLOCKS;
        use[k++].p[0] = c->micro_block;
    }
    if (flags & FLAG_COLS) {
        use[k].id = PTWM_CSTAGE_COLS;
        use[k++].p[0] = rawl_at(rawl, count, side); /* the scale plane: one a column */
    }
    if (flags & FLAG_JOINT) {
        uint64_t sl = rawl_at(rawl, count, c->nplanes);
        if (sl < PTWM_JOINT_MAP)
            return ptwm_fail(err, PTWM_ERR_CORRUPT,
                             "chunk payload: joint side plane %u of %llu bytes (at least %d)",
                             c->nplanes, (unsigned long long)sl, PTWM_JOINT_MAP);
        use[k].id = PTWM_CSTAGE_JOINT;
        use[k++].p[0] = sl - PTWM_JOINT_MAP; /* the map, then one exponent an escape */
    }
    *n = k;
    return PTWM_OK;
}
