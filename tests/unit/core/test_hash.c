#include <string.h>

#include "core/hash.h"
#include "tests.h"

/* The published FNV-1a (32-bit) values, and bytes over 0x7f taken as unsigned: the values every
 * table had before it shared this hash (a signed char would give é another hash). */
static void known_values(void **s)
{
    (void)s;
    assert_int_equal(fnv1a(""), 0x811c9dc5u);
    assert_int_equal(fnv1a("a"), 0xe40c292cu);
    assert_int_equal(fnv1a("foobar"), 0xbf9cf968u);
    assert_int_equal(fnv1a("\xc3\xa9"), 0x1e9de8c1u);
}

static void counted_equals_terminated(void **s)
{
    (void)s;
    const char *v[] = {"", "a", "foobar", "\xc3\xa9", "session-3f2a"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_int_equal(fnv1a_n(v[i], strlen(v[i])), fnv1a(v[i]));
    assert_int_equal(fnv1a_n("foobarbaz", 6), fnv1a("foobar"));
}

int run_hash_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_values),
        cmocka_unit_test(counted_equals_terminated),
    };
    return cmocka_run_group_tests_name("core/hash", tests, NULL, NULL);
}
