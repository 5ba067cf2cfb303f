/* The codec's kernel table (kernels.h): for every codec kernel with
 * CPU-specific forms, the form the instruction-set cap allows. Its lines,
 * which variant each level runs, are in codec_kernels.c; the variants live
 * in kernels/NAME_LEVEL.c, the plain forms in their module. */
#ifndef PTWM_CODEC_KERNELS_H
#define PTWM_CODEC_KERNELS_H

#include "common.h"
#include "kernels.h"

struct rans_vsym;
struct rans_ewriter;
struct huf_state;
struct sign_writer;
struct sign_reader;

/* rANS (rans_encode.c, rans_decode.c): all prefix kernels over the 32
 * interleaved states. */
typedef size_t (*ptwm_rans_dec_o0_fn)(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                                      const uint8_t **pp, const uint8_t *end, uint32_t *x,
                                      uint8_t *dst, size_t n);
typedef size_t (*ptwm_rans_dec_o1_fn)(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                                      const uint8_t **pp, const uint8_t *end, uint32_t *x,
                                      uint32_t *ctx, uint8_t *dst, size_t q);
/* Both streams of a two-stream plane in one loop: the first's states and
 * words (pa, ea, xa) to da, the second's to db, at most n symbols each (as
 * ptwm_rans_dec_o0_fn for one); returns how many each decoded. */
/* Four streams over a packed table in one loop: stream k from p[k] (up to
 * e[k]), its states x[32k..32k+31], its symbols to d[k]; n symbols each at
 * most, returning how many each decoded (0 where it will not run). */
typedef size_t (*ptwm_rans_dec_o0x4_fn)(const uint32_t *tab, unsigned prec, const uint8_t **p,
                                        const uint8_t *const *e, uint32_t *x,
                                        uint8_t *const *d, size_t n);
typedef size_t (*ptwm_rans_dec_o0x2_fn)(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                                        const uint8_t **pa, const uint8_t *ea, uint32_t *xa,
                                        uint8_t *da, const uint8_t **pb, const uint8_t *eb,
                                        uint32_t *xb, uint8_t *db, size_t n);
/* The encoder runs backwards: from symbol i down; returns where it stopped. */
typedef size_t (*ptwm_rans_enc_o0_fn)(const uint8_t *src, size_t i, const struct rans_vsym *vt,
                                      unsigned prec, uint32_t *x, struct rans_ewriter *w);
/* Two streams of one table in one loop, backwards from *ia and *ib, while
 * both have whole steps and room; where each stopped into *ia, *ib. */
typedef void (*ptwm_rans_enc_o0x2_fn)(const uint8_t *sa, size_t *ia, uint32_t *xa,
                                      struct rans_ewriter *wa, const uint8_t *sb, size_t *ib,
                                      uint32_t *xb, struct rans_ewriter *wb,
                                      const struct rans_vsym *vt, unsigned prec);
typedef size_t (*ptwm_skip_seen_fn)(const uint8_t *src, size_t i, size_t n,
                                    const uint8_t absent[256]);

/* Huffman (huffman.c): whole loops, not prefixes. */
typedef void (*ptwm_huf_enc_fn)(const uint8_t *src, const size_t *begin, const uint32_t *ce,
                                uint8_t *const *out, uint8_t *const *end);
typedef void (*ptwm_huf_fast_fn)(struct huf_state *st, const uint16_t *table,
                                 const uint64_t *mt);
typedef void (*ptwm_huf_one_fn)(struct huf_state *st, unsigned s, const uint16_t *table,
                                const uint64_t *mt);
/* The decoder's fast loops, [multi-symbol table][11-bit table]: all four
 * streams, and one stream for what is left. */
typedef struct ptwm_huf_loops {
    ptwm_huf_fast_fn fast[2][2];
    ptwm_huf_one_fn one[2][2];
} ptwm_huf_loops;
typedef uint64_t (*ptwm_huf_bits_fn)(const uint8_t *src, size_t n, const uint8_t len[256]);

