/*
 * ISO 8601 timestamps <-> epoch milliseconds (UTC). The API writes every timestamp as
 * "YYYY-MM-DDTHH:MM:SS.mmmZ"; it reads the common variants clients send. Time-zone
 * conversion for display is left to PostgreSQL.
 */
#pragma once
#include <stdint.h>

#define TIMEFMT_LEN 24 /* "2026-01-02T03:04:05.678Z" */

/* Parses "YYYY-MM-DDTHH:MM[:SS[.fraction]]" followed by "Z" or an offset "+hh:mm", "-hh:mm",
 * "+hhmm" or "+hh" ('T' may be 't' or a space, 'Z' may be 'z'). A time and a zone are
 * required; fractions beyond milliseconds are truncated. Years 0001..9999; the date must exist
 * and hour < 24, minute < 60, second < 60, offset within +-23:59. 0 and *out_ms set, or
 * DOMAIN_EINVAL. */
int timefmt_parse(const char *s, int64_t *out_ms);
/* Formats ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" into out (TIMEFMT_LEN + 1 bytes). Values outside
 * years 0000..9999 are clamped to that range. */
void timefmt_format(int64_t ms, char out[TIMEFMT_LEN + 1]);
/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12, day 1..31). */
int64_t timefmt_days_from_civil(int y, int m, int d);
/* Days in month m (1..12) of year y. */
int timefmt_days_in_month(int y, int m);
