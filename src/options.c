/* Options structs read with their size (options.h). */
#include <stddef.h>
#include "options.h"

/* A struct ends with its last field, so a field added later never lies in
 * the padding an older, smaller struct sent along with its own fields. A
 * field appended to either struct moves these to the new last field. */
#define ENDS_WITH(T, f) (offsetof(T, f) + sizeof(((T *)0)->f) == sizeof(T))
_Static_assert(offsetof(ptwm_cparams, size) == 0 && offsetof(ptwm_checkpoint_options, size) == 0,
               "the size comes first");
_Static_assert(ENDS_WITH(ptwm_cparams, format_version), "ptwm_cparams must not end in padding");
_Static_assert(ENDS_WITH(ptwm_checkpoint_options, format_version),
               "ptwm_checkpoint_options must not end in padding");

/* The caller's struct `in` of in->size bytes over the defaults, into out of
 * `have` bytes (this library's struct, aligned to `align`). */
static ptwm_error read_sized(const void *in, const void *defaults, void *out, size_t have,
                             size_t align, const char *name, const char *init,
                             const char *where, ptwm_err *err) {
    size_t size;
    memcpy(out, defaults, have);
    if (!in) return PTWM_OK;
    memcpy(&size, in, sizeof(size));
    if (size == 0)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "%s: %s.size is 0: start from %s, which sets it to sizeof(%s)", where,
                         name, init, name);
    if (size > have)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "%s: %s.size is %zu, larger than this library's %zu: the program was "
                         "built with a newer ptwm.h than the library it runs with",
                         where, name, size, have);
    if (size < sizeof(size) || size % align)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "%s: %s.size is %zu, the size of no version of it (a multiple of %zu, "
                         "at most %zu)",
                         where, name, size, align, have);
    memcpy(out, in, size);
    memcpy(out, &have, sizeof(have));
    return PTWM_OK;
}

ptwm_error ptwm_cparams_read(const ptwm_cparams *in, ptwm_cparams *out, const char *where,
                             ptwm_err *err) {
    static const ptwm_cparams defaults = PTWM_CPARAMS_DEFAULT;
    return read_sized(in, &defaults, out, sizeof(*out), _Alignof(ptwm_cparams), "ptwm_cparams",
                      "PTWM_CPARAMS_DEFAULT", where, err);
}

ptwm_error ptwm_checkpoint_options_read(const ptwm_checkpoint_options *in,
                                        ptwm_checkpoint_options *out, const char *where,
                                        ptwm_err *err) {
    static const ptwm_checkpoint_options defaults = PTWM_CHECKPOINT_OPTIONS_DEFAULT;
    return read_sized(in, &defaults, out, sizeof(*out), _Alignof(ptwm_checkpoint_options),
                      "ptwm_checkpoint_options", "PTWM_CHECKPOINT_OPTIONS_DEFAULT", where, err);
}
