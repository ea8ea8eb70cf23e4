/*
 * Phone number normalization (see phone.h). The steps follow libphonenumber's parser
 * (PhoneNumberUtil.parse): strip formatting, then either read a country calling code after '+'
 * or the region's international dialling prefix, or take the input as a national number; strip
 * the national prefix with the region's "national prefix for parsing" rule (which may also
 * rewrite the number, as Argentine mobiles "0 11 15 ..." -> "9 11 ..."), and check the national
 * significant number against the region's possible lengths and general pattern.
 *
 * The metadata regexes were converted to POSIX ERE by scripts/gen_phone_data.py. POSIX picks
 * the leftmost-longest match where Java/Python pick by backtracking order; for the prefix rules
 * this only matters when several prefixes could match, and the viability check below (keep the
 * original number when stripping would make a valid number invalid) covers those cases.
 */
#include "domain/phone.h"

#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/err.h"
#include "domain/phone_data.h"

/* Digits kept from the input: E.164 has at most 15, plus room for dialling prefixes. */
#define DIGITS_MAX 24
#define REGIONS_MAX 320
#define GROUPS_MAX 40

enum {
    RE_PATTERN = 0,
    RE_NPFP = 1,
    RE_INTL = 2,
    RE_KINDS = 3,
};

enum {
    SLOT_EMPTY = 0, /* not compiled yet */
    SLOT_READY = 1, /* compiled */
    SLOT_NONE = 2,  /* no pattern, or regcomp refused it: treated as absent */
};

typedef struct re_slot {
    int state;
    regex_t re;
} re_slot_t;

static re_slot_t cache[REGIONS_MAX][RE_KINDS];

static const char *region_source(const phone_region_t *r, int kind)
{
    switch (kind) {
    case RE_PATTERN:
        return r->pattern;
    case RE_NPFP:
        return r->npfp;
    default:
        return r->intl;
    }
}

/* The compiled pattern of one kind for region index i, or NULL when there is none. */
static const regex_t *region_re(int i, int kind)
{
    re_slot_t *s = &cache[i][kind];
    if (s->state == SLOT_EMPTY) {
        const char *src = region_source(&phone_regions[i], kind);
        s->state = SLOT_NONE;
        if (src && regcomp(&s->re, src, REG_EXTENDED) == 0) s->state = SLOT_READY;
    }
    return s->state == SLOT_READY ? &s->re : NULL;
}

void phone_cache_clear(void)
{
    for (int i = 0; i < REGIONS_MAX; i++)
        for (int k = 0; k < RE_KINDS; k++) {
            if (cache[i][k].state == SLOT_READY) regfree(&cache[i][k].re);
            cache[i][k].state = SLOT_EMPTY;
        }
}

static int region_index(const char *region)
{
    if (!region || strlen(region) != 2) return -1;
    char up[3] = {region[0], region[1], 0};
    for (int k = 0; k < 2; k++)
        if (up[k] >= 'a' && up[k] <= 'z') up[k] = (char)(up[k] - 'a' + 'A');
    for (int i = 0; i < phone_regions_count && i < REGIONS_MAX; i++)
        if (strcmp(phone_regions[i].region, up) == 0) return i;
    return -1;
}

/* Full match of the general pattern (lengths not checked), as libphonenumber's
 * matchNationalNumber; a region without a usable pattern matches everything. */
static bool pattern_matches(int i, const char *nn)
{
    const regex_t *re = region_re(i, RE_PATTERN);
    return !re || regexec(re, nn, 0, NULL, 0) == 0;
}

static bool length_possible(int i, size_t len)
{
    return len > 0 && len < 32 && (phone_regions[i].lengths & (1u << len)) != 0;
}

static bool nsn_valid(int i, const char *nn)
{
    return length_possible(i, strlen(nn)) && pattern_matches(i, nn);
}

/* Strips (and maybe rewrites) the national prefix of number into out, as libphonenumber's
 * maybeStripNationalPrefixAndCarrierCode: nothing changes when the rule does not match, or when
 * the number was valid before and would not be after. */
