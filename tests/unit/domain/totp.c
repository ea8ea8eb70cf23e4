/* Unit tests for domain/totp: RFC 6238 Appendix B (SHA-1), RFC 4226 Appendix D, the window and
 * replay rule, base32, the sealed secret and backup codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "domain/crypto.h"
#include "domain/err.h"
#include "domain/totp.h"

static const uint8_t RFC_KEY[] = "12345678901234567890";

/* RFC 6238 Appendix B, the SHA-1 rows: time -> 8-digit TOTP. */
static void test_rfc6238_vectors(void **state)
{
    (void)state;
    static const struct {
        int64_t t;
        uint32_t code;
    } v[] = {
        {59, 94287082},         {1111111109, 7081804},  {1111111111, 14050471},
        {1234567890, 89005924}, {2000000000, 69279037}, {20000000000LL, 65353130},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_int_equal(totp_hotp(RFC_KEY, 20, totp_step(v[i].t), 8), v[i].code);
}

/* RFC 4226 Appendix D: HOTP counters 0..9, 6 digits. */
static void test_rfc4226_vectors(void **state)
{
    (void)state;
    static const uint32_t want[] = {755224, 287082, 359152, 969429, 338314,
                                    254676, 287922, 162583, 399871, 520489};
    for (uint64_t c = 0; c < 10; c++)
        assert_int_equal(totp_hotp(RFC_KEY, 20, c, 6), want[c]);
}

static void code_at(int64_t t, char out[7])
{
    snprintf(out, 7, "%06u", (unsigned)totp_hotp(RFC_KEY, 20, totp_step(t), 6));
}

static void test_verify_window_and_replay(void **state)
{
    (void)state;
    int64_t now = 1234567890; /* step 41152263 */
    int64_t step = (int64_t)totp_step(now);
    char c[7];
    code_at(now, c);
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, -1), step);
    /* Used once: the same step is refused afterwards. */
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, step), -1);
    /* One step either side is accepted; two are not. */
    code_at(now - 30, c);
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, -1), step - 1);
    code_at(now + 30, c);
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, -1), step + 1);
    code_at(now - 60, c);
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, -1), -1);
    code_at(now + 60, c);
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, -1), -1);
    /* A code of an older step than the last used one is refused too. */
    code_at(now - 30, c);
    assert_int_equal(totp_verify(RFC_KEY, 20, c, now, step), -1);
    /* Shape: six digits exactly. */
    assert_int_equal(totp_verify(RFC_KEY, 20, "12345", now, -1), -1);
    assert_int_equal(totp_verify(RFC_KEY, 20, "1234567", now, -1), -1);
    assert_int_equal(totp_verify(RFC_KEY, 20, "12a456", now, -1), -1);
    assert_int_equal(totp_verify(RFC_KEY, 20, NULL, now, -1), -1);
}

