/* Unit tests for domain/err. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(domain_strerror(0), "ok");
    assert_string_equal(domain_strerror(DOMAIN_EINVAL), "invalid input");
    assert_string_equal(domain_strerror(DOMAIN_ENOSPC), "output buffer too small");
    assert_string_equal(domain_strerror(DOMAIN_EMISMATCH), "password mismatch");
    assert_string_equal(domain_strerror(DOMAIN_ETRANSITION), "invalid transition");
    assert_string_equal(domain_strerror(DOMAIN_EINTERNAL), "internal library failure");
    assert_string_equal(domain_strerror(-1000), "unknown error");
    assert_string_equal(domain_strerror(7), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests_name("domain/err", tests, NULL, NULL);
}
