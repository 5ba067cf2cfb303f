/* The binary interface bindings rely on: ptwm_struct_size reports every public
 * struct as this build lays it out (0 for unknown ids), and ptwm_free releases
 * the buffers the library returns (and takes NULL). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int main(void) {
    static const struct {
        ptwm_struct_id id;
        size_t size;
    } want[] = {
        {PTWM_STRUCT_ERR, sizeof(ptwm_err)},
        {PTWM_STRUCT_TENSOR_INFO, sizeof(ptwm_tensor_info)},
        {PTWM_STRUCT_TENSOR_DESC, sizeof(ptwm_tensor_desc)},
        {PTWM_STRUCT_KV, sizeof(ptwm_kv)},
        {PTWM_STRUCT_CPARAMS, sizeof(ptwm_cparams)},
        {PTWM_STRUCT_CHAIN_LIST, sizeof(ptwm_chain_list)},
        {PTWM_STRUCT_CHECKPOINT_OPTIONS, sizeof(ptwm_checkpoint_options)},
        {PTWM_STRUCT_LAYOUT_ENTRY, sizeof(ptwm_layout_entry)},
        {PTWM_STRUCT_OPTIM_STATE, sizeof(ptwm_optim_state)},
    };
    ptwm_tensor_desc d;
    uint64_t shape[1] = {4};
    float x[4] = {1, -2, 3.5f, 0};
    void *blob = NULL, *hdr = NULL;
    size_t i, len = 0, hlen = 0;
    ptwm_err err;

    CHECK(sizeof want / sizeof want[0] == PTWM_STRUCT_COUNT);
    for (i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(ptwm_struct_size(want[i].id) == want[i].size, "struct %d: %zu, expected %zu",
                  (int)want[i].id, ptwm_struct_size(want[i].id), want[i].size);
    CHECK(ptwm_struct_size(PTWM_STRUCT_COUNT) == 0);
    CHECK(ptwm_struct_size((ptwm_struct_id)-1) == 0);

    d = (ptwm_tensor_desc){"x", PTWM_DTYPE_F32, 1, shape, x, sizeof x};
    CHECK_ERR(ptwm_compress_blob(&d, 1, NULL, NULL, &blob, &len, &err), &err, PTWM_OK, NULL);
    CHECK_ERR(ptwm_st_build_header(&d, 1, NULL, 0, &hdr, &hlen, &err), &err, PTWM_OK, NULL);
    CHECK(blob && len > 0 && hdr && hlen > 8 && memcmp((char *)hdr + 8, "{\"x\"", 4) == 0);
    ptwm_free(blob);
    ptwm_free(hdr);
    ptwm_free(NULL);
    return tu_finish("api");
}
