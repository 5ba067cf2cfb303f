/* ptwm_outfile: a file appears whole at its name on commit or not at all;
 * an existing file and leftovers of an interrupted run are refused without
 * force (naming the leftover) and replaced or removed with it; a removal on a
 * signal (ptwm_remove_temporary_outputs) takes the temporary file away and
 * makes the commit fail. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static int write_text(ptwm_outfile *f, const char *text) {
    size_t n = strlen(text);
    return write(ptwm_outfile_fd(f), text, n) == (ssize_t)n;
}

static int file_is(const char *path, const char *text) {
    size_t len = 0;
    uint8_t *b = tu_read_file(path, &len);
    int same = b && len == strlen(text) && memcmp(b, text, len) == 0;
    free(b);
    return same;
}

int main(void) {
    const char *path = tu_tmp_path("out.bin"), *left = tu_tmp_path("out.bin.tmp-Ab12Cd");
    ptwm_outfile *f = NULL;
    ptwm_err err;
    int fd;

    /* Written, invisible until committed, then whole. */
    CHECK_ERR(ptwm_outfile_open(path, 0, &f, &err), &err, PTWM_OK, NULL);
    CHECK(f && write_text(f, "first"));
    CHECK(access(path, F_OK) != 0 && tu_count_prefixed("out.bin.tmp-") == 1);
    CHECK_ERR(ptwm_outfile_commit(f, &err), &err, PTWM_OK, NULL);
    CHECK(file_is(path, "first") && tu_count_prefixed("out.bin.tmp-") == 0);

    /* An existing file: refused, then replaced with force. */
    CHECK_ERR(ptwm_outfile_open(path, 0, &f, &err), &err, PTWM_ERR_EXISTS, "already exists");
    CHECK(f == NULL);
    CHECK_ERR(ptwm_outfile_open(path, 1, &f, &err), &err, PTWM_OK, NULL);
    CHECK(f && write_text(f, "second"));
    CHECK(file_is(path, "first"));
    CHECK_ERR(ptwm_outfile_commit(f, &err), &err, PTWM_OK, NULL);
    CHECK(file_is(path, "second"));

    /* Aborted: the temporary file goes, the old file stays. */
    CHECK_ERR(ptwm_outfile_open(path, 1, &f, &err), &err, PTWM_OK, NULL);
    CHECK(f && write_text(f, "never"));
    ptwm_outfile_abort(f);
    CHECK(file_is(path, "second") && tu_count_prefixed("out.bin.tmp-") == 0);

    /* What a killed run leaves is named, and removed by force. */
    fd = open(left, O_CREAT | O_WRONLY, 0644);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(unlink(path) == 0);
    CHECK_ERR(ptwm_outfile_open(path, 0, &f, &err), &err, PTWM_ERR_EXISTS,
              "left over from an interrupted run: 'out.bin.tmp-Ab12Cd'");
    CHECK_ERR(ptwm_outfile_open(path, 1, &f, &err), &err, PTWM_OK, NULL);
    CHECK(access(left, F_OK) != 0);

    /* Removed on a signal: the temporary file goes and the commit fails. */
    CHECK(f && write_text(f, "late"));
    ptwm_remove_temporary_outputs();
    CHECK(tu_count_prefixed("out.bin.tmp-") == 0);
    CHECK_ERR(ptwm_outfile_commit(f, &err), &err, PTWM_ERR_IO, "interrupted by a signal");
    CHECK(access(path, F_OK) != 0);
    return tu_finish("outfile");
}
