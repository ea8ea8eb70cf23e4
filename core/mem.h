/* Allocation wrappers: running out of memory aborts here, so no caller checks for NULL. */
#pragma once
#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* A size computation overflowed where the caller has no error path: abort, like running out of
 * memory. Input from clients is checked (core/checked.h) before it gets this far. */
_Noreturn void xoverflow(const char *what);

/* container_of: reach the owner of an embedded libuv handle. */
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
