/* core/json.h: compact JSON text (white space outside strings dropped, strings untouched). */
#include <string.h>

#include "core/json.h"
#include "tests.h"

static const char *compact(const char *in, char *out)
{
    size_t n = json_compact(out, in, strlen(in));
    out[n] = '\0';
    return out;
}

static void space_at(void **s)
{
    (void)s;
    assert_int_equal(json_space_at("{\"a\":1}", 7), 7);
    assert_int_equal(json_space_at("{\"a\" : 1}", 9), 4);
    /* Spaces, escaped quotes and backslashes inside strings are not outside them. */
    const char *t = "{\"a b\":\"x \\\" , y\\\\\",\"c\":[1,2]}";
    assert_int_equal(json_space_at(t, strlen(t)), strlen(t));
    assert_int_equal(json_space_at("[1,\n2]", 6), 3);
    assert_int_equal(json_space_at("", 0), 0);
}

static void compacts_postgres_renderings(void **s)
{
    (void)s;
    char out[256];
    /* json_build_object and json_agg */
    assert_string_equal(
        compact("{\"data\" : [{\"id\" : 1, \"n\" : \"a, b : c\"}, \n {\"id\" : 2}]}", out),
        "{\"data\":[{\"id\":1,\"n\":\"a, b : c\"},{\"id\":2}]}");
    /* jsonb::text */
    assert_string_equal(compact("{\"a\": [1, 2], \"b\": {\"c\": null}}", out),
                        "{\"a\":[1,2],\"b\":{\"c\":null}}");
    /* Escapes inside strings keep the string whole. */
    assert_string_equal(compact("{\"q\" : \"say \\\"hi, there\\\" \\\\\" }", out),
                        "{\"q\":\"say \\\"hi, there\\\" \\\\\"}");
    /* Compact text is left as it is; in place works. */
    char in_place[] = "[ 1 ,\t2 ]";
    size_t n = json_compact(in_place, in_place, strlen(in_place));
    in_place[n] = '\0';
    assert_string_equal(in_place, "[1,2]");
    assert_string_equal(compact("{\"a\":\"b\"}", out), "{\"a\":\"b\"}");
    /* An unterminated string is copied to the end. */
    assert_string_equal(compact("[\"a b", out), "[\"a b");
}

static void appends_to_a_buffer(void **s)
{
    (void)s;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":");
    const char *frag = "{\"x\" : 1, \"y\" : \"1, 2\"}";
    buf_json_compact(&b, frag, strlen(frag));
    buf_putc(&b, '}');
    assert_string_equal(b.data, "{\"data\":{\"x\":1,\"y\":\"1, 2\"}}");
    buf_free(&b);
}

int run_json_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(space_at),
        cmocka_unit_test(compacts_postgres_renderings),
        cmocka_unit_test(appends_to_a_buffer),
    };
    return cmocka_run_group_tests_name("core/json", tests, NULL, NULL);
}
