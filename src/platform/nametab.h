/* A name table: open addressing over entries an owner keeps elsewhere
 * (.ptwm tables, safetensors headers, shard directories, indexes). A slot
 * holds 32 bits of the name's hash beside the entry's index plus 1, so a
 * probe compares names only when those bits match, and growing the table
 * moves slots without reading a name or hashing one again (on a header of
 * 250,000 tensors, FNV-1a hashes and the compares of every probe and
 * rehash were a third of opening it). The hash is seeded once per process
 * from the system's random source: a hostile file cannot pick names that
 * share their slots and make every lookup a long probe. */
#ifndef PTWM_NAMETAB_H
#define PTWM_NAMETAB_H

#include "common.h"

typedef struct ptwm_nametab {
    uint64_t *slot;   /* hash bits << 32 | (index + 1); 0: empty */
    size_t cap;       /* a power of two, at least twice the entries; 0 before the first */
} ptwm_nametab;

/* The owner's name of entry i. */
typedef const char *(*ptwm_name_at_fn)(const void *owner, size_t i);

/* The hash of name[0..len) the table keys on (this process's seed). */
uint32_t ptwm_name_hash(const char *name, size_t len);

/* The index of the entry called `name`, or SIZE_MAX: not there (an empty
 * table, never grown, holds nothing). */
size_t ptwm_nametab_lookup(const ptwm_nametab *t, const void *owner, ptwm_name_at_fn at,
                           const char *name);

/* The slot of the entry called `name` (hash h), or the empty slot where it
 * belongs, for inserting; cap must be nonzero (ptwm_nametab_reserve). */
uint64_t *ptwm_nametab_find(const ptwm_nametab *t, const void *owner, ptwm_name_at_fn at,
                            const char *name, uint32_t h);

/* Room for `count` entries (the table at most half full), growing by
 * doubling; 0 when out of memory (the table is left as it was). */
int ptwm_nametab_reserve(ptwm_nametab *t, size_t count);

/* Point entry `index` (whose hash is h) at the empty slot s. */
PTWM_INLINE void ptwm_nametab_put(uint64_t *s, uint32_t h, size_t index) {
    *s = (uint64_t)h << 32 | (uint64_t)(index + 1);
}

/* The index a full slot holds. */
PTWM_INLINE size_t ptwm_nametab_index(uint64_t s) {
    return (size_t)(uint32_t)s - 1;
}

/* Renumber every entry: new index map[old index] (entries reordered). */
void ptwm_nametab_renumber(ptwm_nametab *t, const size_t *map);

void ptwm_nametab_free(ptwm_nametab *t);

#endif
