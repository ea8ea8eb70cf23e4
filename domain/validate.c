/* Field validation rules (see validate.h). */
#include "domain/validate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "domain/err.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/tz_names.h"

/* ISO 3166-1 alpha-2 officially assigned codes (249), sorted; two letters each. */
static const char countries[] =
    "ADAEAFAGAIALAMAOAQARASATAUAWAXAZBABBBDBEBFBGBHBIBJBLBMBNBOBQBRBSBTBVBWBYBZCACCCDCFCGCHCI"
    "CKCLCMCNCOCRCUCVCWCXCYCZDEDJDKDMDODZECEEEGEHERESETFIFJFKFMFOFRGAGBGDGEGFGGGHGIGLGMGNGPGQ"
    "GRGSGTGUGWGYHKHMHNHRHTHUIDIEILIMINIOIQIRISITJEJMJOJPKEKGKHKIKMKNKPKRKWKYKZLALBLCLILKLRLS"
    "LTLULVLYMAMCMDMEMFMGMHMKMLMMMNMOMPMQMRMSMTMUMVMWMXMYMZNANCNENFNGNINLNONPNRNUNZOMPAPEPFPG"
    "PHPKPLPMPNPRPSPTPWPYQARERORSRURWSASBSCSDSESGSHSISJSKSLSMSNSOSRSSSTSVSXSYSZTCTDTFTGTHTJTK"
    "TLTMTNTOTRTTTVTWTZUAUGUMUSUYUZVAVCVEVGVIVNVUWFWSYEYTZAZMZW";

static bool is_alpha(char c);
static bool is_digit(char c);
static bool local_char_ok(char c);
static bool check_domain(const char *d, size_t n);
static int cmp_tz(const void *key, const void *elem);
static double parse_q(const char *p, const char *end);

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool local_char_ok(char c)
{
    return is_alpha(c) || is_digit(c) || (c != '\0' && strchr("!#$%&'*+/=?^_`{|}~.-", c));
}

static bool check_domain(const char *d, size_t n)
{
    size_t labels = 0, i = 0;
    const char *last = NULL;
    size_t lastlen = 0;

    while (i <= n) {
        size_t start = i;
        while (i < n && d[i] != '.') {
            if (!is_alpha(d[i]) && !is_digit(d[i]) && d[i] != '-') return false;
            i++;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || d[start] == '-' || d[i - 1] == '-') return false;
        labels++;
        last = d + start;
        lastlen = len;
        i++; /* skip the dot, or step past the end */
    }
    if (labels < 2) return false;
    if (lastlen >= 4 && strncasecmp(last, "xn--", 4) == 0) return true;
    if (lastlen < 2) return false;
    for (size_t k = 0; k < lastlen; k++)
        if (!is_alpha(last[k])) return false;
    return true;
}

bool validate_is_email(const char *s)
{
    const char *at;
    size_t n, local;

    if (s == NULL) return false;
    n = strlen(s);
    if (n == 0 || n > VALIDATE_EMAIL_MAX) return false;
    at = strchr(s, '@');
    if (at == NULL || strchr(at + 1, '@') != NULL) return false;
    local = (size_t)(at - s);
    if (local == 0 || local > 64 || s[0] == '.' || s[local - 1] == '.') return false;
    for (size_t i = 0; i < local; i++) {
        if (!local_char_ok(s[i])) return false;
        if (s[i] == '.' && s[i + 1] == '.') return false;
    }
    return check_domain(at + 1, n - local - 1);
}

int validate_email_lower(const char *s, char *out, size_t outsz)
{
    size_t n;

    if (!validate_is_email(s)) return DOMAIN_EINVAL;
    n = strlen(s);
    if (outsz < n + 1) return DOMAIN_ENOSPC;
    for (size_t i = 0; i <= n; i++)
        out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    return 0;
}

int validate_trimmed(const char *s, size_t n, size_t min_cp, size_t max_cp, size_t *off,
                     size_t *len)
{
    size_t o, l, cp;

    if (s == NULL || !text_utf8_valid(s, n)) return DOMAIN_EINVAL;
    text_trim(s, n, &o, &l);
    cp = text_cp_count(s + o, l);
    if (cp < min_cp || cp > max_cp) return DOMAIN_EINVAL;
    *off = o;
    *len = l;
    return 0;
}

int validate_name(const char *s, size_t n, size_t *off, size_t *len)
{
    size_t o, l;

    if (validate_trimmed(s, n, 1, VALIDATE_NAME_MAX_CP, &o, &l) != 0) return DOMAIN_EINVAL;
    if (text_has_control(s + o, l)) return DOMAIN_EINVAL;
    *off = o;
    *len = l;
    return 0;
}

