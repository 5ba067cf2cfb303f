/* Internal: the base of tensors coded against one (docs/DELTA.md), as the
 * container sees it: a table of operations over an opaque handle. The
 * container defines it and reads a base through it only; the layer that
 * owns the base fills it in (the formats layer, from a ptwm_source:
 * formats/source_base.c), so the container needs nothing of the base's
 * format. */
#ifndef PTWM_CONTAINER_BASE_H
#define PTWM_CONTAINER_BASE_H

#include "common.h"

typedef struct ptwm_base_ops {
    /* The index of tensor `name`: PTWM_OK, or an error (no message) if the
     * base has none. */
    ptwm_error (*find)(void *h, const char *name, size_t *index);
    /* Name, dtype, shape and size of tensor `index` (no message on failure). */
    ptwm_error (*tensor)(void *h, size_t index, ptwm_tensor_info *out);
    /* The payload hash the base records for tensor `index`, without reading
     * its data: 1, or 0 if it records none. */
    int (*tensor_hash)(void *h, size_t index, uint8_t hash[16]);
    /* Bytes [offset, offset + len) of tensor `index`. */
    ptwm_error (*read)(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                       ptwm_err *err);
    /* What messages call the base (its path). */
    const char *(*label)(void *h);
} ptwm_base_ops;

typedef struct ptwm_base {
    const ptwm_base_ops *ops;   /* NULL: no base */
    void *h;                    /* not owned: outlives the readers and writers given it */
    /* Reads must come one at a time (a base that decodes with state of its
     * own): a reader's workers take turns; else any thread reads at once. */
    int serial;
} ptwm_base;

#endif
