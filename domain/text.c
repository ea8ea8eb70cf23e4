/* UTF-8 validation, counting, trimming and truncation (see text.h). */
#include "domain/text.h"

#include <stdint.h>

static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
static bool is_space_cp(uint32_t cp);

/* Decodes one code point at s; returns its byte length, or 0 when the sequence is invalid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    uint32_t c = s[0], min;
    size_t len;

    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        len = 2, c &= 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, c &= 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, c &= 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return len;
}

static bool is_space_cp(uint32_t cp)
{
    switch (cp) {
    case ' ':
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case 0x00a0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
    case 0xfeff:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

bool text_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        uint32_t cp;
        size_t l = utf8_decode(p + i, n - i, &cp);
        if (l == 0) return false;
        i += l;
    }
    return true;
}

size_t text_cp_count(const char *s, size_t n)
{
    size_t count = 0;

    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80) count++;
    return count;
}

void text_trim(const char *s, size_t n, size_t *off, size_t *len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, start = n, end = 0;

    /* One forward pass: start is the first non-space character, end the byte after the last
     * one. An invalid byte counts as a one-byte non-space character. */
    while (i < n) {
        uint32_t cp = 0;
        size_t l = utf8_decode(p + i, n - i, &cp);
        bool space = l != 0 && is_space_cp(cp);
        if (l == 0) l = 1;
        if (!space) {
            if (start == n) start = i;
            end = i + l;
        }
        i += l;
    }
    if (start == n) {
        *off = n;
        *len = 0;
    } else {
        *off = start;
        *len = end - start;
    }
}

size_t text_truncate(const char *s, size_t n, size_t max_cp)
{
    size_t count = 0;

    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (count == max_cp) return i;
            count++;
        }
    }
    return n;
}

bool text_has_control(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f) return true;
        /* C1 controls are U+0080..U+009F, encoded as C2 80..C2 9F. */
        if (p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f) return true;
    }
    return false;
}

size_t text_ascii_fallback(const char *s, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c < 0x80) {
            out[o++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '_' : (char)c;
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = utf8_decode(u + i, n - i, &cp);
        out[o++] = '_';
        i += len ? len : 1;
    }
    out[o] = '\0';
    return o;
}
