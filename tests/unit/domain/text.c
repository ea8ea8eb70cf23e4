/* Unit tests for domain/text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/text.h"

#define S(lit) lit, sizeof(lit) - 1

static void test_utf8_valid(void **state)
{
    (void)state;
    assert_true(text_utf8_valid(S("")));
    assert_true(text_utf8_valid(S("hello")));
    assert_true(text_utf8_valid(S("señor € 😀")));
    assert_true(text_utf8_valid(S("\xF4\x8F\xBF\xBF"))); /* U+10FFFF */
    assert_true(text_utf8_valid(S("\xEF\xBB\xBF")));     /* BOM */
    assert_false(text_utf8_valid(S("\xff")));
    assert_false(text_utf8_valid(S("\x80")));             /* lone continuation */
    assert_false(text_utf8_valid(S("\xC3")));             /* truncated */
    assert_false(text_utf8_valid(S("\xE2\x82")));         /* truncated */
    assert_false(text_utf8_valid(S("\xC0\xAF")));         /* overlong '/' */
    assert_false(text_utf8_valid(S("\xE0\x80\xAF")));     /* overlong */
    assert_false(text_utf8_valid(S("\xF0\x80\x80\xAF"))); /* overlong */
    assert_false(text_utf8_valid(S("\xED\xA0\x80")));     /* surrogate U+D800 */
    assert_false(text_utf8_valid(S("\xF4\x90\x80\x80"))); /* above U+10FFFF */
    assert_false(text_utf8_valid(S("\xF8\x88\x80\x80\x80")));
    assert_false(text_utf8_valid(S("ok\xC3(")));
    /* The length bounds the scan: a valid prefix of an invalid buffer is valid. */
    assert_true(text_utf8_valid("ab\xff", 2));
}

static void test_cp_count(void **state)
{
    (void)state;
    assert_int_equal(text_cp_count(S("")), 0);
    assert_int_equal(text_cp_count(S("abc")), 3);
    assert_int_equal(text_cp_count(S("ñandú")), 5);
    assert_int_equal(text_cp_count(S("😀😀")), 2);
    assert_int_equal(text_cp_count(S("a€b")), 3);
}

static void check_trim(const char *s, size_t n, const char *want)
{
    size_t off, len;
    text_trim(s, n, &off, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s + off, want, len);
}

static void test_trim(void **state)
{
    size_t off, len;
    (void)state;

    check_trim(S("  hello  "), "hello");
    check_trim(S("\t\r\n\v\fhi there\n"), "hi there");
    check_trim(S("hello"), "hello");
    check_trim(S("\xC2\xA0nbsp\xC2\xA0"), "nbsp");         /* U+00A0 */
    check_trim(S("\xE3\x80\x80ideo\xE3\x80\x80"), "ideo"); /* U+3000 */
    check_trim(S("\xEF\xBB\xBF"
                 "bom"),
               "bom"); /* U+FEFF */
    check_trim(S("\xE2\x80\x83"
                 "em\xE2\x80\xAF"),
               "em");                                /* U+2003, U+202F */
    check_trim(S("\xE2\x80\xA8x\xE2\x80\xA9"), "x"); /* U+2028/2029 */
    check_trim(S(" a \xC2\xA0 b "), "a \xC2\xA0 b"); /* inner kept */
    /* Zero-width space is not white space (JavaScript keeps it too). */
    check_trim(S("\xE2\x80\x8Bzw"), "\xE2\x80\x8Bzw");
    text_trim(S("   \xC2\xA0 "), &off, &len);
    assert_int_equal(len, 0);
    text_trim(S(""), &off, &len);
    assert_int_equal(len, 0);
}

static void test_truncate(void **state)
{
    (void)state;
    assert_int_equal(text_truncate(S("hello"), 3), 3);
    assert_int_equal(text_truncate(S("hello"), 5), 5);
    assert_int_equal(text_truncate(S("hello"), 120), 5);
    assert_int_equal(text_truncate(S("hello"), 0), 0);
    /* Never splits a character: "ñañ" -> 2 code points = 3 bytes. */
    assert_int_equal(text_truncate(S("ñañ"), 2), 3);
    assert_int_equal(text_truncate(S("😀😀😀"), 1), 4);
    assert_int_equal(text_truncate(S("😀😀😀"), 2), 8);

    char buf[400];
    memset(buf, 0, sizeof buf);
    for (int i = 0; i < 130; i++)
        memcpy(buf + 2 * i, "é", 2);
    assert_int_equal(text_truncate(buf, 260, 120), 240);
    assert_int_equal(text_cp_count(buf, text_truncate(buf, 260, 120)), 120);
}

static void test_has_control(void **state)
{
    (void)state;
    assert_false(text_has_control(S("Ana María")));
    assert_true(text_has_control(S("a\nb")));
    assert_true(text_has_control(S("a\tb")));
    assert_true(text_has_control("a\0b", 3));
    assert_true(text_has_control(S("a\x7f")));
    assert_true(text_has_control(S("a\xC2\x85")));  /* U+0085 NEL */
    assert_false(text_has_control(S("a\xC2\xA0"))); /* U+00A0 is not a control */
}

static void test_ascii_fallback(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(text_ascii_fallback(S("report.pdf"), out), 10);
    assert_string_equal(out, "report.pdf");
    /* One code point, one '_', whatever its UTF-8 length (2, 3 and 4 bytes). */
    text_ascii_fallback(S("caf\xC3\xA9.pdf"), out);
    assert_string_equal(out, "caf_.pdf");
    text_ascii_fallback(S("\xE2\x82\xAC 5.txt"), out);
    assert_string_equal(out, "_ 5.txt");
    text_ascii_fallback(S("\xF0\x9F\x98\x80.png"), out);
    assert_string_equal(out, "_.png");
    text_ascii_fallback(S("r\xC3\xA9sum\xC3\xA9 final.txt"), out);
    assert_string_equal(out, "r_sum_ final.txt");
    /* Quotes, backslashes and controls would break the quoted parameter. */
    text_ascii_fallback(S("a\"b\\c\td\x7f"), out);
    assert_string_equal(out, "a_b_c_d_");
    /* An invalid byte is one '_' each; a truncated sequence at the end too. */
    text_ascii_fallback(S("x\xff\x80y\xC3"), out);
    assert_string_equal(out, "x__y_");
    assert_int_equal(text_ascii_fallback(S(""), out), 0);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_valid),  cmocka_unit_test(test_cp_count),
        cmocka_unit_test(test_trim),        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_has_control), cmocka_unit_test(test_ascii_fallback),
    };
    return cmocka_run_group_tests_name("domain/text", tests, NULL, NULL);
}
