/* Unit tests for domain/token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/token.h"

static void test_from_random(void **state)
{
    uint8_t rnd[64];
    char out[TOKEN_MAX_LEN + 1];
    (void)state;

    for (int i = 0; i < 64; i++)
        rnd[i] = (uint8_t)i;
    assert_int_equal(token_from_random(rnd, 32, out, sizeof out), 0);
    assert_int_equal(strlen(out), TOKEN_LEN);
    assert_string_equal(out, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8");
    assert_true(token_is_wellformed(out));

    /* Fewer than 32 bytes is refused; more is allowed. */
    assert_int_equal(token_from_random(rnd, 31, out, sizeof out), DOMAIN_EINVAL);
    assert_int_equal(token_from_random(rnd, 48, out, sizeof out), 0);
    assert_int_equal(strlen(out), 64);
    assert_true(token_is_wellformed(out));
    assert_int_equal(token_from_random(rnd, 32, out, 43), DOMAIN_ENOSPC);

    memset(rnd, 0xff, 32);
    assert_int_equal(token_from_random(rnd, 32, out, sizeof out), 0);
    assert_string_equal(out, "__________________________________________8");
}

static void test_hash(void **state)
{
    char h[TOKEN_HASH_LEN + 1];
    (void)state;

    token_hash("abc", h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(strlen(h), 64);
}

static void test_wellformed(void **state)
{
    (void)state;
    assert_false(token_is_wellformed(NULL));
    assert_false(token_is_wellformed(""));
    assert_false(token_is_wellformed("short"));
    assert_false(token_is_wellformed("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh"));  /* 42 */
    assert_false(token_is_wellformed("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+")); /* '+' */
    assert_false(token_is_wellformed("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh="));
    assert_false(token_is_wellformed("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh%"));
    char big[TOKEN_MAX_LEN + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_false(token_is_wellformed(big));
    big[TOKEN_MAX_LEN] = '\0';
    assert_true(token_is_wellformed(big));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_random),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_wellformed),
    };
    return cmocka_run_group_tests_name("domain/token", tests, NULL, NULL);
}