static void strip_national_prefix(int i, const char *number, char out[DIGITS_MAX + 1])
{
    const phone_region_t *r = &phone_regions[i];
    const regex_t *re = region_re(i, RE_NPFP);
    regmatch_t m[GROUPS_MAX];
    snprintf(out, DIGITS_MAX + 1, "%s", number);
    if (!re || !*number || re->re_nsub + 1 > GROUPS_MAX) return;
    if (regexec(re, number, re->re_nsub + 1, m, 0) != 0 || m[0].rm_so != 0) return;
    bool viable_before = pattern_matches(i, number);
    char cand[DIGITS_MAX + 1];
    size_t end = (size_t)m[0].rm_eo;
    int last = r->npfp_last_group;
    if (!r->transform || last <= 0 || (size_t)last > re->re_nsub || m[last].rm_so < 0) {
        snprintf(cand, sizeof(cand), "%s", number + end);
    } else {
        size_t o = 0;
        for (const char *t = r->transform; *t; t++) {
            int g = (unsigned char)*t;
            if (g < 32) {
                if ((size_t)g > re->re_nsub || m[g].rm_so < 0) continue;
                size_t gl = (size_t)(m[g].rm_eo - m[g].rm_so);
                if (o + gl > DIGITS_MAX) return;
                memcpy(cand + o, number + m[g].rm_so, gl);
                o += gl;
            } else {
                if (o + 1 > DIGITS_MAX) return;
                cand[o++] = *t;
            }
        }
        size_t rest = strlen(number + end);
        if (o + rest > DIGITS_MAX) return;
        memcpy(cand + o, number + end, rest);
        cand[o + rest] = '\0';
    }
    if (viable_before && !pattern_matches(i, cand)) return;
    /* As libphonenumber's parse: keep the stripped form only when its length is possible. */
    if (!length_possible(i, strlen(cand))) return;
    memcpy(out, cand, strlen(cand) + 1);
}

/* A national number of region i: the national significant number into nsn, or false. */
static bool national_nsn(int i, const char *digits, char nsn[DIGITS_MAX + 1])
{
    strip_national_prefix(i, digits, nsn);
    return nsn_valid(i, nsn);
}

static int write_e164(int cc, const char *nsn, char *out, size_t n)
{
    int w = snprintf(out, n, "+%d%s", cc, nsn);
    if (w < 0 || (size_t)w >= n) return DOMAIN_ENOSPC;
    /* E.164: at most 15 digits in all. */
    return w - 1 > 15 ? DOMAIN_EINVAL : 0;
}

/* digits after '+' (or after an international dialling prefix). */
static int international(const char *digits, char *out, size_t n)
{
    if (digits[0] == '0') return DOMAIN_EINVAL;
    for (int cc_len = 1; cc_len <= 3 && digits[cc_len - 1]; cc_len++) {
        int cc = 0;
        for (int k = 0; k < cc_len; k++)
            cc = cc * 10 + (digits[k] - '0');
        bool known = false;
        for (int i = 0; i < phone_regions_count && i < REGIONS_MAX; i++) {
            if (phone_regions[i].country_code != cc) continue;
            known = true;
            char nsn[DIGITS_MAX + 1];
            if (national_nsn(i, digits + cc_len, nsn)) return write_e164(cc, nsn, out, n);
        }
        /* Country calling codes are prefix-free: a known code that did not validate ends it. */
        if (known) return DOMAIN_EINVAL;
    }
    return DOMAIN_EINVAL;
}

int phone_normalize(const char *input, const char *region, char *out, size_t n)
{
    char digits[DIGITS_MAX + 1];
    size_t nd = 0;
    bool plus = false, seen = false;
    if (!input || !out || n == 0) return DOMAIN_EINVAL;
    for (const char *p = input; *p; p++) {
        char ch = *p;
        if (ch >= '0' && ch <= '9') {
            if (nd >= DIGITS_MAX) return DOMAIN_EINVAL;
            digits[nd++] = ch;
            seen = true;
        } else if (ch == '+') {
            if (seen || plus) return DOMAIN_EINVAL;
            plus = true;
            seen = true;
        } else if (ch == ' ' || ch == '-' || ch == '.' || ch == '(' || ch == ')' || ch == '/') {
            if (ch != ' ') seen = true;
        } else {
            return DOMAIN_EINVAL;
        }
    }
    digits[nd] = '\0';
    if (nd < 2) return DOMAIN_EINVAL;
    if (plus) return international(digits, out, n);

    int i = region_index(region);
    if (i < 0) return DOMAIN_EINVAL;
    const regex_t *idd = region_re(i, RE_INTL);
    regmatch_t m[1];
    if (idd && regexec(idd, digits, 1, m, 0) == 0 && m[0].rm_so == 0 && m[0].rm_eo > 0) {
        char e164[PHONE_E164_MAX + 8];
        if (international(digits + m[0].rm_eo, e164, sizeof(e164)) == 0) {
            if (strlen(e164) + 1 > n) return DOMAIN_ENOSPC;
            memcpy(out, e164, strlen(e164) + 1);
            return 0;
        }
    }
    char nsn[DIGITS_MAX + 1];
    int cc = phone_regions[i].country_code;
    if (national_nsn(i, digits, nsn)) return write_e164(cc, nsn, out, n);
    /* The country code typed without '+' ("34 612 345 678" in ES), as libphonenumber allows. */
    char ccs[8];
    int cl = snprintf(ccs, sizeof(ccs), "%d", cc);
    if (strncmp(digits, ccs, (size_t)cl) == 0 && national_nsn(i, digits + cl, nsn))
        return write_e164(cc, nsn, out, n);
    return DOMAIN_EINVAL;
}
