/* Codec workspaces; see workspace.h. */
#include <stdlib.h>
#include <zstd.h>
#include "workspace.h"

ptwm_ws *ptwm_ws_create(void) { return (ptwm_ws *)ptwm_calloc(1, sizeof(ptwm_ws)); }

void ptwm_ws_free(ptwm_ws *ws) {
    int r;
    if (!ws) return;
    for (r = 0; r < PTWM_WS_REGIONS; r++) ptwm_free_big(ws->buf[r], ws->cap[r] + 64);
    ZSTD_freeCCtx((ZSTD_CCtx *)ws->zstd_cctx);
    ZSTD_freeDCtx((ZSTD_DCtx *)ws->zstd_dctx);
    ptwm_free(ws);
}

void *ptwm_ws_get(ptwm_ws *ws, ptwm_ws_region r, size_t size, int zero) {
    uint8_t *p;
    if (ws->cap[r] >= size && ws->buf[r]) return ws->buf[r];
    if (size > SIZE_MAX - 64) return NULL;
    /* The whole mapping: a region that grows within it is not made again. */
    size = (size_t)ptwm_big_size(size + 64) - 64;
    p = (uint8_t *)(zero ? ptwm_calloc_big(size + 64) : ptwm_malloc_big(size + 64));
    if (!p) return NULL;
    ptwm_free_big(ws->buf[r], ws->cap[r] + 64);
    ws->buf[r] = p;
    ws->cap[r] = size;
    if (r == PTWM_WS_RANS_DTAB1) memset(ws->rans_dtab1_built, 0, sizeof(ws->rans_dtab1_built));
    return p;
}

void ptwm_ws_trim(ptwm_ws *ws, size_t keep) {
    int r;
    for (r = 0; r < PTWM_WS_REGIONS; r++) {
        if (ws->cap[r] > keep) {
            ptwm_free_big(ws->buf[r], ws->cap[r] + 64);
            ws->buf[r] = NULL;
            ws->cap[r] = 0;
            if (r == PTWM_WS_RANS_DTAB1)
                memset(ws->rans_dtab1_built, 0, sizeof(ws->rans_dtab1_built));
        }
    }
}