/* Planes (planes.c): prefix kernels. */
typedef size_t (*ptwm_sparse_compact_fn)(const uint8_t *src, size_t n, unsigned width,
                                         uint8_t *bitmap, uint8_t *dst, size_t *jp,
                                         struct sign_writer *sw);
typedef size_t (*ptwm_sparse_expand_fn)(const uint8_t *src, const uint8_t *bitmap, size_t n,
                                        unsigned width, uint8_t *dst, size_t *jp,
                                        struct sign_reader *sr);
typedef size_t (*ptwm_joint_split_fn)(const uint8_t *ex, const uint8_t *sm, size_t n,
                                      const uint8_t rank[256], uint8_t *j, uint8_t *nib,
                                      uint8_t *esc, size_t *nesc);
typedef size_t (*ptwm_joint_merge_fn)(const uint8_t *j, const uint8_t *nib, const uint8_t *map,
                                      size_t n, uint8_t *ex, uint8_t *sm);
/* The next escape of a joint plane from i (a prefix: it may stop short of
 * the escape, never past it). */
typedef size_t (*ptwm_joint_scan_fn)(const uint8_t *j, size_t i, size_t n);
/* BF16 elements from joint symbols and nibbles (a prefix, as the others);
 * esc[w] gets the escapes among elements 64w..64w+63 of that prefix (bit k:
 * element 64w + k), every word the prefix reaches, bits past its end 0: the
 * merge fixes escapes from the masks instead of scanning j again. */
typedef size_t (*ptwm_joint_bf16_fn)(const uint8_t *j, const uint8_t *nib, const uint8_t *mlo,
                                     const uint8_t *mhi, size_t n, uint8_t *dst, uint64_t *esc);

/* Zeros (+0 or -0) among every 8th element of elements of width 2 or 4,
 * added to *zeros; a prefix: returns the elements covered (a multiple of
 * 8), 0 for other widths. */
typedef size_t (*ptwm_zero_sample_fn)(const uint8_t *src, size_t n, unsigned width,
                                      size_t *zeros);

/* The float-split and byte-plane loops (planes.c), whole. */
typedef struct ptwm_plane_loops {
    void (*split_bf16)(const uint8_t *src, size_t n, uint8_t *ex, uint8_t *sm);
    void (*merge_bf16)(const uint8_t *ex, const uint8_t *sm, size_t n, uint8_t *dst);
    void (*split_f16)(const uint8_t *src, size_t n, uint8_t *ex, uint8_t *hi, uint8_t *lo);
    void (*merge_f16)(const uint8_t *ex, const uint8_t *hi, const uint8_t *lo, size_t n,
                      uint8_t *dst);
    void (*split_f32)(const uint8_t *src, size_t n, uint8_t *ex, uint8_t *p1, uint8_t *p2,
                      uint8_t *p3);
    void (*merge_f32)(const uint8_t *ex, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3,
                      size_t n, uint8_t *dst);
    void (*split_bytes)(const uint8_t *src, size_t n, unsigned width, uint8_t *const *planes);
    void (*merge_bytes)(const uint8_t *const *planes, size_t n, unsigned width, uint8_t *dst);
} ptwm_plane_loops;

/* The column-scale loops (microscale.c), whole. */
typedef struct ptwm_colscale_loops {
    void (*forward)(const uint8_t *x, size_t n, size_t cols, uint8_t *r, uint8_t *d,
                    uint32_t *sum);
    void (*inverse)(const uint8_t *r, const uint8_t *d, size_t n, size_t cols, uint8_t *x);
    void (*micro_forward)(const uint8_t *x, size_t n, unsigned block, uint8_t *r, uint8_t *d);
    void (*fix_bf16)(uint8_t *el, size_t n, const uint16_t *s7, size_t span, size_t k0);
} ptwm_colscale_loops;

