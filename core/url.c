/* Request-line and header parsing helpers; pure, tested in tests/unit/core. */
#include "core/url.h"

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/mem.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into out (n + 1 bytes); false when an escape is malformed or decodes
 * to NUL. */
static bool decode_into(char *out, const char *s, size_t n, bool plus_space)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n) return false;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0) return false;
            c = (char)(hi * 16 + lo);
            if (c == '\0') return false;
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        out[j++] = c;
    }
    out[j] = '\0';
    return true;
}

char *url_decode(arena_t *a, const char *s, size_t n, bool plus_space)
{
    size_t bytes;
    if (!size_add(n, 1, &bytes)) xoverflow("url_decode");
    char *out = arena_alloc(a, bytes);
    return decode_into(out, s, n, plus_space) ? out : NULL;
}

/* A malloc'd percent-decoded copy, or NULL when malformed. */
static char *decode_dup(const char *s, size_t n)
{
    size_t bytes;
    if (!size_add(n, 1, &bytes)) xoverflow("url_parse");
    char *out = xmalloc(bytes);
    if (decode_into(out, s, n, false)) return out;
    free(out);
    return NULL;
}

void url_parts_free(url_parts_t *u)
{
    free(u->user);
    free(u->pass);
    free(u->host);
    memset(u, 0, sizeof(*u));
}

int url_parse(const char *url, const char *scheme, url_parts_t *u)
{
    memset(u, 0, sizeof(*u));
    size_t sl = strlen(scheme);
    if (strncmp(url, scheme, sl) != 0 || strncmp(url + sl, "://", 3) != 0) return -1;
    const char *p = url + sl + 3;
    const char *slash = strchr(p, '/');
    if (!slash) slash = p + strlen(p);
    const char *at = memchr(p, '@', (size_t)(slash - p));
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon) {
            if (colon > p && !(u->user = decode_dup(p, (size_t)(colon - p)))) goto bad;
            if (!(u->pass = decode_dup(colon + 1, (size_t)(at - colon - 1)))) goto bad;
        } else if (!(u->pass = decode_dup(p, (size_t)(at - p)))) { /* scheme://password@host */
            goto bad;
        }
        p = at + 1;
    }
    const char *hend;
    if (*p == '[') {
        hend = memchr(p, ']', (size_t)(slash - p));
        if (!hend) goto bad;
        u->host = xstrndup(p + 1, (size_t)(hend - p - 1));
        hend++;
    } else {
        hend = memchr(p, ':', (size_t)(slash - p));
        if (!hend) hend = slash;
        u->host = xstrndup(p, (size_t)(hend - p));
    }
    if (*hend == ':') {
        char *end;
        long port = strtol(hend + 1, &end, 10);
        if (end != slash || end == hend + 1 || port < 1 || port > 65535) goto bad;
        u->port = (int)port;
    } else if (hend != slash) {
        goto bad;
    }
    u->path = slash;
    return 0;
bad:
    url_parts_free(u);
    return -1;
}

const char *url_query_get(arena_t *a, const char *query, const char *name)
{
    if (!query) return NULL;
    size_t nlen = strlen(name);
    const char *p = query;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        char *key = url_decode(a, p, klen, true);
        if (key && strlen(key) == nlen && memcmp(key, name, nlen) == 0) {
            if (!eq) return "";
            return url_decode(a, eq + 1, len - klen - 1, true);
        }
        if (!amp) break;
        p = amp + 1;
    }
    return NULL;
}

const char *url_cookie_get(arena_t *a, const char *header, const char *name)
{
    if (!header) return NULL;
    size_t nlen = strlen(name);
    const char *p = header;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq && (size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0) {
            const char *v = eq + 1;
            size_t vlen = len - nlen - 1;
            while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') v++, vlen -= 2;
            return arena_strndup(a, v, vlen);
        }
        if (!end) break;
        p = end + 1;
    }
    return NULL;
}

char *url_encode(arena_t *a, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    size_t bytes;
    if (!size_mul(n, 3, &bytes) || !size_add(bytes, 1, &bytes)) xoverflow("url_encode");
    char *out = arena_alloc(a, bytes);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[j++] = (char)c;
        } else {
            out[j++] = '%';
            out[j++] = hex[c >> 4];
            out[j++] = hex[c & 15];
        }
    }
    out[j] = '\0';
    return out;
}
