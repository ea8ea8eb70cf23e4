/*
 * Input rules of docs/api.md for request fields: emails, names, languages,
 * dates, countries, time zones and pagination integers. Predicates return bool; parsers and
 * normalizers return 0 or DOMAIN_EINVAL / DOMAIN_ENOSPC and write to caller buffers.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define VALIDATE_EMAIL_MAX 254
#define VALIDATE_NAME_MAX_CP 100
#define VALIDATE_TZ_MAX 100

/* Practical email syntax: local@domain, at most 254 bytes, ASCII only. Local part: 1..64 of
 * [A-Za-z0-9] and !#$%&'*+/=?^_`{|}~.- with no leading, trailing or doubled dot. Domain: two
 * or more dot-separated labels of [A-Za-z0-9-] (1..63, no leading or trailing '-'); the last
 * label is 2..63 letters, or an "xn--" punycode label. No spaces, quotes or control chars. */
bool validate_is_email(const char *s);
/* validate_is_email(), then writes the lower-cased address (stored and compared that way) into
 * out. 0, DOMAIN_EINVAL or DOMAIN_ENOSPC (outsz below strlen(s) + 1). */
int validate_email_lower(const char *s, char *out, size_t outsz);

/* A person's first or last name: valid UTF-8, 1..100 code points after text_trim(), with no
 * control characters. Sets *off and *len to the trimmed span (store that). 0 or DOMAIN_EINVAL. */
int validate_name(const char *s, size_t n, size_t *off, size_t *len);
/* The general trimmed-length rule: valid UTF-8 whose trimmed span has min_cp..max_cp code
 * points. Sets the span like validate_name(). 0 or DOMAIN_EINVAL. */
int validate_trimmed(const char *s, size_t n, size_t min_cp, size_t max_cp, size_t *off,
                     size_t *len);

/* "en" or "es" exactly. */
bool validate_is_lang(const char *s);
/* Picks "en" or "es" from an Accept-Language header by q-value (ties: earlier entry wins),
 * matching the primary subtag case-insensitively ("es-MX" counts as es); q=0 excludes a
 * language; "*" is ignored. Returns the static "en"/"es", or NULL when nothing matches. */
const char *validate_accept_language(const char *header);

/* "YYYY-MM-DD" of a real calendar date (years 0001..9999). Each out pointer may be NULL.
 * 0 or DOMAIN_EINVAL. */
int validate_date_parse(const char *s, int *y, int *m, int *d);
bool validate_is_date(const char *s);

/* An assigned ISO 3166-1 alpha-2 code (the 249 official codes), either case. */
bool validate_is_country(const char *s);
/* validate_is_country(), then the upper-case code into out. 0 or DOMAIN_EINVAL. */
int validate_country_upper(const char *s, char out[3]);

/* An IANA time zone name (zone or link, exact case, e.g. "UTC", "America/New_York",
 * "Asia/Calcutta"), at most VALIDATE_TZ_MAX bytes. */
bool validate_is_timezone(const char *s);

/* Pagination integers: an optional '-' then 1..10 ASCII digits, nothing else (so "", "+5",
 * " 5", "1.0", "1e3" are refused), within [min, max]. 0 and *out set, or DOMAIN_EINVAL. */
int validate_int(const char *s, int min, int max, int *out);
