/*
 * Per-request arena: everything a request allocates (headers, params, parsed JSON copies,
 * response pieces) comes from here and is released by one arena_free() when the request ends.
 * Not thread-safe; owned by exactly one request.
 */
#pragma once
#include <stdarg.h>
#include <stddef.h>

typedef struct arena_chunk arena_chunk_t;

typedef struct arena {
    arena_chunk_t *head;
    size_t total; /* bytes handed out, for limits and stats */
    struct arena_cleanup *cleanups;
} arena_t;

void arena_init(arena_t *a);
/* 16-byte aligned, never NULL. */
void *arena_alloc(arena_t *a, size_t n);
void *arena_calloc(arena_t *a, size_t n);
char *arena_strdup(arena_t *a, const char *s);
char *arena_strndup(arena_t *a, const char *s, size_t n);
char *arena_printf(arena_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *arena_vprintf(arena_t *a, const char *fmt, va_list ap);
/* Frees every chunk; the arena may be reused after arena_init(). */
void arena_free(arena_t *a);

/* Runs fn(p) when the arena is freed (latest registered first): e.g. json_decref of a parsed
 * body. */
void arena_on_free(arena_t *a, void (*fn)(void *), void *p);
