/* The kernel sets registered so far and their publication (see kernels.h).
 * One lock orders registrations and publications, so a set registered while
 * the cap changes ends with the table of the last cap set. */
#include <pthread.h>
#include "cpu.h"

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static ptwm_kernel_set *sets; /* registered, linked through next; under sets_lock */

static void publish(ptwm_kernel_set *set, int level) {
    const void *t = (const char *)set->tables + (size_t)level * set->size;
    __atomic_store_n(&set->active, t, __ATOMIC_RELEASE);
}

const void *ptwm_kernel_set_slow(ptwm_kernel_set *set) {
    int best = ptwm_cpu_best(), l;
    pthread_mutex_lock(&sets_lock);
    if (!__atomic_load_n(&set->active, __ATOMIC_RELAXED)) {
        /* Levels above the CPU's best are never published. */
        for (l = 0; l <= best; l++) set->fill((char *)set->tables + (size_t)l * set->size,
                                             (ptwm_isa)l);
        set->next = sets;
        sets = set;
        publish(set, ptwm_cpu_level());
    }
    pthread_mutex_unlock(&sets_lock);
    return __atomic_load_n(&set->active, __ATOMIC_ACQUIRE);
}

void ptwm_kernels_publish(void) {
    ptwm_kernel_set *set;
    int level;
    pthread_mutex_lock(&sets_lock);
    level = ptwm_cpu_level();
    for (set = sets; set; set = set->next) publish(set, level);
    pthread_mutex_unlock(&sets_lock);
}
