/* Codec workspaces: regions keep their memory between calls, grow zeroed
 * when asked, are separate from each other, and a trim gives back only the
 * large ones. */
#include <stdlib.h>
#include <string.h>
#include "workspace.h"
#include "testutil.h"

static void test_regions(void) {
    ptwm_ws *ws = ptwm_ws_create();
    uint8_t *a, *b, *c;
    size_t i;
    int zero = 1;
    CHECK(ws != NULL);
    if (!ws) return;
    a = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_PLANES, 1000, 0);
    b = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_COLS, 1000, 0);
    CHECK(a && b && a != b);
    if (!a || !b) goto done;
    /* Separate regions: filling one (and its 64 bytes of slack) leaves the
     * other alone. */
    memset(b, 0x5a, 1000);
    memset(a, 0xa5, 1000 + 64);
    for (i = 0; i < 1000; i++) zero &= b[i] == 0x5a;
    CHECK_MSG(zero, "region COLS changed by a write to PLANES");
    /* Kept while no larger size is asked for. */
    CHECK(ptwm_ws_get(ws, PTWM_WS_PLANES, 10, 0) == a && a[0] == 0xa5);
    /* Grown and zeroed on request. */
    c = (uint8_t *)ptwm_ws_get(ws, PTWM_WS_RANS_DTAB1, 5000, 1);
    CHECK(c != NULL);
    for (i = 0, zero = 1; c && i < 5000; i++) zero &= c[i] == 0;
    CHECK(zero);
    ws->rans_dtab1_built[7] = 1;
    CHECK(ptwm_ws_get(ws, PTWM_WS_RANS_DTAB1, 9000, 1) != NULL);
    CHECK_MSG(ws->rans_dtab1_built[7] == 0, "a regrown order-1 table still marked built");
    /* A trim frees what exceeds the limit and keeps the rest. */
    CHECK(ptwm_ws_get(ws, PTWM_WS_CODED, (size_t)3 << 20, 0) != NULL);
    ptwm_ws_trim(ws, (size_t)1 << 20);
    CHECK(ws->cap[PTWM_WS_CODED] == 0 && ws->buf[PTWM_WS_CODED] == NULL);
    CHECK(ws->buf[PTWM_WS_PLANES] == a && ws->cap[PTWM_WS_PLANES] == 1000);
done:
    ptwm_ws_free(ws);
    ptwm_ws_free(NULL);
}

/* NULL asks for a temporary workspace. */
static void test_temp(void) {
    ptwm_ws *own = (ptwm_ws *)1, *ws = ptwm_ws_create(), *got;
    CHECK(ptwm_ws_or_temp(ws, &own) == ws && own == NULL);
    got = ptwm_ws_or_temp(NULL, &own);
    CHECK(got != NULL && got == own);
    ptwm_ws_free(own);
    ptwm_ws_free(ws);
}

int main(void) {
    test_regions();
    test_temp();
    return tu_finish("test_workspace");
}
