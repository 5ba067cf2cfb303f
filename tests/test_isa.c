/* The instruction-set cap (ptwm_set_isa_limit, PTWM_ISA): every level up to
 * the machine's best reports itself, and compresses real weights
 * (samples/posenet.bf16.safetensors: as BF16, widened to F32, the same bits
 * read as F16, and pruned to 40% zeros for the sparse kernels) with each
 * entropy method to the same bytes, which every level decodes back to the
 * source. The widening and column-scale kernels give the same bytes at
 * every level, and every level's kernel table is complete.
 *
 * Run with PTWM_ISA set (ctest's test_isa_env*): the first level reported is
 * the environment's cap, or "scalar" for a name the library does not know.
 *
 * With --stay the cap is never changed: the same weights are compressed,
 * decoded, hashed, widened and column-scaled at the environment's level
 * only, for scripts/check_isa.sh, which runs this under gdb and fails if any
 * instruction above that level executes. */
#include <stdlib.h>
#include <string.h>
#include "codec_kernels.h"
#include "hash.h"
#include "microscale.h"
#include "planes.h"
#include "widen.h"
#include "testutil.h"

#define NVARIANT 4
#define NMETHOD 3

typedef struct sample {
    size_t n;
    ptwm_tensor_desc *desc[NVARIANT];
    uint8_t *bytes[NVARIANT]; /* each variant's tensors, back to back */
} sample;

static const char *const variant_names[NVARIANT] = {"bf16", "f32", "f16", "pruned bf16"};
static const int methods[NMETHOD] = {PTWM_METHOD_MICROSCALE, PTWM_METHOD_HUFFMAN, PTWM_METHOD_RANS};

static void check_names(void) {
    int l;
    ptwm_isa got;
    for (l = 0; l <= PTWM_ISA_BEST; l++) {
        ptwm_error e = ptwm_isa_from_name(ptwm_isa_name((ptwm_isa)l), &got, NULL);
        CHECK_MSG(e == PTWM_OK && got == (ptwm_isa)l, "level %d (%s) does not parse back", l,
                  ptwm_isa_name((ptwm_isa)l));
    }
    CHECK(strcmp(ptwm_isa_name(PTWM_ISA_SCALAR), "scalar") == 0);
    CHECK(strcmp(ptwm_isa_name(PTWM_ISA_AVX512VBMI), "avx512vbmi") == 0);
    CHECK(strcmp(ptwm_isa_name((ptwm_isa)99), "?") == 0);
    CHECK(ptwm_isa_from_name("avx3", &got, NULL) == PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_isa_from_name("AVX2x", &got, NULL) == PTWM_ERR_INVALID_ARG);
    CHECK(ptwm_isa_from_name(NULL, &got, NULL) == PTWM_ERR_INVALID_ARG);
}

/* The first answer, before any call set a cap, follows PTWM_ISA. */
static void check_env(const char *env, ptwm_isa first, ptwm_isa best) {
    ptwm_isa want = PTWM_ISA_BEST;
    if (env && *env && ptwm_isa_from_name(env, &want, NULL) != PTWM_OK) want = PTWM_ISA_SCALAR;
    if (want > best) want = best;
    CHECK_MSG(first == want, "PTWM_ISA=%s: first level %s, expected %s", env ? env : "(unset)",
              ptwm_isa_name(first), ptwm_isa_name(want));
}

