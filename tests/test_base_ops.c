/* The base through the container's own interface (container_base.h): a base
 * that is no source at all, tensors in memory behind a table of operations,
 * codes a file byte for byte as a source over the same tensors does and
 * decodes it; the container knows the base only through the table (its
 * label in messages, its read failures and payload hashes passed on), and a
 * serial base is never read by two threads at once. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "container_base.h"
#include "hash.h"
#include "reader.h"
#include "testutil.h"
#include "writer.h"

enum { NW = 1 << 16, NX = 3000, CHUNK = 16384 };

static float base_w[NW], tuned_w[NW], tuned_x[NX];
static const uint64_t shp_w[1] = {NW}, shp_x[1] = {NX};

/* Tensors in memory behind the container's table. */
typedef struct mem_base {
    const ptwm_tensor_desc *t;
    size_t n;
    int fail_read;               /* reads fail with PTWM_ERR_IO */
    int wrong_hash;              /* tensor_hash gives a hash of other bytes */
    int inside, most, reads;     /* reads under way, the most at once, reads in all */
} mem_base;

static ptwm_error mb_find(void *h, const char *name, size_t *index) {
    const mem_base *m = (const mem_base *)h;
    size_t i;
    for (i = 0; i < m->n; i++)
        if (strcmp(m->t[i].name, name) == 0) {
            *index = i;
            return PTWM_OK;
        }
    return PTWM_ERR_NOT_FOUND;
}
static ptwm_error mb_tensor(void *h, size_t index, ptwm_tensor_info *out) {
    const ptwm_tensor_desc *d = &((const mem_base *)h)->t[index];
    out->name = d->name;
    out->dtype = d->dtype;
    out->ndim = d->ndim;
    out->shape = d->shape;
    out->nbytes = d->nbytes;
    out->coded_bytes = 0;
    out->data = NULL;
    return PTWM_OK;
}
static int mb_tensor_hash(void *h, size_t index, uint8_t hash[16]) {
    const mem_base *m = (const mem_base *)h;
    ptwm_xxh128_oneshot(m->t[index].data, (size_t)m->t[index].nbytes - (m->wrong_hash ? 4 : 0),
                        hash);
    return 1;
}
/* Slow enough that two threads reading at once overlap. */
static ptwm_error mb_read(void *h, size_t index, uint64_t offset, void *dst, size_t len,
                          ptwm_err *err) {
    mem_base *m = (mem_base *)h;
    int now;
    if (m->fail_read) return ptwm_fail(err, PTWM_ERR_IO, "no bytes today");
    now = __atomic_add_fetch(&m->inside, 1, __ATOMIC_SEQ_CST);
    if (now > __atomic_load_n(&m->most, __ATOMIC_SEQ_CST))
        __atomic_store_n(&m->most, now, __ATOMIC_SEQ_CST);
    usleep(2000);
    memcpy(dst, (const uint8_t *)m->t[index].data + offset, len);
    __atomic_add_fetch(&m->reads, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&m->inside, 1, __ATOMIC_SEQ_CST);
    return PTWM_OK;
}
static const char *mb_label(void *h) {
    (void)h;
    return "mem-base";
}
static const ptwm_base_ops mb_ops = {mb_find, mb_tensor, mb_tensor_hash, mb_read, mb_label};

static void make_sets(void) {
    uint64_t s = 42;
    size_t i;
    for (i = 0; i < NW; i++) {
        /* weight-like: exponent near 2^-6, random sign and mantissa */
        uint64_t r = tu_rand(&s);
        uint32_t b = (uint32_t)(r & 1) << 31 | (uint32_t)(118 + (r >> 1) % 6) << 23 |
                     (uint32_t)(r >> 8 & 0x7fffff);
        memcpy(&base_w[i], &b, 4);
        b += (uint32_t)(tu_rand(&s) % 64) - 32; /* the fine-tune: the low bits moved */
        memcpy(&tuned_w[i], &b, 4);
    }
    for (i = 0; i < NX; i++) tuned_x[i] = (float)(tu_rand(&s) % 1000) / 7.0f;
}

/* Decoding tensor `name` of r gives want[0..n), or fails with code and msg. */
static void check_decode(ptwm_reader *r, const char *name, const void *want, size_t n,
                         ptwm_error code, const char *msg) {
    size_t idx;
    ptwm_err err;
    uint8_t *buf = (uint8_t *)malloc(n);
    CHECK(ptwm_reader_find(r, name, &idx, &err) == PTWM_OK);
    CHECK_ERR(ptwm_reader_decode(r, idx, buf, n, &err), &err, code, msg);
    if (code == PTWM_OK) CHECK_MSG(memcmp(buf, want, n) == 0, "%s differs", name);
    free(buf);
}

