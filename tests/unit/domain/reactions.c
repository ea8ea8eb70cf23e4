/* Unit tests of domain/reactions.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/reactions.h"

static const char *canon(const char *s)
{
    return reactions_canonical(s, strlen(s));
}

static void test_allowed(void **state)
{
    (void)state;
    const char *six[] = {"👍", "❤️", "😂", "🎉", "👏", "🙌"};
    for (size_t i = 0; i < 6; i++) {
        const char *c = canon(six[i]);
        assert_non_null(c);
        assert_string_equal(c, six[i]);
    }
}

static void test_heart_without_selector(void **state)
{
    (void)state;
    assert_string_equal(canon("\xE2\x9D\xA4"), "\xE2\x9D\xA4\xEF\xB8\x8F");
    assert_string_equal(canon("❤"), "❤️");
}

static void test_refused(void **state)
{
    (void)state;
    assert_null(canon(""));
    assert_null(canon("x"));
    assert_null(canon("👎"));
    assert_null(canon("👍👍"));
    assert_null(canon("👍 "));
    assert_null(canon(" 👍"));
    assert_null(canon("👍\xEF\xB8\x8F"));        /* thumbs up with a selector: not exact */
    assert_null(canon("👍🏽"));             /* skin tone modifier */
    assert_null(canon("\xE2\x9D\xA4\xEF\xB8")); /* truncated selector */
    assert_null(canon(":heart:"));
    assert_null(reactions_canonical(NULL, 0));
    /* Length counts: an embedded NUL after a valid emoji is refused. */
    assert_null(reactions_canonical("👍\0", 5));
    assert_non_null(reactions_canonical("👍x", 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed),
        cmocka_unit_test(test_heart_without_selector),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