static void test_base32(void **state)
{
    (void)state;
    char out[64];
    totp_base32_encode(RFC_KEY, 20, out);
    assert_string_equal(out, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
    totp_base32_encode((const uint8_t *)"foobar", 6, out);
    assert_string_equal(out, "MZXW6YTBOI"); /* RFC 4648 section 10, padding dropped */
    uint8_t back[32];
    assert_int_equal(totp_base32_decode("gezdgnbvgy3tqojqgezdgnbvgy3tqojq", back, sizeof back), 20);
    assert_memory_equal(back, RFC_KEY, 20);
    assert_int_equal(totp_base32_decode("MZXW6YTBOI======", back, sizeof back), 6);
    assert_memory_equal(back, "foobar", 6);
    assert_int_equal(totp_base32_decode("MZ1W", back, sizeof back), DOMAIN_EINVAL);
    assert_int_equal(totp_base32_decode("GEZDGNBVGY3TQOJQ", back, 4), DOMAIN_ENOSPC);
}

static void test_seal_open(void **state)
{
    (void)state;
    uint8_t key[TOTP_KEY_LEN], other[TOTP_KEY_LEN], nonce[12];
    memset(key, 7, sizeof key);
    memset(other, 8, sizeof other);
    memset(nonce, 1, sizeof nonce);
    char sealed[TOTP_SEALED_HEX_MAX + 1];
    assert_int_equal(totp_seal(key, nonce, "user1", RFC_KEY, 20, sealed, sizeof sealed), 0);
    assert_int_equal(strlen(sealed), 2 * (12 + 20 + 16));
    /* The secret's bytes do not appear in the sealed text. */
    assert_null(strstr(sealed, "3132333435"));
    uint8_t out[64];
    assert_int_equal(totp_open(key, "user1", sealed, out, sizeof out), 20);
    assert_memory_equal(out, RFC_KEY, 20);
    /* Another key, another user's row, or one changed character: refused. */
    assert_int_equal(totp_open(other, "user1", sealed, out, sizeof out), DOMAIN_EINVAL);
    assert_int_equal(totp_open(key, "user2", sealed, out, sizeof out), DOMAIN_EINVAL);
    sealed[30] = sealed[30] == '0' ? '1' : '0';
    assert_int_equal(totp_open(key, "user1", sealed, out, sizeof out), DOMAIN_EINVAL);
    assert_int_equal(totp_open(key, "user1", "zz", out, sizeof out), DOMAIN_EINVAL);
}

/* TWO_FACTOR_ENCRYPTION_KEY stands for two keys, one per purpose: they differ from each other
 * and from the key, are HMAC-SHA256(key, label) (values from Python's hmac), and sealing and
 * backup hashes still round-trip under them. */
static void test_subkeys(void **state)
{
    (void)state;
    uint8_t key[TOTP_KEY_LEN], seal[TOTP_KEY_LEN], backup[TOTP_KEY_LEN], nonce[12];
    memset(key, 7, sizeof key);
    memset(nonce, 1, sizeof nonce);
    totp_subkeys(key, seal, backup);
    assert_memory_not_equal(seal, backup, TOTP_KEY_LEN);
    assert_memory_not_equal(seal, key, TOTP_KEY_LEN);
    assert_memory_not_equal(backup, key, TOTP_KEY_LEN);
    char hex[2 * TOTP_KEY_LEN + 1];
    crypto_hex_encode(seal, sizeof seal, hex);
    assert_string_equal(hex, "b4aef0f2395735c9876f29c97443536d0e666f49ed602d977029d18a1dae5848");
    crypto_hex_encode(backup, sizeof backup, hex);
    assert_string_equal(hex, "2911f308909e8ad402382aec2b1ab5ed3b088855f926e408e95d5f634943ca3a");
    /* Another key, other subkeys. */
    uint8_t key2[TOTP_KEY_LEN], seal2[TOTP_KEY_LEN], backup2[TOTP_KEY_LEN];
    memset(key2, 8, sizeof key2);
    totp_subkeys(key2, seal2, backup2);
    assert_memory_not_equal(seal, seal2, TOTP_KEY_LEN);
    assert_memory_not_equal(backup, backup2, TOTP_KEY_LEN);
    /* Seal and open round-trip under the seal subkey; neither the key nor the backup subkey
     * opens it. */
    char sealed[TOTP_SEALED_HEX_MAX + 1];
    uint8_t out[64];
    assert_int_equal(totp_seal(seal, nonce, "user1", RFC_KEY, 20, sealed, sizeof sealed), 0);
    assert_int_equal(totp_open(seal, "user1", sealed, out, sizeof out), 20);
    assert_memory_equal(out, RFC_KEY, 20);
    assert_int_equal(totp_open(key, "user1", sealed, out, sizeof out), DOMAIN_EINVAL);
    assert_int_equal(totp_open(backup, "user1", sealed, out, sizeof out), DOMAIN_EINVAL);
    /* A backup code hashes the same under the backup subkey each time, and differently under
     * the key itself or the seal subkey. */
    char h1[65], h2[65], h3[65], h4[65];
    assert_true(totp_backup_hash(backup, "u1", "abcde-9ab9M-zAZ08-fghij", h1));
    assert_true(totp_backup_hash(backup, "u1", "abcde9ab9MzAZ08fghij", h2));
    assert_string_equal(h1, h2);
    assert_true(totp_backup_hash(key, "u1", "abcde-9ab9M-zAZ08-fghij", h3));
    assert_true(totp_backup_hash(seal, "u1", "abcde-9ab9M-zAZ08-fghij", h4));
    assert_string_not_equal(h1, h3);
    assert_string_not_equal(h1, h4);
}

static void test_backup_codes(void **state)
{
    (void)state;
    uint8_t rnd[TOTP_BACKUP_RANDOM] = {0,  1,  2,  3,  4,  61, 62, 63, 247, 100,
                                       25, 26, 51, 52, 60, 5,  6,  7,  8,   9};
    char code[TOTP_BACKUP_CODE_LEN + 1];
    assert_true(totp_backup_code(rnd, code));
    assert_string_equal(code, "abcde-9ab9M-zAZ08-fghij");
    assert_int_equal(strlen(code), TOTP_BACKUP_CODE_LEN);
    rnd[13] = 248;
    assert_false(totp_backup_code(rnd, code));
    /* Every byte picks one character: twenty of 62 are above the 112 bits of ASVS 6.5.2. */
    assert_int_equal(TOTP_BACKUP_RANDOM, TOTP_BACKUP_CHARS);
    assert_true(TOTP_BACKUP_CHARS * 5.9541963 >= 112.0); /* log2(62) */
    uint8_t key[TOTP_KEY_LEN];
    memset(key, 3, sizeof key);
    char h1[65], h2[65], h3[65], h4[65];
    assert_true(totp_backup_hash(key, "u1", "abcde-9ab9M-zAZ08-fghij", h1));
    assert_true(totp_backup_hash(key, "u2", "abcde-9ab9M-zAZ08-fghij", h2));
    assert_true(totp_backup_hash(key, "u1", "abcde-9ab9M-zAZ08-fghik", h3));
    assert_int_equal(strlen(h1), 64);
    assert_string_not_equal(h1, h2);
    assert_string_not_equal(h1, h3);
    /* Case-sensitive: the other case is another code. */
    assert_true(totp_backup_hash(key, "u1", "abcde-9ab9M-zaz08-fghij", h4));
    assert_string_not_equal(h1, h4);
    /* Typed without the dashes, with spaces around: the same hash. */
    assert_true(totp_backup_hash(key, "u1", "  abcde9ab9MzAZ08fghij \n", h4));
    assert_string_equal(h1, h4);
    assert_true(totp_backup_hash(key, "u1", "abcde9ab9M-zAZ08fghij", h4));
    assert_string_equal(h1, h4);
}

static void test_backup_normalize(void **state)
{
    (void)state;
    char out[TOTP_BACKUP_CHARS + 1];
    assert_true(totp_backup_normalize("abcde-9ab9M-zAZ08-fghij", out));
    assert_string_equal(out, "abcde9ab9MzAZ08fghij");
    assert_true(totp_backup_normalize("\tabcde9ab9MzAZ08fghij  ", out));
    assert_string_equal(out, "abcde9ab9MzAZ08fghij");
    /* Case-sensitive is the hash's business; the form keeps the case as typed. */
    assert_true(totp_backup_normalize("ABCDE9AB9MZAZ08FGHIJ", out));
    assert_string_equal(out, "ABCDE9AB9MZAZ08FGHIJ");
    /* Not a backup code: too short (the old ten-character shape), too long, a space or another
     * character inside, empty. */
    assert_false(totp_backup_normalize("abcde-9ab9M", out));
    assert_string_equal(out, "");
    assert_false(totp_backup_normalize("abcde-9ab9M-zAZ08-fghijk", out));
    assert_false(totp_backup_normalize("abcde 9ab9M zAZ08 fghij", out));
    assert_false(totp_backup_normalize("abcde_9ab9M-zAZ08-fghij", out));
    assert_false(totp_backup_normalize("abcde-9ab9M-zAZ08-fghi\xc3\xa9", out));
    assert_false(totp_backup_normalize("", out));
    assert_false(totp_backup_normalize("   ", out));
    /* A malformed code hashes like the empty code: it matches no stored hash. */
    uint8_t key[TOTP_KEY_LEN];
    memset(key, 3, sizeof key);
    char a[65], b[65];
    assert_false(totp_backup_hash(key, "u1", "abcde-9ab9M", a));
    assert_false(totp_backup_hash(key, "u1", "zzzzz", b));
    assert_string_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc6238_vectors),
        cmocka_unit_test(test_rfc4226_vectors),
        cmocka_unit_test(test_verify_window_and_replay),
        cmocka_unit_test(test_base32),
        cmocka_unit_test(test_seal_open),
        cmocka_unit_test(test_subkeys),
        cmocka_unit_test(test_backup_codes),
        cmocka_unit_test(test_backup_normalize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
