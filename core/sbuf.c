/* Refcounted immutable buffers: one encoding of an event, shared by every stream it goes to. */
#include "core/sbuf.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

sbuf_t *sbuf_new(const void *data, size_t len)
{
    sbuf_t *b = xmalloc(sizeof(*b) + len + 1);
    b->refs = 1;
    b->len = len;
    memcpy(b->data, data, len);
    b->data[len] = '\0';
    return b;
}

sbuf_t *sbuf_ref(sbuf_t *b)
{
    b->refs++;
    return b;
}

void sbuf_unref(sbuf_t *b)
{
    if (b && --b->refs == 0) free(b);
}
