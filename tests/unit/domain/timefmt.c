/* Unit tests for domain/timefmt (expected values computed with Python's datetime). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/timefmt.h"

static int64_t parse_ok(const char *s)
{
    int64_t ms = 0;
    assert_int_equal(timefmt_parse(s, &ms), 0);
    return ms;
}

static void test_parse(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("2026-01-02T03:04:05Z"), INT64_C(1767323045000));
    assert_int_equal(parse_ok("2026-01-02T03:04:05.678Z"), INT64_C(1767323045678));
    assert_int_equal(parse_ok("2026-01-02T03:04:05.6789999Z"), INT64_C(1767323045678));
    assert_int_equal(parse_ok("2026-01-02T03:04:05.6Z"), INT64_C(1767323045600));
    assert_int_equal(parse_ok("2026-01-02T03:04:05.678-05:00"), INT64_C(1767341045678));
    assert_int_equal(parse_ok("2026-01-02T03:04:05.678-0500"), INT64_C(1767341045678));
    assert_int_equal(parse_ok("2026-01-02T03:04:05.678-05"), INT64_C(1767341045678));
    assert_int_equal(parse_ok("2026-03-10T10:00:00+05:30"), INT64_C(1773117000000));
    assert_int_equal(parse_ok("2026-01-02T03:04:05+00:00"), INT64_C(1767323045000));
    assert_int_equal(parse_ok("2026-01-02t03:04:05z"), INT64_C(1767323045000));
    assert_int_equal(parse_ok("2026-01-02 03:04:05Z"), INT64_C(1767323045000));
    assert_int_equal(parse_ok("2026-01-02T03:04Z"), INT64_C(1767323040000));
    assert_int_equal(parse_ok("2024-02-29T23:59:59.999Z"), INT64_C(1709251199999));
    assert_int_equal(parse_ok("1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parse_ok("1969-12-31T23:59:59.999Z"), -1);
    assert_int_equal(parse_ok("0001-01-01T00:00:00Z"), INT64_C(-62135596800000));
    assert_int_equal(parse_ok("9999-12-31T23:59:59.999Z"), INT64_C(253402300799999));
    /* A decimal comma; offsets up to +-23:59 that stay within the range. */
    assert_int_equal(parse_ok("2026-01-02T03:04:05,678Z"), INT64_C(1767323045678));
    assert_int_equal(parse_ok("9999-12-31T23:59:59.999+23:59"), INT64_C(253402214459999));
    assert_int_equal(parse_ok("0001-01-01T00:00:00-00:01"), INT64_C(-62135596740000));
    assert_int_equal(parse_ok("0001-01-01T01:00:00+01:00"), INT64_C(-62135596800000));
    assert_int_equal(parse_ok("9999-12-31T22:59:59.999-01:00"), INT64_C(253402300799999));
}

static int64_t parse_us_ok(const char *s)
{
    int64_t us = 0;
    assert_int_equal(timefmt_parse_us(s, &us), 0);
    return us;
}

static void test_parse_us(void **state)
{
    (void)state;
    assert_int_equal(parse_us_ok("2026-01-02T03:04:05.678901Z"), INT64_C(1767323045678901));
    assert_int_equal(parse_us_ok("2026-01-02T03:04:05,6789019Z"), INT64_C(1767323045678901));
    assert_int_equal(parse_us_ok("2026-01-02T03:04:05.6Z"), INT64_C(1767323045600000));
    assert_int_equal(parse_us_ok("2026-01-02T12:04:05.000001+09:00"), INT64_C(1767323045000001));
    assert_int_equal(parse_us_ok("1969-12-31T23:59:59.999999Z"), -1);
    assert_int_equal(parse_us_ok("0001-01-01T00:00:00Z"), INT64_C(-62135596800000000));
    assert_int_equal(parse_us_ok("9999-12-31T23:59:59.999999Z"), INT64_C(253402300799999999));
    int64_t us = 7, ms = 7;
    assert_int_equal(timefmt_parse_us("9999-12-31T23:59:59.999999-00:01", &us), DOMAIN_EINVAL);
    assert_int_equal(timefmt_parse_us("2026-01-02T23:59:60Z", &us), DOMAIN_EINVAL);
    assert_int_equal(us, 7);
    /* Milliseconds round down, before the epoch as after it. */
    assert_int_equal(timefmt_parse("1969-12-31T23:59:59.9995Z", &ms), 0);
    assert_int_equal(ms, -1);
}

