/* The binary interface bindings rely on: ptwm_struct_size reports every public
 * struct as this build lays it out (0 for unknown ids), and ptwm_free releases
 * the buffers the library returns (and takes NULL); the lookups and name
 * parsers take err last and say what was wrong. */
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
        {PTWM_STRUCT_ALLOCATOR, sizeof(ptwm_allocator)},
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
    /* Every fallible function takes err last and says what was wrong. */
    {
        ptwm_reader *r = NULL;
        ptwm_tensor_info t;
        ptwm_dtype dt;
        ptwm_isa isa;
        ptwm_method method;
        size_t at;
        char name[64];
        CHECK_ERR(ptwm_reader_open_memory(blob, len, "blob", &r, &err), &err, PTWM_OK, NULL);
        CHECK_ERR(ptwm_reader_tensor(r, 1, &t, &err), &err, PTWM_ERR_INVALID_ARG,
                  "blob: tensor index 1 out of range (1 tensors)");
        CHECK_ERR(ptwm_reader_find(r, "y", &at, &err), &err, PTWM_ERR_NOT_FOUND,
                  "blob: no tensor 'y'");
        CHECK_ERR(ptwm_reader_find(r, "x", &at, &err), &err, PTWM_OK, NULL);
        ptwm_reader_close(r);
        CHECK_ERR(ptwm_dtype_from_name("F99", &dt, &err), &err, PTWM_ERR_DTYPE,
                  "'F99' is not a dtype");
        CHECK_ERR(ptwm_isa_from_name("sse9", &isa, &err), &err, PTWM_ERR_INVALID_ARG,
                  "'sse9' is not an instruction set");
        CHECK_ERR(ptwm_method_from_name("lzma", &method, &err), &err, PTWM_ERR_UNKNOWN_ID,
                  "'lzma' is not a method");
        CHECK_ERR(ptwm_shard_filename(0, 3, "ptwm", name, sizeof name, &err), &err,
                  PTWM_ERR_INVALID_ARG, "shard 0 of 3");
        CHECK_ERR(ptwm_shard_filename(1, 3, "ptwm", name, 8, &err), &err, PTWM_ERR_INVALID_ARG,
                  "longer than 8 bytes");
        CHECK_ERR(ptwm_index_check_shard_name("../a.ptwm", &err), &err, PTWM_ERR_INVALID_ARG,
                  "shard name '../a.ptwm' is not a plain file name");
        CHECK_ERR(ptwm_index_check_shard_name("model-00001-of-00002.ptwm", &err), &err, PTWM_OK,
                  NULL);
    }
    ptwm_free(blob);
    ptwm_free(hdr);
    ptwm_free(NULL);
    return tu_finish("api");
}
