/* A safetensors header entry in its plain form, scanned without jansson.
 *
 * Almost every header is written by the same serializers, entry after entry
 * `"name":{"dtype":"BF16","shape":[4096,4096],"data_offsets":[0,33554432]}`.
 * jansson decoding each key and value (safetensors_header.c) cost about 4 us
 * an entry, 12.5 ms for a header of 3,084 tensors: 7% of restoring its file
 * on one thread. An entry is plain when its name and dtype hold only
 * printable ASCII other than '"' and '\' (no escapes, nothing for UTF-8
 * checks), its value is an object of exactly the keys dtype, shape and
 * data_offsets (any order, once each), shape has at most PTWM_MAX_NDIM and
 * data_offsets exactly 2 integers written as JSON writes them (no sign,
 * fraction, exponent or leading zero; at most 18 digits, so below 2^63), with
 * JSON's whitespace anywhere between tokens. Such text means the same to
 * jansson; anything else, valid or not, goes to jansson, whose path gives
 * every error. */
#include "safetensors.h"

/* A string of plain bytes at s[i] (its '"'): its bytes in [*at, *at + *n),
 * the position after its closing '"'; 0 if it is not plain. */
static size_t plain_string(const char *s, size_t len, size_t i, size_t max, size_t *at, size_t *n) {
    size_t k;
    if (i >= len || s[i] != '"') return 0;
    for (k = i + 1; k < len && k - i - 1 <= max; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '"') {
            *at = i + 1;
            *n = k - i - 1;
            return k + 1;
        }
        if (c < 0x20 || c > 0x7e || c == '\\') return 0;
    }
    return 0;
}

/* An array of at most max plain integers at s[i] (its '['); the position
 * after its ']', 0 if it is not plain. */
static size_t plain_array(const char *s, size_t len, size_t i, uint64_t *v, uint32_t max,
                          uint32_t *n) {
    *n = 0;
    if (i >= len || s[i] != '[') return 0;
    i = ptwm_json_skip_ws(s, len, i + 1);
    if (i < len && s[i] == ']') return i + 1;
    for (;;) {
        uint64_t x = 0;
        size_t d = 0;
        if (*n == max) return 0;
        while (i + d < len && s[i + d] >= '0' && s[i + d] <= '9' && d <= 18)
            x = x * 10 + (uint64_t)(s[i + d++] - '0');
        if (d == 0 || d > 18 || (d > 1 && s[i] == '0')) return 0;
        v[(*n)++] = x;
        i = ptwm_json_skip_ws(s, len, i + d);
        if (i < len && s[i] == ']') return i + 1;
        if (i >= len || s[i] != ',') return 0;
        i = ptwm_json_skip_ws(s, len, i + 1);
    }
}

int ptwm_st_plain_entry(const char *s, size_t len, size_t i, ptwm_st_plain *e) {
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    unsigned seen = 0;
    i = plain_string(s, len, i, PTWM_MAX_NAME, &e->name_at, &e->name_len);
    if (!i || (e->name_len == 12 && memcmp(s + e->name_at, "__metadata__", 12) == 0)) return 0;
    i = ptwm_json_skip_ws(s, len, i);
    if (i >= len || s[i] != ':') return 0;
    i = ptwm_json_skip_ws(s, len, i + 1);
    if (i >= len || s[i] != '{') return 0;
    i = ptwm_json_skip_ws(s, len, i + 1);
    while (seen != 7) {
        size_t at, n;
        unsigned k;
        uint32_t m;
        if (!(i = plain_string(s, len, i, 12, &at, &n))) return 0;
        for (k = 0; k < 3 && (strlen(keys[k]) != n || memcmp(s + at, keys[k], n) != 0); k++) {
        }
        if (k == 3 || (seen & (1u << k))) return 0;   /* unknown or repeated: jansson says */
        seen |= 1u << k;
        i = ptwm_json_skip_ws(s, len, i);
        if (i >= len || s[i] != ':') return 0;
        i = ptwm_json_skip_ws(s, len, i + 1);
        if (k == 0)
            i = plain_string(s, len, i, sizeof(e->dtype) - 1, &at, &n);
        else if (k == 1)
            i = plain_array(s, len, i, e->shape, PTWM_MAX_NDIM, &e->ndim);
        else
            i = plain_array(s, len, i, e->offs, 2, &m);
        if (!i || (k == 2 && m != 2)) return 0;
        if (k == 0) {
            memcpy(e->dtype, s + at, n);
            e->dtype[n] = 0;
        }
        i = ptwm_json_skip_ws(s, len, i);
        if (i < len && s[i] == ',' && seen != 7) {
            i = ptwm_json_skip_ws(s, len, i + 1);
            continue;
        }
        if (i >= len || s[i] != '}' || seen != 7) return 0;
    }
    e->end = i + 1;
    return 1;
}
