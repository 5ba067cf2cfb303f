/* Test support for .ptwm directories' file records (records.h). */
#include "records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "ptdir_files.h"
#include "testutil.h"

int tu_record_refresh(const char *dir) {
    ptwm_files rec;
    int found = 0, bad;
    size_t i;
    ptwm_err err;
    if (ptwm_files_read(dir, &rec, &found, &err) != PTWM_OK || !found) return -1;
    for (i = 0, bad = 0; i < rec.n && !bad; i++) {
        char *path = ptwm_path_join(dir, rec.e[i].name);
        bad = !path || ptwm_hash_file(path, rec.e[i].hash, &rec.e[i].size, &err) != PTWM_OK;
        ptwm_free(path);
    }
    bad = bad || ptwm_files_write(&rec, dir, &err) != PTWM_OK;
    ptwm_files_free(&rec);
    return bad ? -1 : 0;
}

int tu_record_strip(const char *dir) {
    static const char key[] = "\"file_record\": \"" PTWM_FILES_NAME "\"";
    static const char none[] = "\"note\": \"written before file records\"";
    char *rec = ptwm_path_join(dir, PTWM_FILES_NAME), *idx = ptwm_path_join(dir, PTWM_INDEX_NAME);
    size_t len = 0;
    char *text = idx ? (char *)tu_read_file(idx, &len) : NULL, *at;
    int ok = rec && unlink(rec) == 0;
    if (ok && text && (at = strstr(text, key)) != NULL) {
        FILE *f = fopen(idx, "wb");
        ok = f && fwrite(text, 1, (size_t)(at - text), f) == (size_t)(at - text) &&
             fputs(none, f) >= 0 && fputs(at + strlen(key), f) >= 0;
        if (f) ok &= fclose(f) == 0;
    }
    free(text);
    ptwm_free(rec);
    ptwm_free(idx);
    return ok ? 0 : -1;
}
