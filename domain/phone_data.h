/*
 * Numbering-plan data of every region, generated from Google's libphonenumber metadata by
 * scripts/gen_phone_data.py into domain/phone_data.c. The patterns are POSIX extended regular
 * expressions (regcomp with REG_EXTENDED), already anchored. Only domain/phone.c reads this.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct phone_region {
    const char *region;    /* ISO 3166-1 alpha-2, upper case */
    int country_code;      /* country calling code, 1..999 */
    const char *intl;      /* "^(IDD prefix)", e.g. "^(00)"; NULL when none */
    const char *npfp;      /* "^(national prefix for parsing)"; NULL when none */
    const char *transform; /* replacement for the npfp match: literal digits, and bytes 1..31
                            * that stand for that ERE group of npfp; NULL: just strip */
    int npfp_last_group;   /* ERE index of npfp's last original capturing group; 0 none */
    const char *pattern;   /* "^(national number pattern)$"; NULL: lengths only */
    uint32_t lengths;      /* bit n set when a national number of n digits is possible */
} phone_region_t;

/* Regions ordered by country code, the main region of a shared code first (US before CA). */
extern const phone_region_t phone_regions[];
extern const int phone_regions_count;
/* The libphonenumber metadata version the table was generated from. */
extern const char phone_data_version[];
