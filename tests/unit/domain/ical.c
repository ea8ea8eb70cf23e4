/* Unit tests for domain/ical: folding, escaping, the event's properties. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/ical.h"

/* Every physical line ends with CRLF, holds at most 75 octets, and no line starts inside a
 * UTF-8 sequence; unfolding gives back `want`. */
static void assert_folded(const char *out, const char *want)
{
    growbuf_t unfolded = GROWBUF_INIT;
    const char *p = out;
    bool first = true;
    while (*p) {
        const char *eol = strstr(p, "\r\n");
        assert_non_null(eol);
        size_t n = (size_t)(eol - p);
        assert_true(n <= ICAL_LINE_OCTETS);
        assert_null(memchr(p, '\n', n));
        if (!first) {
            assert_int_equal(p[0], ' ');
            assert_true(n > 1);
            assert_true(((unsigned char)p[1] & 0xC0) != 0x80); /* not a continuation byte */
            growbuf_put(&unfolded, p + 1, n - 1);
        } else {
            growbuf_put(&unfolded, p, n);
        }
        /* the line does not end inside a sequence either */
        size_t k = n;
        while (k > 0 && ((unsigned char)p[k - 1] & 0xC0) == 0x80)
            k--;
        if (k > 0 && (unsigned char)p[k - 1] >= 0xC0) {
            unsigned char lead = (unsigned char)p[k - 1];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            assert_int_equal(n - (k - 1), need);
        }
        first = false;
        p = eol + 2;
    }
    assert_string_equal(unfolded.data ? unfolded.data : "", want);
    growbuf_free(&unfolded);
}

static void test_escape(void **state)
{
    (void)state;
    growbuf_t b = GROWBUF_INIT;
    ical_escape_text(&b, "a,b;c\\d\ne\r\nf\rg\x01h\ti");
    assert_string_equal(b.data, "a\\,b\\;c\\\\d\\ne\\nf\\ng"
                                "h\ti");
    growbuf_free(&b);
}

static void test_short_line_unfolded(void **state)
{
    (void)state;
    growbuf_t b = GROWBUF_INIT;
    ical_line(&b, "SUMMARY", "Hello, world", true);
    assert_string_equal(b.data, "SUMMARY:Hello\\, world\r\n");
    growbuf_free(&b);
}

static void test_fold_exactly_75(void **state)
{
    (void)state;
    char v[80];
    memset(v, 'x', 67); /* "SUMMARY:" is 8 octets: 75 in all, no fold */
    v[67] = '\0';
    growbuf_t b = GROWBUF_INIT;
    ical_line(&b, "SUMMARY", v, false);
    assert_int_equal(b.len, 77);
    growbuf_free(&b);
    v[67] = 'x';
    v[68] = '\0';
    ical_line(&b, "SUMMARY", v, false); /* 76: one fold */
    assert_int_equal(b.len, 75 + 2 + 1 + 1 + 2);
    assert_memory_equal(b.data + 75, "\r\n x\r\n", 6);
    growbuf_free(&b);
}

static void test_fold_multibyte(void **state)
{
    (void)state;
    /* Every offset of 2-, 3- and 4-byte sequences against the 75-octet edge. */
    const char *chars[] = {"\xc3\xb1", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (size_t c = 0; c < 3; c++) {
        for (int pad = 0; pad < 8; pad++) {
            char v[1024];
            size_t n = 0;
            for (int i = 0; i < pad; i++)
                v[n++] = 'a';
            for (int i = 0; i < 80; i++) {
                size_t l = strlen(chars[c]);
                memcpy(v + n, chars[c], l);
                n += l;
            }
            v[n] = '\0';
            growbuf_t b = GROWBUF_INIT;
            ical_line(&b, "DESCRIPTION", v, true);
            char want[1100];
            snprintf(want, sizeof(want), "DESCRIPTION:%s", v);
            assert_folded(b.data, want);
            growbuf_free(&b);
        }
    }
}

static void test_event(void **state)
{
    (void)state;
    growbuf_t b = GROWBUF_INIT;
    ical_calendar_t cal = {.method = "REQUEST", .timezone = "Europe/Madrid"};
    ical_begin(&b, &cal);
    ical_event_t e = {.uid = "u1@coachd",
                      .sequence = 2,
                      .start_ms = 1767261600000LL, /* 2026-01-01T10:00:00Z */
                      .end_ms = 1767261600000LL + 45 * 60000,
                      .stamp_ms = 0,
                      .timezone = "Europe/Madrid",
                      .summary = "Plan; \"A\", B",
                      .organizer_name = "Co \"Ach\"",
                      .organizer_email = "c@example.com",
                      .attendee_name = "Tea",
                      .attendee_email = "t@example.com",
                      .cancelled = true};
    assert_int_equal(ical_event(&b, &e), 0);
    ical_end(&b);
    const char *s = b.data;
    assert_non_null(strstr(s, "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"));
    assert_non_null(strstr(s, "\r\nMETHOD:REQUEST\r\n"));
    assert_non_null(strstr(s, "\r\nUID:u1@coachd\r\nSEQUENCE:2\r\nDTSTAMP:19700101T000000Z\r\n"));
    assert_non_null(strstr(s, "\r\nDTSTART:20260101T100000Z\r\nDTEND:20260101T104500Z\r\n"));
    assert_non_null(strstr(s, "\r\nSTATUS:CANCELLED\r\n"));
    assert_non_null(strstr(s, "\r\nSUMMARY:Plan\\; \"A\"\\, B\r\n"));
    assert_non_null(strstr(s, "\r\nORGANIZER;CN=\"Co 'Ach'\":mailto:c@example.com\r\n"));
    assert_non_null(strstr(s, "END:VEVENT\r\nEND:VCALENDAR\r\n"));
    e.end_ms = e.start_ms;
    assert_int_equal(ical_event(&b, &e), DOMAIN_EINVAL);
    e.end_ms = e.start_ms + 1;
    e.uid = NULL;
    assert_int_equal(ical_event(&b, &e), DOMAIN_EINVAL);
    growbuf_free(&b);
}

/* RFC 5545 CAL-ADDRESS is a URI: the mailto: of an address whose local part holds characters
 * RFC 6068 reserves ('?' starts header fields, '#' a fragment, '%' an escape) percent-encodes
 * them, so a URI parser reads the whole address; the usual characters stay as they are. */
static void test_mailto_encoding(void **state)
{
    (void)state;
    growbuf_t b = GROWBUF_INIT;
    ical_event_t e = {.uid = "u1@coachd",
                      .start_ms = 0,
                      .end_ms = 60000,
                      .organizer_email = "a?b#c%d/e=f&g{h}|^`@example.com"};
    assert_int_equal(ical_event(&b, &e), 0);
    assert_non_null(strstr(
        b.data, "\r\nORGANIZER:mailto:a%3Fb%23c%25d%2Fe%3Df%26g%7Bh%7D%7C%5E%60@example.com"));
    e.organizer_email = "o'brien+tag.x_y-z~!$*@example.com";
    assert_int_equal(ical_event(&b, &e), 0);
    assert_non_null(strstr(b.data, "\r\nORGANIZER:mailto:o'brien+tag.x_y-z~!$*@example.com\r\n"));
    growbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),          cmocka_unit_test(test_short_line_unfolded),
        cmocka_unit_test(test_fold_exactly_75), cmocka_unit_test(test_fold_multibyte),
        cmocka_unit_test(test_event),           cmocka_unit_test(test_mailto_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
