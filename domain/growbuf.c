/* The growable byte buffer of domain/ (see growbuf.h). */
#include "domain/growbuf.h"

#include <stdlib.h>
#include <string.h>

void growbuf_put(growbuf_t *b, const void *p, size_t n)
{
    /* n comes from strings and fixed fields the caller holds in memory, so len + n + 1 cannot
     * wrap; the doubling stops at the first capacity that fits. */
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL) abort(); /* out of memory aborts, per project policy */
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void growbuf_puts(growbuf_t *b, const char *s)
{
    growbuf_put(b, s, strlen(s));
}

void growbuf_free(growbuf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
