/* Editing .ptwm images in tests: the table stored plain so its fields can be
 * changed, CRCs resealed after an edit so the damage reaches the parser, and
 * chunk payloads located and swapped. */
#ifndef PTWM_TEST_IMAGE_H
#define PTWM_TEST_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tu_image {
    uint8_t *p;
    size_t len;
} tu_image;

tu_image tu_image_copy(const tu_image *a);
uint64_t tu_image_table_offset(const tu_image *im);
/* Make the table's CRC and the footer's CRC right again after an edit. */
void tu_image_reseal(tu_image *im);
/* The same file with its packed table (section 4) stored plain; takes
 * ownership of `packed`. */
tu_image tu_image_plain(tu_image packed);
/* Where `pat` first lies in the table (a file offset), or 0. */
size_t tu_image_find(const tu_image *im, const void *pat, size_t n);
/* File offset and coded size of chunk k of tensor t (checked). */
void tu_image_chunk_at(const tu_image *im, size_t t, uint64_t k, uint64_t *off, uint32_t *coded);
/* The `which`-th pair (in table order) of distinct payloads of equal coded
 * size and different bytes: their offsets and size. 0 if there is none. */
int tu_image_equal_chunks(const tu_image *im, size_t which, uint64_t *a, uint64_t *b, uint32_t *coded);
/* Exchange the n bytes at a and b. */
void tu_image_swap(tu_image *im, uint64_t a, uint64_t b, uint32_t n);

/* The repository's real-weights sample, samples/posenet.bf16.safetensors
 * (under $PTWM_SOURCE_DIR, else ..), in a static buffer. */
const char *tu_sample_path(void);
/* Write to `dst` a safetensors file of the sample's first tensors (file
 * order) that together hold at most max_bytes (at least one tensor), with
 * their bytes: real weights small enough to damage many times over. Returns
 * the number of tensors, 0 on failure. */
size_t tu_sample_subset(const char *dst, uint64_t max_bytes);

#endif
