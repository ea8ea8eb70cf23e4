#include <stdint.h>
#include <string.h>

#include "core/arena.h"
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

int run_arena_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(alloc_align_free)};
    return cmocka_run_group_tests_name("core/arena", tests, NULL, NULL);
}
