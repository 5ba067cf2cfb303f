/* ptwm_populate: the whole pages inside the range are faulted in (where the
 * kernel has MADV_POPULATE_WRITE), the partial pages at its ends are not,
 * and no byte changes, written or still zero; NULL and ranges within one
 * page do nothing. Pieces whose pages are all resident are skipped: over
 * pieces of 512 pages resident, mixed and fresh, every page ends resident
 * and the written bytes stay. The writer populates its image ahead of payloads it will
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
#ifdef MADV_POPULATE_WRITE
    {
        /* 1300 pages: the first 512 written (a resident piece), the first page of
         * the second piece written (mixed), the third piece fresh. */
        const size_t np = 1300;
        unsigned char *vec = (unsigned char *)malloc(np);
        uint8_t *p = (uint8_t *)mmap(NULL, np * PAGE, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED && vec);
        (void)madvise(p, np * PAGE, MADV_NOHUGEPAGE); /* pages, not one huge page */
        for (i = 0; i < 512; i++) p[i * PAGE + 7] = (uint8_t)(i | 1);
        p[512 * PAGE + 9] = 0x5a; /* its first page: a check of one page would skip it */
        if (madvise(p + 1299 * PAGE, PAGE, MADV_POPULATE_WRITE) == 0) {
            size_t k, res = 0;
            ptwm_populate(p, np * PAGE);
            resident(p, np, vec);
            for (k = 0; k < np; k++) res += vec[k] & 1;
            CHECK_MSG(res == np, "%zu of %zu pages resident after populating", res, np);
            for (k = 0; k < 512; k++) CHECK(p[k * PAGE + 7] == (uint8_t)(k | 1));
            CHECK(p[512 * PAGE + 9] == 0x5a && p[601 * PAGE] == 0 && p[1200 * PAGE + 5] == 0);
        }
        munmap(p, np * PAGE);
        free(vec);
    }
#endif
    free(buf);
    free(want);
    return tu_finish("populate");
}
