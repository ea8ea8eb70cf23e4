/* Unit tests for domain/phone: real numbers of several numbering plans, and libphonenumber's
 * example numbers of every region (phone_vectors.h, generated with the data). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/phone.h"
#include "phone_vectors.h"

static void expect_e164(const char *input, const char *region, const char *want)
{
    char out[PHONE_E164_MAX];
    int rc = phone_normalize(input, region, out, sizeof(out));
    if (rc != 0) fail_msg("%s (%s): rc %d, want %s", input, region ? region : "-", rc, want);
    assert_string_equal(out, want);
}

static void expect_invalid(const char *input, const char *region)
{
    char out[PHONE_E164_MAX];
    int rc = phone_normalize(input, region, out, sizeof(out));
    if (rc != DOMAIN_EINVAL)
        fail_msg("%s (%s): rc %d, want DOMAIN_EINVAL", input ? input : "(null)",
                 region ? region : "-", rc);
}

static void test_us(void **state)
{
    (void)state;
    expect_e164("(650) 253-0000", "US", "+16502530000");
    expect_e164("650.253.0000", "US", "+16502530000");
    expect_e164("1 650 253 0000", "US", "+16502530000"); /* national prefix 1 */
    expect_e164("+1 650-253-0000", NULL, "+16502530000");
    expect_e164("+1 (650) 253-0000", "ES", "+16502530000");    /* international: any country */
    expect_e164("011 44 20 7946 0958", "US", "+442079460958"); /* IDD 011 */
    expect_e164("(416) 555-0123", "CA", "+14165550123");
    expect_invalid("555-1234", "US"); /* 7 digits: not a possible length */
    expect_invalid("(650) 253-00000", "US");
    expect_invalid("+1 150 253 0000", NULL); /* area codes never start with 1 */
}

static void test_es(void **state)
{
    (void)state;
    expect_e164("612 34 56 78", "ES", "+34612345678");
    expect_e164("612345678", "es", "+34612345678"); /* region in either case */
    expect_e164("91 123 45 67", "ES", "+34911234567");
    expect_e164("+34 612 34 56 78", NULL, "+34612345678");
    expect_e164("0034 612 345 678", "ES", "+34612345678"); /* IDD 00 */
    expect_e164("34612345678", "ES", "+34612345678");      /* country code without '+' */
    expect_invalid("612345678", NULL);                     /* national needs a region */
    expect_invalid("+34 612 34 56 7", NULL);
    expect_invalid("412 34 56 78", "ES");
}

static void test_gb(void **state)
{
    (void)state;
    expect_e164("020 7946 0958", "GB", "+442079460958");
    expect_e164("07400 123456", "GB", "+447400123456");
    expect_e164("+44 7400 123456", NULL, "+447400123456");
    expect_e164("+44 (0) 20 7946 0958", NULL, "+442079460958"); /* prefix inside the '+' form */
    expect_e164("01481 256789", "GG", "+441481256789");
    expect_invalid("020 7946 095", "GB");
}

static void test_mx_ar_br_ru(void **state)
{
    (void)state;
    expect_e164("55 1234 5678", "MX", "+525512345678");
    expect_e164("044 55 1234 5678", "MX", "+525512345678"); /* old mobile prefix 044 */
    expect_e164("+52 1 55 1234 5678", NULL, "+525512345678");
    /* Argentine mobiles: national "0 11 15 2345-6789" is international "+54 9 11 2345 6789". */
    expect_e164("011 15-2345-6789", "AR", "+5491123456789");
    expect_e164("+54 9 11 2345-6789", NULL, "+5491123456789");
    expect_e164("011 4321-1234", "AR", "+541143211234");
    /* Brazil: carrier selection code "0 21" before the area code. */
    expect_e164("(11) 98765-4321", "BR", "+5511987654321");
    expect_e164("0 21 11 98765-4321", "BR", "+5511987654321");
    expect_e164("8 (912) 345-67-89", "RU", "+79123456789");
    expect_e164("+7 912 345-67-89", NULL, "+79123456789");
    expect_e164("030 123456", "DE", "+4930123456");
    expect_e164("030/123456", "DE", "+4930123456");
    expect_e164("06 1234 5678", "IT", "+390612345678"); /* Italy keeps the leading 0 */
}

static void test_rejects(void **state)
{
    char out[PHONE_E164_MAX];
    (void)state;
    expect_invalid("", "US");
    expect_invalid("   ", "US");
    expect_invalid("+", NULL);
    expect_invalid("abc", "US");
    expect_invalid("650 253 0000 ext 12", "US");
    expect_invalid("+34 612+345 678", NULL);
    expect_invalid("++34612345678", NULL);
    expect_invalid("+0 612345678", NULL);
    expect_invalid("+999 1234567", NULL); /* unassigned country code */
    expect_invalid("+1234567890123456789012345", NULL);
    expect_invalid("612345678", "AQ"); /* no numbering plan data */
    expect_e164("+34612345678", "AQ", "+34612345678");
    expect_invalid("612345678", "XX");
    expect_invalid(NULL, "US");
    assert_int_equal(phone_normalize("+34612345678", NULL, out, 5), DOMAIN_ENOSPC);
    assert_int_equal(phone_normalize("+34612345678", NULL, out, 13), 0);
    assert_string_equal(out, "+34612345678");
}

static void test_example_numbers(void **state)
{
    (void)state;
    size_t n = sizeof(phone_vectors) / sizeof(phone_vectors[0]);
    assert_true(n > 400);
    for (size_t i = 0; i < n; i++) {
        expect_e164(phone_vectors[i].international, NULL, phone_vectors[i].e164);
        expect_e164(phone_vectors[i].international, phone_vectors[i].region, phone_vectors[i].e164);
        expect_e164(phone_vectors[i].e164, NULL, phone_vectors[i].e164);
        if (phone_vectors[i].national)
            expect_e164(phone_vectors[i].national, phone_vectors[i].region, phone_vectors[i].e164);
    }
    /* The cache can be dropped and rebuilt. */
    phone_cache_clear();
    expect_e164("612 34 56 78", "ES", "+34612345678");
    phone_cache_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_us),      cmocka_unit_test(test_es),
        cmocka_unit_test(test_gb),      cmocka_unit_test(test_mx_ar_br_ru),
        cmocka_unit_test(test_rejects), cmocka_unit_test(test_example_numbers),
    };
    return cmocka_run_group_tests_name("domain/phone", tests, NULL, NULL);
}
