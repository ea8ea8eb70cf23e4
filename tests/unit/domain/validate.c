/* Unit tests for domain/validate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/tz_names.h"
#include "domain/validate.h"

static void test_email(void **state)
{
    char out[300];
    char big[300];
    (void)state;

    assert_true(validate_is_email("user@example.com"));
    assert_true(validate_is_email("first.last+tag@sub.example.co.uk"));
    assert_true(validate_is_email("o'brien@example.ie"));
    assert_true(validate_is_email("x@a-b.io"));
    assert_true(validate_is_email("user@example.xn--p1ai"));
    assert_true(validate_is_email("USER@EXAMPLE.COM"));

    assert_false(validate_is_email(NULL));
    assert_false(validate_is_email(""));
    assert_false(validate_is_email("plainaddress"));
    assert_false(validate_is_email("@example.com"));
    assert_false(validate_is_email("user@"));
    assert_false(validate_is_email("user@localhost"));   /* needs a TLD */
    assert_false(validate_is_email("user@example.c"));   /* TLD too short */
    assert_false(validate_is_email("user@example.c0m")); /* TLD letters */
    assert_false(validate_is_email("user@@example.com"));
    assert_false(validate_is_email("a@b@example.com"));
    assert_false(validate_is_email("user name@example.com"));
    assert_false(validate_is_email(" user@example.com"));
    assert_false(validate_is_email("user@example.com "));
    assert_false(validate_is_email("user@exa mple.com"));
    assert_false(validate_is_email(".user@example.com"));
    assert_false(validate_is_email("user.@example.com"));
    assert_false(validate_is_email("us..er@example.com"));
    assert_false(validate_is_email("user@-example.com"));
    assert_false(validate_is_email("user@example-.com"));
    assert_false(validate_is_email("user@example..com"));
    assert_false(validate_is_email("user@.example.com"));
    assert_false(validate_is_email("user@example.com."));
    assert_false(validate_is_email("user@exam_ple.com"));
    assert_false(validate_is_email("\"quoted\"@example.com"));
    assert_false(validate_is_email("us\ner@example.com"));
    assert_false(validate_is_email("usér@example.com"));
    assert_false(validate_is_email("user@exämple.com"));

    /* Local part at most 64, whole address at most 254. */
    memset(big, 'a', 64);
    strcpy(big + 64, "@example.com");
    assert_true(validate_is_email(big));
    memset(big, 'a', 65);
    strcpy(big + 65, "@example.com");
    assert_false(validate_is_email(big));
    /* 64 + '@' + 61 + '.' + 61 + '.' + 61 + ".com" = 254 */
    memset(big, 'a', 64);
    big[64] = '@';
    size_t o = 65;
    for (int i = 0; i < 3; i++) {
        memset(big + o, 'b', 61);
        o += 61;
        big[o++] = '.';
    }
    strcpy(big + o, "com");
    assert_int_equal(strlen(big), 254);
    assert_true(validate_is_email(big));
    strcpy(big + o, "coms");
    assert_false(validate_is_email(big));

    assert_int_equal(validate_email_lower("Ana.Perez@Example.COM", out, sizeof out), 0);
    assert_string_equal(out, "ana.perez@example.com");
    assert_int_equal(validate_email_lower("bad", out, sizeof out), DOMAIN_EINVAL);
    assert_int_equal(validate_email_lower("a@example.com", out, 13), DOMAIN_ENOSPC);
}

