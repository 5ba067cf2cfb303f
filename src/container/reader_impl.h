/* The .ptwm reader's structures and the calls its files make of one
 * another; nothing outside the reader includes this. The reader, by
 * responsibility (docs/ARCHITECTURE.md, "The container"):
 *
 *   reader.c        the handle: open (footer, then table), close, work memory,
 *                   accessors
 *   read_table.c    the table: every section parsed and validated at open
 *   read_chunk.c    one chunk: its payload's CRC32 checked, then decoded
 *   read_base.c     tensors coded against a base (docs/DELTA.md): the base's
 *                   tensors looked up, base chunks read and checked
 *   read_range.c    a byte range of one tensor, on the reader's pool
 *   read_ring.[ch]  the decode ring: chunks of many tensors, of one reader or
 *                   several, decoded by a queue's workers and retired in order
 *   read_io.c       decoded chunks written into their files (one thread at a
 *                   time, or the I/O thread)
 *   read_many.c     whole tensors into the caller's buffers
 *   read_stream.c   whole tensors to a sink or into files, across readers
 *                   (ptwm_fstream)
 *
 * One thread calls a reader at a time. Its table is read-only once open
 * returns: workers read it without a lock. What they write is their own job's
 * slot; the locks are the ring's (read_ring.h) and base_mu (read_base.c). */
#ifndef PTWM_READER_IMPL_H
#define PTWM_READER_IMPL_H

#include "common.h"
#include "container_base.h"
#include "hash.h"
#include "nametab.h"
#include "threads.h"
#include "workspace.h"

#include <pthread.h>

typedef struct rchunk {
    uint64_t offset, start;      /* start: raw offset of the chunk in its tensor */
    uint32_t coded, raw;
    uint8_t chain;
    uint32_t crc;                /* CRC32 of the payload (version 4 on) */
    uint8_t based;               /* coded against the base chunk (version 6 on) */
    uint32_t base_crc;           /* then the CRC32 of the base chunk's raw bytes */
} rchunk;

/* Names, shapes, chain lists and chunk entries of all tensors live in one
 * arena each (ptwm_reader's names, dims, chain_ptrs/chain_lens, chunk_pool),
 * not in allocations or fixed arrays per tensor: a table of a million small
 * tensors then costs about 200 bytes a tensor. While the table is parsed the
 * arenas grow, so entries hold offsets (*_at) that become pointers after. */
typedef struct rtensor {
    const char *name;                      /* in r->names */
    const uint64_t *shape;                 /* ndim dims in r->dims */
    const uint8_t *const *chain_ptr;       /* nchains chains, each into r->table */
    const size_t *chain_len;
    rchunk *chunks;                        /* nchunks entries in r->chunk_pool */
    uint64_t nbytes, chunk_size, nchunks, coded;
    size_t name_at, dims_at, chains_at, chunks_at;
    ptwm_dtype dtype;
    uint32_t ndim;
    unsigned nchains;
    uint8_t flags;
    uint8_t hash[16];
    uint8_t base_hash[16];                 /* PTWM_TF_BASE: the base tensor's payload hash */
} rtensor;

/* A growable array: `len` of `cap` elements in use. */
typedef struct rarena {
    void *p;
    size_t len, cap;
} rarena;

struct ptwm_reader {
    char *label;
    const uint8_t *mem;          /* in-memory image, else NULL */
    int fd;
    uint64_t size;
    uint8_t *table;              /* owned copy of the table */
    uint64_t table_offset, table_size;
    unsigned version;
    rtensor *t;
    size_t nt;
    ptwm_nametab by_name;        /* the tensors' names */
    rarena names, dims, chain_ptrs, chain_lens, chunk_pool;
    ptwm_kv *meta;
    size_t nmeta;
    const uint8_t *src_header;   /* into r->table */
    size_t src_header_len;
    char *src_name;
    uint64_t src_file_size;
    int threads;
    ptwm_pool *pool;
    /* Work memory: the caller's context (ptwm_reader_set_ctx) or the
     * reader's own (made on first use, kept between calls as ZSTD_DCtx is:
     * a reader decodes many tensors); ws: its workspaces, one per worker. */
    ptwm_ctx *ctx;
    ptwm_ctx *own_ctx;
    ptwm_ws **ws;
    /* decode_range reads that run through a tensor in order from byte 0
     * feed its payload hash: the tensor, where the next such read starts
     * (seq_on: a run is under way), and the running hash. */
    size_t seq_tensor;
    uint64_t seq_next;
    int seq_on;
    ptwm_xxh128 seq_hash;
    /* The base of tensors coded against one (ptwm_reader_use_base; not
     * owned; base.ops NULL: none): per tensor its index in the base, or why
     * it has none. A serial base is read one range at a time (base_mu). */
    ptwm_base base;
    size_t *base_idx;
    ptwm_error *base_rc;
    int base_mu_ready;
    pthread_mutex_t base_mu;
};

/* read_table.c: parse the table p[0..size) (stored: the table as the file
 * holds it, which may be one packed section) into r. */
ptwm_error ptwm_reader_parse_table(ptwm_reader *r, const uint8_t *p, uint64_t size, int stored,
                                   ptwm_err *err);
/* The name of tensor i of the reader `owner` (for its name table). */
const char *ptwm_reader_tensor_name(const void *owner, size_t i);

/* reader.c: workspaces for workers 0..n-1 into r->ws (more are made as a
 * call needs them), in the reader's context (its own when the caller set
 * none). */
ptwm_error ptwm_reader_workspaces(ptwm_reader *r, unsigned n, ptwm_err *err);

/* read_chunk.c: decode chunk c of tensor t from its payload src into exactly
 * c->raw bytes at out. */
ptwm_error ptwm_reader_decode_chunk(const ptwm_reader *r, ptwm_ws *ws, const rtensor *t,
                                    const rchunk *c, const uint8_t *src, uint8_t *out,
                                    ptwm_err *err);
/* PTWM_OK if got is tensor t's recorded payload hash, else PTWM_ERR_HASH
 * naming the file, the tensor and both hashes. */
ptwm_error ptwm_reader_check_hash(const ptwm_reader *r, const rtensor *t, const uint8_t got[16],
                                  ptwm_err *err);

/* read_base.c: as ptwm_reader_decode_chunk for a chunk coded against its
 * base chunk (c->based), its payload's CRC32 already checked. */
ptwm_error ptwm_reader_decode_based(ptwm_reader *r, ptwm_ws *ws, const rtensor *t, const rchunk *c,
                                    const uint8_t *src, uint8_t *out, ptwm_err *err);

#endif
