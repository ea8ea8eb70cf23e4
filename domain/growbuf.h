/*
 * The growable byte buffer of domain/ (canonical requests, templates, token bodies): malloc'd,
 * doubling from 256 bytes, always NUL-terminated after len so text can be used as a C string.
 * Running out of memory aborts, as everywhere in the project. core/buf.h is the loop side's
 * buffer (JSON escaping, arena helpers); domain/ may not include core/, so it has this one.
 */
#pragma once
#include <stddef.h>

typedef struct growbuf {
    char *data; /* NULL until the first put */
    size_t len, cap;
} growbuf_t;

#define GROWBUF_INIT                                                                               \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

void growbuf_put(growbuf_t *b, const void *p, size_t n);
void growbuf_puts(growbuf_t *b, const char *s);
/* Frees the data and empties the buffer. */
void growbuf_free(growbuf_t *b);
