/* Error names, strings and the message helpers every module reports through. */
#include <stdio.h>
#include <stdlib.h>
#include "common.h"

static const char *const error_names[] = {
    "PTWM_OK", "PTWM_ERR_IO", "PTWM_ERR_NOMEM", "PTWM_ERR_INVALID_ARG", "PTWM_ERR_TRUNCATED",
    "PTWM_ERR_HEADER_SIZE", "PTWM_ERR_JSON", "PTWM_ERR_SCHEMA", "PTWM_ERR_DTYPE",
    "PTWM_ERR_SHAPE", "PTWM_ERR_OFFSETS", "PTWM_ERR_LAYOUT", "PTWM_ERR_DUPLICATE",
    "PTWM_ERR_NOT_FOUND", "PTWM_ERR_LIMIT", "PTWM_ERR_BAD_MAGIC", "PTWM_ERR_VERSION",
    "PTWM_ERR_UNKNOWN_ID", "PTWM_ERR_CORRUPT", "PTWM_ERR_CRC", "PTWM_ERR_HASH",
    "PTWM_ERR_DST_SIZE", "PTWM_ERR_MISMATCH", "PTWM_ERR_INDEX", "PTWM_ERR_EXISTS",
    "PTWM_ERR_UNSUPPORTED", "PTWM_ERR_BASE_MISSING", "PTWM_ERR_BASE_MISMATCH",
    "PTWM_ERR_BASE_HASH", "PTWM_ERR_BASE_CRC",
};

static const char *const error_strings[] = {
    "success",
    "I/O error",
    "out of memory",
    "invalid argument",
    "input truncated",
    "bad header length",
    "not valid JSON",
    "wrong structure",
    "unknown or unsupported dtype",
    "bad tensor shape",
    "bad data offsets",
    "tensors do not tile the data region",
    "duplicate name",
    "not found",
    "limit exceeded",
    "not a .ptwm file",
    "unsupported format version",
    "unknown id",
    "corrupt coded data",
    "CRC mismatch",
    "hash mismatch (XXH3-128)",
    "destination size mismatch",
    "does not match what was expected",
    "index disagrees with its shards",
    "output already exists",
    "unsupported",
    "base required",
    "base does not hold the tensor",
    "base tensor differs",
    "base chunk damaged",
};

const char *ptwm_version(void) { return PTWM_VERSION_STRING; }

const char *ptwm_error_name(ptwm_error code) {
    if ((unsigned)code < PTWM_ARRAY_LEN(error_names)) return error_names[code];
    return "PTWM_ERR_UNKNOWN";
}

const char *ptwm_error_string(ptwm_error code) {
    if ((unsigned)code < PTWM_ARRAY_LEN(error_strings)) return error_strings[code];
    return "unknown error";
}

ptwm_error ptwm_fail(ptwm_err *err, ptwm_error code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

void ptwm_err_prefix(ptwm_err *err, const char *fmt, ...) {
    char prefix[PTWM_ERR_MESSAGE_MAX];
    char old[PTWM_ERR_MESSAGE_MAX];
    va_list ap;
    size_t plen;
    if (!err) return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof(old));
    old[sizeof(old) - 1] = 0;
    /* Keep as much of both as fits; truncation of a long message is fine. */
    plen = strlen(prefix);
    if (plen > sizeof(err->message) - 3) plen = sizeof(err->message) - 3;
    memcpy(err->message, prefix, plen);
    memcpy(err->message + plen, ": ", 2);
    plen += 2;
    {
        size_t olen = strlen(old);
        if (olen > sizeof(err->message) - 1 - plen) olen = sizeof(err->message) - 1 - plen;
        memcpy(err->message + plen, old, olen);
        err->message[plen + olen] = 0;
    }
}

int ptwm_grow(void **buf, size_t *cap, size_t need, size_t size) {
    size_t c = *cap ? *cap : 64;
    void *q;
    if (need <= *cap) return 1;
    while (c < need) c *= 2;   /* callers' needs are bounded by a header or table length */
    q = ptwm_realloc(*buf, (uint64_t)c * size);
    if (!q) return 0;
    *buf = q;
    *cap = c;
    return 1;
}

void ptwm_kv_free(ptwm_kv *kv, size_t n) {
    size_t i;
    if (!kv) return;
    for (i = 0; i < n; i++) {
        ptwm_free((char *)kv[i].key);
        ptwm_free((char *)kv[i].value);
    }
    ptwm_free(kv);
}

ptwm_error ptwm_fail_index(ptwm_err *err, const char *where, size_t index, size_t n) {
    return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: tensor index %zu out of range (%zu tensors)",
                     where ? where : "?", index, n);
}

ptwm_error ptwm_fail_name(ptwm_err *err, const char *where, const char *name) {
    if (!name) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%s: tensor name is NULL", where ? where : "?");
    return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "%s: no tensor '%s'", where ? where : "?", name);
}
