/* Plain header entries (safetensors_plain.c) are scanned without jansson:
 * the result must be the one jansson's path gives, on every input. Each
 * header here is parsed both ways (ptwm_st_set_plain) and compared: the same
 * error code and message, or the same tensors (name, dtype, shape, offsets,
 * order) and metadata. Headers: every corpus file's and every hostile
 * file's, entries at the edges of the plain form, and thousands of byte
 * mutations of real headers. The scanner must also take the entries real
 * files are made of (else the comparison would test jansson against itself). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "safetensors.h"
#include "testutil.h"

static int compared, differed;

static void compare(const char *json, size_t len, const char *what) {
    ptwm_st_parsed a, b;
    ptwm_err ea, eb;
    ptwm_error ra, rb;
    size_t i;
    int same;
    ptwm_st_set_plain(1);
    ra = ptwm_st_parse_header(json, len, "h", &a, &ea);
    ptwm_st_set_plain(0);
    rb = ptwm_st_parse_header(json, len, "h", &b, &eb);
    ptwm_st_set_plain(1);
    same = ra == rb;
    if (same && ra) same = strcmp(ea.message, eb.message) == 0;
    if (same && !ra) {
        same = a.n == b.n && a.nmeta == b.nmeta && a.data_len == b.data_len;
        for (i = 0; same && i < a.n; i++) {
            const ptwm_st_entry *x = &a.t[i], *y = &b.t[i];
            same = strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim &&
                   x->begin == y->begin && x->end == y->end && x->order == y->order &&
                   memcmp(x->shape, y->shape, x->ndim * sizeof(uint64_t)) == 0 &&
                   ptwm_st_parsed_find(&a, x->name) == (ptrdiff_t)i;
        }
        for (i = 0; same && i < a.nmeta; i++)
            same = strcmp(a.meta[i].key, b.meta[i].key) == 0 &&
                   strcmp(a.meta[i].value, b.meta[i].value) == 0;
    }
    compared++;
    if (!same) differed++;
    CHECK_MSG(same, "%s: plain path %s (%s), jansson path %s (%s)", what, ptwm_error_name(ra),
              ra ? ea.message : "ok", ptwm_error_name(rb), rb ? eb.message : "ok");
    ptwm_st_parsed_free(&a);
    ptwm_st_parsed_free(&b);
}

/* The header JSON of a safetensors file's bytes (NULL if it has none). */
static const char *header_of(const uint8_t *buf, size_t len, size_t *hlen) {
    uint64_t n = 0;
    int i;
    if (len < 8) return NULL;
    for (i = 7; i >= 0; i--) n = n << 8 | buf[i];
    if (n > len - 8) return NULL;
    *hlen = (size_t)n;
    return (const char *)buf + 8;
}

/* Mutations of a real header: a byte changed, deleted or inserted at random
 * places, often next to the structure (quotes, digits, brackets). */
static void mutations(const char *json, size_t len, const char *file, int count) {
    static const char picks[] = "\"\\:,{}[]0123456789 \t\n-+.eE_aZ\x01\x7f\xc3\xff";
    char *m = (char *)malloc(len + 2), what[300];
    uint64_t rng = 0x5eed ^ len;
    int k;
    for (k = 0; k < count && m; k++) {
        size_t at = (size_t)(tu_rand(&rng) % len), n = len;
        char c = picks[tu_rand(&rng) % (sizeof(picks) - 1)];
        memcpy(m, json, len);
        switch (tu_rand(&rng) % 3) {
        case 0: m[at] = c; break;
        case 1: memmove(m + at, m + at + 1, len - at - 1); n--; break;
        default: memmove(m + at + 1, m + at, len - at); m[at] = c; n++; break;
        }
        snprintf(what, sizeof(what), "%s mutation %d at byte %zu", file, k, at);
        compare(m, n, what);
    }
    free(m);
}

