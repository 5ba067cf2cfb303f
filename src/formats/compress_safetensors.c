/* safetensors <-> .ptwm, streaming both ways.
 *
 * Compression opens the source in pread mode and pulls each tensor chunk by
 * chunk through the writer, so resident memory stays at the writer's window
 * whatever the file size. It records the source header bytes exactly, the
 * file name and size, and adds the tensors in file order (ascending data
 * offset, which need not be the header's order): the .ptwm's tensor order is
 * then the source's data region, and the rebuild is the header followed by
 * every tensor decoded in table order. */
#include "container_read.h"
#include "fileio.h"
#include "ptdir_internal.h"
#include "safetensors.h"

#include <stdlib.h>

ptwm_error ptwm_compress_safetensors(const char *src_path, const char *dst_path,
                                     const ptwm_cparams *params, ptwm_err *err) {
    static const ptwm_cparams defaults = PTWM_CPARAMS_DEFAULT;
    ptwm_cparams p = params ? *params : defaults;
    ptwm_st *st = NULL;
    ptwm_writer *w = NULL;
    ptwm_error rc;
    size_t i, n;
    if (!src_path || !dst_path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL path");
    if ((rc = ptwm_st_open(src_path, PTWM_OPEN_PREAD, &st, err))) return rc;
    if (p.progress && !p.progress_total) {
        size_t hl;
        ptwm_st_header(st, &hl);
        p.progress_total = ptwm_st_file_size(st) - 8 - hl;   /* the tensor bytes */
    }
    if ((rc = ptwm_writer_open_file(dst_path, &p, &w, err))) goto out;
    if ((rc = ptwm_ck_record_source(w, st, err)) || (rc = ptwm_ck_record_metadata(w, st, err)))
        goto out;
    n = ptwm_st_count(st);
    for (i = 0; i < n; i++) {
        if ((rc = ptwm_ck_add_tensor(w, st, i, err))) {
            ptwm_err_prefix(err, "file '%s'", src_path);
            goto out;
        }
    }
    rc = ptwm_writer_finish(w, err);
    w = NULL;
out:
    ptwm_writer_free(w);
    ptwm_st_close(st);
    return rc;
}

/* ---- rebuilding ---------------------------------------------------------- */

/* The recorded header must describe exactly the tensors of the table, in
 * table order, tiling the data region: otherwise the rebuild would write a
 * file whose header disagrees with its bytes. */
static ptwm_error check_source(ptwm_reader *r, const uint8_t *hdr, size_t len, ptwm_err *err) {
    ptwm_st_parsed p;
    const char *label = ptwm_reader_label(r);
    uint64_t off = 0, total;
    size_t i, n = ptwm_reader_count(r);
    ptwm_error rc = ptwm_st_parse_header((const char *)hdr + 8, len - 8, label, &p, err);
    if (rc) {
        ptwm_err_prefix(err, "recorded source header");
        return rc;
    }
    if (p.n != n) {
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH, "file '%s': source header lists %zu tensors, the table %zu",
                       label, p.n, n);
        goto out;
    }
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        const ptwm_st_entry *e = &p.t[i];
        ptwm_reader_tensor(r, i, &info, NULL);
        if (strcmp(e->name, info.name) != 0 || e->dtype != info.dtype || e->begin != off ||
            e->end - e->begin != info.nbytes) {
            rc = ptwm_fail(err, PTWM_ERR_MISMATCH,
                           "file '%s': tensor %zu '%s' (%s, %llu bytes at %llu) disagrees with the "
                           "source header's '%s' (%s, bytes %llu..%llu)",
                           label, i, info.name, ptwm_dtype_name(info.dtype),
                           (unsigned long long)info.nbytes, (unsigned long long)off, e->name,
                           ptwm_dtype_name(e->dtype), (unsigned long long)e->begin,
                           (unsigned long long)e->end);
            goto out;
        }
        off += info.nbytes;
    }
    total = len + off;
    /* A safetensors file is at least 8 bytes, so 0 means "not recorded":
     * checkpoint directories written before the size was recorded. Their
     * source is the header and the tensors it tiles, which is what a strict
     * safetensors reader requires of the file, so the size is derived. */
    if (ptwm_reader_source_file_size(r) != 0 && ptwm_reader_source_file_size(r) != total)
        rc = ptwm_fail(err, PTWM_ERR_MISMATCH, "file '%s': source was %llu bytes, header and tensors make %llu",
                       label, (unsigned long long)ptwm_reader_source_file_size(r),
                       (unsigned long long)total);
