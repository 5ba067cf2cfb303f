/* The C API's own answer for the Python cross-check (test_cross.py):
 *
 *   c_reference SRC.safetensors OUT.ptwm METHOD CHUNK_SIZE [standard-chains]
 *
 * compresses every tensor of SRC, in file order, with ptwm_compress_blob and
 * writes the blob to OUT. With "standard-chains" each tensor gets one candidate
 * chain, ptwm_chain_standard(dtype, METHOD), as Python's chains_per_tensor does.
 * Uses only the public header (its advanced section for ptwm_st_*: the file
 * mapped, tensors handed to the writer without a copy). Exit 0 on success, 1
 * with the error message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTWM_FORMAT_API
#include "ptwm.h"

static int fail(const ptwm_err *err) {
    fprintf(stderr, "c_reference: %s\n", err->message);
    return 1;
}

int main(int argc, char **argv) {
    ptwm_err err = {PTWM_OK, {0}};
    ptwm_cparams params = PTWM_CPARAMS_DEFAULT;
    ptwm_st *st = NULL;
    ptwm_tensor_desc *descs = NULL;
    ptwm_chain_list *lists = NULL;
    uint8_t(*chains)[PTWM_CHAIN_MAX_BYTES] = NULL;
    size_t *lens = NULL;
    const uint8_t **ptrs = NULL;
    void *blob = NULL;
    size_t n, i, blob_len = 0;
    int use_chains, rc = 1;
    FILE *out;

    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: c_reference SRC OUT METHOD CHUNK [standard-chains]\n");
        return 2;
    }
    params.method = atoi(argv[3]);
    params.chunk_size = strtoull(argv[4], NULL, 10);
    use_chains = argc == 6 && strcmp(argv[5], "standard-chains") == 0;
    if (ptwm_st_open(argv[1], PTWM_OPEN_MMAP, &st, &err)) return fail(&err);
    n = ptwm_st_count(st);
    descs = calloc(n ? n : 1, sizeof *descs);
    lists = calloc(n ? n : 1, sizeof *lists);
    chains = calloc(n ? n : 1, sizeof *chains);
    lens = calloc(n ? n : 1, sizeof *lens);
    ptrs = calloc(n ? n : 1, sizeof *ptrs);
    if (!descs || !lists || !chains || !lens || !ptrs) {
        fprintf(stderr, "c_reference: out of memory\n");
        goto done;
    }
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        if (ptwm_st_tensor(st, i, &info, NULL)) goto done;
        descs[i].name = info.name;
        descs[i].dtype = info.dtype;
        descs[i].ndim = info.ndim;
        descs[i].shape = info.shape;
        descs[i].data = info.data;
        descs[i].nbytes = info.nbytes;
        if (use_chains) {
            if (ptwm_chain_standard(info.dtype, params.method, chains[i], PTWM_CHAIN_MAX_BYTES,
                                    &lens[i], &err)) {
                fail(&err);
                goto done;
            }
            ptrs[i] = chains[i];
            lists[i].chains = &ptrs[i];
            lists[i].lens = &lens[i];
            lists[i].count = 1;
        }
    }
    if (ptwm_compress_blob(descs, n, use_chains ? lists : NULL, &params, &blob, &blob_len,
                           &err)) {
        fail(&err);
        goto done;
    }
    out = fopen(argv[2], "wb");
    if (out) {
        int written = fwrite(blob, 1, blob_len, out) == blob_len;
        if (fclose(out) == 0 && written) rc = 0;
    }
    if (rc) fprintf(stderr, "c_reference: cannot write %s\n", argv[2]);
done:
    free(blob);
    free(ptrs);
    free(lens);
    free(chains);
    free(lists);
    free(descs);
    ptwm_st_close(st);
    return rc;
}
