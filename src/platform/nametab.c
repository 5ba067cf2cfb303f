/* The name table (see nametab.h). */
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <xxhash.h>
#include "nametab.h"

static uint64_t seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

/* Without the random source (an old kernel, a sandbox), the clock and an
 * address still differ from run to run. */
static void seed_init(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        s = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ (uint64_t)(uintptr_t)&s;
    }
    seed = s;
}

uint32_t ptwm_name_hash(const char *name, size_t len) {
    pthread_once(&seed_once, seed_init);
    return (uint32_t)XXH3_64bits_withSeed(name, len, seed);
}

uint64_t *ptwm_nametab_find(const ptwm_nametab *t, const void *owner, ptwm_name_at_fn at,
                            const char *name, uint32_t h) {
    size_t mask = t->cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        uint64_t s = t->slot[i];
        if (!s ||
            ((uint32_t)(s >> 32) == h && strcmp(at(owner, ptwm_nametab_index(s)), name) == 0))
            return &t->slot[i];
    }
}

size_t ptwm_nametab_lookup(const ptwm_nametab *t, const void *owner, ptwm_name_at_fn at,
                           const char *name) {
    uint64_t s;
    if (!t->cap) return SIZE_MAX;
    s = *ptwm_nametab_find(t, owner, at, name, ptwm_name_hash(name, strlen(name)));
    return s ? ptwm_nametab_index(s) : SIZE_MAX;
}

/* Every full slot of `from` into the empty table `to`, by its hash bits. */
static void move_slots(const uint64_t *from, size_t n, uint64_t *to, size_t cap) {
    size_t k, mask = cap - 1;
    for (k = 0; k < n; k++) {
        size_t i;
        if (!from[k]) continue;
        for (i = (size_t)(from[k] >> 32) & mask; to[i]; i = (i + 1) & mask) {
        }
        to[i] = from[k];
    }
}

int ptwm_nametab_reserve(ptwm_nametab *t, size_t count) {
    size_t cap = t->cap ? t->cap : 64;
    uint64_t *s;
    /* indices and slot positions stay below 2^32 */
    if (count >= (size_t)1 << 30) return 0;
    if (count * 2 <= t->cap) return 1;
    while (count * 2 > cap) cap *= 2;
    if (!(s = (uint64_t *)ptwm_calloc(cap, sizeof(*s)))) return 0;
    if (t->slot) move_slots(t->slot, t->cap, s, cap);
    ptwm_free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 1;
}

void ptwm_nametab_renumber(ptwm_nametab *t, const size_t *map) {
    size_t k;
    for (k = 0; k < t->cap; k++)
        if (t->slot[k])
            ptwm_nametab_put(&t->slot[k], (uint32_t)(t->slot[k] >> 32),
                             map[ptwm_nametab_index(t->slot[k])]);
}

void ptwm_nametab_free(ptwm_nametab *t) {
    ptwm_free(t->slot);
    t->slot = NULL;
    t->cap = 0;
}