out:
    ptwm_st_parsed_free(&p);
    return rc;
}

/* A fresh header from the table and metadata, when no source was recorded. */
static ptwm_error build_header(ptwm_reader *r, void **hdr, size_t *len, ptwm_err *err) {
    size_t i, n = ptwm_reader_count(r), nmeta = ptwm_reader_metadata_count(r);
    ptwm_tensor_desc *d = (ptwm_tensor_desc *)ptwm_calloc(n ? n : 1, sizeof(*d));
    ptwm_kv *meta = (ptwm_kv *)ptwm_calloc(nmeta ? nmeta : 1, sizeof(*meta));
    ptwm_error rc;
    if (!d || !meta) {
        ptwm_free(d);
        ptwm_free(meta);
        return ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory");
    }
    for (i = 0; i < n; i++) {
        ptwm_tensor_info info;
        ptwm_reader_tensor(r, i, &info, NULL);
        d[i] = ptwm_desc_of(&info, d);   /* the header builder checks for data but never reads it */
    }
    for (i = 0; i < nmeta; i++) meta[i] = ptwm_reader_metadata(r, i);
    rc = ptwm_st_build_header(d, n, meta, nmeta, hdr, len, err);
    ptwm_free(d);
    ptwm_free(meta);
    return rc;
}

/* Every tensor in table order from byte `at` of the open file fd: the
 * decoding threads write each chunk at its place (the header and the table
 * order tile the file: check_source or build_header). */
static ptwm_error write_tensors(ptwm_reader *r, int fd, const char *path, uint64_t at,
                                ptwm_err *err) {
    size_t i, n = ptwm_reader_count(r);
    size_t *idx = (size_t *)ptwm_calloc(n + 1, sizeof *idx);
    uint64_t *offs = (uint64_t *)ptwm_calloc(n + 1, sizeof *offs);
    ptwm_error rc;
    if (!idx || !offs) {
        rc = ptwm_fail(err, PTWM_ERR_NOMEM, "out of memory for %zu tensors", n);
    } else {
        for (i = 0; i < n; i++) {
            ptwm_tensor_info info;
            ptwm_reader_tensor(r, i, &info, NULL);
            idx[i] = i;
            offs[i] = at;
            at += info.nbytes;
        }
        rc = ptwm_reader_stream_to_file(r, idx, n, fd, path, offs, NULL, NULL, err);
    }
    ptwm_free(idx);
    ptwm_free(offs);
    return rc;
}

ptwm_error ptwm_reader_write_safetensors(ptwm_reader *r, const char *path, ptwm_err *err) {
    ptwm_atomic_file f;
    void *fresh = NULL;
    const void *hdr;
    size_t len;
    ptwm_error rc;
    memset(&f, 0, sizeof(f));
    f.fd = -1;
    if (!r || !path) return ptwm_fail(err, PTWM_ERR_INVALID_ARG, "NULL reader or path");
    hdr = ptwm_reader_source_header(r, &len);
    if (hdr) rc = check_source(r, (const uint8_t *)hdr, len, err);
    else rc = build_header(r, &fresh, &len, err);
    if (rc) return rc;
    if (fresh) hdr = fresh;
    if ((rc = ptwm_atomic_open(path, &f, err))) goto out;
    if ((rc = ptwm_write_full(f.fd, hdr, len, path, err))) goto out;
    if ((rc = write_tensors(r, f.fd, path, len, err))) goto out;
    rc = ptwm_atomic_commit(&f, err);
out:
    if (rc) ptwm_atomic_abort(&f);
    ptwm_free(fresh);
    return rc;
}