static uint8_t *load_sample(sample *s) {
    const char *dir = getenv("PTWM_SOURCE_DIR");
    char path[4096];
    ptwm_st *st = NULL;
    ptwm_err err;
    size_t i, v, total = 0, off;
    snprintf(path, sizeof(path), "%s/samples/posenet.bf16.safetensors", dir ? dir : ".");
    CHECK_MSG(ptwm_st_open(path, PTWM_OPEN_MMAP, &st, &err) == PTWM_OK, "%s: %s", path,
              err.message);
    if (!st) return NULL;
    s->n = ptwm_st_count(st);
    for (i = 0; i < s->n; i++) {
        ptwm_tensor_info ti;
        ptwm_st_tensor(st, i, &ti, NULL);
        total += ti.nbytes;
    }
    for (v = 0; v < NVARIANT; v++) {
        s->desc[v] = (ptwm_tensor_desc *)calloc(s->n, sizeof(ptwm_tensor_desc));
        s->bytes[v] = (uint8_t *)malloc(v == 1 ? 2 * total : total);
    }
    for (i = 0, off = 0; i < s->n; i++) {
        ptwm_tensor_info ti;
        size_t k, ne;
        uint8_t *b;
        ptwm_st_tensor(st, i, &ti, NULL);
        ne = (size_t)ti.nbytes / 2;
        memcpy(s->bytes[0] + off, ti.data, ne * 2);
        ptwm_bf16_to_f32((const uint16_t *)ti.data, (float *)(void *)(s->bytes[1] + 2 * off), ne);
        memcpy(s->bytes[2] + off, ti.data, ne * 2);
        /* pruned: 2 of every 5 elements become zero, keeping the sign */
        b = s->bytes[3] + off;
        memcpy(b, ti.data, ne * 2);
        for (k = 0; k < ne; k++) {
            if (k % 5 < 2) {
                b[2 * k] = 0;
                b[2 * k + 1] &= 0x80;
            }
        }
        for (v = 0; v < NVARIANT; v++) {
            ptwm_tensor_desc *d = &s->desc[v][i];
            d->name = ti.name;
            d->dtype = v == 1 ? PTWM_DTYPE_F32 : v == 2 ? PTWM_DTYPE_F16 : PTWM_DTYPE_BF16;
            d->ndim = ti.ndim;
            d->shape = ti.shape;
            d->nbytes = v == 1 ? 2 * ti.nbytes : ti.nbytes;
            d->data = s->bytes[v] + (v == 1 ? 2 * off : off);
        }
        off += ti.nbytes;
    }
    /* The names and shapes stay with the open file: keep it for the test's life. */
    return (uint8_t *)st;
}

static void *compress_at(const sample *s, size_t v, int method, size_t *len) {
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_err err;
    void *out = NULL;
    p.method = method;
    p.threads = 1;
    CHECK_MSG(ptwm_compress_blob(s->desc[v], s->n, NULL, &p, &out, len, &err) == PTWM_OK,
              "%s, method %d, level %s: %s", variant_names[v], method,
              ptwm_isa_name(ptwm_isa_level()), err.message);
    return out;
}

/* Every tensor of blob decodes at the current level to the variant's bytes. */
static void decode_check(const sample *s, size_t v, int method, const void *blob, size_t len) {
    ptwm_reader *r = NULL;
    ptwm_err err;
    size_t i;
    CHECK_MSG(ptwm_reader_open_memory(blob, len, "isa", &r, &err) == PTWM_OK, "%s", err.message);
    if (!r) return;
    ptwm_reader_set_threads(r, 1);
    for (i = 0; i < s->n; i++) {
        const ptwm_tensor_desc *d = &s->desc[v][i];
        uint8_t *got = (uint8_t *)malloc(d->nbytes);
        ptwm_error e = ptwm_reader_decode(r, i, got, d->nbytes, &err);
        CHECK_MSG(e == PTWM_OK && memcmp(got, d->data, d->nbytes) == 0,
                  "%s, method %d, level %s: tensor %s does not decode to its bytes (%s)",
                  variant_names[v], method, ptwm_isa_name(ptwm_isa_level()), d->name,
                  e == PTWM_OK ? "bytes differ" : err.message);
        free(got);
    }
    ptwm_reader_close(r);
}

/* Round trips at the level in effect, the cap untouched. */
static void check_stay(const sample *s) {
    size_t v, m;
    for (v = 0; v < NVARIANT; v++) {
        for (m = 0; m < NMETHOD; m++) {
            size_t len = 0;
            void *blob = compress_at(s, v, methods[m], &len);
            if (blob) decode_check(s, v, methods[m], blob, len);
            free(blob);
        }
    }
}

