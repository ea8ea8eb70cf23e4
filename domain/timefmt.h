/*
 * ISO 8601 timestamps <-> epoch milliseconds or microseconds (UTC). The API writes timestamps
 * as "YYYY-MM-DDTHH:MM:SS.mmmZ" (chat times with microseconds); it reads the common variants
 * clients send. Time-zone
 * conversion for display is left to PostgreSQL.
 */
#pragma once
#include <stdint.h>

#define TIMEFMT_LEN 24    /* "2026-01-02T03:04:05.678Z" */
#define TIMEFMT_US_LEN 27 /* "2026-01-02T03:04:05.678901Z" */

/* Parses "YYYY-MM-DDTHH:MM[:SS[(.|,)fraction]]" followed by "Z" or an offset "+hh:mm",
 * "-hh:mm", "+hhmm" or "+hh" ('T' may be 't' or a space, 'Z' may be 'z'). A time and a zone are
 * required; fractions beyond microseconds are truncated. Years 0001..9999; the date must exist
 * and hour < 24, minute < 60, second < 60 (no leap second), offset within +-23:59, and the
 * instant in UTC within 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z. 0 and *out_us set
 * (microseconds since the epoch), or DOMAIN_EINVAL. */
int timefmt_parse_us(const char *s, int64_t *out_us);
/* timefmt_parse_us in milliseconds (rounded down). */
int timefmt_parse(const char *s, int64_t *out_ms);
/* Formats ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" into out (TIMEFMT_LEN + 1 bytes). Values outside
 * years 0000..9999 are clamped to that range. */
void timefmt_format(int64_t ms, char out[TIMEFMT_LEN + 1]);
/* Formats us (microseconds) as "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" into out (TIMEFMT_US_LEN + 1
 * bytes), clamped to years 0001..9999: the text a time a client sent is handed to PostgreSQL
 * as, so that PostgreSQL never reads a spelling the parser reads differently. */
void timefmt_format_us(int64_t us, char out[TIMEFMT_US_LEN + 1]);
/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12, day 1..31). */
int64_t timefmt_days_from_civil(int y, int m, int d);
/* Days in month m (1..12) of year y. */
int timefmt_days_in_month(int y, int m);
