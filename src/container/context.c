/* Caller-owned work memory (context.h) and its committer thread.
 *
 * mu guards the claim flag, the kept buffers, the commit queue and the first
 * commit failure. Writers take it under their rmu (ptwm_ctx_take while
 * appending); it is never held while taking another lock. The committer
 * thread commits queued files in order, one at a time, and holds mu only to
 * take the next from the queue: the fsyncs and renames run without it. The
 * workspaces are made by the context's one user (ptwm_ctx_claim), outside
 * mu, before its workers use them. */
#include <pthread.h>
#include <stdlib.h>
#include "context.h"
#include "fileio.h"
#include "threads.h"

/* Buffers kept for reuse: a writer's ring on a few threads gives back
 * fewer than this; past it the smallest kept buffer is freed. */
#define CTX_KEEP 64

typedef struct kept {
    void *p;
    size_t size;
} kept;

/* A whole file waiting for its commit (ptwm_ctx_commit_later). */
typedef struct pcommit {
    ptwm_atomic_file af;
    struct pcommit *next;
} pcommit;

struct ptwm_ctx {
    pthread_mutex_t mu;
    int busy;
    /* Deferred commits, oldest first, run by one committer thread (made on
     * the first, joined by ptwm_ctx_free); the first failure is kept. */
    pthread_cond_t cwake, cidle;
    pthread_t committer;
    int has_committer, committing, cquit;
    pcommit *chead, *ctail;
    ptwm_error crc;
    ptwm_err cerr;
    void *writers;                      /* the writers' shared state (write_shared.c) */
    void (*writers_free)(void *);
    ptwm_ws *ws[PTWM_POOL_MAX];
    unsigned nws;
    kept keep[CTX_KEEP];
    unsigned nkeep;
    /* Buffers mapped by ptwm_malloc_big, held or kept, with their mapped
     * size: a buffer taken with ptwm_ctx_take comes back with the size its
     * taker asked for, which is not always the size it has. */
    kept *big;
    size_t nbig, capbig;
};

/* The mapped size of p if ptwm_malloc_big mapped it for this context, and
 * its entry's index into *at; 0 if not (mu held). */
static size_t big_size_of(const ptwm_ctx *ctx, const void *p, size_t *at) {
    size_t i;
    for (i = 0; i < ctx->nbig; i++)
        if (ctx->big[i].p == p) {
            *at = i;
            return ctx->big[i].size;
        }
    return 0;
}

/* Free p (mu held, or the context's end). */
static void release(ptwm_ctx *ctx, void *p) {
    size_t at, mapped = big_size_of(ctx, p, &at);
    if (!mapped) {
        ptwm_free(p);
        return;
    }
    ptwm_free_big(p, mapped);
    ctx->big[at] = ctx->big[--ctx->nbig];
}

/* A new buffer of at least size bytes (its size into *got), mapped on huge
 * pages where that is worth it and recorded (mu held). */
static void *fresh(ptwm_ctx *ctx, size_t size, size_t *got) {
    size_t mapped = (size_t)ptwm_big_size(size);
    void *p;
    *got = size;
    if (!ptwm_big_maps(size) ||
        !ptwm_grow((void **)&ctx->big, &ctx->capbig, ctx->nbig + 1, sizeof(kept)))
        return ptwm_malloc(size);
    if (!(p = ptwm_malloc_big(mapped))) return NULL;
    ctx->big[ctx->nbig].p = p;
    ctx->big[ctx->nbig++].size = mapped;
    *got = mapped;
    return p;
}

