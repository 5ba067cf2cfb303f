/* The decode ring (read_ring.c) and the writes of its chunks into files
 * (read_io.c), shared with the reader's whole-tensor calls (read_many.c,
 * read_stream.c).
 *
 * A drive is a ring of `window` jobs, one chunk each, on a queue of workers
 * (threads.h): the calling thread submits chunks in order (ptwm_drive_submit)
 * and retires them oldest first (ptwm_drive_retire), so whatever it does with
 * a retired chunk (hash it, hand it to a sink, finish its file) happens in
 * submission order for any thread count. Workers decode jobs in any order,
 * each into its job's slot only.
 *
 * Streaming into files, a worker lists its decoded chunk for writing
 * (wq, under wq_mu) and marks it unwritten; one thread at a time writes the
 * list (write_mu), in runs of chunks lying back to back, or hands the runs to
 * the I/O thread (io). Lock order: write_mu, then wq_mu inside it, never the
 * other way (a thread holding wq_mu takes no other lock). Whoever lets go of
 * write_mu looks at the list again, so no listed chunk is left behind. A
 * chunk's writer clears its `unwritten` flag (release) once its bytes are in
 * the file or its failure is in the job; retiring waits for that (acquire)
 * before the job's ring bytes are reused or its file finished. */
#ifndef PTWM_READ_RING_H
#define PTWM_READ_RING_H

#include "reader_impl.h"
#include "fstream.h"
#include "iothread.h"

struct ptwm_fstream_file;

/* One slot of the ring: chunk `chunk` of tensor `tensor` of reader r, decoded
 * into dst (the caller's buffer, or the slot's own buffer when streaming). */
typedef struct sjob {
    ptwm_reader *r;
    size_t item;                 /* position in the caller's list */
    size_t tensor;
    uint64_t chunk;
    uint8_t *dst;
    uint8_t *own;
    size_t own_cap;
    /* Streaming to a file: the file, and where dst goes in it. */
    struct ptwm_fstream_file *file;
    uint64_t file_off;
    int unwritten;               /* decoded, in the drive's write list (under wq_mu) */
    uint64_t ring_end;           /* the byte ring's head after this job (see sdrive) */
    uint8_t hash[16];            /* a one-chunk tensor's XXH3-128, by the worker */
    ptwm_error rc;
    ptwm_err err;
} sjob;

typedef struct sdrive {
    ptwm_reader *r;              /* the reader of the chunks submitted next */
    ptwm_queue *q;
    sjob *jobs;
    size_t window, head, npending;
    uint64_t inflight;           /* raw bytes of queued jobs (streaming) */
    /* Files: one buffer of coded bytes per worker, needed only while it
     * decodes (a buffer per slot touched twice the memory, and fresh pages
     * cost more than the decode of small files). */
    uint8_t **coded;
    size_t *coded_cap;
    unsigned nworkers;
    /* Work memory: the reader's context, or, for a stream that serves
     * several readers (ptwm_fstream), the drive's own (own_ctx); ws: its
     * workspaces, one per worker. */
    ptwm_ctx *ctx;
    ptwm_ctx *own_ctx;
    ptwm_ws **ws;
    /* Streaming: the largest raw and coded chunk of the tensors asked for.
     * Buffers are sized for them at once (up to SLOT_KEEP): growing them
     * chunk by chunk took fresh pages each time. */
    size_t max_raw, max_coded;
    /* Streaming: decoded chunks of up to SLOT_KEEP bytes go into one ring
     * of bytes, in submission order, so slots hold many small chunks or a
     * few large ones in the same memory (`units` chunks of max_raw bytes):
     * with a buffer per slot, a ring of small tensors ran dry while the
     * caller decoded one large chunk and the other threads waited for work.
     * ring_head and ring_tail count bytes from the start (position p is at
     * p % ring_cap); chunks lying back to back in the file lie back to back
     * here too. */
    uint8_t *ring;
    size_t ring_cap, units;
    uint64_t ring_head, ring_tail;
    /* Streaming to files: the file of the chunks submitted next (else
     * NULL). Each worker writes the chunk it decoded at its place in the
     * file, so the copy into the page cache runs on every worker, beside the
     * decoding, instead of on the retiring thread. */
    struct ptwm_fstream_file *file;
    /* Writes into files: one thread writes at a time (write_mu), taking
     * every decoded chunk in the list (wq, under wq_mu) and writing runs
     * that lie back to back with one call. A thread that finds another
     * writing leaves its chunk in the list and goes on decoding: writes to
     * one file take its inode's lock in the kernel, where two threads
     * writing at once spun on each other (7% of the time on two threads). */
    pthread_mutex_t write_mu, wq_mu;
    int mu_ready;
    size_t *wq, nwq;
    uint64_t wq_bytes;           /* raw bytes listed (under wq_mu; one thread reads it bare) */
    /* One decoding thread with a core to spare: runs are written by a
     * writing thread (iothread.h), which clears their flags when done. */
    ptwm_io *io;
} sdrive;

