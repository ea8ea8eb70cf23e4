#include <string.h>

#include "core/url.h"
#include "tests.h"

static void decode_basic(void **s)
{
    (void)s;
    arena_t a;
    arena_init(&a);
    assert_string_equal(url_decode(&a, "a%20b", 5, false), "a b");
    assert_string_equal(url_decode(&a, "a+b", 3, true), "a b");
    assert_string_equal(url_decode(&a, "a+b", 3, false), "a+b");
    assert_string_equal(url_decode(&a, "%C3%B1", 6, false), "\xC3\xB1");
    assert_null(url_decode(&a, "%2", 2, false));
    assert_null(url_decode(&a, "%zz", 3, false));
    assert_null(url_decode(&a, "a%00b", 5, false)); /* NUL never passes */
    arena_free(&a);
}

static void query_get(void **s)
{
    (void)s;
    arena_t a;
    arena_init(&a);
    const char *q = "limit=10&search=J%C3%BAlia+Smith&flag&empty=";
    assert_string_equal(url_query_get(&a, q, "limit"), "10");
    assert_string_equal(url_query_get(&a, q, "search"), "J\xC3\xBAlia Smith");
    assert_string_equal(url_query_get(&a, q, "flag"), "");
    assert_string_equal(url_query_get(&a, q, "empty"), "");
    assert_null(url_query_get(&a, q, "lim"));
    assert_null(url_query_get(&a, NULL, "x"));
    arena_free(&a);
}

static void cookie_get(void **s)
{
    (void)s;
    arena_t a;
    arena_init(&a);
    const char *h = "theme=dark; auth.session_token=abc123;other=\"q v\"";
    assert_string_equal(url_cookie_get(&a, h, "auth.session_token"), "abc123");
    assert_string_equal(url_cookie_get(&a, h, "theme"), "dark");
    assert_string_equal(url_cookie_get(&a, h, "other"), "q v");
    assert_null(url_cookie_get(&a, h, "session_token"));
    assert_null(url_cookie_get(&a, "x.auth.session_token=1", "auth.session_token"));
    arena_free(&a);
}

static void encode(void **s)
{
    (void)s;
    arena_t a;
    arena_init(&a);
    assert_string_equal(url_encode(&a, "/a b?x=1&y"), "%2Fa%20b%3Fx%3D1%26y");
    assert_string_equal(url_encode(&a, "AZaz09-_.~"), "AZaz09-_.~");
    arena_free(&a);
}

static void parse(void **s)
{
    (void)s;
    url_parts_t u;
    assert_int_equal(url_parse("redis://:p%40ss@cache.local:6380/2", "redis", &u), 0);
    assert_null(u.user);
    assert_string_equal(u.pass, "p@ss");
    assert_string_equal(u.host, "cache.local");
    assert_int_equal(u.port, 6380);
    assert_string_equal(u.path, "/2");
    url_parts_free(&u);

    assert_int_equal(url_parse("redis://bob:secret@[::1]", "redis", &u), 0);
    assert_string_equal(u.user, "bob");
    assert_string_equal(u.pass, "secret");
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 0);
    assert_string_equal(u.path, "");
    url_parts_free(&u);

    assert_int_equal(url_parse("redis://pw@h", "redis", &u), 0); /* password only */
    assert_null(u.user);
    assert_string_equal(u.pass, "pw");
    url_parts_free(&u);

    assert_int_equal(url_parse("http://h", "redis", &u), -1);    /* other scheme */
    assert_int_equal(url_parse("redis://h:0", "redis", &u), -1); /* port range */
    assert_int_equal(url_parse("redis://h:70000", "redis", &u), -1);
    assert_int_equal(url_parse("redis://h:", "redis", &u), -1);     /* empty port */
    assert_int_equal(url_parse("redis://[::1/0", "redis", &u), -1); /* unclosed v6 */
    assert_int_equal(url_parse("redis://[::1]x/0", "redis", &u), -1);
    assert_int_equal(url_parse("redis://:%zz@h", "redis", &u), -1); /* bad escape */
    assert_int_equal(url_parse("redis://:%00@h", "redis", &u), -1); /* NUL */
}

int run_url_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_basic), cmocka_unit_test(query_get), cmocka_unit_test(cookie_get),
        cmocka_unit_test(encode),       cmocka_unit_test(parse),
    };
    return cmocka_run_group_tests_name("core/url", tests, NULL, NULL);
}
