/*
 * Checks for callbackURL / redirectTo values and for the Origin / Referer of browser requests,
 * so the service never redirects to a foreign site (docs/api.md: relative paths, or URLs under
 * the trusted origins; anything else is 400).
 *
 * Origins compare in normalized form: lower-case scheme and host, default port (80 for http,
 * 443 for https) dropped, so "HTTPS://App.Example.com:443/x" is under "https://app.example.com".
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define URLCHECK_ORIGIN_MAX 300 /* buffer size for urlcheck_origin() output, NUL included */

/* A same-site relative path: starts with one '/', not "//" or "/\", no backslash, no control
 * characters, spaces or non-ASCII bytes anywhere. */
bool urlcheck_is_relative(const char *url);
/* Writes the normalized origin "scheme://host[:port]" of an absolute http(s) URL into out.
 * Rejected (DOMAIN_EINVAL): other schemes, user info ("user@host"), an empty or malformed host,
 * ports outside 1..65535, backslashes, control characters, spaces. DOMAIN_ENOSPC when out is
 * too small. */
int urlcheck_origin(const char *url, char *out, size_t outsz);
/* True when origin (an Origin header value, or any URL) normalizes to one of origins[0..n). */
bool urlcheck_origin_trusted(const char *origin, const char *const *origins, size_t n);
/* The callbackURL / redirectTo rule: a relative path, or an absolute http(s) URL whose origin
 * is one of origins[0..n) (each "scheme://host[:port]", normalized here too). */
bool urlcheck_is_allowed(const char *url, const char *const *origins, size_t n);
/* The `lang` query parameter of a URL (relative or absolute) when it is "en" or "es" (any
 * case); returns the static "en"/"es", or NULL when absent or anything else. */
const char *urlcheck_lang(const char *url);
