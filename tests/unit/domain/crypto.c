/* Unit tests for domain/crypto: known-answer vectors (FIPS 180-2, RFC 4231, RFC 4648). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/crypto.h"
#include "domain/err.h"

static void test_sha256(void **state)
{
    char hex[65];
    uint8_t d[32];
    (void)state;

    crypto_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    crypto_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    crypto_sha256("abc", 3, d);
    assert_int_equal(d[0], 0xba);
    assert_int_equal(d[31], 0xad);
}

static void test_hmac(void **state)
{
    uint8_t mac[32];
    char hex[65];
    (void)state;

    /* RFC 4231 test case 2 */
    crypto_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
    crypto_hex_encode(mac, 32, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_hex(void **state)
{
    char out[9];
    const uint8_t in[] = {0x00, 0x7f, 0xab, 0xff};
    (void)state;

    crypto_hex_encode(in, 4, out);
    assert_string_equal(out, "007fabff");
    crypto_hex_encode(in, 0, out);
    assert_string_equal(out, "");
}

static void test_base64(void **state)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[16];
    uint8_t dec[16];
    size_t n;
    (void)state;

    for (int i = 0; i < 7; i++) {
        size_t len = strlen(plain[i]);
        assert_int_equal(crypto_base64_len(len), strlen(enc[i]) + 1);
        assert_int_equal(crypto_base64_encode(plain[i], len, out, sizeof out), 0);
        assert_string_equal(out, enc[i]);
        assert_int_equal(crypto_base64_decode(enc[i], strlen(enc[i]), dec, sizeof dec, &n), 0);
        assert_int_equal(n, len);
        assert_memory_equal(dec, plain[i], len);
    }
    /* Too small a buffer. */
    assert_int_equal(crypto_base64_encode("foobar", 6, out, 8), DOMAIN_ENOSPC);
    assert_int_equal(crypto_base64_decode("Zm9vYmFy", 8, dec, 5, &n), DOMAIN_ENOSPC);
    /* Strict decoding: no whitespace, padding only at the end, length a multiple of 4. */
    assert_int_equal(crypto_base64_decode("Zm9", 3, dec, sizeof dec, &n), DOMAIN_EINVAL);
    assert_int_equal(crypto_base64_decode("Zm 9", 4, dec, sizeof dec, &n), DOMAIN_EINVAL);
    assert_int_equal(crypto_base64_decode("Zm=v", 4, dec, sizeof dec, &n), DOMAIN_EINVAL);
    assert_int_equal(crypto_base64_decode("====", 4, dec, sizeof dec, &n), DOMAIN_EINVAL);
    assert_int_equal(crypto_base64_decode("Zm9v\nYmFy", 9, dec, sizeof dec, &n), DOMAIN_EINVAL);
    assert_int_equal(crypto_base64_decode("Zm-_", 4, dec, sizeof dec, &n), DOMAIN_EINVAL);
}

static void test_base64url(void **state)
{
    const uint8_t in[] = {0xfb, 0xff, 0xbf};
    char out[8];
    (void)state;

    assert_int_equal(crypto_base64url_encode(in, 3, out, sizeof out), 0);
    assert_string_equal(out, "-_-_");
    assert_int_equal(crypto_base64url_encode(in, 2, out, sizeof out), 0);
    assert_string_equal(out, "-_8"); /* std "+/8=" without padding */
    assert_int_equal(crypto_base64url_encode(in, 1, out, sizeof out), 0);
    assert_string_equal(out, "-w");
    assert_int_equal(crypto_base64url_len(0), 1);
    assert_int_equal(crypto_base64url_len(1), 3);
    assert_int_equal(crypto_base64url_len(2), 4);
    assert_int_equal(crypto_base64url_len(32), 44);
    assert_int_equal(crypto_base64url_encode(in, 3, out, 4), DOMAIN_ENOSPC);
}

static void test_ct(void **state)
{
    (void)state;
    assert_true(crypto_ct_equal("abcd", "abcd", 4));
    assert_false(crypto_ct_equal("abcd", "abce", 4));
    assert_true(crypto_ct_equal("x", "y", 0));
    assert_true(crypto_ct_streq("secret", "secret"));
    assert_false(crypto_ct_streq("secret", "secreT"));
    assert_false(crypto_ct_streq("secret", "secret2"));
    assert_false(crypto_ct_streq("", "a"));
    assert_true(crypto_ct_streq("", ""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256), cmocka_unit_test(test_hmac),      cmocka_unit_test(test_hex),
        cmocka_unit_test(test_base64), cmocka_unit_test(test_base64url), cmocka_unit_test(test_ct),
    };
    return cmocka_run_group_tests_name("domain/crypto", tests, NULL, NULL);
}
