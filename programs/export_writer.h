/* ptwm export's writer: a thread that writes one filled buffer into the
 * output file while the caller fills the other, so decoding and the kernel's
 * copy into the page cache overlap. */
#ifndef PTWM_EXPORT_WRITER_H
#define PTWM_EXPORT_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct export_writer export_writer;

/* Two buffers of cap bytes each, written to fd (path names it in messages)
 * from offset 0 on. NULL when out of memory or no thread starts. */
export_writer *export_writer_open(int fd, const char *path, size_t cap);
/* The buffer to fill next (waits while the thread still writes it). */
uint8_t *export_writer_buffer(export_writer *w);
/* Hand the buffer export_writer_buffer gave, filled with len bytes, to the
 * thread; they go right after the bytes handed before. 0, or -1 (message
 * printed) once a write has failed. */
int export_writer_push(export_writer *w, size_t len);
/* Wait for every write, stop the thread and free w: 0, or -1 (message
 * printed) if a write failed. *written: bytes handed over in all. */
int export_writer_close(export_writer *w, uint64_t *written);

#endif
