/* Test support for .ptwm directories' file records (model.ptwm.files.json). */
#ifndef PTWM_TEST_RECORDS_H
#define PTWM_TEST_RECORDS_H

/* Hash every file dir's record lists again and rewrite the record: the
 * directory is consistent again after a test edited one of its files on
 * purpose (to reach a check behind the record's). 0 on success. */
int tu_record_refresh(const char *dir);
/* Make dir look like one written before file records: remove the record and
 * the index's metadata naming it. 0 on success. */
int tu_record_strip(const char *dir);

#endif
