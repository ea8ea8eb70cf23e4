/* Growable heap byte buffer, always NUL-terminated after data[len]. */
#pragma once
#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
    char *data;
    size_t len;
    size_t cap;
} buf_t;

#define BUF_INIT                                                                                   \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

void buf_reserve(buf_t *b, size_t extra);
void buf_append(buf_t *b, const void *p, size_t n);
void buf_puts(buf_t *b, const char *s);
void buf_putc(buf_t *b, char c);
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included; invalid UTF-8 bytes become U+FFFD. */
void buf_json_str(buf_t *b, const char *s);
void buf_json_strn(buf_t *b, const char *s, size_t n);
/* Removes the first n bytes. */
void buf_consume(buf_t *b, size_t n);
void buf_reset(buf_t *b);
void buf_free(buf_t *b);
/* Hands the storage to the caller (free() it); the buffer is left empty. */
char *buf_steal(buf_t *b);
