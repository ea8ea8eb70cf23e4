/*
 * core/sse.c: the event encoder every stream writes with. Fields: [0] id, [1] event name,
 * [2] payload (any bytes). Oracle: the output, read back as a browser's EventSource does
 * (WHATWG "event stream interpretation"), is exactly one event whose id and event name are the
 * inputs without CR/LF and whose data is the payload without CR; no payload can end the event
 * early or add a field.
 */
#include <stdio.h>

#include "core/buf.h"
#include "core/sse.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void strip(buf_t *out, const char *s, size_t n, int keep_lf)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\r' && (keep_lf || s[i] != '\n')) buf_putc(out, s[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fields_t f;
    fuzz_split(&f, data, size, 3);
    sbuf_t *sb = sse_encode_event(f.s[0], f.len[0], f.s[1], f.len[1], f.s[2], f.len[2]);
    FUZZ_CHECK(sb->len >= 2 && sb->data[sb->len - 1] == '\n' && sb->data[sb->len - 2] == '\n');

    /* Parse: lines end at LF (the encoder never writes CR); a blank line dispatches. */
    buf_t id = BUF_INIT, ev = BUF_INIT, dat = BUF_INIT;
    int events = 0, data_lines = 0;
    size_t i = 0;
    while (i < sb->len) {
        const char *line = sb->data + i;
        const char *nl = memchr(line, '\n', sb->len - i);
        FUZZ_CHECK(nl != NULL);
        size_t ll = (size_t)(nl - line);
        i += ll + 1;
        FUZZ_CHECK(memchr(line, '\r', ll) == NULL);
        if (ll == 0) {
            events++;
            FUZZ_CHECK(i == sb->len); /* the only blank line is the last one */
            continue;
        }
        const char *colon = memchr(line, ':', ll);
        FUZZ_CHECK(colon != NULL);
        size_t fl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - fl - 1;
        if (vl && *v == ' ') v++, vl--;
        if (fl == 2 && memcmp(line, "id", 2) == 0) {
            FUZZ_CHECK(id.len == 0);
            buf_append(&id, v, vl);
        } else if (fl == 5 && memcmp(line, "event", 5) == 0) {
            FUZZ_CHECK(ev.len == 0);
            buf_append(&ev, v, vl);
        } else if (fl == 4 && memcmp(line, "data", 4) == 0) {
            if (data_lines++) buf_putc(&dat, '\n');
            buf_append(&dat, v, vl);
        } else {
            FUZZ_CHECK(!"unexpected field");
        }
    }
    FUZZ_CHECK(events == 1);
    buf_t want = BUF_INIT;
    strip(&want, f.s[0], f.len[0], 0);
    FUZZ_CHECK(want.len == id.len && (!want.len || memcmp(want.data, id.data, id.len) == 0));
    buf_reset(&want);
    strip(&want, f.s[1], f.len[1], 0);
    FUZZ_CHECK(want.len == ev.len && (!want.len || memcmp(want.data, ev.data, ev.len) == 0));
    buf_reset(&want);
    strip(&want, f.s[2], f.len[2], 1);
    FUZZ_CHECK(want.len == dat.len && (!want.len || memcmp(want.data, dat.data, dat.len) == 0));
    buf_free(&want);
    buf_free(&id);
    buf_free(&ev);
    buf_free(&dat);
    sbuf_unref(sb);
    fuzz_fields_free(&f);
    return 0;
}
