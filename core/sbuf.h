/*
 * Shared, refcounted, immutable byte buffer: an SSE event encoded once and written to many
 * streams. The last unref frees it.
 */
#pragma once
#include <stddef.h>

typedef struct sbuf {
    int refs;
    size_t len;
    char data[];
} sbuf_t;

/* Copies len bytes; refs starts at 1. */
sbuf_t *sbuf_new(const void *data, size_t len);
sbuf_t *sbuf_ref(sbuf_t *b);
void sbuf_unref(sbuf_t *b);
