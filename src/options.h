/* The public options structs read with their size (include/ptwm.h, "Options
 * structs carry their size"): every entry point that takes one reads it
 * through these into a whole struct of this library's size, its defaults
 * where the caller's struct ends. */
#ifndef PTWM_OPTIONS_H
#define PTWM_OPTIONS_H

#include "common.h"

/* *out = *in as far as in->size reaches, the defaults after it (NULL in: every
 * default); out->size is this library's. PTWM_ERR_INVALID_ARG for a size of
 * 0, one larger than this library's struct, or one that is no version's; the
 * message starts with `where` (the function called). */
ptwm_error ptwm_cparams_read(const ptwm_cparams *in, ptwm_cparams *out, const char *where,
                             ptwm_err *err);
ptwm_error ptwm_checkpoint_options_read(const ptwm_checkpoint_options *in,
                                        ptwm_checkpoint_options *out, const char *where,
                                        ptwm_err *err);

#endif
