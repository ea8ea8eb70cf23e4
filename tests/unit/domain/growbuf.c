/* Unit tests for domain/growbuf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/growbuf.h"

static void test_grows_and_terminates(void **state)
{
    (void)state;
    growbuf_t b = GROWBUF_INIT;
    growbuf_puts(&b, "");
    assert_non_null(b.data);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    /* Past the first 256 bytes: the capacity doubles, the content stays. */
    for (int i = 0; i < 100; i++)
        growbuf_puts(&b, "abc");
    assert_int_equal(b.len, 300);
    assert_true(b.cap >= 301);
    assert_int_equal(b.data[300], '\0');
    assert_memory_equal(b.data + 297, "abc", 3);
    /* Binary bytes, NUL included. */
    const uint8_t bytes[3] = {0, 1, 0};
    growbuf_put(&b, bytes, 3);
    assert_int_equal(b.len, 303);
    assert_memory_equal(b.data + 300, bytes, 3);
    growbuf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_and_terminates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
