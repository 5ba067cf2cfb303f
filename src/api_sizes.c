/* Sizes of the public structs, so bindings can check their copies. */
#include <stdlib.h>
#include "common.h"

size_t ptwm_struct_size(ptwm_struct_id id) {
    switch (id) {
    case PTWM_STRUCT_ERR: return sizeof(ptwm_err);
    case PTWM_STRUCT_TENSOR_INFO: return sizeof(ptwm_tensor_info);
    case PTWM_STRUCT_TENSOR_DESC: return sizeof(ptwm_tensor_desc);
    case PTWM_STRUCT_KV: return sizeof(ptwm_kv);
    case PTWM_STRUCT_CPARAMS: return sizeof(ptwm_cparams);
    case PTWM_STRUCT_CHAIN_LIST: return sizeof(ptwm_chain_list);
    case PTWM_STRUCT_CHECKPOINT_OPTIONS: return sizeof(ptwm_checkpoint_options);
    case PTWM_STRUCT_LAYOUT_ENTRY: return sizeof(ptwm_layout_entry);
    case PTWM_STRUCT_OPTIM_STATE: return sizeof(ptwm_optim_state);
    case PTWM_STRUCT_ALLOCATOR: return sizeof(ptwm_allocator);
    case PTWM_STRUCT_COUNT: break;
    }
    return 0;
}
