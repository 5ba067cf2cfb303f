/* Unloading the shared library while its helper threads are parked: they
 * must be stopped by then (a parked helper that woke from its idle wait in
 * unmapped code would crash the process). Compresses on two threads through
 * dlopen'ed libptwm, closes it, then outlives the helpers' idle timeout. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ptwm.h"
#include "testutil.h"

/* Threads of this process (Linux: entries of /proc/self/task); -1 if unknown. */
static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

typedef ptwm_error (*compress_fn)(const ptwm_tensor_desc *, size_t, const ptwm_chain_list *,
                                  const ptwm_cparams *, void **, size_t *, ptwm_err *);

int main(void) {
    const char *path = getenv("PTWM_SHARED_LIB");
    enum { N = 3 << 19 }; /* 3 MiB of BF16: three chunks, so both threads work */
    static uint16_t v[N];
    uint64_t shape[1] = {N}, rng = 5;
    ptwm_tensor_desc d = {"w", PTWM_DTYPE_BF16, 1, shape, v, sizeof(v)};
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    void *lib, *blob = NULL;
    size_t len = 0, i;
    compress_fn compress;
    CHECK_MSG(path != NULL, "PTWM_SHARED_LIB not set (the path of libptwm.so)");
    if (!path) return tu_finish("test_unload");
    for (i = 0; i < N; i++) v[i] = (uint16_t)(((118 + tu_rand(&rng) % 8) << 7) | (tu_rand(&rng) & 0x807f));
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(lib != NULL, "dlopen %s: %s", path, dlerror());
    if (!lib) return tu_finish("test_unload");
    compress = (compress_fn)(uintptr_t)dlsym(lib, "ptwm_compress_blob");
    CHECK(compress != NULL);
    p.threads = 2;
    if (compress) {
        CHECK_MSG(compress(&d, 1, NULL, &p, &blob, &len, &err) == PTWM_OK, "%s", err.message);
        CHECK(len > 0 && len < sizeof(v));
    }
    free(blob);
    CHECK(dlclose(lib) == 0);
    /* The library's destructor has joined every helper: this thread is the
     * process's only one, and nothing of the library is left to run. */
    CHECK_MSG(thread_count() == 1, "%d threads after dlclose (expected 1)", thread_count());
    /* The helpers idle for 2 s before they leave on their own: one that
     * had survived would wake in unmapped code within this sleep. */
    sleep(3);
    return tu_finish("test_unload");
}
