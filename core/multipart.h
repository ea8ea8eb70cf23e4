/*
 * Streaming multipart/form-data parser (RFC 7578 over RFC 2046): bytes are fed in pieces of any
 * size, a boundary may be split anywhere between pieces, and memory is fixed (one header block
 * of MULTIPART_HEADER_MAX and one field value of MULTIPART_FIELD_MAX inside the struct), so a
 * file part of any size streams through on_file_data without being held.
 *
 * Parts with a filename (filename or filename* in Content-Disposition, RFC 5987 UTF-8 or
 * ISO-8859-1) are files; other parts are fields, collected whole and handed to on_field, and a
 * field longer than MULTIPART_FIELD_MAX fails with MULTIPART_EFIELD. Directory parts of a
 * filename ("C:\dir\a.txt") are dropped. The preamble and epilogue are ignored, up to
 * MULTIPART_OUTSIDE_MAX bytes together (MULTIPART_EOUTSIDE past it).
 *
 * Callbacks return 0 to go on; any other value stops the parser and multipart_feed returns it
 * (use positive values, so they differ from the MULTIPART_E* codes). After an error the parser
 * stays failed.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define MULTIPART_HEADER_MAX 8192   /* one part's header block */
#define MULTIPART_FIELD_MAX 4096    /* a non-file field's value */
#define MULTIPART_BOUNDARY_MAX 70   /* RFC 2046 */
#define MULTIPART_OUTSIDE_MAX 16384 /* preamble and epilogue bytes (browsers send none) */

enum multipart_err {
    MULTIPART_EINVAL = -1,     /* Content-Type is not multipart/form-data with a valid boundary */
    MULTIPART_EPARSE = -2,     /* malformed body (bad delimiter line, header without ':') */
    MULTIPART_EHEADER = -3,    /* a part's headers exceed MULTIPART_HEADER_MAX */
    MULTIPART_EFIELD = -4,     /* a field value exceeds MULTIPART_FIELD_MAX */
    MULTIPART_ETRUNCATED = -5, /* the body ended before the final boundary */
    MULTIPART_EOUTSIDE = -6,   /* over MULTIPART_OUTSIDE_MAX bytes outside the parts */
};

typedef struct multipart_part {
    const char *name;         /* form field name; NULL when absent */
    const char *filename;     /* NULL for a field; may be "" (a file input left empty) */
    const char *content_type; /* NULL when absent */
} multipart_part_t;

typedef struct multipart_handler {
    int (*on_field)(void *ud, const char *name, const char *value, size_t len);
    int (*on_file_begin)(void *ud, const multipart_part_t *part);
    int (*on_file_data)(void *ud, const char *data, size_t len);
    int (*on_file_end)(void *ud);
} multipart_handler_t;

typedef struct multipart {
    const multipart_handler_t *h;
    void *ud;
    int state;
    int error;
    char delim[MULTIPART_BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
    size_t dlen;
    size_t match; /* bytes of delim matched so far */
    bool is_file;
    size_t hlen; /* header block bytes */
    char header[MULTIPART_HEADER_MAX + 1];
    size_t flen;    /* field value bytes */
    size_t outside; /* preamble and epilogue bytes */
    char field[MULTIPART_FIELD_MAX + 1];
    char strings[MULTIPART_HEADER_MAX * 3 + 16]; /* decoded name, filename, content type */
    multipart_part_t part;
} multipart_t;

/* Reads the boundary from a Content-Type header value (quoted or not). 0 or MULTIPART_EINVAL. */
int multipart_init(multipart_t *m, const char *content_type, const multipart_handler_t *h,
                   void *ud);
/* Feeds the next bytes. 0, a MULTIPART_E* code, or a callback's non-zero value. */
int multipart_feed(multipart_t *m, const char *data, size_t len);
/* The body has ended: 0 when the final boundary was seen, else MULTIPART_ETRUNCATED (or the
 * earlier error). */
int multipart_finish(multipart_t *m);