typedef struct ptwm_codec_kernels {
    ptwm_isa level; /* the level this table was filled for */
    ptwm_rans_dec_o0_fn rans_dec_o0;
    /* The packed-table decoder (prec <= 12, one gather a step) and the
     * table's build; NULL below AVX-512, where the split table is faster to
     * build and as fast to read. */
    ptwm_rans_dec_o0_fn rans_dec_o0_packed;
    void (*rans_dtab_packed)(const uint32_t freq[256], uint32_t *tab);
    /* Both streams of a two-stream plane in one loop, over the split and the
     * packed table; NULL below AVX-512 (AVX2's eight vectors of states in
     * one loop ran 0.7x as fast as its four, one stream after the other). */
    ptwm_rans_dec_o0x2_fn rans_dec_o0x2, rans_dec_o0x2_packed;
    ptwm_rans_dec_o0x4_fn rans_dec_o0x4_packed; /* NULL: pairs in the two-stream loop */
    ptwm_rans_dec_o1_fn rans_dec_o1;
    ptwm_rans_enc_o0_fn rans_enc_o0;
    ptwm_rans_enc_o0x2_fn rans_enc_o0x2; /* NULL: the streams one after the other */
    ptwm_skip_seen_fn skip_seen; /* a prefix; also whole in its plain form */
    ptwm_huf_enc_fn huf_encode;
    const struct ptwm_huf_loops *huf_loops;
    ptwm_huf_bits_fn huf_bits;
    const ptwm_plane_loops *plane_loops;
    ptwm_sparse_compact_fn sparse_compact; /* widths 2 and 4 */
    ptwm_sparse_expand_fn sparse_expand;
    ptwm_joint_split_fn joint_split;
    ptwm_joint_merge_fn joint_merge;
    ptwm_joint_bf16_fn joint_bf16;
    ptwm_joint_scan_fn joint_scan;
    ptwm_zero_sample_fn zero_sample;
    const ptwm_colscale_loops *colscale_loops;
} ptwm_codec_kernels;

extern ptwm_kernel_set ptwm_codec_kernel_set;
/* The table in effect: load it once per call and call through it. */
PTWM_INLINE const ptwm_codec_kernels *ptwm_codec_kern(void) {
    return (const ptwm_codec_kernels *)ptwm_kernel_table(&ptwm_codec_kernel_set);
}

/* The variants, named <kernel>_<level>; the plain forms are declared here
 * too, so that codec_kernels.c can name them. */
size_t ptwm_skip_seen_scalar(const uint8_t *src, size_t i, size_t n, const uint8_t absent[256]);
void ptwm_huf_encode_scalar(const uint8_t *, const size_t *, const uint32_t *, uint8_t *const *,
                            uint8_t *const *);
uint64_t ptwm_huf_bits_scalar(const uint8_t *src, size_t n, const uint8_t len[256]);
extern const ptwm_huf_loops ptwm_huf_loops_scalar;
extern const ptwm_plane_loops ptwm_plane_loops_scalar;
extern const ptwm_colscale_loops ptwm_colscale_loops_scalar;
#ifdef PTWM_CPU_X86
size_t ptwm_rans_dec_o0_avx2(const uint32_t *, const uint8_t *, unsigned, const uint8_t **,
                             const uint8_t *, uint32_t *, uint8_t *, size_t);
size_t ptwm_rans_dec_o0_avx512(const uint32_t *, const uint8_t *, unsigned, const uint8_t **,
                               const uint8_t *, uint32_t *, uint8_t *, size_t);
size_t ptwm_rans_dec_o0_packed_avx512(const uint32_t *, const uint8_t *, unsigned,
                                      const uint8_t **, const uint8_t *, uint32_t *, uint8_t *,
                                      size_t);
void ptwm_rans_dtab_packed_avx512(const uint32_t freq[256], uint32_t *tab);
size_t ptwm_rans_dec_o0x2_avx512(const uint32_t *, const uint8_t *, unsigned, const uint8_t **,
                                 const uint8_t *, uint32_t *, uint8_t *, const uint8_t **,
                                 const uint8_t *, uint32_t *, uint8_t *, size_t);
size_t ptwm_rans_dec_o0x2_packed_avx512(const uint32_t *, const uint8_t *, unsigned,
                                        const uint8_t **, const uint8_t *, uint32_t *, uint8_t *,
                                        const uint8_t **, const uint8_t *, uint32_t *, uint8_t *,
                                        size_t);
