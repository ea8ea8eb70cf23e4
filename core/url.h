/* Parsers for the request line's pieces: percent-decoding, query strings, Cookie headers. */
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
