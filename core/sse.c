/* Server-sent events framing. */
#include "core/sse.h"

#include "core/buf.h"
#include "core/checked.h"
#include "core/mem.h"

/* Appends s[0..n) without CR or LF: a line break inside a field would end it early. */
static void put_field(buf_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n' && s[i] != '\r') buf_putc(b, s[i]);
}

sbuf_t *sse_encode_event(const char *id, size_t idlen, const char *event, size_t evlen,
                         const char *data, size_t dlen)
{
    buf_t b = BUF_INIT;
    size_t want;
    if (size_add3(idlen, evlen, dlen, &want) && size_add(want, 32, &want)) buf_reserve(&b, want);
    buf_puts(&b, "id: ");
    put_field(&b, id, idlen);
    buf_puts(&b, "\nevent: ");
    put_field(&b, event, evlen);
    /* One data line per line of the payload (JSON from PostgreSQL or jansson has none, but a
     * stray newline must not end the event early). */
    buf_puts(&b, "\ndata: ");
    for (size_t i = 0; i < dlen; i++) {
        if (data[i] == '\n')
            buf_puts(&b, "\ndata: ");
        else if (data[i] != '\r')
            buf_putc(&b, data[i]);
    }
    buf_puts(&b, "\n\n");
    sbuf_t *sb = sbuf_new(b.data, b.len);
    buf_free(&b);
    return sb;
}
