/* The .ptwm writer's handle (docs/FORMAT.md): parameters checked, the ring
 * and its buffers made, the header written; free; what a file records
 * besides its tensors (the source header, metadata); and the one-call forms
 * (ptwm_compress_blob, ptwm_compress_file), whose tensors outlive the
 * writer, so their chunks are coded in place (borrowing).
 *
 * Ring depth: one thread codes each job as it waits for it (one slot); more
 * threads get chunks of 3 a thread + 2 raw bytes in flight when slots hold
 * copies of the chunks, 8 a thread when they borrow (no copies: a deeper
 * ring keeps every thread busy to the end of files of a few MB), and a
 * borrowing ring 8 times as many slots for runs of small tensors. Output
 * buffers are sized to their jobs. Peak memory is at most the budget x 5
 * (each raw byte's copy and its output's work bound) plus one slot of
 * scratch per thread and, for writers
 * sharing a context's threads, the previous writer's last chunks until this
 * one has a chunk queued per thread (write_shared.c). All of this runs on the
 * writing thread. */
#include "writer_impl.h"
#include "container_format.h"
#include "context.h"
#include "options.h"
#include "writer.h"

/* Jobs a borrowing writer's ring holds per chunk of its byte budget. */
#define RING_DEEP 8

static ptwm_error check_params(const ptwm_cparams *p, ptwm_err *err) {
    if (p->method && !ptwm_method_name(p->method))
        return ptwm_fail(err, PTWM_ERR_UNKNOWN_ID, "unknown method %d (1..5; 0 = default)",
                         p->method);
    if (p->chunk_size && (p->chunk_size < PTWM_FMT_MIN_CHUNK || p->chunk_size > PTWM_FMT_MAX_CHUNK))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "chunk size %llu outside [%u, %llu]", (unsigned long long)p->chunk_size,
                         PTWM_FMT_MIN_CHUNK, (unsigned long long)PTWM_FMT_MAX_CHUNK);
    if (p->zstd_level < 0 || p->zstd_level > 22)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "zstd level %d outside [0, 22]", p->zstd_level);
    if (p->format_version &&
        (p->format_version < PTWM_FMT_VERSION || p->format_version > PTWM_FMT_MAX_VERSION))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "format version %llu: this library writes %u..%u (0: the newest needed)",
                         (unsigned long long)p->format_version, PTWM_FMT_VERSION,
                         PTWM_FMT_MAX_VERSION);
    return PTWM_OK;
}

_Static_assert(PTWM_FORMAT_VERSION_OLDEST_WRITTEN == PTWM_FMT_VERSION &&
                   PTWM_FORMAT_VERSION_NEWEST == PTWM_FMT_MAX_VERSION,
               "ptwm.h's format versions are the container's");

/* The streams a rANS plane may take in a file held to format version v. */
static unsigned max_streams(uint64_t v) {
    return !v || v >= PTWM_FMT_X4_VERSION ? 4 : v >= PTWM_FMT_X2_VERSION ? 2 : 1;
}

/* borrow: the caller's tensor bytes outlive the writer (compress_blob,
 * compress_file): chunks are coded in place, so slots need no raw buffer and
 * the ring can be deeper (more chunks queued ahead keeps every thread busy
 * to the end on files of a few MB). */
