/* Unit tests for domain/roles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/roles.h"

static void test_parse_and_name(void **state)
{
    static const char *const names[] = {"Teacher",           "Coach",         "Manager",
                                        "OrganizationAdmin", "PlatformAdmin", "Owner"};
    (void)state;

    for (int i = 0; i < 6; i++) {
        role_t r = role_parse(names[i]);
        assert_int_equal(r, ROLE_TEACHER + i);
        assert_string_equal(role_name(r), names[i]);
    }
    assert_int_equal(role_parse("teacher"), ROLE_NONE);
    assert_int_equal(role_parse("OrgAdmin"), ROLE_NONE); /* chat spelling is output only */
    assert_int_equal(role_parse(""), ROLE_NONE);
    assert_int_equal(role_parse(NULL), ROLE_NONE);
    assert_int_equal(role_parse("Owner "), ROLE_NONE);
    assert_null(role_name(ROLE_NONE));
    assert_null(role_name((role_t)99));
}

static void test_chat_name(void **state)
{
    (void)state;
    assert_string_equal(role_chat_name(ROLE_ORG_ADMIN), "OrgAdmin");
    assert_string_equal(role_chat_name(ROLE_COACH), "Coach");
    assert_string_equal(role_chat_name(ROLE_OWNER), "Owner");
    assert_null(role_chat_name(ROLE_NONE));
}

static void test_kinds(void **state)
{
    (void)state;
    assert_true(role_is_global(ROLE_PLATFORM_ADMIN));
    assert_true(role_is_global(ROLE_OWNER));
    assert_false(role_is_global(ROLE_ORG_ADMIN));
    assert_false(role_is_global(ROLE_NONE));
    assert_true(role_is_org_role(ROLE_TEACHER));
    assert_true(role_is_org_role(ROLE_COACH));
    assert_true(role_is_org_role(ROLE_MANAGER));
    assert_true(role_is_org_role(ROLE_ORG_ADMIN));
    assert_false(role_is_org_role(ROLE_PLATFORM_ADMIN));
    assert_false(role_is_org_role(ROLE_OWNER));
    assert_false(role_is_org_role(ROLE_NONE));
}

static void test_at_least(void **state)
{
    (void)state;
    assert_true(role_at_least(ROLE_OWNER, ROLE_PLATFORM_ADMIN)); /* Owner passes PlatformAdmin */
    assert_true(role_at_least(ROLE_PLATFORM_ADMIN, ROLE_PLATFORM_ADMIN));
    assert_false(role_at_least(ROLE_PLATFORM_ADMIN, ROLE_OWNER));
    assert_true(role_at_least(ROLE_MANAGER, ROLE_COACH));
    assert_false(role_at_least(ROLE_COACH, ROLE_MANAGER));
    assert_true(role_at_least(ROLE_TEACHER, ROLE_TEACHER));
    assert_false(role_at_least(ROLE_NONE, ROLE_TEACHER));
    assert_true(role_at_least(ROLE_ORG_ADMIN, ROLE_MANAGER));
    assert_false(role_at_least((role_t)42, ROLE_TEACHER));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_name),
        cmocka_unit_test(test_chat_name),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_at_least),
    };
    return cmocka_run_group_tests_name("domain/roles", tests, NULL, NULL);
}
