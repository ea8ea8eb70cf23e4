/* Redirect-target and origin checks (see urlcheck.h). */
#include "domain/urlcheck.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "domain/err.h"

static bool has_bad_char(const char *s);
static bool host_char_ok(char c);

/* Control characters, space, DEL, backslash and non-ASCII bytes never belong in a redirect
 * target we accept: browsers "repair" them in ways that can change the host. */
static bool has_bad_char(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= 0x20 || c >= 0x7f || c == '\\') return true;
    }
    return false;
}

static bool host_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.';
}

bool urlcheck_is_relative(const char *url)
{
    if (url == NULL || url[0] != '/') return false;
    if (url[1] == '/' || url[1] == '\\') return false;
    return !has_bad_char(url);
}

int urlcheck_origin(const char *url, char *out, size_t outsz)
{
    const char *p, *host, *port = NULL;
    size_t hostlen, schemelen;
    long portnum = 0;
    bool https;

    if (url == NULL || has_bad_char(url)) return DOMAIN_EINVAL;
    if (strncasecmp(url, "https://", 8) == 0) {
        https = true, schemelen = 5;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        https = false, schemelen = 4;
    } else {
        return DOMAIN_EINVAL;
    }
    host = url + schemelen + 3;
    p = host;
    if (*p == '[') { /* IPv6 literal */
        p++;
        while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F') ||
               *p == ':' || *p == '.')
            p++;
        if (*p != ']' || p == host + 1) return DOMAIN_EINVAL;
        p++;
    } else {
        while (host_char_ok(*p))
            p++;
        if (p == host) return DOMAIN_EINVAL;
    }
    hostlen = (size_t)(p - host);
    if (*p == ':') {
        port = ++p;
        while (*p >= '0' && *p <= '9' && p - port < 6)
            portnum = portnum * 10 + (*p++ - '0');
        if (p == port || p - port > 5 || portnum < 1 || portnum > 65535) return DOMAIN_EINVAL;
    }
    /* The authority must end here; anything else ('@' of user info, '%', '_') is refused. */
    if (*p != '\0' && *p != '/' && *p != '?' && *p != '#') return DOMAIN_EINVAL;
    if (host[0] == '.' || host[hostlen - 1] == '.' || host[0] == '-') return DOMAIN_EINVAL;

    bool default_port = port == NULL || portnum == (https ? 443 : 80);
    size_t need = schemelen + 3 + hostlen + (default_port ? 0 : 6) + 1;
    if (need > outsz) return DOMAIN_ENOSPC;

    size_t o = 0;
    memcpy(out, https ? "https://" : "http://", schemelen + 3);
    o = schemelen + 3;
    for (size_t i = 0; i < hostlen; i++) {
        char c = host[i];
        out[o++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    if (!default_port) o += (size_t)snprintf(out + o, outsz - o, ":%ld", portnum);
    out[o] = '\0';
    return 0;
}

bool urlcheck_origin_trusted(const char *origin, const char *const *origins, size_t n)
{
    char a[URLCHECK_ORIGIN_MAX], b[URLCHECK_ORIGIN_MAX];

    if (urlcheck_origin(origin, a, sizeof a) != 0) return false;
    for (size_t i = 0; i < n; i++)
        if (origins[i] != NULL && urlcheck_origin(origins[i], b, sizeof b) == 0 &&
            strcmp(a, b) == 0)
            return true;
    return false;
}

bool urlcheck_is_allowed(const char *url, const char *const *origins, size_t n)
{
    if (url == NULL || url[0] == '\0') return false;
    if (url[0] == '/') return urlcheck_is_relative(url);
    return urlcheck_origin_trusted(url, origins, n);
}

const char *urlcheck_lang(const char *url)
{
    const char *q, *end;

    if (url == NULL) return NULL;
    end = strchr(url, '#'); /* the fragment is not part of the query */
    if (end == NULL) end = url + strlen(url);
    q = memchr(url, '?', (size_t)(end - url));
    if (q == NULL) return NULL;
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if (stop - p == 7 && strncmp(p, "lang=", 5) == 0) {
            if (strncasecmp(p + 5, "en", 2) == 0) return "en";
            if (strncasecmp(p + 5, "es", 2) == 0) return "es";
        }
        p = amp ? amp + 1 : end;
    }
    return NULL;
}
