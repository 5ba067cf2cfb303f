/* ptwm_populate: the whole pages inside the range are faulted in (where the
 * kernel has MADV_POPULATE_WRITE), the partial pages at its ends are not,
 * and no byte changes, written or still zero; NULL and ranges within one
 * page do nothing. The writer populates its image ahead of payloads it will
 * copy under its lock, while other threads may be writing there: only a
 * call that leaves every byte as it was is safe for that. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fileio.h"
#include "testutil.h"

#define PAGE 4096

/* Which of the n pages at p are resident. */
static void resident(uint8_t *p, size_t n, unsigned char *vec) {
    CHECK(mincore(p, n * PAGE, vec) == 0);
}

int main(void) {
    size_t i, n = (size_t)3 << 20;
    uint64_t rng = 11;
    uint8_t *buf = (uint8_t *)calloc(1, n), *want = (uint8_t *)malloc(n);
    CHECK(buf && want);
    /* Bytes written over the first part, zeros after: both kept. */
    for (i = 0; i < n / 2 + 123; i++) buf[i] = (uint8_t)tu_rand(&rng);
    memcpy(want, buf, n);
    ptwm_populate(buf + 1000, n - 3000);
    CHECK(memcmp(buf, want, n) == 0);
    ptwm_populate(NULL, PAGE * 4);
    ptwm_populate(buf + 10, 100);
    CHECK(memcmp(buf, want, n) == 0);
    {
        /* Fresh pages: only those wholly inside the range become resident. */
        unsigned char vec[4];
        uint8_t *p = (uint8_t *)mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED);
        resident(p, 4, vec);
        CHECK(!(vec[0] & 1) && !(vec[1] & 1) && !(vec[2] & 1) && !(vec[3] & 1));
        ptwm_populate(p + 100, 3 * PAGE);
#ifdef MADV_POPULATE_WRITE
        resident(p, 4, vec);
        /* pages 1 and 2 lie inside [p + 100, p + 3 * PAGE + 100); 0 and 3 do not */
        if (madvise(p + 3 * PAGE, PAGE, MADV_POPULATE_WRITE) == 0) {
            CHECK(!(vec[0] & 1) && (vec[1] & 1) && (vec[2] & 1) && !(vec[3] & 1));
        } else {
            CHECK(errno == EINVAL);   /* a kernel before 5.14: populating is a no-op */
            printf("test_populate: no MADV_POPULATE_WRITE here; residency not checked\n");
        }
#endif
        for (i = 0; i < 4 * PAGE && p[i] == 0; i++) {
        }
        CHECK(i == 4 * PAGE);
        munmap(p, 4 * PAGE);
    }
    free(buf);
    free(want);
    return tu_finish("populate");
}