static ptwm_error writer_new(const ptwm_cparams *params, const ptwm_base *base, int borrow,
                             ptwm_writer **out, ptwm_err *err) {
    ptwm_cparams given;
    ptwm_writer *w;
    ptwm_error rc;
    size_t i;
    uint64_t chunk;
    *out = NULL;
    /* The caller's struct as far as its size reaches (options.h). */
    if ((rc = ptwm_cparams_read(params, &given, "opening a writer", err))) return rc;
    params = &given;
    if ((rc = check_params(params, err))) return rc;
    if (base && base->ops && params->format_version && params->format_version < PTWM_FMT_BASE_VERSION)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "format version %llu cannot hold tensors coded against a base (%u on)",
                         (unsigned long long)params->format_version, PTWM_FMT_BASE_VERSION);
    w = (ptwm_writer *)ptwm_calloc(1, sizeof(*w));
    if (!w) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a writer");
    pthread_mutex_init(&w->rmu, NULL);
    pthread_mutex_init(&w->hmu, NULL);
    pthread_cond_init(&w->copied, NULL);
    w->p = *params;
    w->p.base = NULL;   /* the base is read through w->base only (container_base.h) */
    w->max_streams = max_streams(params->format_version);
    if (base && base->ops) w->base = *base;
    if (!w->p.method) w->p.method = PTWM_METHOD_MICROSCALE;
    w->af.fd = -1;
    if (params->ctx) {
        if ((rc = ptwm_ctx_claim(params->ctx, "writer", err))) {
            ptwm_writer_free(w);
            return rc;
        }
        w->ctx = params->ctx;
        w->claimed = 1;
        if ((rc = ptwm_ctx_commit_failed(w->ctx, err))) { /* ptwm_writer_finish_later */
            ptwm_writer_free(w);
            return rc;
        }
    } else if ((rc = ptwm_ctx_create(&w->own_ctx, err))) {
        ptwm_writer_free(w);
        return rc;
    } else {
        w->ctx = w->own_ctx;
    }
    if (!w->p.chunk_size) w->p.chunk_size = PTWM_DEFAULT_CHUNK;
    chunk = w->p.chunk_size;
    w->bound = ptwm_chunk_bound((size_t)chunk);
    w->slot_size = ptwm_chunk_work_bound((size_t)chunk);
    w->nworkers = ptwm_threads_resolve(w->p.threads);
    w->borrow = borrow;
    /* Enough work queued per thread that a thread never waits for the writer
     * (the writing thread codes too, and while it does it submits nothing:
     * 4 chunks a thread left the second thread idle a quarter of the time).
     * The ring is bounded in raw bytes (budget) and, for borrowing writers,
     * holds up to RING_DEEP times as many jobs: a run of small tensors
     * otherwise emptied the queue while the writing thread coded one large
     * chunk (docs/ARCHITECTURE.md, "Threads"). One thread codes each job as
     * it waits for it: one slot, reused while warm in cache. */
    {
        size_t full = w->nworkers == 1 ? 1 : borrow ? 8 * (size_t)w->nworkers : 3 * (size_t)w->nworkers + 2;
        w->budget = (uint64_t)full * chunk;
        w->window = w->nworkers == 1 ? 1 : full * RING_DEEP;
    }
    w->jobs = (wjob *)ptwm_calloc(w->window, sizeof(wjob));
    w->outs = (wbuf *)ptwm_calloc(w->window, sizeof(wbuf));
    w->copies = (wcopy *)ptwm_calloc(w->window, sizeof(wcopy));
    w->raws = (wbuf *)ptwm_calloc(w->window, sizeof(wbuf));
    w->pulls = (wbuf *)ptwm_calloc(w->window, sizeof(wbuf));
    w->scratch = (uint8_t **)ptwm_calloc(w->nworkers, sizeof(uint8_t *));
    if (!w->jobs || !w->outs || !w->copies || !w->raws || !w->pulls || !w->scratch) goto nomem;
    if ((rc = ptwm_ctx_workspaces(w->ctx, w->nworkers, &w->ws, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    for (i = 0; i < w->nworkers; i++)
        if (!(w->scratch[i] = (uint8_t *)ptwm_ctx_take(w->ctx, w->slot_size))) goto nomem;
    /* Borrowing writers (one-call forms) have a deeper ring of their own. */
    rc = w->claimed && !borrow ? ptwm_writer_share(w, err)
                               : ptwm_queue_create(w->p.threads, w->window, ptwm_writer_encode_task,
                                                   w, &w->queue, err);
    if (rc) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
nomem:
    ptwm_writer_free(w);
    return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu chunk buffers of %llu bytes",
                     2 * (size_t)(w->window + w->nworkers), (unsigned long long)chunk);
}

static ptwm_error write_head(ptwm_writer *w, ptwm_err *err) {
    uint8_t head[PTWM_FMT_HEAD_SIZE];
    memcpy(head, PTWM_FMT_MAGIC, PTWM_FMT_MAGIC_LEN);
    ptwm_store_le32(head + 8, PTWM_FMT_VERSION); /* raised at the end if a base was used */
    ptwm_store_le32(head + 12, 0);
    return ptwm_writer_emit(w, head, sizeof(head), err);
}

static ptwm_error open_file(const char *path, const ptwm_cparams *params, const ptwm_base *base,
                            int borrow, ptwm_writer **out, ptwm_err *err) {
    ptwm_writer *w;
    ptwm_error rc;
    if (!out || !path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL path or output handle");
    if ((rc = writer_new(params, base, borrow, &w, err))) return rc;
    w->to_file = 1;
    if ((rc = ptwm_atomic_open(path, &w->af, err)) || (rc = write_head(w, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
}

static ptwm_error open_memory(const ptwm_cparams *params, const ptwm_base *base, int borrow,
                              ptwm_writer **out, ptwm_err *err) {
    ptwm_writer *w;
    ptwm_error rc;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output handle");
    if ((rc = writer_new(params, base, borrow, &w, err))) return rc;
    if ((rc = write_head(w, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
}

ptwm_error ptwm_writer_open_file_base(const char *path, const ptwm_cparams *params,
                                      const ptwm_base *base, ptwm_writer **out, ptwm_err *err) {
    return open_file(path, params, base, 0, out, err);
}

ptwm_error ptwm_writer_open_memory_base(const ptwm_cparams *params, const ptwm_base *base,
                                        ptwm_writer **out, ptwm_err *err) {
    return open_memory(params, base, 0, out, err);
}

void ptwm_writer_free(ptwm_writer *w) {
    size_t i;
    if (!w) return;
    /* First: workers may still use the buffers. */
    if (!w->sh) {
        ptwm_queue_free(w->queue);
    } else {
        for (; w->nheld; w->nheld--, w->reclaim = (w->reclaim + 1) % w->window)
            ptwm_queue_wait(w->queue, w->slot0 + w->reclaim);
        w->sh->ring[w->slot0 ? 1 : 0] = NULL;
    }
    ptwm_dout_free(w->dout);
    if (w->to_file) ptwm_atomic_abort(&w->af);
    if (!w->mem_fixed) ptwm_free(w->mem.p);
    for (i = 0; i < w->nt; i++) ptwm_free(w->t[i].chunks);
    ptwm_free(w->t);
    ptwm_kv_free(w->meta, w->nmeta);
    ptwm_free(w->src_header);
    ptwm_free(w->src_name);
    if (w->jobs)
        for (i = 0; i < w->window; i++) {
            ptwm_ctx_give(w->ctx, w->jobs[i].raw, w->jobs[i].raw_cap);
            ptwm_ctx_give(w->ctx, w->jobs[i].out, w->jobs[i].out_cap);
            ptwm_ctx_give(w->ctx, w->jobs[i].base_buf, w->jobs[i].base_cap);
        }
    ptwm_free(w->jobs);
    for (i = 0; i < w->nouts; i++) ptwm_ctx_give(w->ctx, w->outs[i].p, w->outs[i].cap);
    for (i = 0; w->copies && i < w->window; i++)
        ptwm_ctx_give(w->ctx, w->copies[i].src, w->copies[i].cap);
    ptwm_free(w->copies);
    for (i = 0; i < w->nraws; i++) ptwm_ctx_give(w->ctx, w->raws[i].p, w->raws[i].cap);
    for (i = 0; i < w->npulls; i++) ptwm_ctx_give(w->ctx, w->pulls[i].p, w->pulls[i].cap);
    ptwm_free(w->pulls);
    ptwm_free(w->outs);
    ptwm_free(w->raws);
    if (w->scratch)
        for (i = 0; i < w->nworkers; i++) ptwm_ctx_give(w->ctx, w->scratch[i], w->slot_size);
    ptwm_free(w->scratch);
    ptwm_free(w->dedup.slot);
    ptwm_free(w->dedup.keep);
    if (w->cmp) ptwm_ctx_give(w->ctx, w->cmp, w->bound);
    if (w->own_ctx) ptwm_ctx_free(w->own_ctx);
    else if (w->claimed) ptwm_ctx_release(w->ctx);
    ptwm_xxh128_free(&w->hstream);
    pthread_cond_destroy(&w->copied);
    pthread_mutex_destroy(&w->rmu);
    pthread_mutex_destroy(&w->hmu);
    ptwm_free(w);
}

uint64_t ptwm_writer_coded_bytes(const ptwm_writer *w) {
    uint64_t n;
    if (!w) return 0;
    rmu_lock(w);
    n = w->coded_total;
    rmu_unlock(w);
    return n;
}

static char *dup_str(const char *s, size_t *len_out) {
    size_t n = strlen(s);
    char *d = (char *)ptwm_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    if (len_out) *len_out = n;
    return d;
}

/* What both ways of recording a source header check: the writer and the
 * file name (the header itself is checked by each). */
static ptwm_error check_source_args(ptwm_writer *w, const char *file_name, ptwm_err *err) {
    ptwm_error rc;
    if (!w) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer");
    if ((rc = w_failed(w, err))) return rc;
    if (file_name && strlen(file_name) > 4096)
        return ptwm_fail(err, PTWM_ERR_LIMIT, "source file name of %zu bytes (max 4096)", strlen(file_name));
    return PTWM_OK;
}

ptwm_error ptwm_writer_borrow_source_json(ptwm_writer *w, const char *json, size_t json_len,
                                          const char *file_name, ptwm_err *err) {
    ptwm_error rc = check_source_args(w, file_name, err);
    if (rc) return rc;
    if ((!json && json_len) || json_len > PTWM_ST_MAX_HEADER)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "source header of %zu bytes (NULL or over the cap)",
                         json_len);
    ptwm_free(w->src_header);
    ptwm_free(w->src_name);
    w->src_header = NULL;
    w->src_name = NULL;
    w->has_source = 0;
    w->src_json = json;
    w->src_header_len = json_len + 8;
    if (file_name && !(w->src_name = dup_str(file_name, NULL)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    w->has_source = 1;
    return PTWM_OK;
}

ptwm_error ptwm_writer_set_source_header(ptwm_writer *w, const void *header, size_t len,
                                         const char *file_name, ptwm_err *err) {
    ptwm_error rc;
    if (!w || (!header && len)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or header");
    if ((rc = check_source_args(w, file_name, err))) return rc;
    if (len < 8 || ptwm_load_le64(header) != len - 8 || len - 8 > PTWM_ST_MAX_HEADER)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "source header of %zu bytes does not start with its own JSON length", len);
    ptwm_free(w->src_header);
    ptwm_free(w->src_name);
    w->src_name = NULL;
    w->src_json = NULL;
    w->has_source = 0;
    w->src_header = (uint8_t *)ptwm_malloc(len);
    if (!w->src_header) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a %zu-byte header", len);
    memcpy(w->src_header, header, len);
    w->src_header_len = len;
    if (file_name && !(w->src_name = dup_str(file_name, NULL)))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    w->has_source = 1;
    return PTWM_OK;
}

void ptwm_writer_set_source_size(ptwm_writer *w, uint64_t size) {
    if (w) w->src_file_size = size;
}

ptwm_error ptwm_writer_set_metadata(ptwm_writer *w, const ptwm_kv *meta, size_t n, ptwm_err *err) {
    size_t i, j;
    ptwm_error rc;
    if (!w || (!meta && n)) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL writer or metadata");
    if ((rc = w_failed(w, err))) return rc;
    for (i = 0; i < n; i++) {
        if (!meta[i].key || !meta[i].value)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "metadata entry %zu has a NULL key or value", i);
        for (j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return ptwm_fail(err, PTWM_ERR_DUPLICATE, "metadata key '%s' given twice", meta[i].key);
    }
    ptwm_kv_free(w->meta, w->nmeta);
    w->nmeta = 0;
    w->meta = (ptwm_kv *)ptwm_calloc(n ? n : 1, sizeof(ptwm_kv));
    if (!w->meta) return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for metadata");
    for (i = 0; i < n; i++) {
        w->meta[i].key = dup_str(meta[i].key, NULL);
        w->meta[i].value = dup_str(meta[i].value, NULL);
        w->nmeta = i + 1;
        if (!w->meta[i].key || !w->meta[i].value)
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for metadata");
    }
    return PTWM_OK;
}

static ptwm_error add_all(ptwm_writer *w, const ptwm_tensor_desc *tensors, size_t n,
                          const ptwm_chain_list *chains, ptwm_err *err) {
    size_t i;
    ptwm_error rc;
    if (n && !tensors) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL tensor list");
    for (i = 0; i < n; i++)
        if ((rc = ptwm_writer_add(w, &tensors[i], chains ? &chains[i] : NULL, err))) return rc;
    return PTWM_OK;
}

/* A borrowing in-memory writer of the tensors, its image the caller's dst
 * (cap bytes, fixed) or its own. Its own has room for the image at its raw
 * size up front: growing by doubling copied the image again at every step,
 * on the thread that also appends every chunk (pages are only touched as
 * far as written); if that reservation fails, the image grows as it goes. */
static ptwm_error compress_image(const ptwm_tensor_desc *tensors, size_t n,
                                 const ptwm_chain_list *chains, const ptwm_cparams *params,
                                 const ptwm_base *base, void *dst, size_t cap, ptwm_writer **out,
                                 ptwm_err *err) {
    ptwm_writer *w = NULL;
    ptwm_error rc;
    *out = NULL;
    if ((rc = open_memory(params, base, 1, &w, err))) return rc; /* the tensors outlive the writer */
    if (dst) {
        /* The header, written at open, moves into the caller's buffer. */
        if (cap < w->mem.len) {
            ptwm_writer_free(w);
            return ptwm_fail(err, PTWM_ERR_DST_SIZE, "a destination of %zu bytes is smaller than a header",
                             cap);
        }
        memcpy(dst, w->mem.p, w->mem.len);
        ptwm_free(w->mem.p);
        w->mem.p = (uint8_t *)dst;
        w->mem.cap = cap;
        w->mem_fixed = 1;
    } else {
        uint64_t raw = 0;
        size_t i;
        for (i = 0; i < n && tensors; i++) raw += tensors[i].nbytes;
        if (raw < (uint64_t)SIZE_MAX / 2 && wbuf_reserve(&w->mem, (size_t)raw + 4096))
            ptwm_advise_huge(w->mem.p, w->mem.cap); /* fewer page faults as the image grows */
    }
    if ((rc = add_all(w, tensors, n, chains, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    *out = w;
    return PTWM_OK;
}

ptwm_error ptwm_compress_blob_base(const ptwm_tensor_desc *tensors, size_t n,
                                   const ptwm_chain_list *chains, const ptwm_cparams *params,
                                   const ptwm_base *base, void **out, size_t *len, ptwm_err *err) {
    ptwm_writer *w = NULL;
    ptwm_error rc;
    if (!out || !len) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output");
    *out = NULL;
    *len = 0;
    if ((rc = compress_image(tensors, n, chains, params, base, NULL, 0, &w, err))) return rc;
    return ptwm_writer_finish_memory(w, out, len, err);
}

ptwm_error ptwm_compress_into_base(const ptwm_tensor_desc *tensors, size_t n,
                                   const ptwm_chain_list *chains, const ptwm_cparams *params,
                                   const ptwm_base *base, void *dst, size_t cap, size_t *len,
                                   ptwm_err *err) {
    ptwm_writer *w = NULL;
    ptwm_error rc;
    void *image = NULL;
    if (!dst || !len) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL destination or length");
    *len = 0;
    if ((rc = compress_image(tensors, n, chains, params, base, dst, cap, &w, err))) return rc;
    return ptwm_writer_finish_memory(w, &image, len, err); /* image is dst */
}

ptwm_error ptwm_compress_file_base(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                                   const ptwm_chain_list *chains, const ptwm_cparams *params,
                                   const ptwm_base *base, ptwm_err *err) {
    ptwm_writer *w = NULL;
    ptwm_error rc;
    if ((rc = open_file(path, params, base, 1, &w, err))) return rc; /* the tensors outlive the writer */
    if ((rc = add_all(w, tensors, n, chains, err))) {
        ptwm_writer_free(w);
        return rc;
    }
    return ptwm_writer_finish(w, err);
}
