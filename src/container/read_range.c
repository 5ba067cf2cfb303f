/* A byte range of one tensor of a .ptwm reader (ptwm_reader_decode_range):
 * the chunks it touches decoded on the reader's pool, one job each, and the
 * range copied out of them.
 *
 * Reads that run through a tensor in order from byte 0 carry its payload
 * hash: the jobs feed it in chunk order, each on the worker that decoded it
 * (job i waits under run->mu for job i-1 to be hashed), and the tensor's
 * last read checks it. The reader's pool and workspaces are made on the
 * first call and kept. */
#include "reader_impl.h"
#include "container_format.h"
#include "context.h"
#include "fileio.h"

/* One chunk decode: the job list of a parallel run. A job decodes chunk
 * `chunk` of tensor `t` and copies raw bytes [skip, skip+len) of it to dst. */
typedef struct rjob {
    uint64_t chunk;
    uint8_t *dst;
    size_t skip, len;
    ptwm_error rc;
    ptwm_err err;
} rjob;

typedef struct rrun {
    ptwm_reader *r;
    const rtensor *t;
    rjob *jobs;
    uint8_t **coded;     /* per worker, file mode: chunk_bound sized */
    uint8_t **raw;       /* per worker: chunk_size, for partial chunks */
    size_t coded_cap, raw_cap;
    /* A read that carries the tensor's payload hash (else NULL): jobs feed it
     * in order, `hashed` of them so far. */
    ptwm_xxh128 *seq;
    size_t hashed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} rrun;

static void decode_job(rrun *run, size_t i, unsigned worker) {
    rjob *j = &run->jobs[i];
    const rtensor *t = run->t;
    const rchunk *c = &t->chunks[j->chunk];
    const uint8_t *src;
    uint8_t *out = (j->skip == 0 && j->len == c->raw) ? j->dst : run->raw[worker];
    if (run->r->mem) {
        src = run->r->mem + c->offset;
    } else {
        if (c->coded > run->coded_cap) {
            j->rc = ptwm_fail(&j->err, PTWM_ERR_CORRUPT, "coded size %u over the bound %zu", c->coded,
                              run->coded_cap);
            return;
        }
        j->rc = ptwm_pread_full(run->r->fd, run->coded[worker], c->coded, c->offset, run->r->label, &j->err);
        if (j->rc) return;
        src = run->coded[worker];
    }
    j->rc = ptwm_reader_decode_chunk(run->r, run->r->ws[worker], t, c, src, out, &j->err);
    if (!j->rc && out != j->dst) memcpy(j->dst, out + j->skip, j->len);
}

/* Each job's bytes go into the payload hash on the thread that decoded them,
 * while they are in its cache (hashing a decoded 8 MiB piece afterwards, from
 * the shared cache, ran at half the speed, serially): job i waits for job i-1
 * to be hashed. The pool hands jobs out in order, so the one waited for has
 * been taken, and it never waits itself on a later one. A failed job passes
 * its turn on; the call fails anyway. */
static void decode_task(void *ctx, size_t i, unsigned worker) {
    rrun *run = (rrun *)ctx;
    decode_job(run, i, worker);
    if (!run->seq) return;
    pthread_mutex_lock(&run->mu);
    while (run->hashed != i) pthread_cond_wait(&run->cv, &run->mu);
    pthread_mutex_unlock(&run->mu);
    if (!run->jobs[i].rc) ptwm_xxh128_update(run->seq, run->jobs[i].dst, run->jobs[i].len);
    pthread_mutex_lock(&run->mu);
    run->hashed++;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
}

static ptwm_error get_pool(ptwm_reader *r, ptwm_err *err) {
    ptwm_error rc;
    if (!r->pool && (rc = ptwm_pool_create(r->threads, &r->pool, err))) return rc;
    return ptwm_reader_workspaces(r, ptwm_pool_size(r->pool), err);
}

static void run_free(rrun *run, unsigned n) {
    unsigned i;
    for (i = 0; i < n; i++) {
        if (run->coded) ptwm_ctx_give(run->r->ctx, run->coded[i], run->coded_cap);
        if (run->raw) ptwm_ctx_give(run->r->ctx, run->raw[i], run->raw_cap);
    }
    ptwm_free(run->coded);
    ptwm_free(run->raw);
    ptwm_free(run->jobs);
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
}

/* Scratch sizes come from what the chunks to decode need (raw bytes of a
 * chunk, coded bytes actually stored in the file), not from the recorded
 * chunk size, so a hostile header cannot make us allocate more than the
 * file and the tensor justify. */