/* On one thread, chunks are decoded ahead in order until this many bytes
 * wait to be written, and written with one call: a write per small tensor
 * cost 5 of the 35 ms that writing a 128 MiB file of BF16 tensors took. */
#define WRITE_BATCH ((uint64_t)256 << 10)

/* A file being written by a stream; see ptwm_fstream_begin. */
typedef struct ptwm_fstream_file {
    int fd;
    const char *path;
    ptwm_fstream_done_fn done;
    void *ctx;
    uint64_t pending;            /* its chunks submitted and not yet retired */
    uint64_t unsynced;           /* bytes written since writeback was last started (by the
                                  * thread holding write_mu, or the writing thread) */
    struct ptwm_flusher *fl;     /* flushes it as it is written, once it is known
                                  * to be large (set by the caller, read by the
                                  * threads writing: atomic) */
    int sealed;                  /* no more tensors will be added */
    ptwm_error rc;               /* its first failure */
} ptwm_fstream_file;

/* Streaming keeps at most this many raw bytes in flight (or one chunk), and
 * gives back slot buffers larger than SLOT_KEEP once they are retired. */
#define STREAM_BUDGET ((uint64_t)64 << 20)
/* Writeback of a file being decoded is started every this many bytes (not
 * the writers' 8 MiB): the fsync that commits it then waits for 2 MiB at
 * most; on a 128 MiB restore the fsync took 0.5-4 ms instead of 8. */
#define DECODE_WRITEBACK_STEP ((uint64_t)2 << 20)
#define SLOT_KEEP ((size_t)8 << 20)

/* read_ring.c. A drive over reader r (NULL: set d->r before each submit),
 * with `per_thread` chunks in flight per thread (the units of the byte ring)
 * and, when `ring` (streaming through the byte ring), four times as many
 * slots; free it with ptwm_drive_free even if this fails. */
ptwm_error ptwm_drive_init(sdrive *d, ptwm_reader *r, int threads, size_t per_thread, int ring,
                           ptwm_err *err);
void ptwm_drive_free(sdrive *d);
/* Whether a chunk of n bytes fits in the byte ring beside those in flight. */
int ptwm_drive_ring_fits(const sdrive *d, size_t n);
/* Queue chunk k of tensor t of d->r for the caller's item `item`, into dst
 * (NULL: the byte ring, or the slot's own buffer for a chunk over
 * SLOT_KEEP), at file_off + the chunk's start in d->file if any. */
ptwm_error ptwm_drive_submit(sdrive *d, size_t item, size_t t, uint64_t k, uint8_t *dst,
                             uint64_t file_off, ptwm_err *err);
/* Take back the oldest job, decoded and written; *out points at it until the
 * next submit. Its failure, with its message, if it failed. */
ptwm_error ptwm_drive_retire(sdrive *d, sjob **out, ptwm_err *err);
/* Add retired job j's chunk to its tensor's payload hash (running state h);
 * *done and got once the tensor is complete. */
ptwm_error ptwm_drive_retired_hash(const rtensor *t, const sjob *j, ptwm_xxh128 *h,
                                   uint8_t got[16], int *done, ptwm_err *err);

/* read_io.c: write the listed chunks, unless another thread is writing
 * (wait 0: that thread takes them) or until none is left (wait 1). */
void ptwm_drive_write_listed(sdrive *d, int wait);

#endif