ptwm_error ptwm_ctx_create(ptwm_ctx **out, ptwm_err *err) {
    ptwm_ctx *c;
    if (!out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL output handle");
    if (!(*out = c = (ptwm_ctx *)ptwm_calloc(1, sizeof(*c))))
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a context");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cwake, NULL);
    pthread_cond_init(&c->cidle, NULL);
    return PTWM_OK;
}

void ptwm_ctx_free(ptwm_ctx *ctx) {
    unsigned i;
    if (!ctx) return;
    if (ctx->writers) ctx->writers_free(ctx->writers); /* may queue a commit */
    if (ctx->has_committer) {
        /* Files already whole are still committed, as ptwm_writer_finish
         * would have; only the failures go unheard. */
        pthread_mutex_lock(&ctx->mu);
        ctx->cquit = 1;
        pthread_cond_signal(&ctx->cwake);
        pthread_mutex_unlock(&ctx->mu);
        pthread_join(ctx->committer, NULL);
    }
    pthread_cond_destroy(&ctx->cwake);
    pthread_cond_destroy(&ctx->cidle);
    for (i = 0; i < ctx->nws; i++) ptwm_ws_free(ctx->ws[i]);
    for (i = 0; i < ctx->nkeep; i++) release(ctx, ctx->keep[i].p);
    ptwm_free(ctx->big);
    pthread_mutex_destroy(&ctx->mu);
    ptwm_free(ctx);
}

size_t ptwm_ctx_size(const ptwm_ctx *ctx) {
    size_t total = 0;
    unsigned i;
    int r;
    if (!ctx) return 0;
    for (i = 0; i < ctx->nkeep; i++) total += ctx->keep[i].size;
    for (i = 0; i < ctx->nws; i++)
        for (r = 0; ctx->ws[i] && r < PTWM_WS_REGIONS; r++) total += ctx->ws[i]->cap[r];
    return total;
}

ptwm_error ptwm_ctx_claim(ptwm_ctx *ctx, const char *who, ptwm_err *err) {
    int was;
    pthread_mutex_lock(&ctx->mu);
    was = ctx->busy;
    ctx->busy = 1;
    pthread_mutex_unlock(&ctx->mu);
    if (was)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "%s: the context is in use by another writer, reader or stream", who);
    return PTWM_OK;
}

void ptwm_ctx_release(ptwm_ctx *ctx) {
    pthread_mutex_lock(&ctx->mu);
    ctx->busy = 0;
    pthread_mutex_unlock(&ctx->mu);
}

ptwm_error ptwm_ctx_workspaces(ptwm_ctx *ctx, unsigned n, ptwm_ws ***out, ptwm_err *err) {
    if (n > PTWM_POOL_MAX)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "%u workspaces (at most %d)", n, PTWM_POOL_MAX);
    for (; ctx->nws < n; ctx->nws++)
        if (!(ctx->ws[ctx->nws] = ptwm_ws_create()))
            return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for a workspace");
    *out = ctx->ws;
    return PTWM_OK;
}

void *ptwm_ctx_take(ptwm_ctx *ctx, size_t size) {
    size_t got;
    return ptwm_ctx_take_fit(ctx, size, &got);
}

void *ptwm_ctx_take_fit(ptwm_ctx *ctx, size_t size, size_t *got) {
    unsigned i, best = CTX_KEEP;
    void *p;
    if (!size) size = 1;
    *got = size;
    pthread_mutex_lock(&ctx->mu);
    for (i = 0; i < ctx->nkeep; i++)
        if (ctx->keep[i].size >= size && (best == CTX_KEEP || ctx->keep[i].size < ctx->keep[best].size))
            best = i;
    if (best < CTX_KEEP) {
        p = ctx->keep[best].p;
        *got = ctx->keep[best].size;
        ctx->keep[best] = ctx->keep[--ctx->nkeep];
    } else {
        p = fresh(ctx, size, got);
    }
    pthread_mutex_unlock(&ctx->mu);
    return p;
}

void ptwm_ctx_give(ptwm_ctx *ctx, void *p, size_t size) {
    unsigned i, small = 0;
    size_t at, mapped;
    if (!p) return;
    if (!size) size = 1;
    pthread_mutex_lock(&ctx->mu);
    if ((mapped = big_size_of(ctx, p, &at))) size = mapped;
    if (ctx->nkeep == CTX_KEEP) {
        for (i = 1; i < CTX_KEEP; i++)
            if (ctx->keep[i].size < ctx->keep[small].size) small = i;
        if (ctx->keep[small].size >= size) {
            release(ctx, p);
            pthread_mutex_unlock(&ctx->mu);
            return;
        }
        release(ctx, ctx->keep[small].p);
        ctx->keep[small] = ctx->keep[--ctx->nkeep];
    }
    ctx->keep[ctx->nkeep].p = p;
    ctx->keep[ctx->nkeep++].size = size;
    pthread_mutex_unlock(&ctx->mu);
}

