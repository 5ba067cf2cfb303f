/* ZSTD stage (wire id 2): one plane through libzstd.
 *
 * Encoding: exactly one zstd frame (RFC 8878) with the content size recorded
 * in its header (ZSTD_c_contentSizeFlag, libzstd's default), no dictionary.
 * Decoding accepts only a frame whose recorded content size equals dst_size
 * and whose compressed size equals src_size, so a truncated or extended input,
 * a second frame, or a skippable frame is rejected before any work is done.
 *
 * Contexts are reused per thread (compression contexts hold megabytes of
 * tables; allocating them per plane dominates small planes). They live in a
 * pthread key whose destructor frees them when the thread exits. */
#include <pthread.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>
#include "entropy.h"

typedef struct zstd_tls {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
} zstd_tls;

static pthread_key_t zstd_key;
static pthread_once_t zstd_key_once = PTHREAD_ONCE_INIT;
static int zstd_key_ok;
static _Thread_local zstd_tls *zstd_cached;

static void zstd_tls_free(void *p) {
    zstd_tls *t = (zstd_tls *)p;
    if (!t) return;
    ZSTD_freeCCtx(t->cctx);
    ZSTD_freeDCtx(t->dctx);
    free(t);
    zstd_cached = NULL;
}

static void zstd_key_init(void) { zstd_key_ok = pthread_key_create(&zstd_key, zstd_tls_free) == 0; }

/* At exit or dlclose (after the helper threads have ended): this thread's
 * contexts are freed, so an unloaded library leaves no memory behind. */
__attribute__((destructor(140))) static void zstd_unload(void) {
    if (!zstd_key_ok) return;
    zstd_key_ok = 0;
    zstd_tls_free(pthread_getspecific(zstd_key));
    pthread_key_delete(zstd_key);
}

/* This thread's context pair, created on first use; NULL if out of memory. */
static zstd_tls *zstd_get_tls(void) {
    zstd_tls *t;
    if (zstd_cached) return zstd_cached;
    pthread_once(&zstd_key_once, zstd_key_init);
    if (!zstd_key_ok) return NULL;
    t = (zstd_tls *)calloc(1, sizeof(*t));
    if (!t) return NULL;
    if (pthread_setspecific(zstd_key, t) != 0) {
        free(t);
        return NULL;
    }
    zstd_cached = t;
    return t;
}

size_t ptwm_zstd_bound(size_t n) {
    size_t b = ZSTD_compressBound(n);
    return ZSTD_isError(b) ? 0 : b;
}

ptwm_error ptwm_zstd_encode(const uint8_t *src, size_t n, int level, uint8_t *dst, size_t cap,
                            size_t *out_len) {
    zstd_tls *t;
    size_t r;
    if (!out_len || (!src && n) || (!dst && cap)) return PTWM_ERR_INVALID_ARG;
    if (level == 0) level = 3;
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) return PTWM_ERR_INVALID_ARG;
    t = zstd_get_tls();
    if (!t) return PTWM_ERR_NOMEM;
    if (!t->cctx && !(t->cctx = ZSTD_createCCtx())) return PTWM_ERR_NOMEM;
    ZSTD_CCtx_reset(t->cctx, ZSTD_reset_session_and_parameters);
    if (ZSTD_isError(ZSTD_CCtx_setParameter(t->cctx, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(t->cctx, ZSTD_c_contentSizeFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(t->cctx, ZSTD_c_checksumFlag, 0)))
        return PTWM_ERR_INVALID_ARG;
    r = ZSTD_compress2(t->cctx, dst, cap, src, n);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) return PTWM_ERR_DST_SIZE;
        if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation) return PTWM_ERR_NOMEM;
        return PTWM_ERR_INVALID_ARG;
    }
    *out_len = r;
    return PTWM_OK;
}

ptwm_error ptwm_zstd_decode(const uint8_t *src, size_t src_size, uint8_t *dst, size_t dst_size) {
    zstd_tls *t;
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
    t = zstd_get_tls();
    if (!t) return PTWM_ERR_NOMEM;
    if (!t->dctx && !(t->dctx = ZSTD_createDCtx())) return PTWM_ERR_NOMEM;
    /* An empty dst may be NULL; libzstd wants a valid pointer to write 0 bytes. */
    {
        uint8_t dummy;
        r = ZSTD_decompressDCtx(t->dctx, dst_size ? dst : &dummy, dst_size, src, src_size);
    }
    if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
        return PTWM_ERR_NOMEM;
    PTWM_CHECK(!ZSTD_isError(r) && r == dst_size);
    return PTWM_OK;
}
