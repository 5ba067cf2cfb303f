/* ZSTD stage (wire id 2): one plane through libzstd.
 *
 * Encoding: exactly one zstd frame (RFC 8878) with the content size recorded
 * in its header (ZSTD_c_contentSizeFlag, libzstd's default), no dictionary.
 * Decoding accepts only a frame whose recorded content size equals dst_size
 * and whose compressed size equals src_size, so a truncated or extended input,
 * a second frame, or a skippable frame is rejected before any work is done.
 *
 * Contexts live in the caller's workspace and are reused from plane to plane
 * (compression contexts hold megabytes of tables; allocating them per plane
 * dominates small planes). */
#include <stdlib.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_customMem: contexts in the library's allocator */
#include <zstd.h>
#include <zstd_errors.h>
#include "zstd_stage.h"

static const ZSTD_customMem zstd_mem = {ptwm_zstd_alloc, ptwm_zstd_free, NULL};

size_t ptwm_zstd_bound(size_t n) {
    size_t b = ZSTD_compressBound(n);
    return ZSTD_isError(b) ? 0 : b;
}

static ptwm_error encode_with(ZSTD_CCtx *cc, const uint8_t *src, size_t n, int level,
                              uint8_t *dst, size_t cap, size_t *out_len) {
    size_t r;
    ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0)))
        return PTWM_ERR_INVALID_ARG;
    r = ZSTD_compress2(cc, dst, cap, src, n);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) return PTWM_ERR_DST_SIZE;
        if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation) return PTWM_ERR_NOMEM;
        return PTWM_ERR_INVALID_ARG;
    }
    *out_len = r;
    return PTWM_OK;
}

ptwm_error ptwm_zstd_encode(ptwm_ws *ws, const uint8_t *src, size_t n, int level, uint8_t *dst,
                            size_t cap, size_t *out_len) {
    ptwm_ws *own;
    ptwm_error e;
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    if (level == 0) level = 3;
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) return PTWM_ERR_INVALID_ARG;
    if (!(ws = ptwm_ws_or_temp(ws, &own))) return PTWM_ERR_NOMEM;
    if (!ws->zstd_cctx) ws->zstd_cctx = ZSTD_createCCtx_advanced(zstd_mem);
    e = ws->zstd_cctx ? encode_with((ZSTD_CCtx *)ws->zstd_cctx, src, n, level, dst, cap, out_len)
                      : PTWM_ERR_NOMEM;
    ptwm_ws_free(own);
    return e;
}

ptwm_error ptwm_zstd_decode(ptwm_ws *ws, const uint8_t *src, size_t src_size, uint8_t *dst,
                            size_t dst_size) {
    ptwm_ws *own;
    unsigned long long content;
    size_t r;
    if ((!src && src_size) || (!dst && dst_size)) return PTWM_ERR_INVALID_ARG;
    /* A zstd frame proper: libzstd would also take a skippable frame as an
     * empty plane. */
    PTWM_CHECK(src_size >= 4 && ptwm_load_le32(src) == ZSTD_MAGICNUMBER);
    content = ZSTD_getFrameContentSize(src, src_size);
    /* Unknown, error, or a different size: not a frame of this plane. */
    PTWM_CHECK(content != ZSTD_CONTENTSIZE_UNKNOWN && content != ZSTD_CONTENTSIZE_ERROR);
    PTWM_CHECK(content == (unsigned long long)dst_size);
    r = ZSTD_findFrameCompressedSize(src, src_size);
    PTWM_CHECK(!ZSTD_isError(r) && r == src_size);
    if (!(ws = ptwm_ws_or_temp(ws, &own))) return PTWM_ERR_NOMEM;
    if (!ws->zstd_dctx) ws->zstd_dctx = ZSTD_createDCtx_advanced(zstd_mem);
    if (!ws->zstd_dctx) {
        ptwm_ws_free(own);
        return PTWM_ERR_NOMEM;
    }
    /* An empty dst may be NULL; libzstd wants a valid pointer to write 0 bytes. */
    {
        uint8_t dummy;
        r = ZSTD_decompressDCtx((ZSTD_DCtx *)ws->zstd_dctx, dst_size ? dst : &dummy, dst_size, src,
                                src_size);
    }
    ptwm_ws_free(own);
    if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
        return PTWM_ERR_NOMEM;
    PTWM_CHECK(!ZSTD_isError(r) && r == dst_size);
    return PTWM_OK;
}
