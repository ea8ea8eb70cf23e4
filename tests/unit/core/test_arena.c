#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "core/checked.h"
#include "tests.h"

static int cleaned;
static void cleanup(void *p)
{
    cleaned += *(int *)p;
}

static void alloc_align_free(void **s)
{
    (void)s;
    arena_t a;
    arena_init(&a);
    for (int i = 1; i < 2000; i++) {
        char *p = arena_alloc(&a, (size_t)i % 97 + 1);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 'a', (size_t)i % 97 + 1);
    }
    char *big = arena_alloc(&a, 1 << 20); /* a dedicated chunk */
    memset(big, 0, 1 << 20);
    assert_string_equal(arena_printf(&a, "%s-%d", "x", 42), "x-42");
    assert_string_equal(arena_strndup(&a, "hello", 3), "hel");
    static int one = 1, two = 2;
    arena_on_free(&a, cleanup, &one);
    arena_on_free(&a, cleanup, &two);
    arena_free(&a);
    assert_int_equal(cleaned, 3);
    assert_null(a.head);
}

/* The checked helpers every client-derived size goes through (core/checked.h). */
static void checked_sizes(void **s)
{
    (void)s;
    size_t r;
    assert_true(size_add(1, 2, &r) && r == 3);
    assert_false(size_add(SIZE_MAX, 1, &r));
    /* The wrap of issue 9: a Content-Length of 2^64-1 plus the NUL byte. */
    assert_false(size_add((size_t)18446744073709551615ull, 1, &r));
    assert_true(size_add3(1, 2, 3, &r) && r == 6);
    assert_false(size_add3(SIZE_MAX - 2, 1, 2, &r));
    assert_true(size_mul(1024, 1024, &r) && r == 1048576);
    assert_false(size_mul(SIZE_MAX / 2 + 1, 2, &r));
    assert_true(size_from_u64(1000, 1024, &r) && r == 1000);
    assert_false(size_from_u64(18446744073709551615ull, 1024, &r));
    assert_false(size_from_u64(1025, 1024, &r));
}

int run_arena_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(alloc_align_free),
                                       cmocka_unit_test(checked_sizes)};
    return cmocka_run_group_tests_name("core/arena", tests, NULL, NULL);
}