size_t ptwm_rans_dec_o0_packed_vbmi(const uint32_t *, const uint8_t *, unsigned,
                                    const uint8_t **, const uint8_t *, uint32_t *, uint8_t *,
                                    size_t);
size_t ptwm_rans_dec_o0x4_packed_vbmi(const uint32_t *, unsigned, const uint8_t **,
                                      const uint8_t *const *, uint32_t *, uint8_t *const *, size_t);
size_t ptwm_rans_dec_o0x2_packed_vbmi(const uint32_t *, const uint8_t *, unsigned,
                                      const uint8_t **, const uint8_t *, uint32_t *, uint8_t *,
                                      const uint8_t **, const uint8_t *, uint32_t *, uint8_t *,
                                      size_t);
size_t ptwm_rans_dec_o1_avx2(const uint32_t *, const uint8_t *, unsigned, const uint8_t **,
                             const uint8_t *, uint32_t *, uint32_t *, uint8_t *, size_t);
size_t ptwm_rans_enc_o0_avx2(const uint8_t *, size_t, const struct rans_vsym *, unsigned,
                             uint32_t *, struct rans_ewriter *);
void ptwm_rans_enc_o0x2_vbmi(const uint8_t *, size_t *, uint32_t *, struct rans_ewriter *,
                             const uint8_t *, size_t *, uint32_t *, struct rans_ewriter *,
                             const struct rans_vsym *, unsigned);
size_t ptwm_rans_enc_o0_vbmi(const uint8_t *, size_t, const struct rans_vsym *, unsigned,
                             uint32_t *, struct rans_ewriter *);
size_t ptwm_skip_seen_avx2(const uint8_t *src, size_t i, size_t n, const uint8_t absent[256]);
size_t ptwm_skip_seen_vbmi(const uint8_t *src, size_t i, size_t n, const uint8_t absent[256]);
void ptwm_huf_encode_avx2(const uint8_t *, const size_t *, const uint32_t *, uint8_t *const *,
                          uint8_t *const *);
extern const ptwm_huf_loops ptwm_huf_loops_avx2;
extern const ptwm_plane_loops ptwm_plane_loops_avx2, ptwm_plane_loops_avx512;
extern const ptwm_colscale_loops ptwm_colscale_loops_avx2, ptwm_colscale_loops_avx512;
uint64_t ptwm_huf_bits_vbmi(const uint8_t *src, size_t n, const uint8_t len[256]);
size_t ptwm_sparse_compact_vbmi(const uint8_t *, size_t, unsigned, uint8_t *, uint8_t *,
                                  size_t *, struct sign_writer *);
size_t ptwm_sparse_expand_vbmi(const uint8_t *, const uint8_t *, size_t, unsigned, uint8_t *,
                                 size_t *, struct sign_reader *);
size_t ptwm_joint_split_avx2(const uint8_t *, const uint8_t *, size_t, const uint8_t[256],
                             uint8_t *, uint8_t *, uint8_t *, size_t *);
size_t ptwm_joint_split_vbmi(const uint8_t *, const uint8_t *, size_t, const uint8_t[256],
                             uint8_t *, uint8_t *, uint8_t *, size_t *);
size_t ptwm_joint_merge_ssse3(const uint8_t *, const uint8_t *, const uint8_t *, size_t,
                              uint8_t *, uint8_t *);
size_t ptwm_joint_bf16_ssse3(const uint8_t *, const uint8_t *, const uint8_t *, const uint8_t *,
                             size_t, uint8_t *, uint64_t *);
size_t ptwm_joint_bf16_avx512(const uint8_t *, const uint8_t *, const uint8_t *,
                              const uint8_t *, size_t, uint8_t *, uint64_t *);
size_t ptwm_joint_scan_avx512(const uint8_t *j, size_t i, size_t n);
size_t ptwm_zero_sample_avx512(const uint8_t *src, size_t n, unsigned width, size_t *zeros);
#endif

#endif
