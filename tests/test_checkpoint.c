/* Training checkpoints: bit-exact round trips for every optimizer in every
 * format, the mismatch errors with their figures, and how well .ptwm
 * compresses the state of a few real Adam steps on a corpus network. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include "testutil.h"

#define N 1000

static const uint64_t sh_a[] = {10, 20}, sh_b[] = {500}, sh_c[] = {300};
static const uint64_t sh_a_t[] = {20, 10};
static const ptwm_layout_entry layout[3] = {{"enc.w", 2, sh_a}, {"enc.b", 1, sh_b}, {"head.w", 1, sh_c}};

static const ptwm_optimizer kinds[] = {PTWM_OPT_SGD, PTWM_OPT_MOMENTUM, PTWM_OPT_ADAM,
                                       PTWM_OPT_ADAMW, PTWM_OPT_ADAMW_BF16};
static const ptwm_ckpt_format formats[] = {PTWM_CKPT_PTWM, PTWM_CKPT_SAFETENSORS, PTWM_CKPT_RAW};
static const char *const format_ext[] = {"ptwm", "safetensors", "raw"};

static float rand_float(uint64_t *rng) {
    uint32_t b = (uint32_t)tu_rand(rng);
    float f;
    /* mostly ordinary values, sometimes any bit pattern (NaN payloads, inf, subnormals) */
    if (b % 16) return ((float)(b >> 8) / 16777216.0f - 0.5f) * 0.1f;
    b = (uint32_t)tu_rand(rng);
    memcpy(&f, &b, 4);
    return f;
}

/* A state of `kind` with buffers allocated; filled with values when rng != NULL. */
static void state_make(ptwm_optim_state *st, ptwm_optimizer kind, uint64_t n, uint64_t *rng) {
    uint64_t i;
    memset(st, 0, sizeof(*st));
    st->kind = kind;
    st->n_params = n;
    st->params = (float *)calloc(n, 4);
    if (kind == PTWM_OPT_MOMENTUM) st->momentum_buf = (float *)calloc(n, 4);
    if (kind == PTWM_OPT_ADAM || kind == PTWM_OPT_ADAMW) {
        st->m = (float *)calloc(n, 4);
        st->v = (float *)calloc(n, 4);
    }
    if (kind == PTWM_OPT_ADAMW_BF16) {
        st->m_bf16 = (uint16_t *)calloc(n, 2);
        st->v_bf16 = (uint16_t *)calloc(n, 2);
    }
    if (!rng) return;
    for (i = 0; i < n; i++) {
        st->params[i] = rand_float(rng);
        if (st->momentum_buf) st->momentum_buf[i] = rand_float(rng);
        if (st->m) st->m[i] = rand_float(rng);
        if (st->v) st->v[i] = fabsf(rand_float(rng));
        if (st->m_bf16) st->m_bf16[i] = (uint16_t)tu_rand(rng);
        if (st->v_bf16) st->v_bf16[i] = (uint16_t)tu_rand(rng);
    }
    st->step = 123456789012ull;
    st->lr = 3e-4f;
    st->beta1 = 0.9f;
    st->beta2 = 0.999f;
    st->eps = 1e-8f;
    st->weight_decay = 0.01f;
    st->momentum = 0.9f;
    st->bc1 = 1.0f - powf(0.9f, 7.0f);
    st->bc2 = 1.0f - powf(0.999f, 7.0f);
}

