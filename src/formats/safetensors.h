/* Internal: the safetensors header parser shared by the reader, the
 * checkpoint directory reader and the fuzz harness. */
#ifndef PTWM_SAFETENSORS_H
#define PTWM_SAFETENSORS_H

#include "common.h"
#include "nametab.h"

/* One tensor entry of a header, after validation. Names and shapes live in
 * arenas of ptwm_st_parsed (one allocation each, not one per tensor): a
 * header of a million tensors costs tens of bytes per tensor, not a tree. */
typedef struct ptwm_st_entry {
    const char *name;           /* in p->names */
    const uint64_t *shape;      /* ndim dims in p->dims */
    uint64_t begin, end;        /* data_offsets, relative to the data region */
    size_t order;               /* position in the header */
    size_t name_at, shape_at;   /* offsets of name and shape in the arenas */
    ptwm_dtype dtype;
    uint32_t ndim;
} ptwm_st_entry;

typedef struct ptwm_st_parsed {
    ptwm_st_entry *t;           /* sorted into file order: (begin, end, header order) */
    size_t n;
    ptwm_kv *meta;              /* __metadata__ in header order (strings in names) */
    size_t nmeta;
    uint64_t data_len;          /* end of the last tensor: bytes the data region must hold */
    char *names;                /* every tensor name and metadata string, NUL-terminated */
    uint64_t *dims;             /* every shape, one after the other */
    ptwm_nametab by_name;       /* the names' hash table, over t */
} ptwm_st_parsed;

/* Parse and validate a header's JSON (the bytes after the 8-byte length):
 * schema, dtypes, shapes, offsets and the exact tiling of [0, data_len).
 * `label` names the file in messages. On failure *out is left empty. */
ptwm_error ptwm_st_parse_header(const char *json, size_t len, const char *label,
                                ptwm_st_parsed *out, ptwm_err *err);
void ptwm_st_parsed_free(ptwm_st_parsed *p);
/* The index in p->t of the tensor called `name`, or -1 (a hash lookup). */
ptrdiff_t ptwm_st_parsed_find(const ptwm_st_parsed *p, const char *name);

/* An entry `"name": {"dtype": ..., "shape": [...], "data_offsets": [a, b]}`
 * in the plain form safetensors_plain.c describes, scanned without jansson:
 * 1 with *e filled (name at s + name_at, name_len bytes; end: the position
 * after the value's '}'), 0 when the entry at s[i] (its '"') is not plain,
 * valid or not (the caller then decodes it with jansson). */
/* The position of the first byte at or after pos that is not JSON
 * whitespace (space, tab, newline, carriage return), or len. */
size_t ptwm_json_skip_ws(const char *json, size_t len, size_t pos);

typedef struct ptwm_st_plain {
    size_t name_at, name_len, end;
    char dtype[33];
    uint64_t shape[PTWM_MAX_NDIM], offs[2];
    uint32_t ndim;
} ptwm_st_plain;
int ptwm_st_plain_entry(const char *s, size_t len, size_t i, ptwm_st_plain *e);
/* Tests and fuzzers: 0 sends every entry through jansson (default 1), so the
 * two paths can be compared on the same header. */
void ptwm_st_set_plain(int on);

/* Check the 8-byte length prefix against the file size: on success
 * *header_len is the JSON length and the JSON fits the file. */
ptwm_error ptwm_st_check_prefix(const uint8_t prefix[8], uint64_t file_size, const char *label,
                                uint64_t *header_len, ptwm_err *err);
/* Check that the data region of a file of `file_size` bytes holds exactly
 * what the header describes ("expected N bytes, file has M"). */
ptwm_error ptwm_st_check_size(const ptwm_st_parsed *p, uint64_t header_len, uint64_t file_size,
                              const char *label, ptwm_err *err);

/* Every tensor with bytes to write has data (PTWM_ERR_INVALID_ARG naming
 * `path` and the tensor otherwise). */
ptwm_error ptwm_st_check_data(const char *path, const ptwm_tensor_desc *tensors, size_t n,
                              ptwm_err *err);

/* A JSON value (a json_t *) as messages quote one of the wrong kind: "-3",
 * "1.5 (not an integer)", "a string", "an array", "null"... */
void ptwm_json_describe(const void *value, char *buf, size_t cap);

#endif