static const char *const edges[] = {
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{ \"a\" : { \"shape\" : [ 2 ] , \"data_offsets\" : [ 0 , 8 ] , \"dtype\" : \"F32\" } }",
    "{\"a\":{\"data_offsets\":[0,8],\"dtype\":\"F32\",\"shape\":[2]}}\n\t\r ",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[00,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"U8\",\"shape\":[999999999999999999],\"data_offsets\":[0,999999999999999999]}}",
    "{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775807],\"data_offsets\":[0,9223372036854775807]}}",
    "{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
    "{\"a\\u0062\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"\xc3\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"__metadata__\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2] \"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":F32,\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}\x0c}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8\x01]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"BF16\",\"shape\":[3,1],\"data_offsets\":[8,14]}}",
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"BF16\",\"shape\":[3,1],\"data_offsets\":[4,10]}}",
    "{\"a\":{\"dtype\":\"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"a\":{\"dtype\":\"\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{\"a\":[],\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
    "{}",
};

/* $PTWM_SOURCE_DIR (set by ctest), else next to this source file. */
static const char *hostile_dir(void) {
    static char buf[2048];
    const char *src = getenv("PTWM_SOURCE_DIR");
    const char *slash = strrchr(__FILE__, '/');
    if (src) snprintf(buf, sizeof(buf), "%s/tests/hostile/safetensors", src);
    else snprintf(buf, sizeof(buf), "%.*s/hostile/safetensors", slash ? (int)(slash - __FILE__) : 1,
                  slash ? __FILE__ : ".");
    return buf;
}

static void hostile_headers(void) {
    char path[4096];
    struct dirent *de;
    DIR *d = opendir(hostile_dir());
    int n = 0;
    CHECK_MSG(d != NULL, "no directory %s", hostile_dir());
    while (d && (de = readdir(d))) {
        size_t len = 0, hlen = 0;
        uint8_t *buf;
        const char *json;
        if (!strstr(de->d_name, ".safetensors")) continue;
        snprintf(path, sizeof(path), "%s/%s", hostile_dir(), de->d_name);
        buf = tu_read_file(path, &len);
        json = buf ? header_of(buf, len, &hlen) : NULL;
        if (json) {
            compare(json, hlen, de->d_name);
            n++;
        }
        free(buf);
    }
    if (d) closedir(d);
    CHECK_MSG(n > 40, "only %d hostile headers", n);
}

int main(void) {
    const char *const *files = tu_corpus_files();
    ptwm_st_plain pe;
    char what[300];
    size_t i, hlen = 0, len = 0;
    const char *json;
    uint8_t *buf;
    /* a real file's tensor entries are plain (its first key may be __metadata__) */
    buf = tu_read_file(tu_corpus_path("emotion.bf16.safetensors"), &len);
    json = buf ? header_of(buf, len, &hlen) : NULL;
    if (json) {
        ptwm_st_parsed p;
        size_t k, plain = 0;
        CHECK(ptwm_st_parse_header(json, hlen, "h", &p, NULL) == PTWM_OK && p.n > 10);
        for (k = 0; k < p.n; k++) {
            char quoted[PTWM_MAX_NAME + 4];
            const char *at;
            snprintf(quoted, sizeof(quoted), "\"%s\":", p.t[k].name);
            at = strstr(json, quoted);
            plain += at && ptwm_st_plain_entry(json, hlen, (size_t)(at - json), &pe) == 1 &&
                     pe.name_len == strlen(p.t[k].name) && pe.offs[0] == p.t[k].begin;
        }
        CHECK_MSG(plain == p.n, "%zu of %zu entries plain", plain, p.n);
        ptwm_st_parsed_free(&p);
    }
    free(buf);
    for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        snprintf(what, sizeof(what), "edge %zu", i);
        compare(edges[i], strlen(edges[i]), what);
    }
    hostile_headers();
    for (i = 0; files && files[i]; i++) {
        buf = tu_read_file(tu_corpus_path(files[i]), &len);
        json = buf ? header_of(buf, len, &hlen) : NULL;
        CHECK_MSG(json != NULL, "%s: no header", files[i]);
        if (json) {
            compare(json, hlen, files[i]);
            mutations(json, hlen, files[i], 400);
        }
        free(buf);
    }
    printf("compared %d headers, %d differed\n", compared, differed);
    return tu_finish("st_plain");
}