static void state_free(ptwm_optim_state *st) {
    free(st->params);
    free(st->momentum_buf);
    free(st->m);
    free(st->v);
    free(st->m_bf16);
    free(st->v_bf16);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static int buffers_equal(const ptwm_optim_state *a, const ptwm_optim_state *b) {
    size_t n = (size_t)a->n_params;
    if (memcmp(a->params, b->params, n * 4)) return 0;
    if (a->momentum_buf && memcmp(a->momentum_buf, b->momentum_buf, n * 4)) return 0;
    if (a->m && (memcmp(a->m, b->m, n * 4) || memcmp(a->v, b->v, n * 4))) return 0;
    if (a->m_bf16 && (memcmp(a->m_bf16, b->m_bf16, n * 2) || memcmp(a->v_bf16, b->v_bf16, n * 2)))
        return 0;
    return 1;
}

static int scalars_equal(const ptwm_optim_state *a, const ptwm_optim_state *b) {
    return a->step == b->step && same_bits(a->lr, b->lr) && same_bits(a->beta1, b->beta1) &&
           same_bits(a->beta2, b->beta2) && same_bits(a->eps, b->eps) &&
           same_bits(a->weight_decay, b->weight_decay) && same_bits(a->momentum, b->momentum) &&
           same_bits(a->bc1, b->bc1) && same_bits(a->bc2, b->bc2);
}

static const char *ckpt_path(ptwm_optimizer kind, size_t f) {
    static char buf[600];
    snprintf(buf, sizeof(buf), "%s/ckpt-%d.%s", tu_tmpdir(), (int)kind, format_ext[f]);
    return buf;
}

static void test_round_trips(void) {
    uint64_t rng = 99;
    size_t k, f;
    for (k = 0; k < PTWM_OPT_ADAMW_BF16; k++) {
        for (f = 0; f < 3; f++) {
            ptwm_optim_state a, b;
            ptwm_err err;
            ptwm_error rc;
            const char *path = ckpt_path(kinds[k], f);
            state_make(&a, kinds[k], N, &rng);
            state_make(&b, kinds[k], N, NULL);
            rc = ptwm_ckpt_save(path, formats[f], layout, 3, &a, &err);
            CHECK_ERR(rc, &err, PTWM_OK, NULL);
            rc = ptwm_ckpt_load(path, formats[f], layout, 3, &b, &err);
            CHECK_ERR(rc, &err, PTWM_OK, NULL);
            CHECK_MSG(buffers_equal(&a, &b), "kind %d format %s: buffers differ", (int)kinds[k],
                      format_ext[f]);
            if (formats[f] == PTWM_CKPT_RAW) {
                CHECK(same_bits(a.bc1, b.bc1) || kinds[k] < PTWM_OPT_ADAM);
                CHECK(same_bits(a.bc2, b.bc2) || kinds[k] < PTWM_OPT_ADAM);
            } else {
                CHECK_MSG(scalars_equal(&a, &b), "kind %d format %s: scalars differ",
                          (int)kinds[k], format_ext[f]);
            }
            if (formats[f] == PTWM_CKPT_RAW) {
                uint64_t need;
                size_t len = 0;
                uint8_t *bytes = tu_read_file(path, &len);
                ptwm_ckpt_raw_size(kinds[k], N, &need, NULL);
                CHECK(bytes && len == need);
                /* the documented layout: params first, bc1 and bc2 last */
                if (bytes) CHECK(memcmp(bytes, a.params, N * 4) == 0);
                if (bytes && kinds[k] >= PTWM_OPT_ADAM)
                    CHECK(memcmp(bytes + len - 8, &a.bc1, 4) == 0 &&
                          memcmp(bytes + len - 4, &a.bc2, 4) == 0);
                free(bytes);
            }
            state_free(&a);
            state_free(&b);
        }
    }
}

static void test_mismatches(void) {
    ptwm_optim_state st, saved;
    ptwm_err err;
    ptwm_error rc;
    uint64_t rng = 5;
    ptwm_layout_entry bad[3];

    state_make(&st, PTWM_OPT_ADAMW_BF16, N, NULL);
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAM, 2), PTWM_CKPT_RAW, NULL, 0, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH,
              "has 12008 bytes, an AdamW-BF16 raw checkpoint of 1000 params needs 8008 "
              "(the size of the Adam raw layout)");
    state_free(&st);
    state_make(&st, PTWM_OPT_MOMENTUM, N, NULL);
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_SGD, 2), PTWM_CKPT_RAW, NULL, 0, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH,
              "has 4000 bytes, an SGD+momentum raw checkpoint of 1000 params needs 8000");
    state_free(&st);
    state_make(&st, PTWM_OPT_ADAMW, N + 1, NULL);
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAMW, 2), PTWM_CKPT_RAW, NULL, 0, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH,
              "has 12008 bytes, an AdamW raw checkpoint of 1001 params needs 12020");
    state_free(&st);

    /* self-describing: wrong optimizer, names, shapes, counts; scalars kept on failure */
    state_make(&st, PTWM_OPT_ADAMW, N, &rng);
    saved = st;
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAM, 0), PTWM_CKPT_PTWM, layout, 3, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "holds optimizer 'adam', resuming 'adamw' (AdamW)");
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAM, 1), PTWM_CKPT_SAFETENSORS, layout, 3, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "holds optimizer 'adam', resuming 'adamw'");
    memcpy(bad, layout, sizeof(bad));
    bad[1].name = "enc.bias";
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAMW, 0), PTWM_CKPT_PTWM, bad, 3, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "has no tensor 'param/enc.bias'");
    memcpy(bad, layout, sizeof(bad));
    bad[0].shape = sh_a_t;
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAMW, 1), PTWM_CKPT_SAFETENSORS, bad, 3, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH,
              "tensor 'param/enc.w' has shape [10, 20], layout expects [20, 10]");
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAMW, 0), PTWM_CKPT_PTWM, layout, 2, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "layout names 700 parameters, the state has 1000");
    st.n_params = 700;
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAMW, 0), PTWM_CKPT_PTWM, layout, 2, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH,
              "has 9 tensors, an AdamW state of 2 layout entries has 6");
    st.n_params = N;
    CHECK(scalars_equal(&st, &saved));
    rc = ptwm_ckpt_load(tu_corpus_path("emotion.f32.safetensors"), PTWM_CKPT_SAFETENSORS, layout,
                        3, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "no ptwm.optimizer metadata: not a training checkpoint");
    state_free(&st);

    /* a BF16-moment file resumed as plain AdamW: optimizer named differently */
    state_make(&st, PTWM_OPT_ADAMW, N, NULL);
    rc = ptwm_ckpt_load(ckpt_path(PTWM_OPT_ADAMW_BF16, 0), PTWM_CKPT_PTWM, layout, 3, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_MISMATCH, "holds optimizer 'adamw_bf16', resuming 'adamw'");
    /* an incomplete state is the caller's error */
    free(st.v);
    st.v = NULL;
    rc = ptwm_ckpt_save(ckpt_path(PTWM_OPT_ADAMW, 2), PTWM_CKPT_RAW, NULL, 0, &st, &err);
    CHECK_ERR(rc, &err, PTWM_ERR_INVALID_ARG, "AdamW state lacks its adam.v buffer");
    state_free(&st);
}

