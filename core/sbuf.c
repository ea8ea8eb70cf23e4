/* Refcounted immutable buffers: one encoding of an event, shared by every stream it goes to. */
#include "core/sbuf.h"

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/mem.h"

sbuf_t *sbuf_new(const void *data, size_t len)
{
    size_t bytes;
    if (!size_add3(sizeof(sbuf_t), len, 1, &bytes)) xoverflow("sbuf_new");
    sbuf_t *b = xmalloc(bytes);
    b->refs = 1;
    b->len = len;
    b->counter = NULL;
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
    if (!b || --b->refs > 0) return;
    if (b->counter) *b->counter -= b->len;
    free(b);
}

void sbuf_count(sbuf_t *b, size_t *counter)
{
    b->counter = counter;
    *counter += b->len;
}