bool validate_is_lang(const char *s)
{
    return s != NULL && (strcmp(s, "en") == 0 || strcmp(s, "es") == 0);
}

/* Reads the q of one Accept-Language entry's parameters p..end (";q=0.8"); 1 when absent,
 * -1 when malformed (the entry is then skipped). */
static double parse_q(const char *p, const char *end)
{
    while (p < end) {
        while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
            p++;
        if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            const char *v = p + 2;
            double q = 0, scale = 1;
            if (v >= end || (*v != '0' && *v != '1')) return -1;
            q = *v++ - '0';
            if (v < end && *v == '.') {
                for (v++; v < end && is_digit(*v); v++) {
                    scale /= 10;
                    q += (*v - '0') * scale;
                }
            }
            return q > 1 ? -1 : q;
        }
        while (p < end && *p != ';')
            p++;
    }
    return 1;
}

const char *validate_accept_language(const char *header)
{
    const char *best = NULL;
    double best_q = 0;

    if (header == NULL) return NULL;
    for (const char *p = header; *p;) {
        const char *end = strchr(p, ',');
        if (end == NULL) end = p + strlen(p);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;

        const char *tag = p;
        while (p < end && (is_alpha(*p) || *p == '-' || *p == '*' || is_digit(*p)))
            p++;
        size_t primary = 0;
        while (primary < (size_t)(p - tag) && tag[primary] != '-')
            primary++;

        const char *lang = NULL;
        if (primary == 2 && strncasecmp(tag, "en", 2) == 0) lang = "en";
        if (primary == 2 && strncasecmp(tag, "es", 2) == 0) lang = "es";
        double q = parse_q(p, end);
        /* Strictly greater: among equal q-values the earlier entry keeps its place. */
        if (lang != NULL && q > 0 && q > best_q) {
            best = lang;
            best_q = q;
        }
        p = *end ? end + 1 : end;
    }
    return best;
}

int validate_date_parse(const char *s, int *y, int *m, int *d)
{
    int yy = 0, mm = 0, dd = 0;

    if (s == NULL || strlen(s) != 10 || s[4] != '-' || s[7] != '-') return DOMAIN_EINVAL;
    for (int i = 0; i < 10; i++) {
        if (i == 4 || i == 7) continue;
        if (!is_digit(s[i])) return DOMAIN_EINVAL;
    }
    yy = atoi(s);
    mm = (s[5] - '0') * 10 + (s[6] - '0');
    dd = (s[8] - '0') * 10 + (s[9] - '0');
    if (yy < 1 || mm < 1 || mm > 12 || dd < 1 || dd > timefmt_days_in_month(yy, mm))
        return DOMAIN_EINVAL;
    if (y) *y = yy;
    if (m) *m = mm;
    if (d) *d = dd;
    return 0;
}

bool validate_is_date(const char *s)
{
    return validate_date_parse(s, NULL, NULL, NULL) == 0;
}

int validate_country_upper(const char *s, char out[3])
{
    char up[2];

    if (s == NULL || !is_alpha(s[0]) || !is_alpha(s[1]) || s[2] != '\0') return DOMAIN_EINVAL;
    for (int i = 0; i < 2; i++)
        up[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 32) : s[i];

    /* Binary search over the packed pairs. */
    size_t lo = 0, hi = (sizeof countries - 1) / 2;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = memcmp(up, countries + 2 * mid, 2);
        if (c == 0) {
            if (out) {
                out[0] = up[0];
                out[1] = up[1];
                out[2] = '\0';
            }
            return 0;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return DOMAIN_EINVAL;
}

bool validate_is_country(const char *s)
{
    return validate_country_upper(s, NULL) == 0;
}

static int cmp_tz(const void *key, const void *elem)
{
    return strcmp((const char *)key, *(const char *const *)elem);
}

bool validate_is_timezone(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > VALIDATE_TZ_MAX) return false;
    return bsearch(s, tz_names, tz_names_count, sizeof tz_names[0], cmp_tz) != NULL;
}

int validate_int(const char *s, int min, int max, int *out)
{
    int64_t v = 0;
    bool neg = false;
    size_t nd = 0;

    if (s == NULL) return DOMAIN_EINVAL;
    if (*s == '-') {
        neg = true;
        s++;
    }
    for (; *s; s++, nd++) {
        if (!is_digit(*s) || nd >= 10) return DOMAIN_EINVAL;
        v = v * 10 + (*s - '0');
    }
    if (nd == 0) return DOMAIN_EINVAL;
    if (neg) v = -v;
    if (v < min || v > max) return DOMAIN_EINVAL;
    *out = (int)v;
    return 0;
}