static void test_format_us(void **state)
{
    char out[TIMEFMT_US_LEN + 1];
    int64_t back;
    (void)state;

    timefmt_format_us(INT64_C(1767323045678901), out);
    assert_string_equal(out, "2026-01-02T03:04:05.678901Z");
    timefmt_format_us(-1, out);
    assert_string_equal(out, "1969-12-31T23:59:59.999999Z");
    timefmt_format_us(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000000Z");
    timefmt_format_us(INT64_MAX, out); /* clamped */
    assert_string_equal(out, "9999-12-31T23:59:59.999999Z");
    timefmt_format_us(INT64_MIN, out);
    assert_string_equal(out, "0001-01-01T00:00:00.000000Z");
    assert_int_equal(strlen(out), TIMEFMT_US_LEN);
    for (int64_t t = INT64_C(-62135596800000000); t < INT64_C(253402300799999999);
         t += INT64_C(86400000000) * 89 + 3601000001) {
        timefmt_format_us(t, out);
        assert_int_equal(timefmt_parse_us(out, &back), 0);
        assert_int_equal(back, t);
    }
}

static void test_parse_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "2026-01-02",            /* a date alone: no time */
        "2026-01-02T03:04:05",   /* no zone */
        "2026-01-02T03:04:05.Z", /* empty fraction */
        "2026-01-02T03:04:05ZZ",
        "2026-01-02T03:04:05Z ",
        " 2026-01-02T03:04:05Z",
        "2026-01-02T3:04:05Z",
        "2026-1-02T03:04:05Z",
        "2026-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "2026-01-02T24:00:00Z",
        "2026-01-02T23:60:00Z",
        "2026-01-02T23:59:60Z", /* leap seconds are not accepted */
        "2026-01-02T03:04:05+24:00",
        "2026-01-02T03:04:05+05:60",
        "2026-01-02T03:04:05+5",
        "2026-01-02T03:04:05+05:0",
        "2026-01-02T03:04:05+05:30:00",
        "2026-01-02T03:04:05,Z",
        /* Offsets that carry the instant out of years 0001..9999 UTC (PostgreSQL reads no year
         * 0000, timefmt_format clamps at 9999). */
        "0001-01-01T00:00:00+00:01",
        "0001-01-01T00:59:59.999999+01:00",
        "9999-12-31T23:59:59.999-00:01",
        "9999-12-31T23:00:00-01:00",
        "2026-01-02X03:04:05Z",
        "20260102T030405Z",
        "1767323045000",
        "next tuesday",
    };
    int64_t ms = 42;
    (void)state;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (timefmt_parse(bad[i], &ms) != DOMAIN_EINVAL) fail_msg("accepted \"%s\"", bad[i]);
    }
    assert_int_equal(ms, 42);
    assert_int_equal(timefmt_parse(NULL, &ms), DOMAIN_EINVAL);
}

static void test_format(void **state)
{
    char out[TIMEFMT_LEN + 1];
    (void)state;

    timefmt_format(INT64_C(1767323045678), out);
    assert_string_equal(out, "2026-01-02T03:04:05.678Z");
    timefmt_format(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
    timefmt_format(-1, out);
    assert_string_equal(out, "1969-12-31T23:59:59.999Z");
    timefmt_format(INT64_C(1709251199999), out);
    assert_string_equal(out, "2024-02-29T23:59:59.999Z");
    timefmt_format(INT64_C(253402300799999), out);
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
    timefmt_format(INT64_MAX, out); /* clamped */
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
    timefmt_format(INT64_MIN, out);
    assert_string_equal(out, "0000-01-01T00:00:00.000Z");
    assert_int_equal(strlen(out), TIMEFMT_LEN);
}

static void test_round_trip(void **state)
{
    char out[TIMEFMT_LEN + 1];
    int64_t back;
    (void)state;

    /* Every day boundary and some odd instants across four centuries. */
    for (int64_t t = INT64_C(-12219292800000); t < INT64_C(253402300799999);
         t += INT64_C(86400000) * 97 + 3601001) {
        timefmt_format(t, out);
        assert_int_equal(timefmt_parse(out, &back), 0);
        assert_int_equal(back, t);
    }
}

static void test_calendar(void **state)
{
    (void)state;
    assert_int_equal(timefmt_days_from_civil(1970, 1, 1), 0);
    assert_int_equal(timefmt_days_from_civil(2000, 3, 1), 11017);
    assert_int_equal(timefmt_days_from_civil(1969, 12, 31), -1);
    assert_int_equal(timefmt_days_in_month(2024, 2), 29);
    assert_int_equal(timefmt_days_in_month(2100, 2), 28);
    assert_int_equal(timefmt_days_in_month(2000, 2), 29);
    assert_int_equal(timefmt_days_in_month(2026, 4), 30);
    assert_int_equal(timefmt_days_in_month(2026, 13), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),     cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_format),    cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_calendar),  cmocka_unit_test(test_parse_us),
        cmocka_unit_test(test_format_us),
    };
    return cmocka_run_group_tests_name("domain/timefmt", tests, NULL, NULL);
}
