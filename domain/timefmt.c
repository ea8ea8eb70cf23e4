/*
 * ISO 8601 parsing and formatting (see timefmt.h). Calendar arithmetic uses Howard Hinnant's
 * days-from-civil algorithm, exact for the whole proleptic Gregorian calendar.
 */
#include "domain/timefmt.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "domain/err.h"

#define MS_PER_DAY INT64_C(86400000)

static bool digits(const char *s, int n, int *out);
static void civil_from_days(int64_t z, int *y, int *m, int *d);
static void put_digits(char *out, unsigned v, int width);

/* Writes exactly `width` decimal digits of v, zero-padded. */
static void put_digits(char *out, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* Reads exactly n ASCII digits. */
static bool digits(const char *s, int n, int *out)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int timefmt_days_in_month(int y, int m)
{
    static const int len[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    if (m < 1 || m > 12) return 0;
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return len[m - 1];
}

int64_t timefmt_days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

/* Microseconds of 0001-01-01T00:00:00Z and one past 9999-12-31T23:59:59.999999Z: the instants
 * that four-digit years can write and PostgreSQL reads back (ISO notation has no year 0000
 * there). */
#define US_MIN (timefmt_days_from_civil(1, 1, 1) * MS_PER_DAY * 1000)
#define US_END (timefmt_days_from_civil(10000, 1, 1) * MS_PER_DAY * 1000)

int timefmt_parse_us(const char *s, int64_t *out_us)
{
    int y, mo, d, h, mi, sec = 0, us = 0, oh = 0, om = 0, sign = 0;
    const char *p = s;

    if (s == NULL) return DOMAIN_EINVAL;
    if (!digits(p, 4, &y) || p[4] != '-' || !digits(p + 5, 2, &mo) || p[7] != '-' ||
        !digits(p + 8, 2, &d))
        return DOMAIN_EINVAL;
    p += 10;
    if (*p != 'T' && *p != 't' && *p != ' ') return DOMAIN_EINVAL;
    p++;
    if (!digits(p, 2, &h) || p[2] != ':' || !digits(p + 3, 2, &mi)) return DOMAIN_EINVAL;
    p += 5;
    if (*p == ':') {
        if (!digits(p + 1, 2, &sec)) return DOMAIN_EINVAL;
        p += 3;
        if (*p == '.' || *p == ',') {
            int n = 0;
            p++;
            for (; *p >= '0' && *p <= '9'; p++, n++)
                if (n < 6) us = us * 10 + (*p - '0');
            if (n == 0) return DOMAIN_EINVAL;
            for (; n < 6; n++)
                us *= 10;
        }
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p == '-' ? -1 : 1;
        if (!digits(p + 1, 2, &oh)) return DOMAIN_EINVAL;
        p += 3;
        if (*p == ':') {
            if (!digits(p + 1, 2, &om)) return DOMAIN_EINVAL;
            p += 3;
        } else if (*p >= '0' && *p <= '9') {
            if (!digits(p, 2, &om)) return DOMAIN_EINVAL;
            p += 2;
        }
        if (oh > 23 || om > 59) return DOMAIN_EINVAL;
    } else {
        return DOMAIN_EINVAL; /* no zone: the instant would be ambiguous */
    }
    if (*p != '\0') return DOMAIN_EINVAL;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > timefmt_days_in_month(y, mo) || h > 23 ||
        mi > 59 || sec > 59)
        return DOMAIN_EINVAL;

    int64_t t = (timefmt_days_from_civil(y, mo, d) * MS_PER_DAY +
                 ((int64_t)h * 3600 + mi * 60 + sec) * 1000) *
                    1000 +
                us;
    t -= (int64_t)sign * (oh * 3600 + om * 60) * 1000000;
    /* An offset can carry a date at either end of the range out of it. */
    if (t < US_MIN || t >= US_END) return DOMAIN_EINVAL;
    *out_us = t;
    return 0;
}

/* Floor, not truncation toward zero: 1969-12-31T23:59:59.9995Z is -1 ms, not 0. */
static int64_t us_to_ms(int64_t us)
{
    return us >= 0 ? us / 1000 : -((-us + 999) / 1000);
}

int timefmt_parse(const char *s, int64_t *out_ms)
{
    int64_t us;
    int rc = timefmt_parse_us(s, &us);
    if (rc == 0) *out_ms = us_to_ms(us);
    return rc;
}

void timefmt_format_us(int64_t us, char out[TIMEFMT_US_LEN + 1])
{
    if (us < US_MIN) us = US_MIN;
    if (us >= US_END) us = US_END - 1;
    int64_t ms = us_to_ms(us);
    char head[TIMEFMT_LEN + 1];
    timefmt_format(ms, head);
    memcpy(out, head, 23); /* "YYYY-MM-DDTHH:MM:SS.mmm" */
    put_digits(out + 23, (unsigned)(us - ms * 1000), 3);
    out[26] = 'Z';
    out[27] = '\0';
}

void timefmt_format(int64_t ms, char out[TIMEFMT_LEN + 1])
{
    /* 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z */
    const int64_t lo = timefmt_days_from_civil(0, 1, 1) * MS_PER_DAY;
    const int64_t hi = (timefmt_days_from_civil(9999, 12, 31) + 1) * MS_PER_DAY - 1;
    int y, m, d;

    if (ms < lo) ms = lo;
    if (ms > hi) ms = hi;
    int64_t days = ms >= 0 ? ms / MS_PER_DAY : -((-ms + MS_PER_DAY - 1) / MS_PER_DAY);
    int64_t rem = ms - days * MS_PER_DAY;
    civil_from_days(days, &y, &m, &d);
    unsigned secs = (unsigned)(rem / 1000);
    put_digits(out, (unsigned)y, 4);
    out[4] = '-';
    put_digits(out + 5, (unsigned)m, 2);
    out[7] = '-';
    put_digits(out + 8, (unsigned)d, 2);
    out[10] = 'T';
    put_digits(out + 11, secs / 3600, 2);
    out[13] = ':';
    put_digits(out + 14, secs / 60 % 60, 2);
    out[16] = ':';
    put_digits(out + 17, secs % 60, 2);
    out[19] = '.';
    put_digits(out + 20, (unsigned)(rem % 1000), 3);
    out[23] = 'Z';
    out[24] = '\0';
}