/* The committer: commits the queued files in order, then waits for more. */
static void *commit_main(void *arg) {
    ptwm_ctx *ctx = (ptwm_ctx *)arg;
    pthread_mutex_lock(&ctx->mu);
    for (;;) {
        pcommit *c = ctx->chead;
        ptwm_err e;
        ptwm_error rc;
        if (!c) {
            ctx->committing = 0;
            pthread_cond_broadcast(&ctx->cidle);
            if (ctx->cquit) break;
            pthread_cond_wait(&ctx->cwake, &ctx->mu);
            continue;
        }
        ctx->committing = 1;
        if (!(ctx->chead = c->next)) ctx->ctail = NULL;
        pthread_mutex_unlock(&ctx->mu);
        rc = ptwm_atomic_commit(&c->af, &e);
        ptwm_atomic_abort(&c->af);
        ptwm_free(c);
        if (rc) ptwm_ctx_commit_fail(ctx, rc, &e);
        pthread_mutex_lock(&ctx->mu);
    }
    pthread_mutex_unlock(&ctx->mu);
    return NULL;
}

ptwm_error ptwm_ctx_commit_later(ptwm_ctx *ctx, ptwm_atomic_file *af, ptwm_err *err) {
    pcommit *c = (pcommit *)ptwm_calloc(1, sizeof(*c));
    if (!c) return ptwm_atomic_commit(af, err); /* no room to defer: commit now */
    c->af = *af;
    af->fd = -1;
    af->tmp_path = af->final_path = NULL;
    pthread_mutex_lock(&ctx->mu);
    if (!ctx->has_committer) {
        if (pthread_create(&ctx->committer, NULL, commit_main, ctx) == 0) {
            ctx->has_committer = 1;
        } else {
            pthread_mutex_unlock(&ctx->mu);
            *af = c->af; /* no thread: commit now */
            ptwm_free(c);
            return ptwm_atomic_commit(af, err);
        }
    }
    if (ctx->ctail) ctx->ctail->next = c;
    else ctx->chead = c;
    ctx->ctail = c;
    ctx->committing = 1;
    pthread_cond_signal(&ctx->cwake);
    pthread_mutex_unlock(&ctx->mu);
    return PTWM_OK;
}

void ptwm_ctx_commit_fail(ptwm_ctx *ctx, ptwm_error rc, const ptwm_err *err) {
    pthread_mutex_lock(&ctx->mu);
    if (!ctx->crc) {
        ctx->crc = rc;
        ctx->cerr = *err;
    }
    pthread_mutex_unlock(&ctx->mu);
}

ptwm_error ptwm_ctx_commit_failed(ptwm_ctx *ctx, ptwm_err *err) {
    ptwm_error rc;
    pthread_mutex_lock(&ctx->mu);
    rc = ctx->crc;
    if (rc && err) *err = ctx->cerr;
    pthread_mutex_unlock(&ctx->mu);
    return rc;
}

ptwm_error ptwm_ctx_commits_done(ptwm_ctx *ctx, ptwm_err *err) {
    pthread_mutex_lock(&ctx->mu);
    while (ctx->committing) pthread_cond_wait(&ctx->cidle, &ctx->mu);
    pthread_mutex_unlock(&ctx->mu);
    return ptwm_ctx_commit_failed(ctx, err);
}

void *ptwm_ctx_writers(ptwm_ctx *ctx) {
    return ctx->writers;
}

void ptwm_ctx_set_writers(ptwm_ctx *ctx, void *p, void (*free_fn)(void *)) {
    ctx->writers = p;
    ctx->writers_free = free_fn;
}
