/*
 * The compiled-in list of IANA time zone names (generated into domain/tz_names.c by
 * scripts/gen_tz_names.py). Read-only data, sorted by strcmp() order.
 */
#pragma once
#include <stddef.h>

extern const char *const tz_names[];
extern const size_t tz_names_count;
