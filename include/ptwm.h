/* ptwm.h - store, compress and load neural-network weights.
 *
 * The one public header of libptwm. Conventions (as in libdeflate and zstd):
 *  - Every fallible function returns a ptwm_error (0 = PTWM_OK) and takes an
 *    optional `ptwm_err *err` last; when non-NULL it receives the code and a
 *    message naming the file, the tensor and the numbers that were wrong.
 *  - Handles are opaque; each open or create function has a close or free, and those
 *    accept NULL and do nothing.
 *  - The caller owns the buffers it passes; pointers returned by accessors stay
 *    valid until the handle that returned them is closed.
 *  - Handles are not safe to use from two threads at once unless a function
 *    says so; distinct handles are independent. The library never aborts or
 *    exits on bad data.
 *  - Wire values (dtype numbers, method ids, error numbers) are never
 *    renumbered.
 */
#ifndef PTWM_H
#define PTWM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define PTWM_API
#else
#define PTWM_API __attribute__((visibility("default")))
#endif

#define PTWM_VERSION_MAJOR 0
#define PTWM_VERSION_MINOR 1
#define PTWM_VERSION_PATCH 0
#define PTWM_VERSION_STRING "0.1.0"

PTWM_API const char *ptwm_version(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum ptwm_error {
    PTWM_OK = 0,
    PTWM_ERR_IO = 1,              /* open/read/write/rename failed (errno text in message) */
    PTWM_ERR_NOMEM = 2,           /* allocation failed */
    PTWM_ERR_INVALID_ARG = 3,     /* the caller passed something unusable */
    PTWM_ERR_TRUNCATED = 4,       /* input shorter than its own description says */
    PTWM_ERR_HEADER_SIZE = 5,     /* header length too large or past end of file */
    PTWM_ERR_JSON = 6,            /* not UTF-8, not JSON, trailing bytes, NUL padding */
    PTWM_ERR_SCHEMA = 7,          /* valid JSON of the wrong shape (types, keys, numbers) */
    PTWM_ERR_DTYPE = 8,           /* unknown or unsupported dtype */
    PTWM_ERR_SHAPE = 9,           /* shape overflows or is not a whole number of bytes */
    PTWM_ERR_OFFSETS = 10,        /* data_offsets malformed or disagreeing with the shape */
    PTWM_ERR_LAYOUT = 11,         /* tensors leave a hole, overlap, or the file has extra bytes */
    PTWM_ERR_DUPLICATE = 12,      /* the same key or tensor name twice */
    PTWM_ERR_NOT_FOUND = 13,      /* no such tensor, file or directory entry */
    PTWM_ERR_LIMIT = 14,          /* a cap exceeded (name length, nesting, allocation) */
    PTWM_ERR_BAD_MAGIC = 15,      /* not a .ptwm file */
    PTWM_ERR_VERSION = 16,        /* a .ptwm version this library does not know */
    PTWM_ERR_UNKNOWN_ID = 17,     /* unknown method, stage or field id */
    PTWM_ERR_CORRUPT = 18,        /* coded data is not a valid encoding */
    PTWM_ERR_CRC = 19,            /* a plane's or a chunk payload's CRC32 does not match */
    PTWM_ERR_HASH = 20,           /* an XXH3-128 does not match: a tensor's payload, a file
                                   * of a .ptwm directory (its file record) */
    PTWM_ERR_DST_SIZE = 21,       /* destination buffer of the wrong size */
    PTWM_ERR_MISMATCH = 22,       /* a load or resume: shape, count, name or optimizer disagree */
    PTWM_ERR_INDEX = 23,          /* a sharded index disagrees with its shards */
    PTWM_ERR_EXISTS = 24,         /* output exists and overwriting was not asked for */
    PTWM_ERR_UNSUPPORTED = 25,    /* valid request this build cannot do */
    PTWM_ERR_BASE_MISSING = 26,   /* a tensor is coded against a base, and none was given */
    PTWM_ERR_BASE_MISMATCH = 27,  /* the base lacks the tensor, or its dtype or shape differ */
    PTWM_ERR_BASE_HASH = 28,      /* the base tensor's payload hash is not the one recorded */
    PTWM_ERR_BASE_CRC = 29        /* a base chunk's CRC32 is not the one recorded */
} ptwm_error;

#define PTWM_ERR_MESSAGE_MAX 512

typedef struct ptwm_err {
    ptwm_error code;
    char message[PTWM_ERR_MESSAGE_MAX];
} ptwm_err;

/* The constant name of an error ("PTWM_ERR_CRC"); never NULL. */
PTWM_API const char *ptwm_error_name(ptwm_error code);
/* A short English description of an error; never NULL. */
PTWM_API const char *ptwm_error_string(ptwm_error code);

/* ------------------------------------------------------------------------ */
/* Memory and binary interface                                               */
/* ------------------------------------------------------------------------ */

/* Release memory the library returned to the caller (buffers documented as
 * "release with ptwm_free"); NULL does nothing. Bindings call this rather
 * than their C runtime's free, which may not be the library's. */
PTWM_API void ptwm_free(void *p);

/* The allocator every allocation of the library goes through, and every
 * buffer it returns comes from: the C library's malloc, realloc and free
 * unless the program supplies its own (an arena, a tracking allocator, the
 * host language's). realloc_fn(opaque, NULL, n) must allocate; sizes are
 * never 0. Memory that libzstd allocates for the library goes through it
 * too; the temporaries of jansson (JSON parsing) and libxxhash's hash
 * states use those libraries' own allocators. */
typedef struct ptwm_allocator {
    void *(*malloc_fn)(void *opaque, size_t size);
    void *(*realloc_fn)(void *opaque, void *p, size_t size);
    void (*free_fn)(void *opaque, void *p);
    void *opaque;
} ptwm_allocator;

/* Use `a` (copied; NULL: the C library's) for every later allocation. Call
 * it once, from one thread, before any other function of the library:
 * PTWM_ERR_INVALID_ARG once the library has allocated anything, or when a
 * function of `a` is missing. */
PTWM_API ptwm_error ptwm_set_allocator(const ptwm_allocator *a, ptwm_err *err);

/* The public structs, for bindings that copy their layout (ctypes, cffi,
 * other languages) to check it when they load the library. */
typedef enum ptwm_struct_id {
    PTWM_STRUCT_ERR = 0,
    PTWM_STRUCT_TENSOR_INFO = 1,
    PTWM_STRUCT_TENSOR_DESC = 2,
    PTWM_STRUCT_KV = 3,
    PTWM_STRUCT_CPARAMS = 4,
    PTWM_STRUCT_CHAIN_LIST = 5,
    PTWM_STRUCT_CHECKPOINT_OPTIONS = 6,
    PTWM_STRUCT_LAYOUT_ENTRY = 7,
    PTWM_STRUCT_OPTIM_STATE = 8,
    PTWM_STRUCT_ALLOCATOR = 9,
    PTWM_STRUCT_COUNT = 10
} ptwm_struct_id;

/* sizeof the struct `id` names in this build of the library; 0 for an id it
 * does not know. */
PTWM_API size_t ptwm_struct_size(ptwm_struct_id id);

/* ------------------------------------------------------------------------ */
/* Contexts: work memory kept between calls                                  */
/* ------------------------------------------------------------------------ */

/* The work memory of compressing and decoding (a codec workspace per
 * thread, chunk buffers), owned by the caller, as zstd's ZSTD_CCtx and
 * ZSTD_DCtx. A writer or reader given no context makes its own and frees
 * it with itself; memory fresh from the system costs page faults on first
 * touch, so a program that compresses or decodes many files, or many small
 * ones, keeps one context and passes it to each (ptwm_cparams.ctx,
 * ptwm_reader_set_ctx). One writer or reader uses a context at a time:
 * attaching one that is in use fails with PTWM_ERR_INVALID_ARG. A context
 * keeps the memory its largest user needed until it is freed. */
typedef struct ptwm_ctx ptwm_ctx;
PTWM_API ptwm_error ptwm_ctx_create(ptwm_ctx **out, ptwm_err *err);
/* NULL does nothing. No writer or reader may still use it. */
PTWM_API void ptwm_ctx_free(ptwm_ctx *ctx);
/* Bytes of work memory the context holds now. */
PTWM_API size_t ptwm_ctx_size(const ptwm_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Instruction sets: a cap on the CPU-specific kernels                       */
/* ------------------------------------------------------------------------ */

/* Each level adds kernels to the one below; every level gives the same bytes.
 * SCALAR runs only the plain C loops (on x86-64 the compiler may still use
 * SSE2, which the baseline ABI includes; a build with -march=... may use what
 * that allows everywhere). SSSE3: byte-shuffle joint-plane merges. AVX2
 * (with BMI2, F16C, POPCNT): rANS, Huffman (BMI2), planes, widening, XXH3.
 * AVX512 (F, BW, CD, DQ, VL): rANS, planes, joint BF16 merge, XXH3.
 * AVX512VBMI (+ VBMI, VBMI2, BITALG): the rANS encoder and order-0 decoder
 * by byte permutes, joint split, sparse compact/expand, Huffman size scan. */
typedef enum ptwm_isa {
    PTWM_ISA_SCALAR = 0,
    PTWM_ISA_SSSE3 = 1,
    PTWM_ISA_AVX2 = 2,
    PTWM_ISA_AVX512 = 3,
    PTWM_ISA_AVX512VBMI = 4,
    PTWM_ISA_BEST = PTWM_ISA_AVX512VBMI /* no cap */
} ptwm_isa;

/* Cap the kernels at `level` for the whole process (a level above what the
 * CPU has changes nothing) and return the level now in effect. Without a
 * call the cap comes from the environment variable PTWM_ISA (a name below,
 * read once at the first kernel call; an unknown name caps at "scalar"),
 * else none. Thread-safe, any time: each kernel reads the cap when it
 * starts, so a change reaches the next kernel in every thread, inside calls
 * already running too (every level gives the same bytes: only speed changes). */
PTWM_API ptwm_isa ptwm_set_isa_limit(ptwm_isa level);
/* The level the kernels run at: the cap, or the CPU's best if lower. */
PTWM_API ptwm_isa ptwm_isa_level(void);
/* "scalar", "ssse3", "avx2", "avx512", "avx512vbmi"; "?" for other values. */
PTWM_API const char *ptwm_isa_name(ptwm_isa level);
/* Parse a name above (exact, lowercase); PTWM_ERR_INVALID_ARG for any other text. */
PTWM_API ptwm_error ptwm_isa_from_name(const char *name, ptwm_isa *out, ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Dtypes: every dtype of the safetensors specification. The numbers are     */
/* .ptwm wire values.                                                        */
/* ------------------------------------------------------------------------ */

typedef enum ptwm_dtype {
    PTWM_DTYPE_BOOL = 0,
    PTWM_DTYPE_U8 = 1,
    PTWM_DTYPE_I8 = 2,
    PTWM_DTYPE_I16 = 3,
    PTWM_DTYPE_U16 = 4,
    PTWM_DTYPE_I32 = 5,
    PTWM_DTYPE_U32 = 6,
    PTWM_DTYPE_I64 = 7,
    PTWM_DTYPE_U64 = 8,
    PTWM_DTYPE_F16 = 9,
    PTWM_DTYPE_BF16 = 10,
    PTWM_DTYPE_F32 = 11,
    PTWM_DTYPE_F64 = 12,
    PTWM_DTYPE_C64 = 13,
    PTWM_DTYPE_F8_E5M2 = 14,
    PTWM_DTYPE_F8_E4M3 = 15,
    PTWM_DTYPE_F8_E8M0 = 16,
    PTWM_DTYPE_F8_E4M3FNUZ = 17,
    PTWM_DTYPE_F8_E5M2FNUZ = 18,
    PTWM_DTYPE_F4 = 19,
    PTWM_DTYPE_F6_E2M3 = 20,
    PTWM_DTYPE_F6_E3M2 = 21,
    PTWM_DTYPE_COUNT = 22
} ptwm_dtype;

/* "BF16" etc.; NULL for an out-of-range value. */
PTWM_API const char *ptwm_dtype_name(ptwm_dtype dtype);
/* Parse a safetensors dtype name (exact, case-sensitive). PTWM_ERR_DTYPE if unknown. */
PTWM_API ptwm_error ptwm_dtype_from_name(const char *name, ptwm_dtype *out, ptwm_err *err);
/* Bits per element (1..128); 0 for an out-of-range value. */
PTWM_API unsigned ptwm_dtype_bits(ptwm_dtype dtype);
/* Byte size of a tensor: product(shape) * bits / 8, checked. PTWM_ERR_SHAPE when
 * the product overflows 64 bits or the bit count is not a whole number of bytes. */
PTWM_API ptwm_error ptwm_tensor_nbytes(ptwm_dtype dtype, const uint64_t *shape, uint32_t ndim,
                                       uint64_t *nbytes, ptwm_err *err);

#define PTWM_MAX_NDIM 16          /* dims per tensor we accept */
#define PTWM_MAX_NAME 4096        /* bytes per tensor name we accept */

/* A tensor as readers describe it. Pointers live as long as the handle. */
typedef struct ptwm_tensor_info {
    const char *name;
    ptwm_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;
    uint64_t nbytes;        /* raw (decoded) bytes */
    uint64_t coded_bytes;   /* stored bytes: the payloads this tensor adds to the file (a
                               payload shared with an earlier tensor counts there); equals
                               nbytes for safetensors */
    const void *data;       /* zero-copy raw bytes, or NULL when not mapped (pread mode, .ptwm) */
} ptwm_tensor_info;

/* A tensor as writers take it. */
typedef struct ptwm_tensor_desc {
    const char *name;
    ptwm_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;
    const void *data;
    uint64_t nbytes;
} ptwm_tensor_desc;

typedef struct ptwm_kv {
    const char *key;
    const char *value;
} ptwm_kv;

/* ------------------------------------------------------------------------ */
/* Safetensors files (the reader and writer, ptwm_st_*, are in the advanced  */
/* section at the end: read them through ptwm_source_*)                      */
/* ------------------------------------------------------------------------ */

/* Files that change while open: opening checks the exact size once. A file
 * replaced by rename (as every writer here does) is safe in both modes: the
 * handle keeps the old file. A file truncated or rewritten in place is not:
 * in PREAD mode a read past its new end fails with PTWM_ERR_TRUNCATED (and
 * other bytes read as they now are); in MMAP mode touching a mapped page past
 * the new end raises SIGBUS, as with any memory-mapped file, and the library
 * does not catch signals. Use PREAD for files another process may truncate. */
typedef enum ptwm_open_mode {
    PTWM_OPEN_MMAP = 0,   /* map the file; tensor data is zero-copy */
    PTWM_OPEN_PREAD = 1   /* read the header only; tensor bytes on demand with pread */
} ptwm_open_mode;

#define PTWM_ST_MAX_HEADER 100000000ull  /* safetensors header length cap */

/* ------------------------------------------------------------------------ */
/* Shard sizes and names (Hugging Face layout)                               */
/* ------------------------------------------------------------------------ */

/* "5GB", "5GiB", "500MB", "500MiB", "1kB", "123B", "123" (bytes); units B, kB,
 * MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024); unit
 * letters in either case but the final B upper case ("5Gb" would be bits).
 * A decimal fraction is exact and must give whole bytes ("1.5GB"). No sign,
 * spaces or exponent. PTWM_ERR_INVALID_ARG, quoting the text, otherwise. */
PTWM_API ptwm_error ptwm_parse_size(const char *text, uint64_t *out, ptwm_err *err);

/* Greedy packing in input order: shard_of[i] receives the 0-based shard of
 * tensor i; a tensor larger than max_shard_size gets a shard of its own.
 * Sizes count tensor bytes only, not headers (as Hugging Face does).
 * *nshards receives the number of shards (0 for n == 0). max_shard_size 0
 * is PTWM_ERR_INVALID_ARG. */
PTWM_API ptwm_error ptwm_plan_shards(const uint64_t *sizes, size_t n, uint64_t max_shard_size,
                                     size_t *shard_of, size_t *nshards, ptwm_err *err);
/* "model-00001-of-00003.<suffix>" into buf; returns PTWM_ERR_INVALID_ARG if
 * idx_one_based is 0 or > total, or buf too small. */
PTWM_API ptwm_error ptwm_shard_filename(size_t idx_one_based, size_t total, const char *suffix,
                                        char *buf, size_t cap, ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Methods, chains and the .ptwm container                                   */
/* ------------------------------------------------------------------------ */

/* Methods: what a writer does where a chain leaves the coding open; wire
 * ids. HUFFMAN, ZSTD, RANS and IDENTITY name the coder of the planes (a
 * plane it would not shrink is stored as it is).
 * MICROSCALE, the default, names no coder of its own: it adds exponent
 * scales (per block or per column, where they pay) and keeps, per plane, the
 * smallest of the coders, so a plane's coded form is always one of the other
 * four (or a constant), never "MICROSCALE". */
typedef enum ptwm_method {
    PTWM_METHOD_HUFFMAN = 1,
    PTWM_METHOD_ZSTD = 2,
    PTWM_METHOD_MICROSCALE = 3,
    PTWM_METHOD_RANS = 4,
    PTWM_METHOD_IDENTITY = 5
} ptwm_method;

/* "huffman", "zstd", "microscale", "rans", "identity"; NULL if unknown. */
PTWM_API const char *ptwm_method_name(ptwm_method method);
/* Case-insensitive name or decimal id. */
PTWM_API ptwm_error ptwm_method_from_name(const char *name, ptwm_method *method, ptwm_err *err);

/* A chain is data: its stable wire encoding (docs/CHAINS.md) is what callers
 * pass and what .ptwm files record. */
#define PTWM_CHAIN_MAX_BYTES 256

/* The standard production chain for a dtype and method (the table is
 * documented in docs/CHAINS.md). Writes at most PTWM_CHAIN_MAX_BYTES. */
PTWM_API ptwm_error ptwm_chain_standard(ptwm_dtype dtype, ptwm_method method, uint8_t *buf,
                                        size_t cap, size_t *len, ptwm_err *err);
/* Validate a chain blob against a dtype. */
PTWM_API ptwm_error ptwm_chain_validate(const uint8_t *chain, size_t len, ptwm_dtype dtype,
                                        ptwm_err *err);
/* Human-readable form, e.g. "split(e8m7) > microscale(32) > entropy(*:auto)". */
PTWM_API ptwm_error ptwm_chain_describe(const uint8_t *chain, size_t len, char *buf, size_t cap,
                                        ptwm_err *err);
/* Parse the human-readable form back into a blob (the inverse of describe). */
PTWM_API ptwm_error ptwm_chain_parse(const char *text, uint8_t *buf, size_t cap, size_t *len,
                                     ptwm_err *err);

typedef struct ptwm_source ptwm_source; /* any weights file or directory (below) */

/* Options structs (ptwm_cparams, ptwm_checkpoint_options) carry their size,
 * as libdeflate's sizeof_options does: start from the struct's _DEFAULT
 * initialiser (which sets `size` to the struct's sizeof in the header the
 * program was built with) and set the fields wanted. The library reads the
 * first `size` bytes, so a program built with an older, smaller struct keeps
 * working: the fields it lacks take their defaults. A size of 0 (a struct not
 * started from _DEFAULT), one larger than the library's own struct (a program
 * built with a newer header than the library it runs with) or one that is no
 * version's size (not a multiple of the struct's alignment) is
 * PTWM_ERR_INVALID_ARG, naming the struct and both sizes. Fields are only
 * ever added at the end, and a struct never ends in padding, so an older
 * struct's bytes never reach a newer field. A NULL options pointer means
 * every default. */
typedef struct ptwm_cparams {
    size_t size;              /* sizeof(ptwm_cparams); PTWM_CPARAMS_DEFAULT sets it */
    ptwm_method method;       /* used where a chain leaves the stage open;
                               * 0 = PTWM_METHOD_MICROSCALE */
    int no_payload_hash;      /* 1: no XXH3-128 of each tensor's raw bytes (0, the
                               * default: every tensor carries it) */
    int no_plane_crc;         /* 1: no CRC32 of each coded plane (0: every plane
                               * carries one) */
    uint64_t chunk_size;      /* raw bytes per chunk; 0 = default */
    int threads;              /* 0 = all cores (those this process may run on, as
                               * nproc counts them); the output is identical for
                               * any count */
    int zstd_level;           /* for ZSTD stages; 0 = 3 (1 where zstd is one
                               * candidate among several: docs/CHAINS.md) */
    /* Optional progress report, called on the writing thread after each
     * coded chunk is written (about once per chunk_size raw bytes): raw bytes
     * coded so far and progress_total (0 if the caller set none;
     * ptwm_compress_safetensors sets it to the source's tensor bytes). */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    uint64_t progress_total;
    ptwm_ctx *ctx;            /* work memory to use (see ptwm_ctx); NULL: the
                               * writer's own */
    /* Optional base (docs/DELTA.md), NULL for none: a tensor whose name,
     * dtype and shape match a tensor of `base` is coded against it where
     * that is smaller, chunk by chunk (the file then records the base
     * tensor's payload hash and each base chunk's CRC32, and decoding
     * needs the base: ptwm_reader_set_base). Others are coded as usual. A
     * file with a tensor coded against its base is format version 6 (7 or
     * 8 if it also has a rANS plane in two or four streams); with none, the file is the
     * one written without a base. Not owned; read on
     * the writing thread. */
    ptwm_source *base;
    /* The newest container format version the file may take, for readers
     * of an older version (docs/FORMAT.md); 0: the newest its tensors need.
     * 7: rANS planes in at most two streams (decoded a little slower than
     * four), 5 or 6: in one. A file is still written in the oldest version
     * that holds it. 6 is needed for a base (5 with a base, and anything
     * outside 5..8 but 0, is PTWM_ERR_INVALID_ARG). */
    uint64_t format_version;
} ptwm_cparams;

/* The .ptwm versions this library writes (ptwm_cparams.format_version) and
 * reads (1 to the newest). */
#define PTWM_FORMAT_VERSION_OLDEST_WRITTEN 5u
#define PTWM_FORMAT_VERSION_NEWEST 8u

#define PTWM_DEFAULT_CHUNK ((uint64_t)1 << 20)
#define PTWM_MIN_CHUNK ((uint64_t)4096)      /* chunk_size bounds the writer accepts */
#define PTWM_MAX_CHUNK ((uint64_t)1 << 28)
#define PTWM_CPARAMS_DEFAULT { .size = sizeof(ptwm_cparams), .method = PTWM_METHOD_MICROSCALE }

/* Optional per-tensor chains: `count` candidate chain blobs; each chunk is
 * coded with whichever candidate codes it smallest. */
typedef struct ptwm_chain_list {
    const uint8_t *const *chains;
    const size_t *lens;
    size_t count;
} ptwm_chain_list;

/* Read callback for streaming a tensor's raw bytes into the writer. */
typedef ptwm_error (*ptwm_read_fn)(void *ctx, uint64_t offset, void *dst, size_t len,
                                   ptwm_err *err);

typedef struct ptwm_writer ptwm_writer;

/* Start a .ptwm written to `path` (through a temporary file, fsynced and renamed
 * on finish). Past 8 MiB the file is written with O_DIRECT where the file system
 * takes it, bypassing the page cache (and one extra thread writes its blocks);
 * PTWM_DIRECT_IO=0 in the environment keeps it in the page cache. */
PTWM_API ptwm_error ptwm_writer_open_file(const char *path, const ptwm_cparams *params,
                                          ptwm_writer **out, ptwm_err *err);
/* Start a .ptwm built in memory; ptwm_writer_finish_memory hands it over. */
PTWM_API ptwm_error ptwm_writer_open_memory(const ptwm_cparams *params, ptwm_writer **out,
                                            ptwm_err *err);
/* Record the safetensors header this file was made from (8-byte length plus
 * JSON), so decompression rebuilds the original file byte for byte. */
PTWM_API ptwm_error ptwm_writer_set_source_header(ptwm_writer *w, const void *header,
                                                  size_t len, const char *file_name,
                                                  ptwm_err *err);
PTWM_API ptwm_error ptwm_writer_set_metadata(ptwm_writer *w, const ptwm_kv *meta, size_t n,
                                             ptwm_err *err);
/* Add a tensor whose bytes are in memory (desc->data). chains may be NULL. */
PTWM_API ptwm_error ptwm_writer_add(ptwm_writer *w, const ptwm_tensor_desc *desc,
                                    const ptwm_chain_list *chains, ptwm_err *err);
/* Add a tensor whose bytes are pulled chunk by chunk through `read`. */
PTWM_API ptwm_error ptwm_writer_add_stream(ptwm_writer *w, const ptwm_tensor_desc *desc,
                                           const ptwm_chain_list *chains, ptwm_read_fn read,
                                           void *ctx, ptwm_err *err);
/* Write the tensor table and close. For a file writer the file appears
 * atomically. The writer is freed whether or not this succeeds. */
PTWM_API ptwm_error ptwm_writer_finish(ptwm_writer *w, ptwm_err *err);
/* For a memory writer: *out is released with ptwm_free. Frees the writer. */
PTWM_API ptwm_error ptwm_writer_finish_memory(ptwm_writer *w, void **out, size_t *len,
                                              ptwm_err *err);
/* Abandon a writer (removes its temporary file). NULL is fine. */
PTWM_API void ptwm_writer_free(ptwm_writer *w);
/* Total coded bytes so far. */
PTWM_API uint64_t ptwm_writer_coded_bytes(const ptwm_writer *w);

/* One-call form: compress n tensors into a blob (release it with ptwm_free).
 * chains may be NULL (standard table), else one ptwm_chain_list per tensor. */
PTWM_API ptwm_error ptwm_compress_blob(const ptwm_tensor_desc *tensors, size_t n,
                                       const ptwm_chain_list *chains, const ptwm_cparams *params,
                                       void **out, size_t *len, ptwm_err *err);
/* The most bytes ptwm_compress_into can write for these tensors, chains and
 * parameters (NULL: defaults): about their raw size plus 14 bytes a chunk,
 * the table, and 4 chunks' worth of room for the last chunk to be coded in
 * place. 0 if an argument is unusable or the size overflows. */
PTWM_API size_t ptwm_compress_bound(const ptwm_tensor_desc *tensors, size_t n,
                                    const ptwm_chain_list *chains, const ptwm_cparams *params);
/* ptwm_compress_blob into the caller's buffer dst of cap bytes, the image's
 * size into *len; the same bytes, and no image allocated: a buffer reused
 * from call to call is already in memory, where a fresh image costs the
 * kernel's zeroing of each of its pages. PTWM_ERR_DST_SIZE if the image
 * does not fit (a capacity of ptwm_compress_bound always does); dst's bytes
 * are then unspecified. */
PTWM_API ptwm_error ptwm_compress_into(const ptwm_tensor_desc *tensors, size_t n,
                                       const ptwm_chain_list *chains, const ptwm_cparams *params,
                                       void *dst, size_t cap, size_t *len, ptwm_err *err);
/* One-call form writing a file. */
PTWM_API ptwm_error ptwm_compress_file(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                                       const ptwm_chain_list *chains, const ptwm_cparams *params,
                                       ptwm_err *err);

typedef struct ptwm_reader ptwm_reader;

/* Open a .ptwm; validates the header and tensor table (not the payload). */
PTWM_API ptwm_error ptwm_reader_open(const char *path, ptwm_reader **out, ptwm_err *err);
/* Buffer must outlive the handle. */
PTWM_API ptwm_error ptwm_reader_open_memory(const void *buf, size_t size, const char *label,
                                            ptwm_reader **out, ptwm_err *err);
PTWM_API void ptwm_reader_close(ptwm_reader *r);
/* Decoding threads for later calls (0 = all cores). */
PTWM_API void ptwm_reader_set_threads(ptwm_reader *r, int threads);
/* Decode with the caller's work memory (see ptwm_ctx) from now until the
 * reader closes or another context (NULL: the reader's own) is set.
 * PTWM_ERR_INVALID_ARG if ctx is in use by another writer or reader. */
PTWM_API ptwm_error ptwm_reader_set_ctx(ptwm_reader *r, ptwm_ctx *ctx, ptwm_err *err);
PTWM_API size_t ptwm_reader_count(const ptwm_reader *r);
PTWM_API ptwm_error ptwm_reader_tensor(const ptwm_reader *r, size_t index, ptwm_tensor_info *out,
                                       ptwm_err *err);
PTWM_API ptwm_error ptwm_reader_find(const ptwm_reader *r, const char *name, size_t *index,
                                     ptwm_err *err);
/* Human-readable chain(s) of a tensor. */
PTWM_API ptwm_error ptwm_reader_chain_text(const ptwm_reader *r, size_t index, char *buf,
                                           size_t cap, ptwm_err *err);
/* Decode tensor `index` into dst (dst_size must equal its nbytes); checks
 * plane CRCs and the payload hash when present. */
PTWM_API ptwm_error ptwm_reader_decode(ptwm_reader *r, size_t index, void *dst, size_t dst_size,
                                       ptwm_err *err);
/* Decode several tensors in one call: tensor indices[i] into dsts[i] of
 * sizes[i] bytes (each its nbytes). The chunks of all of them share the
 * threads, so many small tensors decode as fast as one big one. Every
 * payload hash is checked; on failure the first damage (in list order) is
 * reported and a tensor whose hash failed is zeroed. */
PTWM_API ptwm_error ptwm_reader_decode_many(ptwm_reader *r, const size_t *indices,
                                            void *const *dsts, const size_t *sizes, size_t n,
                                            ptwm_err *err);
/* Decode bytes [offset, offset+len) of a tensor, touching only the chunks
 * that hold them, checking each chunk's CRCs. The payload hash covers the
 * whole tensor, so it is checked only for reads that run through the tensor
 * in order: a read from byte 0, then reads each starting where the last one
 * (of this reader) ended; the read that reaches the end fails with
 * PTWM_ERR_HASH (its bytes zeroed) when the hash does not match, so a caller
 * that streams the pieces must discard what it wrote. Any other read (a
 * sub-range not starting at 0, or out of order) does NOT check the hash:
 * use it only when the rest of the tensor is not needed. */
PTWM_API ptwm_error ptwm_reader_decode_range(ptwm_reader *r, size_t index, uint64_t offset,
                                             void *dst, size_t len, ptwm_err *err);
/* Decode everything and check every CRC and hash; reports the first damage.
 * A file may hold tensors with nothing to check (see below): they decode,
 * and this still returns PTWM_OK for them. */
PTWM_API ptwm_error ptwm_reader_verify(ptwm_reader *r, ptwm_err *err);
/* Tensors (with bytes) that carry no check at all: no payload hash, no plane
 * CRCs, and no payload CRC in their chunk entries (files before format
 * version 4, written with both emit options off). Damage to their bytes
 * cannot be detected; `ptwm verify` fails on such a file and `ptwm
 * decompress` warns. 0 for every file of version 4 or later. */
PTWM_API size_t ptwm_reader_unchecked_count(const ptwm_reader *r);
/* The source safetensors header and file name, if recorded (else NULL). */
PTWM_API const void *ptwm_reader_source_header(const ptwm_reader *r, size_t *len);
PTWM_API const char *ptwm_reader_source_name(const ptwm_reader *r);
PTWM_API size_t ptwm_reader_metadata_count(const ptwm_reader *r);
PTWM_API ptwm_kv ptwm_reader_metadata(const ptwm_reader *r, size_t i);
/* Rebuild the source safetensors file (or, if none was recorded, write a
 * fresh one) at `path`, streaming chunk by chunk. */
PTWM_API ptwm_error ptwm_reader_write_safetensors(ptwm_reader *r, const char *path,
                                                  ptwm_err *err);
PTWM_API uint64_t ptwm_reader_file_size(const ptwm_reader *r);
/* The base that tensors coded against one need (docs/DELTA.md): any source
 * (a safetensors or .ptwm file or directory), not owned, open while r
 * decodes; NULL removes it. A .ptwm base is set to decode on one thread (it
 * decodes chunk ranges on the reader's threads, one at a time). Decoding a
 * tensor coded against a base fails, naming the tensor and the hashes or
 * CRCs, with PTWM_ERR_BASE_MISSING (no base set), PTWM_ERR_BASE_MISMATCH (the
 * base lacks the tensor, or its dtype or shape differ), PTWM_ERR_BASE_HASH
 * (a .ptwm base whose tensor records another payload hash: a different
 * base) or PTWM_ERR_BASE_CRC (a base chunk's bytes are not those the chunk
 * was coded against: a damaged or different base), before that chunk is
 * decoded; never with wrong bytes. Tensors not coded against a base ignore
 * it. */
PTWM_API ptwm_error ptwm_reader_set_base(ptwm_reader *r, ptwm_source *base, ptwm_err *err);
/* Whether tensor `index` is coded against a base: 1 with the base tensor's
 * payload hash (XXH3-128, canonical bytes) and the count of its chunks coded
 * against base chunks (either may be NULL), else 0. */
PTWM_API int ptwm_reader_tensor_base(const ptwm_reader *r, size_t index, uint8_t hash[16],
                                     uint64_t *chunks);

/* Compress a safetensors file into a .ptwm, streaming (memory bounded by
 * threads x chunk size). */
PTWM_API ptwm_error ptwm_compress_safetensors(const char *src_path, const char *dst_path,
                                              const ptwm_cparams *params, ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Converting checkpoints: files and sharded directories, either way        */
/* ------------------------------------------------------------------------ */

/* A sharded .ptwm checkpoint is these files (docs/FORMAT.md); the index is
 * read and written by ptwm_index_* in the advanced section. */
#define PTWM_INDEX_NAME "model.ptwm.index.json"
#define PTWM_SINGLE_NAME "model.ptwm"
/* The size and XXH3-128 of every other file of the directory (the index,
 * config.json, tokenizer files...), checked by every reader that uses them. */
#define PTWM_FILES_NAME "model.ptwm.files.json"

/* Whole checkpoints: a .safetensors file or Hugging Face directory to a .ptwm
 * directory and back, one shard in flight at a time (memory bounded by threads x
 * chunk size, never the model). Output is built in a temporary directory
 * `outdir`.tmp-XXXXXX beside `outdir`, every file and directory of it fsynced,
 * then renamed into place and the parent directory fsynced, so a crash or power
 * loss leaves the old output or the complete new one. An existing `outdir` is
 * PTWM_ERR_EXISTS unless `force`; `force` swaps old and new in one atomic
 * rename (RENAME_EXCHANGE) where the file system has it, else moves the old one
 * to `outdir`.old-XXXXXX first (the next call puts it back if a crash came
 * before the new one was in place). Leftovers `outdir`.tmp-* and .old-* of an
 * interrupted run are PTWM_ERR_EXISTS, naming them, unless `force`, which
 * removes them (so two calls must not write one outdir at the same time).
 * Files other than the tensors and the index
 * (config.json, tokenizer files) are copied as they are, subdirectories up to
 * 16 deep; a link to a file is copied as the file if it leads inside the
 * source directory or into the blobs/ of the Hugging Face cache it is a
 * snapshot of (any link with follow_symlinks), else PTWM_ERR_UNSUPPORTED naming
 * it, as for the source's shards and index; a link to a directory is
 * PTWM_ERR_UNSUPPORTED, other special files are skipped. A .ptwm directory
 * with an index or other files gets a file record (PTWM_FILES_NAME), written
 * before the index; decompression checks every file against it (PTWM_ERR_HASH
 * naming a damaged one). A source file name a .ptwm file records that is not
 * a plain file name is PTWM_ERR_SCHEMA (not replaced by another name). */
typedef void (*ptwm_progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);

/* Carries its size like ptwm_cparams (see there). */
typedef struct ptwm_checkpoint_options {
    size_t size;                /* sizeof(ptwm_checkpoint_options); the _DEFAULT sets it */
    uint64_t max_shard_size;    /* 0: one output shard per input shard (byte-exact
                                 * restore); else re-plan shards by raw bytes */
    ptwm_method method;         /* compress; 0 = PTWM_METHOD_MICROSCALE */
    int threads;                /* 0 = one per 32 MiB of input begun, up to all cores
                                 * (on a few MB a second thread is slower) */
    uint64_t chunk_size;        /* raw bytes per chunk (compress); 0 = default */
    int force;                  /* replace an existing outdir */
    int follow_symlinks;        /* follow links in the source directory wherever they
                                 * lead; 0: only links that stay inside it (or in the
                                 * blobs/ of a Hugging Face cache), others refused */
    ptwm_progress_fn progress;  /* raw bytes done so far; NULL for none; called
                                 * from the calling thread */
    void *progress_ctx;
    uint32_t part, parts;       /* compress: only part `part` (1..parts) of the shards,
                                 * for ptwm_assemble_checkpoint to join (docs/SCALE.md);
                                 * parts 0 = one run does everything */
    ptwm_source *base;          /* compress: code against this base (ptwm_cparams.base);
                                 * decompress: the base the files need; NULL: none */
    ptwm_source *src_base;      /* compress from a .ptwm source: the base its own tensors
                                 * were coded against (NULL: none) */
    uint64_t format_version;    /* compress: the newest container version the files may
                                 * take (ptwm_cparams.format_version); 0: as needed */
} ptwm_checkpoint_options;

#define PTWM_CHECKPOINT_OPTIONS_DEFAULT                                                          \
    { .size = sizeof(ptwm_checkpoint_options), .method = PTWM_METHOD_MICROSCALE }

/* src: a .safetensors file (-> outdir/model.ptwm recording its header and name)
 * or a directory (model.safetensors.index.json plus shards, or model.safetensors)
 * -> model-0000k-of-0000n.ptwm + model.ptwm.index.json (the source index is kept
 * in the index metadata so decompression restores it). opt may be NULL.
 * A .ptwm file or directory as src is re-coded: against opt->base (a training
 * checkpoint against the one before it), or as a whole file when only
 * opt->src_base (its own base) is given; it keeps the safetensors files it
 * restores, so decompressing the output gives the same bytes as decompressing
 * src. With neither it is PTWM_ERR_INVALID_ARG (nothing to re-code). */
PTWM_API ptwm_error ptwm_compress_checkpoint(const char *src, const char *outdir,
                                             const ptwm_checkpoint_options *opt, ptwm_err *err);
/* Finish a checkpoint compressed in parts (options part and parts, one run
 * per part, in any processes or machines sharing OUTDIR): check that every
 * part is there and agrees with the plan recomputed from the source (same
 * plan, no shard twice, sizes and hashes as each part recorded), move the
 * shards into place, copy the source's other files and write the index last.
 * A missing, failed or foreign part is an error naming it (PTWM_ERR_NOT_FOUND,
 * PTWM_ERR_HASH, PTWM_ERR_MISMATCH) and leaves OUTDIR without an index. On a
 * finished OUTDIR it does nothing. The result is the directory one
 * unpartitioned run gives, byte for byte. */
PTWM_API ptwm_error ptwm_assemble_checkpoint(const char *outdir, ptwm_err *err);
/* src: a .ptwm file or directory. Restores the original safetensors files, index
 * and other files byte for byte; with max_shard_size (or when the shards record no
 * source file) writes Hugging Face shards model-0000k-of-0000n.safetensors plus
 * model.safetensors.index.json (a single model.safetensors when one shard). */
PTWM_API ptwm_error ptwm_decompress_checkpoint(const char *src, const char *outdir,
                                               const ptwm_checkpoint_options *opt, ptwm_err *err);

/* Remove every temporary output (staged directory, file written under a
 * temporary name) that calls in progress in this process have made, and make
 * any later attempt to create or commit one fail. For a program that ends on a
 * signal: call it from a thread that waits for the signal (sigwait), not from
 * a signal handler (it takes a lock and frees memory), then exit. */
PTWM_API void ptwm_remove_temporary_outputs(void);


/* ------------------------------------------------------------------------ */
/* Sources and layout loads                                                  */
/* ------------------------------------------------------------------------ */

/* One handle over any kind of weights: a safetensors file, a Hugging Face
 * checkpoint directory, a .ptwm file, a sharded .ptwm directory, or a raw
 * little-endian F32 file (one F32 tensor named "" of shape [size / 4]). The
 * header or index is parsed once at open and reused by every load. */
typedef enum ptwm_source_kind {
    PTWM_SOURCE_AUTO = 0,             /* detect; never picks RAW_F32 */
    PTWM_SOURCE_SAFETENSORS = 1,
    PTWM_SOURCE_SAFETENSORS_DIR = 2,
    PTWM_SOURCE_PTWM = 3,
    PTWM_SOURCE_PTWM_DIR = 4,
    PTWM_SOURCE_RAW_F32 = 5           /* only when asked: any file could look raw */
} ptwm_source_kind;

/* AUTO: a directory holding model.ptwm.index.json or model.ptwm is PTWM_DIR,
 * one holding model.safetensors.index.json or model.safetensors is
 * SAFETENSORS_DIR; a file starting with the .ptwm magic is PTWM, else it must
 * be a valid safetensors file. Safetensors kinds are read with pread
 * (PTWM_OPEN_PREAD): a file truncated while open is PTWM_ERR_TRUNCATED, "file X
 * is N bytes, expected M", never SIGBUS. */
PTWM_API ptwm_error ptwm_source_open(const char *path, ptwm_source_kind kind, ptwm_source **out,
                                     ptwm_err *err);
/* As ptwm_source_open, choosing how safetensors kinds read tensor bytes:
 * PTWM_OPEN_PREAD (the default: bounded reads; resident memory never grows
 * with the file; a file truncated while open is PTWM_ERR_TRUNCATED, not
 * SIGBUS) or PTWM_OPEN_MMAP (zero-copy widening from the mapping, for files
 * nothing truncates: see ptwm_open_mode). Other kinds ignore it. */
PTWM_API ptwm_error ptwm_source_open_mode(const char *path, ptwm_source_kind kind,
                                          ptwm_open_mode mode, ptwm_source **out,
                                          ptwm_err *err);
PTWM_API void ptwm_source_close(ptwm_source *s);
PTWM_API ptwm_source_kind ptwm_source_get_kind(const ptwm_source *s);
/* "safetensors", "safetensors-dir", "ptwm", "ptwm-dir", "raw-f32"; "auto" for 0. */
PTWM_API const char *ptwm_source_kind_name(ptwm_source_kind kind);
PTWM_API const char *ptwm_source_path(const ptwm_source *s);
/* Decoding threads for .ptwm kinds (0 = all cores); ignored by the others. */
PTWM_API void ptwm_source_set_threads(ptwm_source *s, int threads);
/* ptwm_reader_set_base for every .ptwm file of s; other kinds hold no tensor
 * coded against a base (PTWM_OK). */
PTWM_API ptwm_error ptwm_source_set_base(ptwm_source *s, ptwm_source *base, ptwm_err *err);
PTWM_API size_t ptwm_source_count(const ptwm_source *s);
/* Tensors in the source's own order (file order; index order for directories). */
PTWM_API ptwm_error ptwm_source_tensor(const ptwm_source *s, size_t index, ptwm_tensor_info *out,
                                       ptwm_err *err);
/* PTWM_ERR_NOT_FOUND (message names the tensor and the path) if absent. */
PTWM_API ptwm_error ptwm_source_find(const ptwm_source *s, const char *name, size_t *index,
                                     ptwm_err *err);
/* Raw bytes [offset, offset+len) of a tensor (decoding only the chunks needed). */
PTWM_API ptwm_error ptwm_source_read(ptwm_source *s, size_t index, uint64_t offset, void *dst,
                                     size_t len, ptwm_err *err);
/* Whole tensors at once: tensor indices[i] into dsts[i] of sizes[i] bytes
 * (each its nbytes: PTWM_ERR_DST_SIZE otherwise). For .ptwm kinds the chunks
 * of all of them share the decoding threads (ptwm_reader_decode_many, shard by
 * shard for a directory), so many small tensors load as fast as one big one,
 * and every payload hash is checked; other kinds read them in turn. */
PTWM_API ptwm_error ptwm_source_read_many(ptwm_source *s, const size_t *indices,
                                          void *const *dsts, const size_t *sizes, size_t n,
                                          ptwm_err *err);
/* A metadata value (safetensors __metadata__, .ptwm metadata; for directories
 * the first shard's), or NULL. Valid until the source closes. */
PTWM_API const char *ptwm_source_metadata_get(const ptwm_source *s, const char *key);
/* Every metadata entry, in file order (for directories the first shard's):
 * ptwm_source_metadata(s, i) for i < ptwm_source_metadata_count(s); {NULL,
 * NULL} past the end. Strings valid until the source closes. */
PTWM_API size_t ptwm_source_metadata_count(const ptwm_source *s);
PTWM_API ptwm_kv ptwm_source_metadata(const ptwm_source *s, size_t i);

/* Conversions a layout load may apply. Each level includes the ones above it. */
typedef enum ptwm_convert {
    PTWM_CONVERT_FLOAT = 0,      /* F32 as is; BF16 and F16 widened exactly; others an error */
    PTWM_CONVERT_F64_ROUND = 1,  /* also F64 rounded to nearest F32 */
    PTWM_CONVERT_INT = 2         /* also BOOL and integer dtypes by value (round to nearest) */
} ptwm_convert;

/* One tensor a program expects: its name in the source and its shape. */
typedef struct ptwm_layout_entry {
    const char *name;
    uint32_t ndim;
    const uint64_t *shape;
} ptwm_layout_entry;

/* Number of F32 elements a layout fills (checked). */
PTWM_API ptwm_error ptwm_layout_elements(const ptwm_layout_entry *entries, size_t n,
                                         uint64_t *count, ptwm_err *err);
/* Fill dst (exactly dst_count floats) with the layout's tensors in order. All
 * entries are checked before anything is read: PTWM_ERR_NOT_FOUND for a
 * missing tensor, PTWM_ERR_MISMATCH for a shape or total that disagrees,
 * PTWM_ERR_DTYPE for a dtype `conv` does not allow. Tensors are streamed in
 * bounded pieces straight into dst; no copy of the whole layout is made, so a
 * model loaded as a sequence of per-layer layouts never holds more than the
 * layer being filled. */
PTWM_API ptwm_error ptwm_load_layout(ptwm_source *s, const ptwm_layout_entry *entries, size_t n,
                                     ptwm_convert conv, float *dst, uint64_t dst_count,
                                     ptwm_err *err);
/* Elements [first, first + count) of one entry's tensor as F32 (checked as
 * ptwm_load_layout checks it): for streaming a tensor through a small buffer. */
PTWM_API ptwm_error ptwm_load_tensor_part(ptwm_source *s, const ptwm_layout_entry *entry,
                                          ptwm_convert conv, uint64_t first, float *dst,
                                          uint64_t count, ptwm_err *err);

/* An owned layout (entries and their strings live as long as it does). */
typedef struct ptwm_layout ptwm_layout;
/* Parse a JSON list of {"name": "...", "shape": [d0, d1, ...]}; label names
 * the text in messages (may be NULL). */
PTWM_API ptwm_error ptwm_layout_parse_json(const char *text, size_t len, const char *label,
                                           ptwm_layout **out, ptwm_err *err);
PTWM_API ptwm_error ptwm_layout_read_json(const char *path, ptwm_layout **out, ptwm_err *err);
/* Every tensor of a source, in the source's order, with its own shape. */
PTWM_API ptwm_error ptwm_layout_from_source(const ptwm_source *s, ptwm_layout **out,
                                            ptwm_err *err);
PTWM_API const ptwm_layout_entry *ptwm_layout_entries(const ptwm_layout *l, size_t *n);
/* Stable sort by name, so entries sharing a prefix become adjacent. */
PTWM_API void ptwm_layout_sort_by_name(ptwm_layout *l);
PTWM_API void ptwm_layout_free(ptwm_layout *l);
/* Layer iteration: the end (exclusive) of the run of entries from `start`
 * whose names share entries[start]'s layer key. Names split into components
 * at '/' and '.'; with depth 0 the key is the name up to its last separator
 * ("conv2d_1/kernel" and "conv2d_1/bias" share "conv2d_1"), else its first
 * `depth` components (depth 3: "model.layers.7" for every tensor of that
 * transformer block); a name with fewer components is its own key. Returns
 * start for start >= n. */
PTWM_API size_t ptwm_layout_group_end(const ptwm_layout_entry *entries, size_t n, size_t start,
                                      unsigned depth);

/* Widening kernels: exact for every bit pattern. BF16: bits << 16. F16: the
 * value itself; a NaN keeps its payload shifted into place (as numpy does; a
 * signalling NaN stays signalling). Inputs are host-order 16-bit values. */
PTWM_API void ptwm_bf16_to_f32(const uint16_t *src, float *dst, size_t n);
PTWM_API void ptwm_f16_to_f32(const uint16_t *src, float *dst, size_t n);
/* Round to nearest even; overflow becomes infinity; a NaN keeps its sign and
 * top payload bits and gets the quiet bit (0x0040). */
PTWM_API void ptwm_f32_to_bf16(const float *src, uint16_t *dst, size_t n);

/* Raw little-endian F32 files. Sizes and offsets are 64-bit throughout. */
/* A whole file of exactly n floats (PTWM_ERR_MISMATCH "file has X bytes, expected Y"). */
PTWM_API ptwm_error ptwm_raw_read_f32_file(const char *path, float *dst, uint64_t n,
                                           ptwm_err *err);
/* n F32 values at byte `offset` of a file of any size (PTWM_ERR_TRUNCATED past its end). */
PTWM_API ptwm_error ptwm_raw_read_f32_at(const char *path, uint64_t offset, float *dst,
                                         uint64_t n, ptwm_err *err);
/* n BF16 values at byte `offset`, each widened exactly. */
PTWM_API ptwm_error ptwm_raw_read_bf16_at(const char *path, uint64_t offset, float *dst,
                                          uint64_t n, ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Training checkpoints                                                      */
/* ------------------------------------------------------------------------ */

typedef enum ptwm_optimizer {
    PTWM_OPT_SGD = 1,
    PTWM_OPT_MOMENTUM = 2,
    PTWM_OPT_ADAM = 3,
    PTWM_OPT_ADAMW = 4,
    PTWM_OPT_ADAMW_BF16 = 5     /* AdamW with m and v stored as BF16 */
} ptwm_optimizer;

typedef struct ptwm_optim_state {
    ptwm_optimizer kind;
    uint64_t step;
    float lr, beta1, beta2, eps, weight_decay, momentum;
    uint64_t n_params;          /* total F32 parameters */
    float *params;              /* n_params */
    float *momentum_buf;        /* MOMENTUM: n_params; else NULL */
    float *m, *v;               /* ADAM, ADAMW: n_params each */
    uint16_t *m_bf16, *v_bf16;  /* ADAMW_BF16: n_params each */
    float bc1, bc2;             /* 1 - beta1^t, 1 - beta2^t */
} ptwm_optim_state;

typedef enum ptwm_ckpt_format {
    PTWM_CKPT_PTWM = 0,         /* self-describing, compressed (default) */
    PTWM_CKPT_SAFETENSORS = 1,  /* self-describing, uncompressed */
    PTWM_CKPT_RAW = 2           /* headerless raw layout */
} ptwm_ckpt_format;

/* Self-describing checkpoints hold tensors "param/<name>", "momentum/<name>",
 * "adam.m/<name>", "adam.v/<name>" (BF16 for ADAMW_BF16) per layout entry and
 * metadata ptwm.optimizer ("sgd", "momentum", "adam", "adamw", "adamw_bf16"),
 * ptwm.step, ptwm.lr, ptwm.beta1, ptwm.beta2, ptwm.eps, ptwm.weight_decay,
 * ptwm.momentum, ptwm.bc1, ptwm.bc2 (floats as 9-digit decimals: exact).
 * The raw layout is the buffers back to back, little-endian: params F32, then
 * momentum F32 | m F32, v F32 | m BF16, v BF16, then bc1, bc2 F32 for the Adam
 * kinds; it has no names, step or hyper-parameters (see docs/LOADING.md). */

/* Bytes of a raw checkpoint: SGD 4N, MOMENTUM 8N, ADAM/ADAMW 12N + 8,
 * ADAMW_BF16 8N + 8. */
PTWM_API ptwm_error ptwm_ckpt_raw_size(ptwm_optimizer kind, uint64_t n_params, uint64_t *bytes,
                                       ptwm_err *err);
/* Save the state `st` (its kind decides the buffers) through a temporary file
 * renamed over `path`. layout names the parameters in order and must add up to
 * st->n_params; the raw format may pass NULL. */
PTWM_API ptwm_error ptwm_ckpt_save(const char *path, ptwm_ckpt_format fmt,
                                   const ptwm_layout_entry *layout, size_t n,
                                   const ptwm_optim_state *st, ptwm_err *err);
/* Resume into the caller-allocated buffers of `st` (kind, n_params and the
 * kind's buffers set by the caller). Self-describing formats also set step,
 * hyper-parameters, bc1 and bc2; raw sets bc1 and bc2 only. A file that does
 * not match (size, optimizer, tensor names, shapes, dtypes, tensor count) is
 * PTWM_ERR_MISMATCH with the expected and actual figures; the scalars are left
 * unchanged on any error. */
PTWM_API ptwm_error ptwm_ckpt_load(const char *path, ptwm_ckpt_format fmt,
                                   const ptwm_layout_entry *layout, size_t n,
                                   ptwm_optim_state *st, ptwm_err *err);

#ifdef __cplusplus
}
#endif
#endif /* PTWM_H */

/* ======================================================================== */
/* Advanced: each format's own reader and writer                            */
/* ======================================================================== */

/* ptwm_source_* reads every kind through one interface; the handles below are
 * the readers behind it, one family per format: a safetensors file
 * (ptwm_st), a Hugging Face checkpoint directory (ptwm_stdir) and a sharded
 * .ptwm directory (ptwm_ptdir). They answer what only their format has (the
 * header bytes, a tensor's file offset, shard names, the index, mmap mode)
 * and write safetensors files and directories. A program that needs them
 * defines PTWM_FORMAT_API before including this header (as zstd's
 * ZSTD_STATIC_LINKING_ONLY); the library exports them either way (bindings
 * call them by name), but this section may change between minor versions
 * where the rest of the header does not. */
#if defined(PTWM_FORMAT_API) && !defined(PTWM_FORMAT_API_H)
#define PTWM_FORMAT_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Safetensors files                                                         */
/* ------------------------------------------------------------------------ */

typedef struct ptwm_st ptwm_st;

/* Open and fully validate a safetensors file. There is no separate validate call.
 * Beyond the format's rules it rejects duplicate keys, keys other than
 * dtype/shape/data_offsets in a tensor entry, integers of 2^63 or more,
 * fractions and exponents, a tensor named __metadata__, non-string metadata
 * values, names over PTWM_MAX_NAME bytes and shapes over PTWM_MAX_NDIM dims.
 * The empty name is allowed. Codes: TRUNCATED (under 8 bytes, or data
 * shorter than the header says), HEADER_SIZE, JSON, SCHEMA, DTYPE, SHAPE,
 * OFFSETS, LAYOUT (hole, overlap, trailing bytes), DUPLICATE, LIMIT, IO. */
PTWM_API ptwm_error ptwm_st_open(const char *path, ptwm_open_mode mode, ptwm_st **out, ptwm_err *err);
/* Validate a safetensors image in memory. The buffer must outlive the handle;
 * `label` names it in error messages (may be NULL). */
PTWM_API ptwm_error ptwm_st_open_memory(const void *buf, size_t size, const char *label,
                                        ptwm_st **out, ptwm_err *err);
PTWM_API void ptwm_st_close(ptwm_st *st);

PTWM_API size_t ptwm_st_count(const ptwm_st *st);
/* Tensors in file order: ascending data offset; at one offset, zero-size
 * tensors first, then header order. PTWM_ERR_INVALID_ARG past the end. */
PTWM_API ptwm_error ptwm_st_tensor(const ptwm_st *st, size_t index, ptwm_tensor_info *out,
                                   ptwm_err *err);
/* Index of a tensor by name, O(log n); PTWM_ERR_NOT_FOUND if absent. index may be NULL. */
PTWM_API ptwm_error ptwm_st_find(const ptwm_st *st, const char *name, size_t *index,
                                 ptwm_err *err);
/* Copy `len` bytes starting `offset` bytes into tensor `index` (any mode);
 * PTWM_ERR_INVALID_ARG if the range leaves the tensor. Safe to call from
 * several threads at once on one handle. */
PTWM_API ptwm_error ptwm_st_read(const ptwm_st *st, size_t index, uint64_t offset, void *dst,
                                 size_t len, ptwm_err *err);
/* Byte offset of tensor `index` from the start of the file. */
PTWM_API uint64_t ptwm_st_file_offset(const ptwm_st *st, size_t index);
/* __metadata__ entries in file order, and lookup by key (NULL if absent). */
PTWM_API size_t ptwm_st_metadata_count(const ptwm_st *st);
PTWM_API ptwm_kv ptwm_st_metadata(const ptwm_st *st, size_t i);
PTWM_API const char *ptwm_st_metadata_get(const ptwm_st *st, const char *key);
/* The header JSON bytes exactly as stored (after the 8-byte length). */
PTWM_API const void *ptwm_st_header(const ptwm_st *st, size_t *len);
PTWM_API uint64_t ptwm_st_file_size(const ptwm_st *st);
PTWM_API const char *ptwm_st_path(const ptwm_st *st);

/* Write a safetensors file: header padded with spaces to a multiple of 8,
 * tensors in the given order, written to a temporary file in the same
 * directory and renamed over `path`. The input is checked first: a name
 * given twice (PTWM_ERR_DUPLICATE), nbytes disagreeing with dtype and shape,
 * NULL data, '__metadata__' or invalid UTF-8 as a name (PTWM_ERR_INVALID_ARG). */
PTWM_API ptwm_error ptwm_st_write(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                                  const ptwm_kv *meta, size_t nmeta, ptwm_err *err);
/* Build the header (8-byte length + padded JSON) that ptwm_st_write would
 * write: compact JSON, __metadata__ first, keys dtype, shape, data_offsets,
 * as the reference writes it. Tensor data may be NULL here. *out is
 * allocated by the library: release it with ptwm_free. */
PTWM_API ptwm_error ptwm_st_build_header(const ptwm_tensor_desc *tensors, size_t n,
                                         const ptwm_kv *meta, size_t nmeta, void **out,
                                         size_t *out_len, ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Sharded safetensors checkpoints (Hugging Face layout)                     */
/* ------------------------------------------------------------------------ */

typedef struct ptwm_stdir ptwm_stdir;

/* Open a directory with model.safetensors.index.json, or a lone model.safetensors.
 * The weight_map must agree with the shards exactly: shard names are plain
 * file names (no '/', '\\', "..", not empty: PTWM_ERR_INDEX); a listed shard
 * that is missing is PTWM_ERR_NOT_FOUND; a tensor absent from its mapped
 * shard, a shard tensor the weight_map does not list, or metadata.total_size
 * differing from the tensors' bytes is PTWM_ERR_INDEX; a tensor in two
 * shards is PTWM_ERR_DUPLICATE. Other index keys are ignored. */
PTWM_API ptwm_error ptwm_stdir_open(const char *dir, ptwm_open_mode mode, ptwm_stdir **out,
                                    ptwm_err *err);
PTWM_API void ptwm_stdir_close(ptwm_stdir *d);
PTWM_API size_t ptwm_stdir_count(const ptwm_stdir *d);
/* Tensors shard by shard (shards in name order), file order within each. */
PTWM_API ptwm_error ptwm_stdir_tensor(const ptwm_stdir *d, size_t index, ptwm_tensor_info *out,
                                      ptwm_err *err);
PTWM_API ptwm_error ptwm_stdir_find(const ptwm_stdir *d, const char *name, size_t *index,
                                    ptwm_err *err);
PTWM_API ptwm_error ptwm_stdir_read(const ptwm_stdir *d, size_t index, uint64_t offset, void *dst,
                                    size_t len, ptwm_err *err);
PTWM_API size_t ptwm_stdir_shard_count(const ptwm_stdir *d);
PTWM_API const ptwm_st *ptwm_stdir_shard(const ptwm_stdir *d, size_t i);
/* Which shard holds tensor `index`. */
PTWM_API size_t ptwm_stdir_shard_of(const ptwm_stdir *d, size_t index);

/* Write tensors as a sharded directory (created if missing): names
 * model-0000k-of-0000n.safetensors plus model.safetensors.index.json (indent
 * 2, sorted keys, as transformers writes it), or a single model.safetensors
 * with no index when everything fits one shard (a stale index is removed).
 * Every shard carries `meta`. Packing as ptwm_plan_shards. */
PTWM_API ptwm_error ptwm_stdir_write(const char *dir, const ptwm_tensor_desc *tensors, size_t n,
                                     const ptwm_kv *meta, size_t nmeta, uint64_t max_shard_size,
                                     ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Sharded .ptwm checkpoints                                                 */
/* ------------------------------------------------------------------------ */

/* model.ptwm.index.json, laid out like Hugging Face's model.safetensors.index.json:
 *   {"metadata": {"total_size": RAW, "compressed_total_size": CODED, "format": "ptwm",
 *                 ...extra string entries}, "weight_map": {"tensor": "shard.ptwm", ...}}
 * total_size is the sum of the tensors' raw bytes; compressed_total_size the sum of
 * the shard files' sizes. Reading rejects malformed JSON, duplicate keys, unknown top-level
 * keys, non-string extras, and shard names that are empty, contain '/', '\\' or
 * "..", or do not end in ".ptwm" (so a weight_map never points outside the directory). */
typedef struct ptwm_index ptwm_index;

PTWM_API ptwm_error ptwm_index_create(uint64_t total_size, uint64_t compressed_total_size,
                                      ptwm_index **out, ptwm_err *err);
/* A file named model.ptwm.index.json is checked against the file record of
 * its directory (PTWM_FILES_NAME), if it has one: PTWM_ERR_HASH when its
 * bytes are not those the record lists; PTWM_ERR_NOT_FOUND when the index
 * names a record that is missing. */
PTWM_API ptwm_error ptwm_index_read(const char *path, ptwm_index **out, ptwm_err *err);
/* Parse an index held in memory; `label` names it in messages (may be NULL). */
PTWM_API ptwm_error ptwm_index_parse(const char *json, size_t len, const char *label,
                                     ptwm_index **out, ptwm_err *err);
/* Written to a temporary file and renamed over `path`. */
PTWM_API ptwm_error ptwm_index_write(const ptwm_index *idx, const char *path, ptwm_err *err);
PTWM_API void ptwm_index_free(ptwm_index *idx);
PTWM_API uint64_t ptwm_index_total_size(const ptwm_index *idx);
PTWM_API uint64_t ptwm_index_compressed_total_size(const ptwm_index *idx);
PTWM_API void ptwm_index_set_totals(ptwm_index *idx, uint64_t total, uint64_t compressed);
/* Adds tensor -> shard; PTWM_ERR_DUPLICATE if the tensor is already mapped,
 * PTWM_ERR_INVALID_ARG for a shard name the reader would reject. */
PTWM_API ptwm_error ptwm_index_add(ptwm_index *idx, const char *tensor, const char *shard,
                                   ptwm_err *err);
/* Entries in insertion (file) order. */
PTWM_API size_t ptwm_index_count(const ptwm_index *idx);
PTWM_API ptwm_error ptwm_index_entry(const ptwm_index *idx, size_t i, const char **tensor,
                                     const char **shard, ptwm_err *err);
/* Position of a tensor's entry; PTWM_ERR_NOT_FOUND if unmapped. */
PTWM_API ptwm_error ptwm_index_find(const ptwm_index *idx, const char *tensor, size_t *pos,
                                    ptwm_err *err);
/* Distinct shard names in order of first appearance. */
PTWM_API size_t ptwm_index_shard_count(const ptwm_index *idx);
PTWM_API const char *ptwm_index_shard(const ptwm_index *idx, size_t i);
/* Extra metadata strings (not total_size, compressed_total_size or format);
 * setting an existing key replaces it. Values may hold any UTF-8, NUL included
 * (value_len bytes). get returns NULL when absent; *len may be NULL. */
PTWM_API ptwm_error ptwm_index_set_meta(ptwm_index *idx, const char *key, const char *value,
                                        size_t value_len, ptwm_err *err);
PTWM_API const char *ptwm_index_get_meta(const ptwm_index *idx, const char *key, size_t *len);
/* PTWM_OK if the name is a plain file name inside the directory ending in .ptwm,
 * else PTWM_ERR_INVALID_ARG naming it. */
PTWM_API ptwm_error ptwm_index_check_shard_name(const char *shard, ptwm_err *err);

typedef struct ptwm_ptdir ptwm_ptdir;   /* a sharded .ptwm directory */

/* Open model.ptwm.index.json and every shard it lists, or a lone model.ptwm
 * (read_sharded_ptwm). The directory's file record (model.ptwm.files.json), if
 * it has one, is read first and the index's bytes checked against it.
 * Errors: PTWM_ERR_NOT_FOUND when neither exists or a listed shard is missing;
 * PTWM_ERR_HASH naming a damaged record or index; PTWM_ERR_DUPLICATE for a
 * tensor in two shards; PTWM_ERR_INDEX when the weight_map disagrees with the
 * shards' tensors or the totals with their sums (message holds both numbers);
 * PTWM_ERR_SCHEMA for an unsafe shard name. */
PTWM_API ptwm_error ptwm_ptdir_open(const char *dir, ptwm_ptdir **out, ptwm_err *err);
PTWM_API void ptwm_ptdir_close(ptwm_ptdir *d);
PTWM_API void ptwm_ptdir_set_threads(ptwm_ptdir *d, int threads);
/* Tensors shard by shard (index order), table order within each shard. */
PTWM_API size_t ptwm_ptdir_count(const ptwm_ptdir *d);
PTWM_API ptwm_error ptwm_ptdir_tensor(const ptwm_ptdir *d, size_t index, ptwm_tensor_info *out,
                                      ptwm_err *err);
PTWM_API ptwm_error ptwm_ptdir_find(const ptwm_ptdir *d, const char *name, size_t *index,
                                    ptwm_err *err);
/* ptwm_reader_decode_range on the shard holding the tensor: the payload hash
 * is checked for reads that run through the tensor in order from byte 0. */
PTWM_API ptwm_error ptwm_ptdir_decode_range(ptwm_ptdir *d, size_t index, uint64_t offset,
                                            void *dst, size_t len, ptwm_err *err);
PTWM_API size_t ptwm_ptdir_shard_count(const ptwm_ptdir *d);
PTWM_API ptwm_reader *ptwm_ptdir_shard(const ptwm_ptdir *d, size_t i);
PTWM_API const char *ptwm_ptdir_shard_name(const ptwm_ptdir *d, size_t i);
/* Which shard holds tensor `index`, and its index within that shard's reader. */
PTWM_API size_t ptwm_ptdir_shard_of(const ptwm_ptdir *d, size_t index, size_t *local);
/* The index, or NULL for a lone model.ptwm. Owned by the handle. */
PTWM_API const ptwm_index *ptwm_ptdir_index(const ptwm_ptdir *d);
/* Sums over the shards: raw tensor bytes and shard file bytes. */
PTWM_API uint64_t ptwm_ptdir_total_size(const ptwm_ptdir *d);
PTWM_API uint64_t ptwm_ptdir_compressed_total_size(const ptwm_ptdir *d);
/* Whether the directory has a file record (directories written before them
 * have none). */
PTWM_API int ptwm_ptdir_has_file_record(const ptwm_ptdir *d);
/* What ptwm_ptdir_check_files finds for one file. */
typedef enum ptwm_file_check {
    PTWM_FILE_OK = 0,          /* size and XXH3-128 as its file record lists them */
    PTWM_FILE_DAMAGED = 1,     /* either differs, or it cannot be read (err says which) */
    PTWM_FILE_MISSING = 2,     /* the record lists it; it is not there (err says so) */
    PTWM_FILE_UNRECORDED = 3   /* there, but not listed, or no record: not checked */
} ptwm_file_check;
typedef void (*ptwm_file_check_fn)(void *ctx, const char *name, ptwm_file_check result,
                                   const ptwm_err *err);
/* Every file of the directory besides its shards and the record itself (the
 * index, config, tokenizer files, subdirectories' files), read whole and
 * checked against the record: fn(ctx, its path inside the directory, ...)
 * once per file, the files present in name order, then those missing.
 * PTWM_OK once every file was seen, whatever the results; an error only
 * when the directory cannot be listed. */
PTWM_API ptwm_error ptwm_ptdir_check_files(const ptwm_ptdir *d, ptwm_file_check_fn fn, void *ctx,
                                           ptwm_err *err);
/* Write dir's file record (PTWM_FILES_NAME) for the files it holds now: the
 * index and every other file besides the shards (those the index lists, or
 * a lone model.ptwm). For a directory put together by hand (shards written
 * with ptwm_compress_file, an index with ptwm_index_write, config files);
 * the conversions and ptwm_ptdir_write write their own. */
PTWM_API ptwm_error ptwm_ptdir_record_files(const char *dir, ptwm_err *err);
/* Write tensors as a sharded .ptwm directory: model-0000k-of-0000n.ptwm plus
 * model.ptwm.index.json, or a lone model.ptwm when everything fits one shard
 * of max_shard_size (> 0) raw bytes; every shard carries `meta`; coded with
 * `params` (NULL: defaults). Built beside `dir` and committed whole, as
 * ptwm_compress_checkpoint does (an existing `dir` is PTWM_ERR_EXISTS unless
 * `force`). */
PTWM_API ptwm_error ptwm_ptdir_write(const char *dir, const ptwm_tensor_desc *tensors, size_t n,
                                     const ptwm_kv *meta, size_t nmeta, uint64_t max_shard_size,
                                     const ptwm_cparams *params, int force, ptwm_err *err);

/* ------------------------------------------------------------------------ */
/* Output files                                                              */
/* ------------------------------------------------------------------------ */

/* One output file, written under PATH.tmp-XXXXXX beside PATH and, on commit,
 * fsynced, renamed into place and its directory fsynced: a reader or a crash
 * never leaves a partial PATH. While open the temporary file is one of the
 * outputs ptwm_remove_temporary_outputs() removes. Open refuses an existing
 * PATH, and PATH.tmp-* files an interrupted run left (named in the message),
 * with PTWM_ERR_EXISTS unless force, which replaces PATH on commit and removes
 * the leftovers. */
typedef struct ptwm_outfile ptwm_outfile;
PTWM_API ptwm_error ptwm_outfile_open(const char *path, int force, ptwm_outfile **out,
                                      ptwm_err *err);
/* The descriptor to write to (the temporary file). */
PTWM_API int ptwm_outfile_fd(const ptwm_outfile *f);
/* Make the written file PATH, then free f (also when it fails: the
 * temporary file is removed). */
PTWM_API ptwm_error ptwm_outfile_commit(ptwm_outfile *f, ptwm_err *err);
/* Remove the temporary file and free f (NULL is fine). */
PTWM_API void ptwm_outfile_abort(ptwm_outfile *f);

#ifdef __cplusplus
}
#endif
#endif /* PTWM_FORMAT_API */
