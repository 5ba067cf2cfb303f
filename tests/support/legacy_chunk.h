/* A chunk payload of format version 5 rewritten in the form versions 1-4
 * wrote (a flags byte, raw lengths in every entry): the same planes, so a
 * test can check that the old form still decodes, and damage it byte by
 * byte as an old file would be damaged. */
#ifndef PTWM_TEST_LEGACY_CHUNK_H
#define PTWM_TEST_LEGACY_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/* out: room for len + 64 bytes; returns the length, 0 if p is not a valid
 * version 5 payload of raw_len bytes. transform: the chain has a SPLIT or
 * PLANES (a payload without stages is then the bypassed form). */
size_t tu_chunk_v4(const uint8_t *p, size_t len, size_t raw_len, int transform, uint8_t *out);

#endif
