/* See legacy_chunk.h. */
#include <string.h>
#include "chain.h"
#include "chunk_frame.h"
#include "legacy_chunk.h"

/* The flags byte of versions 1-4 for a list of stages. */
static unsigned legacy_flags(const ptwm_chunk_head *h, int transform) {
    unsigned f = h->flags & 1u, s;
    if (h->nuse == 0 && transform) f |= 4u; /* bypassed */
    for (s = 0; s < h->nuse; s++) {
        switch (h->use[s].id) {
        case PTWM_CSTAGE_SPARSE: f |= 8u | (h->use[s].p[2] ? 64u : 0u); break;
        case PTWM_CSTAGE_BLOCKS: f |= 2u; break;
        case PTWM_CSTAGE_JOINT: f |= 16u; break;
        case PTWM_CSTAGE_COLS: f |= 32u; break;
        default: break;
        }
    }
    return f;
}

size_t tu_chunk_v4(const uint8_t *p, size_t len, size_t raw_len, int transform, uint8_t *out) {
    ptwm_chunk_head h;
    size_t o = 0, k;
    if (ptwm_chunk_head_parse(5, NULL, p, len, raw_len, &h, NULL) != PTWM_OK) return 0;
    out[o++] = (uint8_t)legacy_flags(&h, transform);
    out[o++] = (uint8_t)h.L.count;
    for (k = 0; k < h.L.count; k++) {
        out[o++] = (uint8_t)h.coder[k];
        o += ptwm_put_varint(out + o, h.L.len[k]);
        o += ptwm_put_varint(out + o, h.coded[k]);
        if (h.flags & 1u) {
            ptwm_store_le32(out + o, h.crc[k]);
            o += 4;
        }
    }
    memcpy(out + o, h.body, h.body_len);
    return o + h.body_len;
}
