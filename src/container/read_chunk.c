/* One chunk of a .ptwm reader decoded: the payload's CRC32 (from version 4)
 * checked against its chunk entry, then the payload decoded, against its
 * base chunk when it was coded against one (read_base.c); and the check of a
 * whole tensor's payload hash. Called on any worker: reads the table only. */
#include "reader_impl.h"
#include "chunk.h"
#include "container_format.h"

/* Decode chunk c of tensor t from its payload src into exactly c->raw bytes.
 * From version 4 each chunk entry records the CRC32 of its payload: damaged
 * bytes, or another chunk's bytes moved to this entry's place (which plane
 * CRCs, inside the payload, cannot tell), fail the chunk with PTWM_ERR_CRC
 * whatever the decode made of them, and the plane CRCs, over a subset of the
 * bytes checked, are skipped. The check runs after the decode (every decoder
 * checks every byte it reads, so damaged bytes only make it fail or write
 * bytes the CRC then rejects): the decode, bound by its own work, reads the
 * payload from memory while it computes, and the CRC finds the bytes in
 * cache; run first, the CRC was the payload's first read from memory
 * (docs/SCALING.md, "Decoding BF16 without gathers"). A chunk coded against
 * a base is checked first, before its base chunks are read. The check lives
 * in the table, so entries sharing one payload share it too. */
ptwm_error ptwm_reader_decode_chunk(const ptwm_reader *r, ptwm_ws *ws, const rtensor *t,
                                    const rchunk *c, const uint8_t *src, uint8_t *out,
                                    ptwm_err *err) {
    ptwm_error rc = PTWM_OK;
    uint32_t got;
    if (r->version < PTWM_FMT_ENTRY_CRC_VERSION)
        return ptwm_chunk_decode_version(ws, r->version, t->chain_ptr[c->chain], t->chain_len[c->chain],
                                         t->dtype, src, c->coded, out, c->raw, err);
    if (!c->based)
        rc = ptwm_chunk_decode_checked(ws, r->version, t->chain_ptr[c->chain],
                                       t->chain_len[c->chain], t->dtype, src, c->coded, out,
                                       c->raw, err);
    got = ptwm_crc32(0, src, c->coded);
    if (got != c->crc)
        return ptwm_fail(err, PTWM_ERR_CRC,
                         "payload at bytes %llu..%llu has CRC32 %08x, its chunk entry records %08x "
                         "(damaged, or the bytes of another chunk)",
                         (unsigned long long)c->offset, (unsigned long long)(c->offset + c->coded),
                         (unsigned)got, (unsigned)c->crc);
    if (c->based) return ptwm_reader_decode_based((ptwm_reader *)r, ws, t, c, src, out, err);
    return rc;
}

ptwm_error ptwm_reader_check_hash(const ptwm_reader *r, const rtensor *t, const uint8_t got[16],
                                  ptwm_err *err) {
    char a[33], b[33];
    if (memcmp(got, t->hash, 16) == 0) return PTWM_OK;
    return ptwm_fail(err, PTWM_ERR_HASH, "file '%s': tensor '%s': payload XXH3-128 %s, expected %s",
                     r->label, t->name, ptwm_hex128(got, a), ptwm_hex128(t->hash, b));
}
