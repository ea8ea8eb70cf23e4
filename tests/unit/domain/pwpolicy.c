/* Unit tests for domain/pwpolicy: the common-password list and the context words. The program
 * takes the path of domain/wordlists/common_passwords.txt and checks that every line of it is
 * found in the compiled-in list (so the generated array is sorted as bsearch needs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "domain/pwpolicy.h"

static const char *list_path;

static void test_exact_hits(void **state)
{
    (void)state;
    /* The first and last entries in rank order, and some in between. */
    assert_true(pwpolicy_is_common("123456"));
    assert_true(pwpolicy_is_common("qqqqqq1"));
    assert_true(pwpolicy_is_common("password"));
    assert_true(pwpolicy_is_common("12345678"));
    assert_true(pwpolicy_is_common("iloveyou"));
    assert_true(pwpolicy_is_common("lizaveta"));
    /* The first and last entries in byte order (the ends of the bsearch). */
    assert_true(pwpolicy_is_common("!qaz2wsx"));
    assert_true(pwpolicy_is_common("zzzzzz1"));
    assert_int_equal(pwpolicy_common_count(), 10000);
}

static void test_case_insensitive(void **state)
{
    (void)state;
    assert_true(pwpolicy_is_common("PASSWORD"));
    assert_true(pwpolicy_is_common("PassWord"));
    assert_true(pwpolicy_is_common("Iloveyou"));
    assert_true(pwpolicy_is_common("!QAZ2WSX"));
}

static void test_non_hits(void **state)
{
    (void)state;
    assert_false(pwpolicy_is_common(NULL));
    assert_false(pwpolicy_is_common(""));
    assert_false(pwpolicy_is_common("password "));
    assert_false(pwpolicy_is_common(" password"));
    assert_false(pwpolicy_is_common("passwordx9q"));
    assert_false(pwpolicy_is_common("correct horse battery"));
    assert_false(pwpolicy_is_common("qqqqqq2"));
    assert_false(pwpolicy_is_common("zzzzzz2"));
    assert_false(pwpolicy_is_common("!!!!!!!!!!"));
    assert_false(pwpolicy_is_common("~~~~~~~~"));
    /* Ranks 10,001 and 10,002 of the source are not in the list. */
    assert_false(pwpolicy_is_common("cathy1"));
    assert_false(pwpolicy_is_common("08154711"));
}

static void test_every_line_of_the_file(void **state)
{
    (void)state;
    FILE *f = fopen(list_path, "r");
    assert_non_null(f);
    char line[256];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!pwpolicy_is_common(line)) fail_msg("not found: %s", line);
        for (char *p = line; *p; p++)
            if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 32);
        if (!pwpolicy_is_common(line)) fail_msg("not found upper-cased: %s", line);
        n++;
    }
    fclose(f);
    assert_int_equal(n, 10000);
}

static void test_context(void **state)
{
    (void)state;
    const char *e = "maria.gonzalez+work@example.com";
    assert_int_equal(pwpolicy_check("a fine passphrase 9", e, "María", "González"), PWPOLICY_OK);
    assert_int_equal(pwpolicy_check("PASSWORD", e, NULL, NULL), PWPOLICY_COMMON);
    /* The service's name, any case, anywhere. */
    assert_int_equal(pwpolicy_check("my CoachD pass 9", NULL, NULL, NULL), PWPOLICY_SERVICE);
    /* The local part, whole or a part of it of 4 or more characters. */
    assert_int_equal(pwpolicy_check("xx maria.gonzalez+work", e, NULL, NULL), PWPOLICY_EMAIL);
    assert_int_equal(pwpolicy_check("xxMARIAxx and more", e, NULL, NULL), PWPOLICY_EMAIL);
    assert_int_equal(pwpolicy_check("gonzalez rules 77", e, NULL, NULL), PWPOLICY_EMAIL);
    assert_int_equal(pwpolicy_check("hard WORK pays 77", e, NULL, NULL), PWPOLICY_EMAIL);
    /* The domain is not part of the rule. */
    assert_int_equal(pwpolicy_check("example rules 77", e, NULL, NULL), PWPOLICY_OK);
    /* Names, with Latin-1 capitals folded. */
    assert_int_equal(pwpolicy_check("i am maría 2024!", NULL, "María", "González"), PWPOLICY_NAME);
    assert_int_equal(pwpolicy_check("GONZÁLEZ forever 1", NULL, "María", "González"),
                     PWPOLICY_NAME);
    assert_int_equal(pwpolicy_check("Jean-Luc was here", NULL, "Jean-Luc", "Picard"),
                     PWPOLICY_NAME);
    assert_int_equal(pwpolicy_check("my jean is blue", NULL, "Jean-Luc", "Picard"), PWPOLICY_NAME);
    /* Parts under 4 characters are ignored. */
    assert_int_equal(pwpolicy_check("al is a strong one", "al@example.com", "Al", "Li"),
                     PWPOLICY_OK);
    assert_int_equal(pwpolicy_check("ann and mary go", NULL, "Ann", NULL), PWPOLICY_OK);
    assert_int_equal(pwpolicy_check("ann and mary go", "ann.mary@x.test", NULL, NULL),
                     PWPOLICY_EMAIL);
    /* Unknown context: only the list and the service's name apply. */
    assert_int_equal(pwpolicy_check("maria gonzalez 1", NULL, NULL, NULL), PWPOLICY_OK);
    assert_int_equal(pwpolicy_check(NULL, e, "María", "González"), PWPOLICY_OK);
}

static void test_messages(void **state)
{
    (void)state;
    assert_null(pwpolicy_message(PWPOLICY_OK));
    assert_non_null(strstr(pwpolicy_message(PWPOLICY_COMMON), "10,000 most common passwords"));
    assert_non_null(strstr(pwpolicy_message(PWPOLICY_SERVICE), "coachd"));
    assert_non_null(strstr(pwpolicy_message(PWPOLICY_EMAIL), "email address"));
    assert_non_null(strstr(pwpolicy_message(PWPOLICY_NAME), "name"));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s common_passwords.txt\n", argv[0]);
        return 2;
    }
    list_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_hits),      cmocka_unit_test(test_case_insensitive),
        cmocka_unit_test(test_non_hits),        cmocka_unit_test(test_every_line_of_the_file),
        cmocka_unit_test(test_context),         cmocka_unit_test(test_messages),
    };
    return cmocka_run_group_tests_name("domain/pwpolicy", tests, NULL, NULL);
}
