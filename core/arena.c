/*
 * Request arena: a chain of chunks, bump allocation, freed in one call. The first chunk is
 * sized for a typical request (2 KiB, so idle streams stay small); larger requests grow by
 * doubling, and an allocation bigger than half a chunk gets a chunk of its own so big bodies do not
 * waste the tail.
 */
#include "core/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/mem.h"

#define ARENA_FIRST 2048
#define ARENA_ALIGN 16

struct arena_chunk {
    arena_chunk_t *next;
    size_t size;
    size_t used;
    _Alignas(16) char data[];
};

struct arena_cleanup {
    struct arena_cleanup *next;
    void (*fn)(void *);
    void *p;
};

void arena_init(arena_t *a)
{
    a->head = NULL;
    a->total = 0;
    a->cleanups = NULL;
}

static arena_chunk_t *chunk_new(size_t size)
{
    size_t bytes;
    if (!size_add(sizeof(arena_chunk_t), size, &bytes)) xoverflow("arena chunk");
    arena_chunk_t *c = xmalloc(bytes);
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

void *arena_alloc(arena_t *a, size_t n)
{
    /* Rounding up must not wrap a huge n to a tiny block. */
    if (!size_add(n, ARENA_ALIGN - 1, &n)) xoverflow("arena_alloc");
    n &= ~(size_t)(ARENA_ALIGN - 1);
    if (n == 0) n = ARENA_ALIGN;
    arena_chunk_t *c = a->head;
    if (c && c->size - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        a->total += n;
        return p;
    }
    size_t size = c ? c->size * 2 : ARENA_FIRST;
    if (size > 256 * 1024) size = 256 * 1024;
    if (n > size / 2) {
        /* Dedicated chunk, linked behind the head so the head keeps its free tail. */
        arena_chunk_t *big = chunk_new(n);
        big->used = n;
        if (c) {
            big->next = c->next;
            c->next = big;
        } else {
            a->head = big;
        }
        a->total += n;
        return big->data;
    }
    arena_chunk_t *nc = chunk_new(size);
    nc->next = c;
    a->head = nc;
    nc->used = n;
    a->total += n;
    return nc->data;
}

void *arena_calloc(arena_t *a, size_t n)
{
    void *p = arena_alloc(a, n);
    memset(p, 0, n);
    return p;
}

char *arena_strndup(arena_t *a, const char *s, size_t n)
{
    size_t bytes;
    if (!size_add(n, 1, &bytes)) xoverflow("arena_strndup");
    char *p = arena_alloc(a, bytes);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *arena_strdup(arena_t *a, const char *s)
{
    return s ? arena_strndup(a, s, strlen(s)) : NULL;
}

char *arena_vprintf(arena_t *a, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) n = 0;
    char *p = arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *arena_printf(arena_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = arena_vprintf(a, fmt, ap);
    va_end(ap);
    return p;
}

void arena_on_free(arena_t *a, void (*fn)(void *), void *p)
{
    struct arena_cleanup *c = arena_alloc(a, sizeof(*c));
    c->fn = fn;
    c->p = p;
    c->next = a->cleanups;
    a->cleanups = c;
}

void arena_free(arena_t *a)
{
    /* Cleanups live inside the chunks: run them all before releasing memory. */
    for (struct arena_cleanup *c = a->cleanups; c; c = c->next)
        c->fn(c->p);
    a->cleanups = NULL;
    arena_chunk_t *c = a->head;
    while (c) {
        arena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}