/* Sum of coded bytes of the tensors whose names start with prefix. */
static uint64_t coded_by_prefix(const char *path, const char *prefix, uint64_t *raw) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    uint64_t sum = 0;
    size_t i;
    *raw = 0;
    if (ptwm_reader_open(path, &r, &err)) return 0;
    for (i = 0; i < ptwm_reader_count(r); i++) {
        ptwm_tensor_info ti;
        ptwm_reader_tensor(r, i, &ti, NULL);
        if (strncmp(ti.name, prefix, strlen(prefix)) == 0) {
            sum += ti.coded_bytes;
            *raw += ti.nbytes;
        }
    }
    ptwm_reader_close(r);
    return sum;
}

static size_t zstd_size(const void *p, size_t n) {
    size_t cap = ZSTD_compressBound(n), got;
    void *out = malloc(cap);
    got = out ? ZSTD_compress(out, cap, p, n, 3) : 0;
    free(out);
    return ZSTD_isError(got) ? 0 : got;
}

/* A few AdamW steps on emotion.f32's parameters: loss = 0.5 wd_l2 |w|^2 +
 * sum_k 0.5 (a_k . w - y_k)^2 for 4 random directions a_k; real gradients
 * give m and v their real structure. Then the state's compressed size. */
static void test_adam_compression(void) {
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err;
    ptwm_error rc;
    ptwm_optim_state st, back, st16;
    const ptwm_layout_entry *e;
    size_t n, k, t;
    uint64_t total, i, rng = 2024;
    float *a, *g, y[4];
    char path[600], path16[600];
    static const char *const prefixes[] = {"param/", "adam.m/", "adam.v/"};

    rc = ptwm_source_open(tu_corpus_path("emotion.f32.safetensors"), PTWM_SOURCE_AUTO, &s, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    if (rc) return;
    ptwm_layout_from_source(s, &l, &err);
    e = ptwm_layout_entries(l, &n);
    ptwm_layout_elements(e, n, &total, &err);
    state_make(&st, PTWM_OPT_ADAMW, total, NULL);
    rc = ptwm_load_layout(s, e, n, PTWM_CONVERT_FLOAT, st.params, total, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    a = (float *)malloc(4 * total * 4);
    g = (float *)malloc(total * 4);
    for (i = 0; i < 4 * total; i++)
        a[i] = ((float)(tu_rand(&rng) >> 40) / 16777216.0f - 0.5f) / sqrtf((float)total);
    for (k = 0; k < 4; k++) y[k] = (float)k - 1.5f;
    st.lr = 1e-3f;
    st.beta1 = 0.9f;
    st.beta2 = 0.999f;
    st.eps = 1e-8f;
    st.weight_decay = 0.01f;
    for (t = 1; t <= 8; t++) {
        for (i = 0; i < total; i++) g[i] = 1e-3f * st.params[i];
        for (k = 0; k < 4; k++) {
            double dot = 0;
            for (i = 0; i < total; i++) dot += (double)a[k * total + i] * st.params[i];
            for (i = 0; i < total; i++) g[i] += (float)(dot - y[k]) * a[k * total + i];
        }
        st.step = t;
        st.bc1 = 1.0f - powf(st.beta1, (float)t);
        st.bc2 = 1.0f - powf(st.beta2, (float)t);
        for (i = 0; i < total; i++) {
            float mh, vh;
            st.m[i] = st.beta1 * st.m[i] + (1 - st.beta1) * g[i];
            st.v[i] = st.beta2 * st.v[i] + (1 - st.beta2) * g[i] * g[i];
            mh = st.m[i] / st.bc1;
            vh = st.v[i] / st.bc2;
            st.params[i] -= st.lr * (mh / (sqrtf(vh) + st.eps) + st.weight_decay * st.params[i]);
        }
    }
    snprintf(path, sizeof(path), "%s/adam-emotion.ptwm", tu_tmpdir());
    rc = ptwm_ckpt_save(path, PTWM_CKPT_PTWM, e, n, &st, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    state_make(&back, PTWM_OPT_ADAMW, total, NULL);
    rc = ptwm_ckpt_load(path, PTWM_CKPT_PTWM, e, n, &back, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);
    CHECK(buffers_equal(&st, &back) && scalars_equal(&st, &back));

    /* the same moments packed as BF16 */
    state_make(&st16, PTWM_OPT_ADAMW_BF16, total, NULL);
    memcpy(st16.params, st.params, total * 4);
    ptwm_f32_to_bf16(st.m, st16.m_bf16, total);
    ptwm_f32_to_bf16(st.v, st16.v_bf16, total);
    st16.step = st.step;
    st16.bc1 = st.bc1;
    st16.bc2 = st.bc2;
    snprintf(path16, sizeof(path16), "%s/adam-emotion-bf16.ptwm", tu_tmpdir());
    rc = ptwm_ckpt_save(path16, PTWM_CKPT_PTWM, e, n, &st16, &err);
    CHECK_ERR(rc, &err, PTWM_OK, NULL);

    printf("AdamW checkpoint of emotion.f32 (%llu params) after 8 steps, .ptwm vs zstd -3:\n",
           (unsigned long long)total);
    for (k = 0; k < 3; k++) {
        uint64_t raw, coded = coded_by_prefix(path, prefixes[k], &raw);
        const float *buf = k == 0 ? st.params : k == 1 ? st.m : st.v;
        size_t z = zstd_size(buf, total * 4);
        CHECK(coded > 0 && raw == total * 4);
        printf("  %-8s F32  raw %8llu  ptwm %8llu (%5.1f%%)  zstd-3 %8zu (%5.1f%%)\n", prefixes[k],
               (unsigned long long)raw, (unsigned long long)coded, 100.0 * (double)coded / (double)raw,
               z, 100.0 * (double)z / (double)raw);
    }
    for (k = 1; k < 3; k++) {
        uint64_t raw, coded = coded_by_prefix(path16, prefixes[k], &raw);
        const uint16_t *buf = k == 1 ? st16.m_bf16 : st16.v_bf16;
        size_t z = zstd_size(buf, total * 2);
        CHECK(coded > 0 && raw == total * 2);
        printf("  %-8s BF16 raw %8llu  ptwm %8llu (%5.1f%%)  zstd-3 %8zu (%5.1f%%)\n", prefixes[k],
               (unsigned long long)raw, (unsigned long long)coded, 100.0 * (double)coded / (double)raw,
               z, 100.0 * (double)z / (double)raw);
    }
    free(a);
    free(g);
    state_free(&st);
    state_free(&back);
    state_free(&st16);
    ptwm_layout_free(l);
    ptwm_source_close(s);
}

int main(void) {
    CHECK(tu_corpus_dir() != NULL);
    if (!tu_corpus_dir()) return tu_finish("test_checkpoint");
    test_round_trips();
    test_mismatches();
    test_adam_compression();
    return tu_finish("test_checkpoint");
}
