/* Widening and narrowing kernels: every BF16 and F16 bit pattern against an
 * independent reference computed by value (ldexp arithmetic in double), NaNs
 * compared by bits; F32 -> BF16 rounding against a nearest-even reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "widen.h"

#define NLOWS (sizeof(lows) / sizeof(lows[0]))

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float float_of(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* F16 by value: sign, 5-bit exponent (bias 15), 10-bit mantissa. NaN keeps its
 * payload shifted into place, as numpy's float16 -> float32 does. */
static uint32_t ref_f16(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) {
        if (m == 0) return sign ? 0xff800000u : 0x7f800000u;
        return ((uint32_t)sign << 31) | 0x7f800000u | ((uint32_t)m << 13);
    }
    v = e == 0 ? ldexp((double)m, -24) : ldexp((double)(1024 + m), e - 25);
    if (sign) v = -v;
    if (v == 0.0) return sign ? 0x80000000u : 0u;
    return bits_of((float)v);
}

/* BF16 by value: 8-bit exponent (bias 127), 7-bit mantissa. */
static uint32_t ref_bf16(uint16_t h) {
    int sign = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 255) {
        if (m == 0) return sign ? 0xff800000u : 0x7f800000u;
        return ((uint32_t)h) << 16;  /* torch keeps the payload: bits << 16 */
    }
    v = e == 0 ? ldexp((double)m, -133) : ldexp((double)(128 + m), e - 134);
    if (sign) v = -v;
    if (v == 0.0) return sign ? 0x80000000u : 0u;
    return bits_of((float)v);
}

/* Nearest-even BF16 of an F32 by value: the two neighbours and their distances. */
static uint16_t ref_to_bf16(uint32_t x) {
    uint16_t lo = (uint16_t)(x >> 16), hi;
    double d_lo, d_hi, v;
    float f = float_of(x);
    if (isnan(f)) return (uint16_t)((x >> 16) | 0x40);
    if ((x & 0xffff) == 0) return lo;
    hi = (uint16_t)(lo + 1);  /* away from zero in magnitude: may become infinity */
    v = fabs((double)f);
    d_lo = v - fabs((double)float_of((uint32_t)lo << 16));
    if (((hi >> 7) & 255) == 255) {
        /* rounding up reaches infinity: the BF16 "next value" is 2^128 */
        d_hi = ldexp(1.0, 128) - v;
    } else {
        d_hi = fabs((double)float_of((uint32_t)hi << 16)) - v;
    }
    if (d_lo < d_hi) return lo;
    if (d_hi < d_lo) return hi;
    return (lo & 1) ? hi : lo;
}

/* All checks through one variant's kernels. */
static void check_variant(const ptwm_widen_impl *v) {
    uint16_t *src = malloc(65536 * sizeof(uint16_t));
    float *dst = malloc(65536 * sizeof(float));
    uint32_t i;
    int bad_f16 = 0, bad_bf16 = 0, bad_round = 0;
    uint64_t rng = 12345;
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};

    CHECK(src && dst);
    if (!src || !dst) return;
    for (i = 0; i < 65536; i++) src[i] = (uint16_t)i;

    v->f16_to_f32(src, dst, 65536);
    for (i = 0; i < 65536; i++) {
        if (bits_of(dst[i]) != ref_f16((uint16_t)i)) {
            if (bad_f16++ < 5)
                fprintf(stderr, "f16 %04x -> %08x, expected %08x\n", i, bits_of(dst[i]),
                        ref_f16((uint16_t)i));
        }
    }
    CHECK_MSG(bad_f16 == 0, "%d F16 patterns widened wrongly", bad_f16);

    v->bf16_to_f32(src, dst, 65536);
    for (i = 0; i < 65536; i++) {
        if (bits_of(dst[i]) != ref_bf16((uint16_t)i) || bits_of(dst[i]) != i << 16) {
            if (bad_bf16++ < 5)
                fprintf(stderr, "bf16 %04x -> %08x, expected %08x\n", i, bits_of(dst[i]),
                        ref_bf16((uint16_t)i));
        }
    }
    CHECK_MSG(bad_bf16 == 0, "%d BF16 patterns widened wrongly", bad_bf16);

    /* Odd lengths and unaligned pointers take the same path as the bulk. */
    v->f16_to_f32(src + 1, dst + 3, 1001);
    CHECK(bits_of(dst[3]) == ref_f16(1) && bits_of(dst[1003]) == ref_f16(1001));

    /* F32 -> BF16: every BF16 pattern as the top half with low halves that
     * cover exact, below, tie, above and maximum, plus random low halves. */
    {
        float *f = malloc(65536 * sizeof(float));
        uint16_t *out = malloc(65536 * sizeof(uint16_t));
        size_t k;
        CHECK(f && out);
        for (k = 0; f && out && k < NLOWS + 4; k++) {
            for (i = 0; i < 65536; i++) {
                uint32_t low = k < NLOWS ? lows[k] : (uint32_t)(tu_rand(&rng) & 0xffff);
                f[i] = float_of((i << 16) | low);
            }
            v->f32_to_bf16(f, out, 65536);
            for (i = 0; i < 65536; i++) {
                uint16_t want = ref_to_bf16(bits_of(f[i]));
                if (out[i] != want && bad_round++ < 5)
                    fprintf(stderr, "f32 %08x -> bf16 %04x, expected %04x\n", bits_of(f[i]),
                            out[i], want);
            }
        }
        CHECK_MSG(bad_round == 0, "%d F32 values rounded wrongly to BF16", bad_round);
        /* Round trip: widening then narrowing is the identity on non-NaN BF16. */
        v->bf16_to_f32(src, f, 65536);
        v->f32_to_bf16(f, out, 65536);
        for (i = 0, bad_round = 0; i < 65536; i++) {
            int nan = ((i >> 7) & 255) == 255 && (i & 127) != 0;
            if (!nan && out[i] != i) bad_round++;
            if (nan && out[i] != (i | 0x40)) bad_round++;
        }
        CHECK_MSG(bad_round == 0, "%d BF16 values changed by widen+narrow", bad_round);
        /* Overflow rounds to infinity; the largest finite BF16 stays. */
        f[0] = float_of(0x7f7fffffu);
        f[1] = float_of(0x7f7f7fffu);
        v->f32_to_bf16(f, out, 2);
        CHECK(out[0] == 0x7f80 && out[1] == 0x7f7f);
        free(f);
        free(out);
    }
    free(src);
    free(dst);
    printf("%s: %d F16, %d BF16, %d rounding mismatches\n", v->name, bad_f16, bad_bf16, bad_round);
}

int main(void) {
    const ptwm_widen_impl *const *list;
    size_t i, n = ptwm_widen_variants(&list);
    uint16_t h[3] = {0x7c01, 0x3555, 0xfe00};
    float f[3];
    uint32_t b[3];
    for (i = 0; i < n; i++) check_variant(list[i]);
    /* the public entry points are one of the variants: spot-check them */
    ptwm_f16_to_f32(h, f, 3);
    memcpy(b, f, sizeof(b));
    CHECK(b[0] == ref_f16(h[0]) && b[1] == ref_f16(h[1]) && b[2] == ref_f16(h[2]));
    CHECK(b[0] == 0x7f802000u);  /* a signalling NaN stays signalling */
    return tu_finish("test_widen");
}
