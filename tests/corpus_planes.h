/* Byte planes cut from the corpus files, for the entropy-stage tests.
 *
 * A minimal safetensors reading (8-byte LE header length, JSON, data): each
 * corpus file holds one dtype, named in the header; every tensor's bytes are
 * taken as one run of that dtype. Planes per dtype:
 *   BF16: exponent (v >> 7) & 0xff, sign+mantissa ((v >> 8) & 0x80) | (v & 0x7f)
 *   F16:  exponent (v >> 10) & 0x1f, low mantissa byte v & 0xff
 *   F32:  exponent (v >> 23) & 0xff, sign + top mantissa bits, low byte
 *   U8:   the bytes as they are */
#ifndef PTWM_TEST_CORPUS_PLANES_H
#define PTWM_TEST_CORPUS_PLANES_H

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CP_MAX_PLANES 3

typedef struct cp_planes {
    uint8_t *plane[CP_MAX_PLANES];
    const char *label[CP_MAX_PLANES];
    size_t n; /* symbols per plane */
    int count;
} cp_planes;

static inline void cp_free(cp_planes *p) {
    int i;
    for (i = 0; i < CP_MAX_PLANES; i++) free(p->plane[i]);
    memset(p, 0, sizeof(*p));
}

/* Cut the planes of a corpus file; 0 if the file does not look as expected. */
static inline int cp_cut(const char *path, cp_planes *p) {
    size_t size = 0, hlen = 0, dlen, i, width;
    uint8_t *file = tu_read_file(path, &size);
    const uint8_t *data;
    const char *dt;
    char *json;
    int k;
    memset(p, 0, sizeof(*p));
    if (!file || size < 8) goto fail;
    for (k = 7; k >= 0; k--) hlen = (hlen << 8) | file[k];
    if (hlen > size - 8) goto fail;
    json = (char *)malloc(hlen + 1);
    if (!json) goto fail;
    memcpy(json, file + 8, hlen);
    json[hlen] = 0;
    dt = strstr(json, "\"dtype\"");
    dt = dt ? strchr(dt + 7, '"') : NULL;
    data = file + 8 + hlen;
    dlen = size - 8 - hlen;
    if (!dt) {
        free(json);
        goto fail;
    }
    dt++;
    width = !strncmp(dt, "BF16\"", 5) || !strncmp(dt, "F16\"", 4) ? 2
            : !strncmp(dt, "F32\"", 4)                           ? 4
            : !strncmp(dt, "U8\"", 3)                            ? 1
                                                                 : 0;
    if (!width || dlen % width) {
        free(json);
        goto fail;
    }
    p->n = dlen / width;
    p->count = width == 1 ? 1 : width == 2 ? 2 : 3;
    for (k = 0; k < p->count; k++) {
        p->plane[k] = (uint8_t *)malloc(p->n ? p->n : 1);
        if (!p->plane[k]) {
            free(json);
            goto fail;
        }
    }
    for (i = 0; i < p->n; i++) {
        const uint8_t *e = data + i * width;
        uint32_t v = width == 1 ? e[0]
                     : width == 2 ? (uint32_t)(e[0] | (e[1] << 8))
                                  : (uint32_t)e[0] | ((uint32_t)e[1] << 8) |
                                        ((uint32_t)e[2] << 16) | ((uint32_t)e[3] << 24);
        if (width == 1) {
            p->plane[0][i] = (uint8_t)v;
        } else if (dt[0] == 'B') {
            p->plane[0][i] = (uint8_t)((v >> 7) & 0xff);
            p->plane[1][i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
        } else if (width == 2) {
            p->plane[0][i] = (uint8_t)((v >> 10) & 0x1f);
            p->plane[1][i] = (uint8_t)(v & 0xff);
        } else {
            p->plane[0][i] = (uint8_t)((v >> 23) & 0xff);
            p->plane[1][i] = (uint8_t)(((v >> 24) & 0x80) | ((v >> 16) & 0x7f));
            p->plane[2][i] = (uint8_t)v;
        }
    }
    p->label[0] = width == 1 ? "u8" : "exponent";
    p->label[1] = width == 4 || dt[0] == 'B' ? "sign+mantissa" : "mantissa-low";
    p->label[2] = "low-byte";
    free(json);
    free(file);
    return 1;
fail:
    free(file);
    cp_free(p);
    return 0;
}

/* Call fn on every plane of every corpus file; a missing corpus or an
 * unreadable file is a failed check, never a skip. */
typedef void (*cp_visit_fn)(const char *file, const char *label, const uint8_t *plane, size_t n);

static inline void cp_for_each(cp_visit_fn fn) {
    const char *const *f;
    CHECK_MSG(tu_corpus_dir() != NULL, "corpus not found (set PTWM_CORPUS)");
    if (!tu_corpus_dir()) return;
    for (f = tu_corpus_files(); *f; f++) {
        cp_planes p;
        int k;
        CHECK_MSG(cp_cut(tu_corpus_path(*f), &p), "%s: cannot cut planes", *f);
        for (k = 0; k < p.count; k++) fn(*f, p.label[k], p.plane[k], p.n);
        cp_free(&p);
    }
}

#endif
