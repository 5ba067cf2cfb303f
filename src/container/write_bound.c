/* ptwm_compress_bound: the most bytes an image of given tensors can take
 * (ptwm_compress_into), from the container's layout (docs/FORMAT.md): the
 * header; each chunk's payload at its bound (ptwm_chunk_bound: the stored
 * form); the tensor table unpacked (packed only when smaller), each entry
 * with its chains (the given candidates, or the standard chain of its dtype
 * and method), a payload and a base hash; the footer; and a chunk's work bound, so that the chunk
 * coded in place at the image's end always has its room (else it is coded
 * apart and copied). Checked arithmetic: 0 if the sum overflows or an
 * argument is unusable. */
#include "writer_impl.h"
#include "container_format.h"
#include "options.h"

/* A table entry's fixed part: name length, dtype, ndim, flags, chain
 * count, nbytes, chunk size, chunk count, payload and base hashes; and a
 * chunk entry with its base fields. */
#define ENTRY_FIXED (4u + 4u + 8u + 8u + 8u + 16u + 16u)
#define CHUNK_ENTRY (8u + 4u + 4u + 1u + 4u + 1u + 4u)

/* *sum += a * b, 0 on overflow. */
static int add_mul(uint64_t *sum, uint64_t a, uint64_t b) {
    uint64_t p;
    return !ptwm_mul_overflow(a, b, &p) && !ptwm_add_overflow(*sum, p, sum);
}

/* The bytes a tensor's chains take in its entry: each with its u16 length. */
static int chain_bytes(const ptwm_tensor_desc *d, const ptwm_chain_list *chains, ptwm_method method,
                       uint64_t *out) {
    uint8_t std[PTWM_CHAIN_MAX_BYTES];
    size_t i, len = 0;
    *out = 0;
    if (!chains)
        return ptwm_chain_standard(d->dtype, method, std, sizeof(std), &len, NULL) == PTWM_OK &&
               !ptwm_add_overflow(2, len, out);
    if (!chains->lens || chains->count > PTWM_FMT_MAX_CHAINS) return 0;
    for (i = 0; i < chains->count; i++)
        if (ptwm_add_overflow(*out, 2 + (uint64_t)chains->lens[i], out)) return 0;
    return 1;
}

static int tensor_bound(const ptwm_tensor_desc *d, const ptwm_chain_list *chains, uint64_t chunk,
                        ptwm_method method, uint64_t *sum) {
    uint64_t size, nchunks, cb;
    if (!d || !d->name || (unsigned)d->dtype >= PTWM_DTYPE_COUNT || d->ndim > PTWM_MAX_NDIM ||
        !chain_bytes(d, chains, method, &cb))
        return 0;
    size = ptwm_fmt_tensor_chunk(chunk, d->dtype);
    nchunks = d->nbytes / size + (d->nbytes % size != 0);
    return !ptwm_add_overflow(*sum, d->nbytes, sum) &&
           add_mul(sum, nchunks, ptwm_chunk_bound(0) + CHUNK_ENTRY) &&
           !ptwm_add_overflow(*sum, ENTRY_FIXED + (uint64_t)strlen(d->name), sum) &&
           add_mul(sum, d->ndim, 8) && !ptwm_add_overflow(*sum, cb, sum);
}

size_t ptwm_compress_bound(const ptwm_tensor_desc *tensors, size_t n,
                           const ptwm_chain_list *chains, const ptwm_cparams *params) {
    ptwm_cparams p;
    uint64_t sum = PTWM_FMT_HEAD_SIZE + PTWM_FMT_SECTION_HEAD + 4 + PTWM_FMT_FOOT_SIZE, chunk;
    size_t i;
    if ((n && !tensors) || ptwm_cparams_read(params, &p, "ptwm_compress_bound", NULL)) return 0;
    chunk = p.chunk_size ? p.chunk_size : PTWM_DEFAULT_CHUNK;
    for (i = 0; i < n; i++)
        if (!tensor_bound(&tensors[i], chains ? &chains[i] : NULL, chunk,
                          p.method ? p.method : PTWM_METHOD_MICROSCALE, &sum))
            return 0;
    if (chunk > SIZE_MAX || ptwm_add_overflow(sum, ptwm_chunk_work_bound((size_t)chunk), &sum) ||
        sum > SIZE_MAX)
        return 0;
    return (size_t)sum;
}
