/*
 * Phone numbers: parsing of what people type (national or international format) into E.164,
 * checked against the numbering plan of libphonenumber's metadata (domain/phone_data.c).
 *
 * A number is valid when its national significant number has one of the region's possible
 * lengths and matches the region's general-description pattern (any line type: fixed, mobile,
 * toll-free...). Compiled patterns are cached per region on first use; the cache is not
 * thread-safe, so call this from one thread (the event loop) only.
 */
#pragma once
#include <stddef.h>

/* Longest E.164 text with its '+' and NUL. */
#define PHONE_E164_MAX 17

/* Normalizes `input` into E.164 ("+34612345678") in out[0..n).
 *
 * Accepted input: digits with optional spaces, dashes, dots, slashes and parentheses;
 * international format "+<country code><number>"; with `region` (ISO 3166-1 alpha-2, either
 * case) also the region's national format (with or without its national prefix, e.g. "0" in
 * GB, "1" in the US, "0 ... 15" for Argentine mobiles) and its international dialling prefix
 * ("00 44 ...", "011 44 ..."). Without a region, or for a region without numbering-plan data,
 * only the '+' form is accepted. An international number may belong to any country, whatever
 * `region` says.
 *
 * Returns 0, DOMAIN_EINVAL (not a valid number) or DOMAIN_ENOSPC (n too small; n >=
 * PHONE_E164_MAX is always enough). */
int phone_normalize(const char *input, const char *region, char *out, size_t n);

/* Frees the compiled patterns (tests and shutdown; later calls compile them again). */
void phone_cache_clear(void);