static void test_name(void **state)
{
    size_t off, len;
    char buf[600];
    (void)state;

    assert_int_equal(validate_name("  Ana María ", 12, &off, &len), 0);
    assert_int_equal(off, 2);
    assert_int_equal(len, strlen("Ana María"));
    assert_int_equal(validate_name("X", 1, &off, &len), 0);
    assert_int_equal(validate_name("", 0, &off, &len), DOMAIN_EINVAL);
    assert_int_equal(validate_name("   ", 3, &off, &len), DOMAIN_EINVAL);
    assert_int_equal(validate_name("\xC2\xA0", 2, &off, &len), DOMAIN_EINVAL);
    assert_int_equal(validate_name("a\nb", 3, &off, &len), DOMAIN_EINVAL);
    assert_int_equal(validate_name("a\0b", 3, &off, &len), DOMAIN_EINVAL);
    assert_int_equal(validate_name("ab\xff", 3, &off, &len), DOMAIN_EINVAL);

    /* 100 code points (200 bytes) pass, 101 fail; surrounding spaces do not count. */
    buf[0] = ' ';
    for (int i = 0; i < 100; i++)
        memcpy(buf + 1 + 2 * i, "ñ", 2);
    buf[201] = ' ';
    assert_int_equal(validate_name(buf, 202, &off, &len), 0);
    assert_int_equal(off, 1);
    assert_int_equal(len, 200);
    memcpy(buf + 201, "ñ", 2);
    assert_int_equal(validate_name(buf, 203, &off, &len), DOMAIN_EINVAL);

    assert_int_equal(validate_trimmed(" abc ", 5, 0, 3, &off, &len), 0);
    assert_int_equal(validate_trimmed("   ", 3, 0, 3, &off, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(validate_trimmed("abcd", 4, 0, 3, &off, &len), DOMAIN_EINVAL);
}

static void test_lang(void **state)
{
    (void)state;
    assert_true(validate_is_lang("en"));
    assert_true(validate_is_lang("es"));
    assert_false(validate_is_lang("EN"));
    assert_false(validate_is_lang("fr"));
    assert_false(validate_is_lang("en-US"));
    assert_false(validate_is_lang(""));
    assert_false(validate_is_lang(NULL));
}

static void test_accept_language(void **state)
{
    (void)state;
    assert_string_equal(validate_accept_language("es-MX,es;q=0.9,en;q=0.8"), "es");
    assert_string_equal(validate_accept_language("en-US,en;q=0.9,es;q=0.8"), "en");
    assert_string_equal(validate_accept_language("fr-CH, fr;q=0.9, en;q=0.8, *;q=0.5"), "en");
    assert_string_equal(validate_accept_language("fr, es;q=0.5, en;q=0.7"), "en");
    assert_string_equal(validate_accept_language("en;q=0.5, es;q=0.6"), "es");
    assert_string_equal(validate_accept_language("ES"), "es");
    assert_string_equal(validate_accept_language("es-419"), "es");
    assert_string_equal(validate_accept_language("en;q=0.8, es;q=0.8"), "en"); /* tie: first */
    assert_string_equal(validate_accept_language("es;q=0, en;q=0.1"), "en");
    assert_string_equal(validate_accept_language("en ; q=0.3 , es ; q=0.2"), "en");
    assert_null(validate_accept_language("es;q=0"));
    assert_null(validate_accept_language("fr-FR,fr;q=0.9,de;q=0.8"));
    assert_null(validate_accept_language("*"));
    assert_null(validate_accept_language(""));
    assert_null(validate_accept_language(NULL));
    assert_null(validate_accept_language("eng,esp")); /* primary subtag must be exactly en/es */
    assert_null(validate_accept_language("es;q=abc"));
    assert_null(validate_accept_language("es;q=2"));
}

static void test_date(void **state)
{
    int y, m, d;
    (void)state;

    assert_int_equal(validate_date_parse("1990-05-17", &y, &m, &d), 0);
    assert_int_equal(y, 1990);
    assert_int_equal(m, 5);
    assert_int_equal(d, 17);
    assert_true(validate_is_date("2024-02-29")); /* leap year */
    assert_true(validate_is_date("2000-02-29")); /* divisible by 400 */
    assert_true(validate_is_date("0001-01-01"));
    assert_true(validate_is_date("9999-12-31"));
    assert_false(validate_is_date("2023-02-29"));
    assert_false(validate_is_date("1900-02-29")); /* divisible by 100 */
    assert_false(validate_is_date("2024-04-31"));
    assert_false(validate_is_date("2024-13-01"));
    assert_false(validate_is_date("2024-00-10"));
    assert_false(validate_is_date("2024-01-00"));
    assert_false(validate_is_date("0000-01-01"));
    assert_false(validate_is_date("2024-1-01"));
    assert_false(validate_is_date("2024/01/01"));
    assert_false(validate_is_date("2024-01-01T00:00:00Z"));
    assert_false(validate_is_date("20240101"));
    assert_false(validate_is_date("+024-01-01"));
    assert_false(validate_is_date(""));
    assert_false(validate_is_date(NULL));
}

static void test_country(void **state)
{
    char out[3];
    (void)state;

    assert_true(validate_is_country("US"));
    assert_true(validate_is_country("MX"));
    assert_true(validate_is_country("ES"));
    assert_true(validate_is_country("AD")); /* first */
    assert_true(validate_is_country("ZW")); /* last */
    assert_true(validate_is_country("AQ"));
    assert_true(validate_is_country("SS"));
    assert_true(validate_is_country("es"));
    assert_false(validate_is_country("UK")); /* reserved, not assigned (GB is) */
    assert_false(validate_is_country("XK")); /* user-assigned, not official */
    assert_false(validate_is_country("EU"));
    assert_false(validate_is_country("AN")); /* withdrawn */
    assert_false(validate_is_country("ZZ"));
    assert_false(validate_is_country("USA"));
    assert_false(validate_is_country("U"));
    assert_false(validate_is_country(""));
    assert_false(validate_is_country("1A"));
    assert_false(validate_is_country(NULL));
    assert_int_equal(validate_country_upper("mx", out), 0);
    assert_string_equal(out, "MX");
    assert_int_equal(validate_country_upper("xx", out), DOMAIN_EINVAL);
}

static void test_timezone(void **state)
{
    (void)state;
    assert_true(validate_is_timezone("UTC"));
    assert_true(validate_is_timezone("America/New_York"));
    assert_true(validate_is_timezone("America/Mexico_City"));
    assert_true(validate_is_timezone("Europe/Madrid"));
    assert_true(validate_is_timezone("Asia/Calcutta")); /* link */
    assert_true(validate_is_timezone("Asia/Kolkata"));
    assert_true(validate_is_timezone("America/Argentina/Buenos_Aires"));
    assert_true(validate_is_timezone("Etc/GMT+5"));
    assert_true(validate_is_timezone("US/Pacific"));
    assert_false(validate_is_timezone("utc"));
    assert_false(validate_is_timezone("america/new_york"));
    assert_false(validate_is_timezone("Mars/Olympus_Mons"));
    assert_false(validate_is_timezone("Factory"));
    assert_false(validate_is_timezone("EST+5"));
    assert_false(validate_is_timezone(""));
    assert_false(validate_is_timezone(NULL));
    assert_false(validate_is_timezone("America/New_York "));

    /* The generated table is sorted (bsearch depends on it) and sizeable. */
    assert_true(tz_names_count > 400);
    for (size_t i = 1; i < tz_names_count; i++)
        assert_true(strcmp(tz_names[i - 1], tz_names[i]) < 0);
}

static void test_int(void **state)
{
    int v = -99;
    (void)state;

    assert_int_equal(validate_int("0", 0, 1000, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(validate_int("1000", 0, 1000, &v), 0);
    assert_int_equal(v, 1000);
    assert_int_equal(validate_int("007", 0, 1000, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(validate_int("-3", -5, 5, &v), 0);
    assert_int_equal(v, -3);
    v = 42;
    assert_int_equal(validate_int("1001", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(v, 42); /* untouched on failure */
    assert_int_equal(validate_int("-1", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("-", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("+5", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int(" 5", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("5 ", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("1.0", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("1e3", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("0x10", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("abc", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int(NULL, 0, 1000, &v), DOMAIN_EINVAL);
    /* Overflow never wraps into range. */
    assert_int_equal(validate_int("4294967296", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("99999999999999999999", 0, 1000, &v), DOMAIN_EINVAL);
    assert_int_equal(validate_int("2147483647", 0, 2147483647, &v), 0);
    assert_int_equal(v, 2147483647);
    assert_int_equal(validate_int("2147483648", 0, 2147483647, &v), DOMAIN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_email),    cmocka_unit_test(test_name),
        cmocka_unit_test(test_lang),     cmocka_unit_test(test_accept_language),
        cmocka_unit_test(test_date),     cmocka_unit_test(test_country),
        cmocka_unit_test(test_timezone), cmocka_unit_test(test_int),
    };
    return cmocka_run_group_tests_name("domain/validate", tests, NULL, NULL);
}
