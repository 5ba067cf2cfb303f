/* A source file that shrinks between open and load: every kind of source
 * (safetensors file, safetensors directory, raw F32 file) opened the default
 * way reports PTWM_ERR_TRUNCATED, "file X is N bytes, expected M", where a
 * memory-mapped read used to die of SIGBUS. The input is the repository's
 * samples/posenet.bf16.safetensors. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static uint8_t *sample;
static size_t sample_len;

/* Open `path` as `kind`, shrink `file` (the data file behind it) to half its
 * size with ftruncate, then load every tensor of the source's layout. */
static void shrink_then_load(const char *path, const char *file, ptwm_source_kind kind) {
    ptwm_source *s = NULL;
    ptwm_layout *l = NULL;
    ptwm_err err = {0};
    const ptwm_layout_entry *e;
    size_t n;
    uint64_t count = 0;
    float *dst = NULL;
    int fd;
    char want[256];
    CHECK_ERR(ptwm_source_open(path, kind, &s, &err), &err, PTWM_OK, NULL);
    if (!s) return;
    CHECK_ERR(ptwm_layout_from_source(s, &l, &err), &err, PTWM_OK, NULL);
    if (!l) goto done;
    e = ptwm_layout_entries(l, &n);
    CHECK_ERR(ptwm_layout_elements(e, n, &count, &err), &err, PTWM_OK, NULL);
    dst = (float *)malloc((size_t)count * sizeof(float) + 1);
    fd = open(file, O_WRONLY);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)(sample_len / 2)) == 0);
    if (fd >= 0) close(fd);
    snprintf(want, sizeof want, "file '%s' is %zu bytes, expected %zu", file, sample_len / 2,
             sample_len);
    CHECK_ERR(ptwm_load_layout(s, e, n, PTWM_CONVERT_INT, dst, count, &err), &err,
              PTWM_ERR_TRUNCATED, want);
done:
    free(dst);
    ptwm_layout_free(l);
    ptwm_source_close(s);
}

int main(void) {
    char src[1200], file[1300], dir[1200], raw[1200];
    const char *root = getenv("PTWM_SOURCE_DIR");
    snprintf(src, sizeof src, "%s/samples/posenet.bf16.safetensors", root ? root : ".");
    sample = tu_read_file(src, &sample_len);
    CHECK_MSG(sample != NULL, "cannot read %s (PTWM_SOURCE_DIR)", src);
    if (!sample) return tu_finish("test_source_truncated");

    snprintf(file, sizeof file, "%s/shrinks.safetensors", tu_tmpdir());
    CHECK(tu_write_file(file, sample, sample_len) == 0);
    shrink_then_load(file, file, PTWM_SOURCE_AUTO);

    snprintf(dir, sizeof dir, "%s/ckpt", tu_tmpdir());
    CHECK(mkdir(dir, 0777) == 0);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    CHECK(tu_write_file(file, sample, sample_len) == 0);
    shrink_then_load(dir, file, PTWM_SOURCE_AUTO);

    snprintf(raw, sizeof raw, "%s/shrinks.f32", tu_tmpdir());
    CHECK(tu_write_file(raw, sample, sample_len - sample_len % 4) == 0);
    sample_len -= sample_len % 4;
    shrink_then_load(raw, raw, PTWM_SOURCE_RAW_F32);

    free(sample);
    return tu_finish("test_source_truncated");
}