static void check_levels(const sample *s, ptwm_isa best) {
    size_t v, m;
    int l;
    for (v = 0; v < NVARIANT; v++) {
        for (m = 0; m < NMETHOD; m++) {
            size_t ref_len = 0;
            void *ref;
            ptwm_set_isa_limit(PTWM_ISA_SCALAR);
            ref = compress_at(s, v, methods[m], &ref_len);
            if (!ref) continue;
            for (l = 0; l <= (int)best; l++) {
                size_t len = 0;
                void *blob;
                ptwm_set_isa_limit((ptwm_isa)l);
                blob = compress_at(s, v, methods[m], &len);
                CHECK_MSG(blob && len == ref_len && memcmp(blob, ref, len) == 0,
                          "%s, method %d: level %s writes %zu bytes unlike scalar's %zu",
                          variant_names[v], methods[m], ptwm_isa_name((ptwm_isa)l), len, ref_len);
                decode_check(s, v, methods[m], ref, ref_len);
                free(blob);
            }
            free(ref);
        }
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* Each layer's kernel table in effect (the codec's, the platform's hashes,
 * the load layer's widening) is the capped level's, and names a kernel for
 * every entry: only the packed-table rANS decoder and its table build are
 * absent below AVX512 (rans_decode.c then builds the split table), and
 * hash_avx2.c's states exist only in x86 builds. A field added to a table
 * without a line in its layer's fill function fails here, before any kernel
 * would call through it. */
static void check_table(ptwm_isa best) {
    int l;
    for (l = 0; l <= (int)best; l++) {
        const ptwm_codec_kernels *k;
        const ptwm_hash_kernels *h;
        const ptwm_widen_impl *w;
        ptwm_set_isa_limit((ptwm_isa)l);
        k = ptwm_codec_kern();
        h = ptwm_hash_kern();
        w = ptwm_widen_kern();
        CHECK_MSG(k->level == (ptwm_isa)l && h->level == (ptwm_isa)l,
                  "cap %s: the codec's table is level %s's, the hashes' level %s's",
                  ptwm_isa_name((ptwm_isa)l), ptwm_isa_name(k->level), ptwm_isa_name(h->level));
        CHECK_MSG(k->rans_dec_o0 && k->rans_dec_o1 && k->rans_enc_o0 && k->skip_seen &&
                      k->huf_encode && k->huf_loops && k->huf_bits && k->plane_loops &&
                      k->colscale_loops && k->sparse_compact && k->sparse_expand &&
                      k->joint_split && k->joint_merge && k->joint_bf16 && k->joint_scan &&
                      k->zero_sample && h->xxh_oneshot && w->name && w->bf16_to_f32 &&
                      w->f16_to_f32 && w->f32_to_bf16,
                  "level %s: a kernel table entry is empty", ptwm_isa_name((ptwm_isa)l));
        CHECK_MSG((k->rans_dec_o0_packed != NULL) == (l >= PTWM_ISA_AVX512) &&
                      (k->rans_dtab_packed != NULL) == (l >= PTWM_ISA_AVX512),
                  "level %s: packed rANS decoder %s, its table build %s",
                  ptwm_isa_name((ptwm_isa)l), k->rans_dec_o0_packed ? "present" : "absent",
                  k->rans_dtab_packed ? "present" : "absent");
        CHECK(h->xxh_vec == (l >= PTWM_ISA_AVX2));
        CHECK_MSG(strcmp(w->name, l >= PTWM_ISA_AVX2 ? "avx2+f16c" : "generic") == 0,
                  "level %s widens with %s", ptwm_isa_name((ptwm_isa)l), w->name);
#ifdef PTWM_CPU_X86
        CHECK(h->xxh_vec_update != NULL);
#endif
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* The mechanism every layer's table uses (kernels.h), on a set of this
 * test's own: registered at its first use under a cap, it publishes the
 * capped level's table, follows each later cap, and never fills a level
 * above the CPU's best. */
static int test_tables[PTWM_ISA_BEST + 1];
static void test_fill(void *table, ptwm_isa level) { *(int *)table = 100 + (int)level; }
static ptwm_kernel_set test_set = {"test", sizeof(int), test_fill, test_tables, NULL, NULL};

static void check_registration(ptwm_isa best) {
    ptwm_isa first = best > PTWM_ISA_SCALAR ? PTWM_ISA_SSSE3 : PTWM_ISA_SCALAR;
    int l;
    ptwm_set_isa_limit(first);
    CHECK_MSG(*(const int *)ptwm_kernel_table(&test_set) == 100 + (int)first,
              "a set registered under cap %s publishes level %d", ptwm_isa_name(first),
              *(const int *)ptwm_kernel_table(&test_set) - 100);
    for (l = PTWM_ISA_BEST; l >= 0; l--) {
        int want = PTWM_MIN(l, (int)best);
        ptwm_set_isa_limit((ptwm_isa)l);
        CHECK_MSG(*(const int *)ptwm_kernel_table(&test_set) == 100 + want,
                  "cap %s: the registered set publishes level %d, expected %d",
                  ptwm_isa_name((ptwm_isa)l), *(const int *)ptwm_kernel_table(&test_set) - 100,
                  want);
    }
    for (l = 0; l <= PTWM_ISA_BEST; l++)
        CHECK_MSG(test_tables[l] == (l <= (int)best ? 100 + l : 0),
                  "level %d's table holds %d", l, test_tables[l]);
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* Widening kernel k of n values from the sample: BF16 and F16 to F32 (into
 * f), F32 to BF16 (into h). */
static void widen_run(const sample *s, int k, size_t n, float *f, uint16_t *h) {
    const uint16_t *b16 = (const uint16_t *)(const void *)s->bytes[0];
    if (k == 0) ptwm_bf16_to_f32(b16, f, n);
    if (k == 1) ptwm_f16_to_f32(b16, f, n);
    if (k == 2) ptwm_f32_to_bf16((const float *)(const void *)s->bytes[1], h, n);
}

/* The public widening calls: the same bits at every level. */
static void check_widen(const sample *s, ptwm_isa best) {
    size_t n = 0, i;
    float *ref32, *got32;
    uint16_t *ref16, *got16;
    int l, k;
    for (i = 0; i < s->n; i++) n += (size_t)s->desc[0][i].nbytes / 2;
    ref32 = (float *)malloc(4 * n);
    got32 = (float *)malloc(4 * n);
    ref16 = (uint16_t *)malloc(2 * n);
    got16 = (uint16_t *)malloc(2 * n);
    for (k = 0; k < 3; k++) {
        ptwm_set_isa_limit(PTWM_ISA_SCALAR);
        widen_run(s, k, n, ref32, ref16);
        for (l = 1; l <= (int)best; l++) {
            ptwm_set_isa_limit((ptwm_isa)l);
            widen_run(s, k, n, got32, got16);
            CHECK_MSG(k == 2 ? memcmp(got16, ref16, 2 * n) == 0 : memcmp(got32, ref32, 4 * n) == 0,
                      "widening kernel %d at level %s differs from scalar", k,
                      ptwm_isa_name((ptwm_isa)l));
        }
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
    free(ref32);
    free(got32);
    free(ref16);
    free(got16);
}

/* The column-scale loops on the sample's first BF16 exponents with `cols`
 * columns, into out (4n + cols bytes): residuals, scales, the inverse, and
 * the BF16 inverse of the elements with residuals in their exponent fields.
 * Both inverses must give the source back. */
#define COLS_MAX_N ((size_t)1 << 20)
static void colscale_run(const sample *s, size_t cols, uint8_t *out) {
    const uint8_t *src = s->bytes[0];
    size_t n = 0, i;
    uint8_t *x, *r = out, *d, *y, *el;
    uint32_t *sum = (uint32_t *)malloc(cols * sizeof(*sum));
    uint16_t *s7 = (uint16_t *)malloc((cols + 256) * sizeof(*s7));
    for (i = 0; i < s->n; i++) n += (size_t)s->desc[0][i].nbytes / 2;
    n = PTWM_MIN(n, COLS_MAX_N);
    d = r + n;
    y = d + cols;
    el = y + n;
    x = (uint8_t *)malloc(n);
    for (i = 0; i < n; i++) x[i] = (uint8_t)(ptwm_load_le16(src + 2 * i) >> 7);
    ptwm_colscale_forward(x, n, cols, r, d, sum);
    ptwm_colscale_inverse(r, d, n, cols, y);
    for (i = 0; i < n; i++)
        ptwm_store_le16(el + 2 * i, (uint16_t)((ptwm_load_le16(src + 2 * i) & 0x807f) | r[i] << 7));
    ptwm_colscale_inverse_bf16(el, n, d, cols, s7);
    CHECK_MSG(memcmp(y, x, n) == 0 && memcmp(el, src, 2 * n) == 0,
              "level %s, %zu columns: the column-scale inverses do not give the source back",
              ptwm_isa_name(ptwm_isa_level()), cols);
    free(x);
    free(sum);
    free(s7);
}

/* Rows narrower than the loops' span, around it, and wide. */
static const size_t col_counts[] = {3, 255, 257, 1000};
#define COLS_OUT_LEN(cols) (4 * COLS_MAX_N + (cols))

/* The column-scale loops give scalar's bytes at every level. */
static void check_colscale(const sample *s, ptwm_isa best) {
    size_t c;
    int l;
    for (c = 0; c < PTWM_ARRAY_LEN(col_counts); c++) {
        size_t len = COLS_OUT_LEN(col_counts[c]);
        uint8_t *ref = (uint8_t *)calloc(1, len), *got = (uint8_t *)calloc(1, len);
        ptwm_set_isa_limit(PTWM_ISA_SCALAR);
        colscale_run(s, col_counts[c], ref);
        for (l = 1; l <= (int)best; l++) {
            ptwm_set_isa_limit((ptwm_isa)l);
            memset(got, 0, len);
            colscale_run(s, col_counts[c], got);
            CHECK_MSG(memcmp(got, ref, len) == 0,
                      "%zu columns: the column-scale loops at level %s differ from scalar",
                      col_counts[c], ptwm_isa_name((ptwm_isa)l));
        }
        free(ref);
        free(got);
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* Joint planes with escapes (exponents outside the 15 most frequent) at the
 * edges of the escape scan's 64-symbol steps (and the SSSE3 merge's 16 of
 * them, which make up its mask words), in planes shorter than a step, one
 * longer, several longer and across the BF16 merge's strips of 8192
 * elements: at every level the split gives scalar's planes, and both merges
 * give the elements back with the escape count. */
static void joint_escapes_run(size_t n, const size_t *at, size_t nat, uint8_t *planes) {
    uint8_t *ex = (uint8_t *)malloc(n), *sm = (uint8_t *)malloc(n), *x = (uint8_t *)malloc(2 * n);
    uint8_t *j = planes, *nib = j + n, *side = nib + n / 2 + 1, *el = side + PTWM_JOINT_MAP + n;
    size_t i, k, ns, esc = 0;
    for (i = 0; i < n; i++) {
        ex[i] = (uint8_t)(100 + i % 15);
        sm[i] = (uint8_t)(i * 37 + 11);
    }
    for (k = 0; k < nat; k++)
        if (at[k] < n) {
            ex[at[k]] = (uint8_t)(200 + k);
            esc++;
        }
    ns = ptwm_joint_split(ex, sm, n, NULL, j, nib, side);
    CHECK_MSG(ns == PTWM_JOINT_MAP + esc, "level %s, %zu elements: %zu side bytes for %zu escapes",
              ptwm_isa_name(ptwm_isa_level()), n, ns, esc);
    CHECK_MSG(ptwm_joint_merge_bf16(j, nib, side, ns, n, el) == esc &&
                  ptwm_joint_merge(j, nib, side, ns, n, x, x + n) == esc,
              "level %s, %zu elements: the merges do not count %zu escapes",
              ptwm_isa_name(ptwm_isa_level()), n, esc);
    for (i = 0; i < n; i++)
        CHECK_MSG(el[2 * i] == (uint8_t)((ex[i] & 1) << 7 | (sm[i] & 0x7f)) &&
                      el[2 * i + 1] == (uint8_t)((sm[i] & 0x80) | ex[i] >> 1) && x[i] == ex[i] &&
                      x[n + i] == sm[i],
                  "level %s, %zu elements: element %zu does not merge back",
                  ptwm_isa_name(ptwm_isa_level()), n, i);
    free(ex);
    free(sm);
    free(x);
}

static void check_joint_escapes(ptwm_isa best) {
    static const size_t sizes[] = {40, 64, 65, 200, 4103, 8269, 16451};
    static const size_t at[] = {0,    1,    15,   16,   47,   48,   62,    63,    64,
                                65,   127,  128,  191,  4038, 4039, 4102,  8191,  8192,
                                8193, 8255, 8256, 8268, 16383, 16384, 16450};
    size_t k;
    int l;
    for (k = 0; k < PTWM_ARRAY_LEN(sizes); k++) {
        size_t n = sizes[k], len = 5 * n + PTWM_JOINT_MAP + 1;
        uint8_t *ref = (uint8_t *)calloc(1, len), *got = (uint8_t *)calloc(1, len);
        ptwm_set_isa_limit(PTWM_ISA_SCALAR);
        joint_escapes_run(n, at, PTWM_ARRAY_LEN(at), ref);
        for (l = 1; l <= (int)best; l++) {
            ptwm_set_isa_limit((ptwm_isa)l);
            memset(got, 0, len);
            joint_escapes_run(n, at, PTWM_ARRAY_LEN(at), got);
            CHECK_MSG(memcmp(got, ref, len) == 0,
                      "%zu elements: the joint planes at level %s differ from scalar", n,
                      ptwm_isa_name((ptwm_isa)l));
        }
        free(ref);
        free(got);
    }
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* The sparse test's count of zeros among every 8th element, at every level
 * against a count written here: +0 and -0 count, the smallest magnitudes
 * (1, the sign bit's neighbours) do not, and zeros off the sampled
 * positions are not seen. Lengths around the kernels' 16 and 32 elements a
 * step. */
static void check_zero_sample(ptwm_isa best) {
    static const size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4103};
    static const uint32_t f32[] = {0, 0x80000000u, 1, 0x80000001u, 0x00800000u, 0x3f800000u,
                                   0x7fffffffu, 0x40000000u};
    static const uint16_t b16[] = {0, 0x8000, 1, 0x8001, 0x0080, 0x3f80, 0x7fff, 0x4000};
    size_t k, i;
    unsigned w;
    int l;
    uint8_t *buf = (uint8_t *)malloc(4 * 4103);
    uint32_t seed = 7;
    for (w = 2; w <= 4; w += 2)
        for (k = 0; k < PTWM_ARRAY_LEN(sizes); k++) {
            size_t n = sizes[k], want = 0, step;
            for (i = 0; i < n; i++) {
                unsigned pick;
                seed = seed * 1103515245u + 12345u;
                pick = (seed >> 16) % 8;
                if (w == 2) ptwm_store_le16(buf + 2 * i, b16[pick]);
                else ptwm_store_le32(buf + 4 * i, f32[pick]);
                if (i % 8 == 0 && pick < 2) want++;
            }
            for (l = 0; l <= (int)best; l++) {
                ptwm_set_isa_limit((ptwm_isa)l);
                CHECK_MSG(ptwm_count_zero_elems(buf, n, w, 8) == want,
                          "width %u, %zu elements, level %s: %zu sampled zeros, expected %zu", w,
                          n, ptwm_isa_name((ptwm_isa)l), ptwm_count_zero_elems(buf, n, w, 8),
                          want);
            }
            /* other steps take the plain loop */
            for (step = 1, want = 0, i = 0; i < n; i++)
                want += w == 2 ? (ptwm_load_le16(buf + 2 * i) & 0x7fffu) == 0
                               : (ptwm_load_le32(buf + 4 * i) & 0x7fffffffu) == 0;
            CHECK(ptwm_count_zero_elems(buf, n, w, step) == want);
        }
    free(buf);
    ptwm_set_isa_limit(PTWM_ISA_BEST);
}

/* The command line refuses a PTWM_ISA it does not know, and --version names
 * the level in effect. */
static void check_cli(void) {
    const char *bin = getenv("PTWM_BIN");
    char out[4200], errp[4200];
    uint8_t *text;
    size_t len;
    int rc;
    if (!bin) {
        fprintf(stderr, "test_isa: PTWM_BIN unset, the command line is not checked\n");
        return;
    }
    snprintf(out, sizeof(out), "%s/out", tu_tmpdir());
    snprintf(errp, sizeof(errp), "%s/err", tu_tmpdir());
    setenv("PTWM_ISA", "avx3", 1);
    rc = tu_run_cli(bin, out, errp, "--version");
    text = tu_read_file(errp, &len);
    if (text) text[len] = 0; /* tu_read_file leaves a byte spare */
    CHECK_MSG(rc == 2 && text &&
                  strstr((const char *)text, "PTWM_ISA='avx3' is not an instruction set"),
              "PTWM_ISA=avx3: exit %d, stderr %s", rc, text ? (const char *)text : "(none)");
    free(text);
    setenv("PTWM_ISA", "scalar", 1);
    rc = tu_run_cli(bin, out, errp, "--version");
    text = tu_read_file(out, &len);
    if (text) text[len] = 0;
    CHECK_MSG(rc == 0 && text && strstr((const char *)text, "(instruction set scalar)"),
              "PTWM_ISA=scalar --version: exit %d, stdout %s", rc,
              text ? (const char *)text : "(none)");
    free(text);
    unsetenv("PTWM_ISA");
}

int main(int argc, char **argv) {
    ptwm_isa first = ptwm_isa_level(), best;
    sample s;
    ptwm_st *st;
    size_t v;
    int l;
    if (argc > 1 && strcmp(argv[1], "--stay") == 0) {
        memset(&s, 0, sizeof(s));
        st = (ptwm_st *)(void *)load_sample(&s);
        if (st) {
            size_t i, n = 0;
            float *f;
            uint16_t *h;
            int k;
            for (i = 0; i < s.n; i++) n += (size_t)s.desc[0][i].nbytes / 2;
            f = (float *)malloc(4 * n);
            h = (uint16_t *)malloc(2 * n);
            check_stay(&s);
            for (k = 0; k < 3; k++) widen_run(&s, k, n, f, h);
            for (k = 0; k < (int)PTWM_ARRAY_LEN(col_counts); k++) {
                uint8_t *out = (uint8_t *)malloc(COLS_OUT_LEN(col_counts[k]));
                colscale_run(&s, col_counts[k], out);
                free(out);
            }
            free(f);
            free(h);
        }
        for (v = 0; v < NVARIANT; v++) {
            free(s.desc[v]);
            free(s.bytes[v]);
        }
        ptwm_st_close(st);
        CHECK(ptwm_isa_level() == first);
        return tu_finish("isa --stay");
    }
    check_names();
    best = ptwm_set_isa_limit(PTWM_ISA_BEST);
    check_env(getenv("PTWM_ISA"), first, best);
    check_cli();
    fprintf(stderr, "test_isa: this machine's best level is %s\n", ptwm_isa_name(best));
    CHECK(ptwm_isa_level() == best);
    for (l = 0; l <= PTWM_ISA_BEST; l++) {
        ptwm_isa want = l < (int)best ? (ptwm_isa)l : best;
        CHECK_MSG(ptwm_set_isa_limit((ptwm_isa)l) == want && ptwm_isa_level() == want,
                  "cap %s: level %s, expected %s", ptwm_isa_name((ptwm_isa)l),
                  ptwm_isa_name(ptwm_isa_level()), ptwm_isa_name(want));
    }
    CHECK(ptwm_set_isa_limit((ptwm_isa)-1) == PTWM_ISA_SCALAR);
    CHECK(ptwm_set_isa_limit((ptwm_isa)99) == best);
    check_registration(best);
    check_table(best);
    check_joint_escapes(best);
    check_zero_sample(best);
#ifdef PTWM_NO_SIMD
    CHECK_MSG(best == PTWM_ISA_SCALAR, "portable build reports %s", ptwm_isa_name(best));
#endif

    memset(&s, 0, sizeof(s));
    st = (ptwm_st *)(void *)load_sample(&s);
    if (st) {
        check_levels(&s, best);
        check_widen(&s, best);
        check_colscale(&s, best);
    }
    for (v = 0; v < NVARIANT; v++) {
        free(s.desc[v]);
        free(s.bytes[v]);
    }
    ptwm_st_close(st);
    return tu_finish("isa");
}
