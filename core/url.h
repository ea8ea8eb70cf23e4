/* URLs: the request line's pieces (percent-decoding, query strings, Cookie headers) and the
 * service URLs of the configuration (url_parse). The one URL parser and percent-decoder of the
 * project. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"

/* Percent-decodes s[0..n) into the arena; plus_space turns '+' into ' ' (query strings).
 * Returns NULL when an escape is malformed or decodes to NUL. */
char *url_decode(arena_t *a, const char *s, size_t n, bool plus_space);
/* Value of `name` in a raw query string (decoded, arena); NULL when absent. A key without '='
 * gives "". */
const char *url_query_get(arena_t *a, const char *query, const char *name);
/* Value of cookie `name` in a Cookie header (arena, raw); NULL when absent. */
const char *url_cookie_get(arena_t *a, const char *header, const char *name);
/* Appends s percent-encoded (RFC 3986 unreserved kept) into the arena. */
char *url_encode(arena_t *a, const char *s);

/* The parts of scheme://[[user]:password@]host[:port][/path]. */
typedef struct url_parts {
    char *user, *pass; /* percent-decoded (malloc); NULL when absent */
    char *host;        /* malloc; [v6] without its brackets; "" when empty */
    int port;          /* 0 when absent */
    const char *path;  /* into the parsed string: from the '/' after the authority, else "" */
} url_parts_t;
/* Parses url, whose scheme must be `scheme`. 0, or -1 when malformed (other scheme, bad
 * escape, port outside 1..65535, junk after the host); free with url_parts_free. */
int url_parse(const char *url, const char *scheme, url_parts_t *out);
void url_parts_free(url_parts_t *u);
