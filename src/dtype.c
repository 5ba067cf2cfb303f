/* Dtype names, bit widths and checked tensor byte sizes (safetensors dtypes). */
#include <stdio.h>
#include "common.h"

static const struct {
    const char *name;
    unsigned bits;
} dtype_table[PTWM_DTYPE_COUNT] = {
    [PTWM_DTYPE_BOOL] = {"BOOL", 8},
    [PTWM_DTYPE_U8] = {"U8", 8},
    [PTWM_DTYPE_I8] = {"I8", 8},
    [PTWM_DTYPE_I16] = {"I16", 16},
    [PTWM_DTYPE_U16] = {"U16", 16},
    [PTWM_DTYPE_I32] = {"I32", 32},
    [PTWM_DTYPE_U32] = {"U32", 32},
    [PTWM_DTYPE_I64] = {"I64", 64},
    [PTWM_DTYPE_U64] = {"U64", 64},
    [PTWM_DTYPE_F16] = {"F16", 16},
    [PTWM_DTYPE_BF16] = {"BF16", 16},
    [PTWM_DTYPE_F32] = {"F32", 32},
    [PTWM_DTYPE_F64] = {"F64", 64},
    [PTWM_DTYPE_C64] = {"C64", 64}, /* two F32: real, imaginary */
    [PTWM_DTYPE_F8_E5M2] = {"F8_E5M2", 8},
    [PTWM_DTYPE_F8_E4M3] = {"F8_E4M3", 8},
    [PTWM_DTYPE_F8_E8M0] = {"F8_E8M0", 8},
    [PTWM_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [PTWM_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    /* Sub-byte dtypes pack little-end first; a tensor must fill whole bytes. */
    [PTWM_DTYPE_F4] = {"F4", 4},
    [PTWM_DTYPE_F6_E2M3] = {"F6_E2M3", 6},
    [PTWM_DTYPE_F6_E3M2] = {"F6_E3M2", 6},
};

const char *ptwm_dtype_name(ptwm_dtype dtype) {
    if ((unsigned)dtype >= PTWM_DTYPE_COUNT) return NULL;
    return dtype_table[dtype].name;
}

ptwm_error ptwm_dtype_from_name(const char *name, ptwm_dtype *out, ptwm_err *err) {
    unsigned i;
    if (!name || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_dtype_from_name: NULL argument");
    for (i = 0; i < PTWM_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_table[i].name) == 0) {
            *out = (ptwm_dtype)i;
            return PTWM_OK;
        }
    }
    return ptwm_fail(err, PTWM_ERR_DTYPE, "'%s' is not a dtype this library knows", name);
}

unsigned ptwm_dtype_bits(ptwm_dtype dtype) {
    if ((unsigned)dtype >= PTWM_DTYPE_COUNT) return 0;
    return dtype_table[dtype].bits;
}

void ptwm_format_shape(const uint64_t *shape, uint32_t ndim, char *buf, size_t cap) {
    size_t pos = 0;
    uint32_t i;
    int n;
    buf[0] = 0;
    n = snprintf(buf, cap, "[");
    pos = (size_t)n;
    for (i = 0; i < ndim && pos < cap; i++) {
        n = snprintf(buf + pos, cap - pos, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
        if (n < 0) return;
        pos += (size_t)n;
    }
    if (pos < cap) snprintf(buf + pos, cap - pos, "]");
}

ptwm_error ptwm_tensor_nbytes(ptwm_dtype dtype, const uint64_t *shape, uint32_t ndim,
                              uint64_t *nbytes, ptwm_err *err) {
    uint64_t elems = 1, bits;
    int has_zero = 0, overflow = 0;
    uint32_t i;
    char sh[160];
    if (!nbytes || (ndim && !shape))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_tensor_nbytes: NULL argument");
    if ((unsigned)dtype >= PTWM_DTYPE_COUNT)
        return ptwm_fail(err, PTWM_ERR_DTYPE, "dtype value %u is not a known dtype", (unsigned)dtype);
    if (ndim > PTWM_MAX_NDIM)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "%u dimensions, at most %u accepted", (unsigned)ndim,
                         (unsigned)PTWM_MAX_NDIM);
    /* As in the reference, elements x bits must fit 64 bits (so a U8 tensor
     * tops out at 2^61 bytes; no real file comes near).
     * The product of the non-zero dims must fit 64 bits whatever their order,
     * even when a zero dim makes the element count 0: a shape like
     * [2^32, 2^32, 0] is nonsense, and rejecting it never depends on dim order. */
    for (i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            has_zero = 1;
            continue;
        }
        if (!overflow && ptwm_mul_overflow(elems, shape[i], &elems)) overflow = 1;
    }
    if (!overflow && ptwm_mul_overflow(elems, dtype_table[dtype].bits, &bits)) overflow = 1;
    if (overflow) {
        ptwm_format_shape(shape, ndim, sh, sizeof(sh));
        return ptwm_fail(err, PTWM_ERR_SHAPE, "shape %s of %s overflows 64 bits", sh,
                         dtype_table[dtype].name);
    }
    if (has_zero) bits = 0;
    if (bits % 8 != 0) {
        ptwm_format_shape(shape, ndim, sh, sizeof(sh));
        return ptwm_fail(err, PTWM_ERR_SHAPE,
                         "shape %s of %s is %llu bits, not a whole number of bytes", sh,
                         dtype_table[dtype].name, (unsigned long long)bits);
    }
    *nbytes = bits / 8;
    return PTWM_OK;
}