int main(void) {
    ptwm_tensor_desc base_d[1] = {{"w", PTWM_DTYPE_F32, 1, shp_w, base_w, sizeof(base_w)}};
    ptwm_tensor_desc tuned_d[2] = {{"w", PTWM_DTYPE_F32, 1, shp_w, tuned_w, sizeof(tuned_w)},
                                   {"x", PTWM_DTYPE_F32, 1, shp_x, tuned_x, sizeof(tuned_x)}};
    mem_base m = {base_d, 1, 0, 0, 0, 0, 0};
    ptwm_base table = {&mb_ops, &m, 0};
    ptwm_cparams p = PTWM_CPARAMS_DEFAULT;
    ptwm_source *src = NULL;
    ptwm_reader *r = NULL;
    ptwm_err err;
    void *via_src = NULL, *via_table = NULL, *plain = NULL;
    size_t len_src = 0, len_table = 0, len_plain = 0, idx;
    uint64_t based = 0;

    make_sets();
    p.chunk_size = CHUNK;
    p.threads = 2;
    /* The same file through a source (the public call) and through the table. */
    CHECK(ptwm_st_write(tu_tmp_path("base.safetensors"), base_d, 1, NULL, 0, &err) == PTWM_OK);
    CHECK(ptwm_source_open(tu_tmp_path("base.safetensors"), PTWM_SOURCE_AUTO, &src, &err) ==
          PTWM_OK);
    p.base = src;
    CHECK_MSG(ptwm_compress_blob(tuned_d, 2, NULL, &p, &via_src, &len_src, &err) == PTWM_OK, "%s",
              err.message);
    p.base = NULL;
    CHECK_MSG(ptwm_compress_blob_base(tuned_d, 2, NULL, &p, &table, &via_table, &len_table,
                                      &err) == PTWM_OK,
              "%s", err.message);
    CHECK(ptwm_compress_blob(tuned_d, 2, NULL, &p, &plain, &len_plain, &err) == PTWM_OK);
    CHECK(via_src && via_table && len_src == len_table &&
          memcmp(via_src, via_table, len_src) == 0);
    CHECK(len_table < len_plain); /* the base was used, and paid */
    CHECK(m.reads > 0);

    /* Decoded with the table as its base; "x", which the base lacks, was
     * coded without it. */
    CHECK(ptwm_reader_open_memory(via_table, len_table, "tuned", &r, &err) == PTWM_OK);
    if (r) {
        CHECK(ptwm_reader_find(r, "w", &idx, &err) == PTWM_OK);
        CHECK(ptwm_reader_tensor_base(r, idx, NULL, &based) == 1 && based > 0);
        CHECK(ptwm_reader_find(r, "x", &idx, &err) == PTWM_OK);
        CHECK(ptwm_reader_tensor_base(r, idx, NULL, NULL) == 0);
        check_decode(r, "w", tuned_w, sizeof(tuned_w), PTWM_ERR_BASE_MISSING,
                     "and no base was given");
        ptwm_reader_set_threads(r, 2);
        CHECK(ptwm_reader_use_base(r, &table, &err) == PTWM_OK);
        m.reads = m.most = 0;
        check_decode(r, "w", tuned_w, sizeof(tuned_w), PTWM_OK, NULL);
        check_decode(r, "x", tuned_x, sizeof(tuned_x), PTWM_OK, NULL);
        CHECK(m.reads >= 2);
        /* A serial base: two decoding threads, one read at a time. */
        table.serial = 1;
        CHECK(ptwm_reader_use_base(r, &table, &err) == PTWM_OK);
        m.reads = m.most = 0;
        check_decode(r, "w", tuned_w, sizeof(tuned_w), PTWM_OK, NULL);
        CHECK_MSG(m.most == 1 && m.reads >= 2, "serial base: %d reads, %d at once", m.reads,
                  m.most);
        /* What the table says reaches the caller: its read failures and its
         * hashes, under its label. */
        m.fail_read = 1;
        check_decode(r, "w", tuned_w, sizeof(tuned_w), PTWM_ERR_IO,
                     "its base 'mem-base': no bytes today");
        m.fail_read = 0;
        m.wrong_hash = 1;
        CHECK(ptwm_reader_use_base(r, &table, &err) == PTWM_OK);
        check_decode(r, "w", tuned_w, sizeof(tuned_w), PTWM_ERR_BASE_HASH,
                     "the base 'mem-base' holds one of XXH3-128");
        /* No base again. */
        CHECK(ptwm_reader_use_base(r, NULL, &err) == PTWM_OK);
        check_decode(r, "w", tuned_w, sizeof(tuned_w), PTWM_ERR_BASE_MISSING,
                     "and no base was given");
        ptwm_reader_close(r);
    }
    ptwm_source_close(src);
    ptwm_free(via_src);
    ptwm_free(via_table);
    ptwm_free(plain);
    return tu_finish("base_ops");
}
