#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/sbuf.h"
#include "tests.h"

static void json_escape(void **s)
{
    (void)s;
    buf_t b = BUF_INIT;
    buf_json_str(&b, "a\"b\\c\n\t\x01");
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\"");
    buf_reset(&b);
    buf_json_str(&b, NULL);
    assert_string_equal(b.data, "null");
    buf_reset(&b);
    buf_json_str(&b, "\xC3\xB1 \xF0\x9F\x91\x8D");
    assert_string_equal(b.data, "\"\xC3\xB1 \xF0\x9F\x91\x8D\"");
    buf_reset(&b);
    /* Invalid UTF-8 (lone continuation byte, overlong, surrogate) becomes U+FFFD. */
    buf_json_str(&b, "x\x80y\xC0\xAFz\xED\xA0\x80");
    assert_string_equal(
        b.data, "\"x\xEF\xBF\xBDy\xEF\xBF\xBD\xEF\xBF\xBDz\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
    buf_free(&b);
}

static void printf_growth(void **s)
{
    (void)s;
    buf_t b = BUF_INIT;
    for (int i = 0; i < 1000; i++)
        buf_printf(&b, "%d,", i);
    assert_int_equal(b.len, strlen(b.data));
    assert_true(strncmp(b.data, "0,1,2,", 6) == 0);
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    buf_reset(&b);
    buf_printf(&b, "[%s]", big);
    assert_int_equal(b.len, 601);
    buf_consume(&b, 1);
    assert_int_equal(b.data[0], 'x');
    char *stolen = buf_steal(&b);
    assert_int_equal(strlen(stolen), 600);
    assert_null(b.data);
    free(stolen);
}

static void shared(void **s)
{
    (void)s;
    sbuf_t *b = sbuf_new("event", 5);
    assert_int_equal(b->refs, 1);
    sbuf_ref(b);
    assert_int_equal(b->refs, 2);
    sbuf_unref(b);
    assert_memory_equal(b->data, "event", 5);
    sbuf_unref(b);
}

/* A counted buffer holds its length in the counter until its last reference goes. */
static void counted(void **s)
{
    (void)s;
    size_t total = 7;
    sbuf_t *a = sbuf_new("event one", 9), *b = sbuf_new("two", 3);
    sbuf_count(a, &total);
    sbuf_count(b, &total);
    assert_int_equal(total, 7 + 9 + 3);
    sbuf_ref(a);
    sbuf_unref(a);
    assert_int_equal(total, 7 + 9 + 3);
    sbuf_unref(a);
    assert_int_equal(total, 7 + 3);
    sbuf_unref(b);
    assert_int_equal(total, 7);
    sbuf_t *plain = sbuf_new("x", 1);
    sbuf_unref(plain);
    assert_int_equal(total, 7);
}

int run_buf_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_escape),
        cmocka_unit_test(printf_growth),
        cmocka_unit_test(shared),
        cmocka_unit_test(counted),
    };
    return cmocka_run_group_tests_name("core/buf", tests, NULL, NULL);
}
