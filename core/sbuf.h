/*
 * Shared, refcounted, immutable byte buffer: an SSE event encoded once and written to many
 * streams. The last unref frees it.
 */
#pragma once
#include <stddef.h>

typedef struct sbuf {
    int refs;
    size_t len;
    size_t *counter; /* NULL, or a total that holds len while the buffer lives (sbuf_count) */
    char data[];
} sbuf_t;

/* Copies len bytes; refs starts at 1. */
sbuf_t *sbuf_new(const void *data, size_t len);
sbuf_t *sbuf_ref(sbuf_t *b);
void sbuf_unref(sbuf_t *b);
/* Adds b->len to *counter now and takes it off when the last reference goes, wherever that
 * happens (a write completing inside core/http): the owner of the counter knows how many bytes
 * of its buffers are alive without tracking every holder. Once per buffer. */
void sbuf_count(sbuf_t *b, size_t *counter);
