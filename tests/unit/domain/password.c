/* Unit tests for domain/password (argon2id). Each hash costs ~19 MiB and tens of ms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <argon2.h>
#include <cmocka.h>

#include "domain/err.h"
#include "domain/password.h"

static void test_hash_and_verify(void **state)
{
    uint8_t salt[PASSWORD_SALT_LEN];
    char enc[PASSWORD_ENCODED_MAX];
    (void)state;

    memset(salt, 0x2a, sizeof salt);
    assert_int_equal(password_hash("coachd dummy password", salt, enc, sizeof enc), 0);
    /* Parameters travel with the hash. */
    assert_true(strncmp(enc, "$argon2id$v=19$m=19456,t=2,p=1$", 31) == 0);
    /* Same password and salt give the dummy hash, which was generated the same way. */
    assert_string_equal(enc, password_dummy_hash());

    assert_int_equal(password_verify(enc, "coachd dummy password"), 0);
    assert_int_equal(password_verify(enc, "coachd dummy passworD"), DOMAIN_EMISMATCH);
    assert_int_equal(password_verify(enc, "coachd dummy password "), DOMAIN_EMISMATCH);
    assert_int_equal(password_verify(enc, ""), DOMAIN_EMISMATCH);
    assert_false(password_needs_rehash(enc));

    /* A different salt gives a different hash of the same password. */
    char enc2[PASSWORD_ENCODED_MAX];
    salt[0] = 1;
    assert_int_equal(password_hash("coachd dummy password", salt, enc2, sizeof enc2), 0);
    assert_string_not_equal(enc, enc2);
    assert_int_equal(password_verify(enc2, "coachd dummy password"), 0);

    assert_int_equal(password_hash("x", salt, enc, 40), DOMAIN_ENOSPC);
}

static void test_verify_uses_stored_params(void **state)
{
    uint8_t salt[16];
    char enc[128];
    (void)state;

    /* A hash made with cheaper parameters (as if stored before they were raised). */
    memset(salt, 7, sizeof salt);
    assert_int_equal(
        argon2id_hash_encoded(1, 64, 1, "long enough", 11, salt, 16, 32, enc, sizeof enc),
        ARGON2_OK);
    assert_true(strncmp(enc, "$argon2id$v=19$m=64,t=1,p=1$", 28) == 0);
    assert_int_equal(password_verify(enc, "long enough"), 0);
    assert_int_equal(password_verify(enc, "long enougH"), DOMAIN_EMISMATCH);
    assert_true(password_needs_rehash(enc));
}

static void test_verify_rejects_malformed(void **state)
{
    (void)state;
    assert_int_equal(password_verify(NULL, "password"), DOMAIN_EINVAL);
    assert_int_equal(password_verify("", "password"), DOMAIN_EINVAL);
    assert_int_equal(password_verify("plain", "plain"), DOMAIN_EINVAL);
    /* Other argon2 variants and the better-auth scrypt form are not accepted. */
    assert_int_equal(password_verify("$argon2i$v=19$m=64,t=1,p=1$BwcHBwcHBwcHBwcHBwcHBw$"
                                     "mG7mMZx1SDZzZ8BUGzG2Z0MKsSUxkvSN6oqXTsmzUxE",
                                     "long enough"),
                     DOMAIN_EINVAL);
    assert_int_equal(password_verify("0a1b2c3d:abcdef", "long enough"), DOMAIN_EINVAL);
    /* Absurd parameters from a corrupted row are refused before any work. */
    assert_int_equal(password_verify("$argon2id$v=19$m=4194304,t=2,p=1$KioqKioqKioqKioqKioqKg$"
                                     "u3I3wkEbeSFLl7J7ZVKd3L4XMt79PG7Umt9aXGxmYZE",
                                     "x"),
                     DOMAIN_EINVAL);
    assert_int_equal(password_verify("$argon2id$v=19$m=19456,t=100,p=1$KioqKioqKioqKioqKioqKg$"
                                     "u3I3wkEbeSFLl7J7ZVKd3L4XMt79PG7Umt9aXGxmYZE",
                                     "x"),
                     DOMAIN_EINVAL);
    assert_int_equal(password_verify("$argon2id$v=16$m=19456,t=2,p=1$KioqKioqKioqKioqKioqKg$"
                                     "u3I3wkEbeSFLl7J7ZVKd3L4XMt79PG7Umt9aXGxmYZE",
                                     "x"),
                     DOMAIN_EINVAL);
    /* Broken base64 in the hash part. */
    assert_int_equal(password_verify("$argon2id$v=19$m=64,t=1,p=1$KioqKioqKioqKioqKioqKg$!!!", "x"),
                     DOMAIN_EINVAL);
    assert_true(password_needs_rehash("garbage"));
}

static void test_dummy(void **state)
{
    (void)state;
    /* Even the password that produced the dummy hash gets a mismatch. */
    assert_int_equal(password_verify_dummy("coachd dummy password"), DOMAIN_EMISMATCH);
    assert_int_equal(password_verify_dummy("anything at all"), DOMAIN_EMISMATCH);
    assert_false(password_needs_rehash(password_dummy_hash()));
}

static void test_length_rule(void **state)
{
    char buf[1024];
    (void)state;

    assert_false(password_length_ok(NULL));
    assert_false(password_length_ok(""));
    assert_false(password_length_ok("1234567"));
    assert_true(password_length_ok("12345678"));
    /* Code points, not bytes: 7 x "ñ" is 14 bytes but too short; 8 is enough. */
    assert_false(password_length_ok("ñññññññ"));
    assert_true(password_length_ok("ññññññññ"));

    /* 128 four-byte code points (512 bytes) pass; 129 fail. */
    buf[0] = '\0';
    for (int i = 0; i < 128; i++)
        strcat(buf, "\xF0\x9F\x98\x80");
    assert_true(password_length_ok(buf));
    strcat(buf, "a");
    assert_false(password_length_ok(buf));

    memset(buf, 'a', 128);
    buf[128] = '\0';
    assert_true(password_length_ok(buf));
    buf[128] = 'a';
    buf[129] = '\0';
    assert_false(password_length_ok(buf));

    /* Invalid UTF-8 is refused. */
    assert_false(password_length_ok("abcdefg\xff"));
    assert_false(password_length_ok("abcdefg\xc0\xaf"));
    /* Spaces count and are kept. */
    assert_true(password_length_ok("        "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_and_verify),
        cmocka_unit_test(test_verify_uses_stored_params),
        cmocka_unit_test(test_verify_rejects_malformed),
        cmocka_unit_test(test_dummy),
        cmocka_unit_test(test_length_rule),
    };
    return cmocka_run_group_tests_name("domain/password", tests, NULL, NULL);
}