static ptwm_error run_init(rrun *run, ptwm_reader *r, const rtensor *t, uint64_t first, uint64_t last,
                           size_t njobs, ptwm_err *err) {
    unsigned i, n = ptwm_pool_size(r->pool);
    uint64_t k, raw_cap = 1;   /* (the pool's workspaces made the context) */
    memset(run, 0, sizeof(*run));
    pthread_mutex_init(&run->mu, NULL);
    pthread_cond_init(&run->cv, NULL);
    run->r = r;
    run->t = t;
    run->jobs = (rjob *)ptwm_calloc(njobs ? njobs : 1, sizeof(rjob));
    run->coded = (uint8_t **)ptwm_calloc(n, sizeof(uint8_t *));
    run->raw = (uint8_t **)ptwm_calloc(n, sizeof(uint8_t *));
    if (!run->jobs || !run->coded || !run->raw) goto nomem;
    run->coded_cap = 1;
    for (k = first; k <= last && k < t->nchunks; k++) {
        run->coded_cap = PTWM_MAX(run->coded_cap, (size_t)t->chunks[k].coded);
        raw_cap = PTWM_MAX(raw_cap, t->chunks[k].raw);
    }
    run->raw_cap = (size_t)raw_cap;
    for (i = 0; i < n; i++) {
        if (!r->mem && !(run->coded[i] = (uint8_t *)ptwm_ctx_take(r->ctx, run->coded_cap)))
            goto nomem;
        if (!(run->raw[i] = (uint8_t *)ptwm_ctx_take(r->ctx, run->raw_cap))) goto nomem;
    }
    return PTWM_OK;
nomem:
    run_free(run, n);
    return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for decode buffers");
}

/* Run jobs [0, n) and report the first failure (lowest chunk: deterministic). */
static ptwm_error run_jobs(rrun *run, size_t n, ptwm_err *err) {
    size_t i;
    ptwm_pool_run(run->r->pool, n, decode_task, run);
    for (i = 0; i < n; i++)
        if (run->jobs[i].rc) {
            if (err) *err = run->jobs[i].err;
            ptwm_err_prefix(err, "file '%s': tensor '%s' chunk %llu of %llu", run->r->label, run->t->name,
                            (unsigned long long)run->jobs[i].chunk, (unsigned long long)run->t->nchunks);
            return run->jobs[i].rc;
        }
    return PTWM_OK;
}

ptwm_error ptwm_reader_decode_range(ptwm_reader *r, size_t index, uint64_t offset, void *dst,
                                    size_t len, ptwm_err *err) {
    const rtensor *t;
    rrun run;
    uint64_t end, first, last, k;
    int seq;
    ptwm_error rc;
    if (!r || (!dst && len)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or buffer");
    if (index >= r->nt) return ptwm_fail(err, PTWM_ERR_NOT_FOUND, "no tensor %zu (of %zu)", index, r->nt);
    t = &r->t[index];
    if (ptwm_add_overflow(offset, len, &end) || end > t->nbytes)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "tensor '%s': range %llu+%zu past its %llu bytes", t->name,
                         (unsigned long long)offset, len, (unsigned long long)t->nbytes);
    /* A read from byte 0, or one continuing the last read of this tensor,
     * carries the tensor's payload hash on; any other read breaks the run. */
    seq = (t->flags & PTWM_TF_PAYLOAD_HASH) &&
          (offset == 0 || (r->seq_on && r->seq_tensor == index && r->seq_next == offset));
    r->seq_on = 0;
    if (!len) return PTWM_OK;
    if ((rc = get_pool(r, err))) return rc;
    if (seq && offset == 0 && (rc = ptwm_xxh128_begin(&r->seq_hash, err))) return rc;
    first = offset / t->chunk_size;
    last = (end - 1) / t->chunk_size;
    if ((rc = run_init(&run, r, t, first, last, (size_t)(last - first + 1), err))) return rc;
    for (k = first; k <= last; k++) {
        rjob *j = &run.jobs[k - first];
        const rchunk *c = &t->chunks[k];
        uint64_t lo = PTWM_MAX(offset, c->start), hi = PTWM_MIN(end, c->start + c->raw);
        j->chunk = k;
        j->skip = (size_t)(lo - c->start);
        j->len = (size_t)(hi - lo);
        j->dst = (uint8_t *)dst + (lo - offset);
    }
    if (seq) run.seq = &r->seq_hash;
    rc = run_jobs(&run, (size_t)(last - first + 1), err);
    run_free(&run, ptwm_pool_size(r->pool));
    if (rc || !seq) return rc;
    if (end < t->nbytes) {
        r->seq_on = 1;
        r->seq_tensor = index;
        r->seq_next = end;
        return PTWM_OK;
    }
    {
        uint8_t got[16];
        ptwm_xxh128_digest(&r->seq_hash, got);
        if ((rc = ptwm_reader_check_hash(r, t, got, err))) memset(dst, 0, len);
    }
    return rc;
}
