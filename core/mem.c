/* Allocation wrappers that abort on exhaustion: a server that cannot allocate a few bytes
 * cannot answer anyway, and checking NULL everywhere hides real bugs. */
#include "core/mem.h"

#include "core/checked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *xcalloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (!p) oom(count * n);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

void xoverflow(const char *what)
{
    fprintf(stderr, "fatal: size overflow in %s\n", what);
    abort();
}

char *xstrndup(const char *s, size_t n)
{
    size_t bytes;
    if (!size_add(n, 1, &bytes)) xoverflow("xstrndup");
    char *p = xmalloc(bytes);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}
