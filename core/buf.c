/* Growable byte buffer used for JSON rendering and connection I/O. */
#include "core/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/mem.h"

void buf_reserve(buf_t *b, size_t extra)
{
    size_t need;
    if (!size_add3(b->len, extra, 1, &need)) xoverflow("buf_reserve");
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        if (!size_mul(cap, 2, &cap)) cap = need;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_append(buf_t *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(buf_t *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_putc(buf_t *b, char c)
{
    buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void buf_printf(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap2);
    va_end(ap2);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof(tmp)) {
        buf_append(b, tmp, (size_t)n);
    } else {
        buf_reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
    }
    va_end(ap);
}

/* Length of a valid UTF-8 sequence at s (max n bytes), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned int cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

void buf_json_strn(buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    buf_reserve(b, n + 2);
    buf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t run = i;
        /* Copy plain ASCII runs in one go. */
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            buf_append(b, p + i, run - i);
            i = run;
            continue;
        }
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            buf_append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            switch (c) {
            case '\n':
                buf_append(b, "\\n", 2);
                break;
            case '\r':
                buf_append(b, "\\r", 2);
                break;
            case '\t':
                buf_append(b, "\\t", 2);
                break;
            default:
                buf_append(b, esc, 6);
            }
            i++;
        } else {
            size_t len = utf8_seq(p + i, n - i);
            if (len == 0) {
                buf_append(b, "\xEF\xBF\xBD", 3);
                i++;
            } else {
                buf_append(b, p + i, len);
                i += len;
            }
        }
    }
    buf_putc(b, '"');
}

void buf_json_str(buf_t *b, const char *s)
{
    if (!s) {
        buf_append(b, "null", 4);
        return;
    }
    buf_json_strn(b, s, strlen(s));
}

void buf_consume(buf_t *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data) b->data[b->len] = '\0';
}

void buf_reset(buf_t *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void buf_free(buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *buf_steal(buf_t *b)
{
    char *p = b->data;
    if (!p) p = xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
