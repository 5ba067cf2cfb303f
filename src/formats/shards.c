/* Shard sizes and names for sharded checkpoints: size parsing, greedy
 * packing, "model-00001-of-00005" file names. */
#include <stdio.h>
#include "common.h"

/* Units: the number may be followed by B, kB/KB, MB, GB, TB (powers of 1000)
 * or KiB, MiB, GiB, TiB (powers of 1024), or nothing (bytes). The unit
 * letter and the 'i' may be either case, but the final B must be upper
 * case: Hugging Face reads "5Gb" as gigabits, so a lower-case b is refused
 * as ambiguous rather than guessed. A decimal fraction is accepted when the
 * result is a whole number of bytes ("1.5GB" = 1500000000), computed
 * exactly in integers; no sign, exponent or spaces. */
ptwm_error ptwm_parse_size(const char *text, uint64_t *out, ptwm_err *err) {
    static const char prefixes[] = "kmgt";
    const char *p = text;
    uint64_t whole = 0, frac = 0, frac_scale = 1, mult = 1, v, f;
    int digits = 0, fdigits = 0;
    if (!text || !out) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_parse_size: NULL argument");
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if (ptwm_mul_overflow(whole, 10, &whole) || ptwm_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "size '%s' is too large", text);
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, fdigits++) {
            if (fdigits >= 18)
                return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "size '%s' has too many decimals", text);
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_scale *= 10;
        }
        if (!fdigits)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "size '%s': a '.' must be followed by digits",
                             text);
    }
    if (!digits)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                         "size '%s' is not a size: expected a number of bytes or a number with "
                         "B, kB, MB, GB, TB, KiB, MiB, GiB or TiB (e.g. 5GB, 500MiB)",
                         text);
    if (*p) {
        const char *unit = p, *pos = NULL;
        char c = (char)(*p | 0x20);
        int binary = 0, power = 0;
        if (*p != 'B' && (pos = strchr(prefixes, c)) != NULL && c) {
            power = (int)(pos - prefixes) + 1;
            p++;
            if (*p == 'i' || *p == 'I') {
                binary = 1;
                p++;
            }
        }
        if (*p == 'b' && p[1] == 0)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                             "size '%s': a lower-case 'b' means bits; write '%.*sB' for bytes", text,
                             (int)(p - text), text);
        if (*p != 'B' || p[1] != 0)
            return ptwm_fail(err, PTWM_ERR_INVALID_ARG,
                             "size '%s': unknown unit '%s' (use B, kB, MB, GB, TB, KiB, MiB, GiB "
                             "or TiB)",
                             text, unit);
        while (power--) mult *= binary ? 1024 : 1000;
    }
    if (ptwm_mul_overflow(whole, mult, &v) || ptwm_mul_overflow(frac, mult, &f))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "size '%s' is too large", text);
    if (f % frac_scale)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "size '%s' is not a whole number of bytes", text);
    if (ptwm_add_overflow(v, f / frac_scale, &v))
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "size '%s' is too large", text);
    *out = v;
    return PTWM_OK;
}

/* Sizes count tensor bytes only (as Hugging Face does), not the headers. */
ptwm_error ptwm_plan_shards(const uint64_t *sizes, size_t n, uint64_t max_shard_size,
                            size_t *shard_of, size_t *nshards, ptwm_err *err) {
    uint64_t cur = 0;
    size_t i, shard = 0, in_shard = 0;
    if ((n && (!sizes || !shard_of)) || !nshards)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_plan_shards: NULL argument");
    if (max_shard_size == 0)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "maximum shard size must be positive");
    for (i = 0; i < n; i++) {
        uint64_t next;
        if (in_shard && (ptwm_add_overflow(cur, sizes[i], &next) || next > max_shard_size)) {
            shard++;
            in_shard = 0;
            cur = 0;
        }
        cur += sizes[i]; /* cannot wrap: either the shard was empty or next fitted */
        shard_of[i] = shard;
        in_shard++;
    }
    *nshards = n ? shard + 1 : 0;
    return PTWM_OK;
}

ptwm_error ptwm_shard_filename(size_t idx_one_based, size_t total, const char *suffix, char *buf,
                               size_t cap, ptwm_err *err) {
    int len;
    if (!suffix || !buf)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "ptwm_shard_filename: NULL argument");
    if (idx_one_based == 0 || idx_one_based > total)
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "shard %zu of %zu: shards count from 1",
                         idx_one_based, total);
    len = snprintf(buf, cap, "model-%05zu-of-%05zu.%s", idx_one_based, total, suffix);
    if (len < 0 || (size_t)len >= cap) {
        if (cap) buf[0] = 0;
        return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "shard %zu of %zu: name longer than %zu bytes",
                         idx_one_based, total, cap);
    }
    return PTWM_OK;
}
