/* The codec's kernel table's lines (see codec_kernels.h): which variant each
 * level runs. A level starts from the plain forms and each block below
 * overrides what its instructions do faster; a new variant is one file and
 * one line here. */
#include "codec_kernels.h"

/* The plain forms of the prefix kernels: no vector loop, the module's plain
 * loop does everything. */
static size_t rans_dec_o0_none(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                               const uint8_t **pp, const uint8_t *end, uint32_t *x, uint8_t *dst,
                               size_t n) {
    (void)tab, (void)sym, (void)prec, (void)pp, (void)end, (void)x, (void)dst, (void)n;
    return 0;
}

static size_t rans_dec_o1_none(const uint32_t *tab, const uint8_t *sym, unsigned prec,
                               const uint8_t **pp, const uint8_t *end, uint32_t *x, uint32_t *ctx,
                               uint8_t *dst, size_t q) {
    (void)tab, (void)sym, (void)prec, (void)pp, (void)end, (void)x, (void)ctx, (void)dst, (void)q;
    return 0;
}

static size_t rans_enc_o0_none(const uint8_t *src, size_t i, const struct rans_vsym *vt,
                               unsigned prec, uint32_t *x, struct rans_ewriter *w) {
    (void)src, (void)vt, (void)prec, (void)x, (void)w;
    return i;
}

static size_t sparse_compact_none(const uint8_t *src, size_t n, unsigned width, uint8_t *bitmap,
                                  uint8_t *dst, size_t *jp, struct sign_writer *sw) {
    (void)src, (void)n, (void)width, (void)bitmap, (void)dst, (void)sw;
    *jp = 0;
    return 0;
}

static size_t sparse_expand_none(const uint8_t *src, const uint8_t *bitmap, size_t n,
                                 unsigned width, uint8_t *dst, size_t *jp,
                                 struct sign_reader *sr) {
    (void)src, (void)bitmap, (void)n, (void)width, (void)dst, (void)sr;
    *jp = 0;
    return 0;
}

static size_t joint_split_none(const uint8_t *ex, const uint8_t *sm, size_t n,
                               const uint8_t rank[256], uint8_t *j, uint8_t *nib, uint8_t *esc,
                               size_t *nesc) {
    (void)ex, (void)sm, (void)n, (void)rank, (void)j, (void)nib, (void)esc;
    *nesc = 0;
    return 0;
}

static size_t joint_merge_none(const uint8_t *j, const uint8_t *nib, const uint8_t *map, size_t n,
                               uint8_t *ex, uint8_t *sm) {
    (void)j, (void)nib, (void)map, (void)n, (void)ex, (void)sm;
    return 0;
}

static size_t joint_scan_none(const uint8_t *j, size_t i, size_t n) {
    (void)j, (void)n;
    return i;
}

static size_t zero_sample_none(const uint8_t *src, size_t n, unsigned width, size_t *zeros) {
    (void)src, (void)n, (void)width, (void)zeros;
    return 0;
}

static size_t joint_bf16_none(const uint8_t *j, const uint8_t *nib, const uint8_t *mlo,
                              const uint8_t *mhi, size_t n, uint8_t *dst, uint64_t *esc) {
    (void)j, (void)nib, (void)mlo, (void)mhi, (void)n, (void)dst, (void)esc;
    return 0;
}

static void codec_kernels_fill(void *table, ptwm_isa level) {
    ptwm_codec_kernels *k = (ptwm_codec_kernels *)table;
    memset(k, 0, sizeof(*k));
    k->level = level;
    k->rans_dec_o0 = rans_dec_o0_none;
    k->rans_dec_o1 = rans_dec_o1_none;
    k->rans_enc_o0 = rans_enc_o0_none;
    k->skip_seen = ptwm_skip_seen_scalar;
    k->huf_encode = ptwm_huf_encode_scalar;
    k->huf_loops = &ptwm_huf_loops_scalar;
    k->huf_bits = ptwm_huf_bits_scalar;
    k->plane_loops = &ptwm_plane_loops_scalar;
    k->sparse_compact = sparse_compact_none;
    k->sparse_expand = sparse_expand_none;
    k->joint_split = joint_split_none;
    k->joint_merge = joint_merge_none;
    k->joint_bf16 = joint_bf16_none;
    k->joint_scan = joint_scan_none;
    k->zero_sample = zero_sample_none;
    k->colscale_loops = &ptwm_colscale_loops_scalar;
#ifdef PTWM_CPU_X86
    if (level >= PTWM_ISA_SSSE3) {
        k->joint_merge = ptwm_joint_merge_ssse3;
        k->joint_bf16 = ptwm_joint_bf16_ssse3;
    }
    if (level >= PTWM_ISA_AVX2) { /* with BMI2, F16C and POPCNT (cpu.h) */
        k->rans_dec_o0 = ptwm_rans_dec_o0_avx2;
        k->rans_dec_o1 = ptwm_rans_dec_o1_avx2;
        k->rans_enc_o0 = ptwm_rans_enc_o0_avx2;
        k->skip_seen = ptwm_skip_seen_avx2;
        k->joint_split = ptwm_joint_split_avx2;
        k->huf_encode = ptwm_huf_encode_avx2;
        k->huf_loops = &ptwm_huf_loops_avx2;
        k->plane_loops = &ptwm_plane_loops_avx2;
        k->colscale_loops = &ptwm_colscale_loops_avx2;
    }
    if (level >= PTWM_ISA_AVX512) { /* F, BW, CD, DQ, VL */
        k->rans_dec_o0 = ptwm_rans_dec_o0_avx512;
        k->rans_dec_o0_packed = ptwm_rans_dec_o0_packed_avx512;
        k->rans_dtab_packed = ptwm_rans_dtab_packed_avx512;
        k->rans_dec_o0x2 = ptwm_rans_dec_o0x2_avx512;
        k->rans_dec_o0x2_packed = ptwm_rans_dec_o0x2_packed_avx512;
        k->plane_loops = &ptwm_plane_loops_avx512;
        k->colscale_loops = &ptwm_colscale_loops_avx512;
        k->joint_bf16 = ptwm_joint_bf16_avx512;
        k->joint_scan = ptwm_joint_scan_avx512;
        k->zero_sample = ptwm_zero_sample_avx512;
    }
    if (level >= PTWM_ISA_AVX512VBMI) { /* with VBMI2 and BITALG */
        k->rans_enc_o0 = ptwm_rans_enc_o0_vbmi;
        k->rans_enc_o0x2 = ptwm_rans_enc_o0x2_vbmi;
        k->rans_dec_o0_packed = ptwm_rans_dec_o0_packed_vbmi;
        k->rans_dec_o0x2_packed = ptwm_rans_dec_o0x2_packed_vbmi;
        k->rans_dec_o0x4_packed = ptwm_rans_dec_o0x4_packed_vbmi;
        k->skip_seen = ptwm_skip_seen_vbmi;
        k->huf_bits = ptwm_huf_bits_vbmi;
        k->sparse_compact = ptwm_sparse_compact_vbmi;
        k->sparse_expand = ptwm_sparse_expand_vbmi;
        k->joint_split = ptwm_joint_split_vbmi;
    }
#endif
}

static ptwm_codec_kernels codec_tables[PTWM_ISA_BEST + 1];
ptwm_kernel_set ptwm_codec_kernel_set = {"codec", sizeof(ptwm_codec_kernels), codec_kernels_fill,
                                         codec_tables, NULL, NULL};
