/*
 * Unit tests for domain/accesstoken2: the published AccessToken2 vector (REFERENCE.md section 4)
 * byte for byte, and the layout of the RTC publisher and RTM tokens after inflating them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "domain/accesstoken2.h"
#include "domain/crypto.h"
#include "domain/err.h"

#define APP_ID "970CA35de60c44645bbae8a215061b33"
#define APP_CERT "5CFd2fd1755d40ecb72977518be15d3b"
#define CHANNEL "7d72365eb983485397e3e3f9d460bdda"

/* Inflated token content and a read cursor. */
typedef struct rd {
    uint8_t buf[4096];
    size_t len, pos;
} rd_t;

static void inflate_token(const char *tok, rd_t *r)
{
    uint8_t z[4096];
    size_t zlen = 0;
    uLongf n = sizeof r->buf;

    assert_memory_equal(tok, "007", 3);
    assert_int_equal(crypto_base64_decode(tok + 3, strlen(tok + 3), z, sizeof z, &zlen), 0);
    assert_int_equal(uncompress(r->buf, &n, z, zlen), Z_OK);
    r->len = n;
    r->pos = 0;
}

static uint16_t rd_u16(rd_t *r)
{
    assert_true(r->pos + 2 <= r->len);
    uint16_t v = (uint16_t)(r->buf[r->pos] | r->buf[r->pos + 1] << 8);
    r->pos += 2;
    return v;
}

static uint32_t rd_u32(rd_t *r)
{
    assert_true(r->pos + 4 <= r->len);
    uint32_t v = (uint32_t)r->buf[r->pos] | (uint32_t)r->buf[r->pos + 1] << 8 |
                 (uint32_t)r->buf[r->pos + 2] << 16 | (uint32_t)r->buf[r->pos + 3] << 24;
    r->pos += 4;
    return v;
}

/* Reads a length-prefixed string and compares it with want. */
static void rd_expect_str(rd_t *r, const char *want)
{
    uint16_t n = rd_u16(r);
    assert_int_equal(n, strlen(want));
    assert_true(r->pos + n <= r->len);
    assert_memory_equal(r->buf + r->pos, want, n);
    r->pos += n;
}

/* Checks the signature over the signing info, then positions the cursor on the services. */
static void expect_header(rd_t *r, uint32_t ts, uint32_t salt, uint32_t expire, uint16_t nsvc)
{
    uint8_t k1[32], k2[32], sig[32], key[4];

    assert_int_equal(rd_u16(r), 32);
    const uint8_t *got_sig = r->buf + r->pos;
    r->pos += 32;
    size_t info = r->pos;

    memcpy(key,
           (uint8_t[]){(uint8_t)ts, (uint8_t)(ts >> 8), (uint8_t)(ts >> 16), (uint8_t)(ts >> 24)},
           4);
    crypto_hmac_sha256(key, 4, APP_CERT, strlen(APP_CERT), k1);
    memcpy(key,
           (uint8_t[]){(uint8_t)salt, (uint8_t)(salt >> 8), (uint8_t)(salt >> 16),
                       (uint8_t)(salt >> 24)},
           4);
    crypto_hmac_sha256(key, 4, k1, 32, k2);
    crypto_hmac_sha256(k2, 32, r->buf + info, r->len - info, sig);
    assert_memory_equal(sig, got_sig, 32);

    rd_expect_str(r, APP_ID);
    assert_int_equal(rd_u32(r), ts);
    assert_int_equal(rd_u32(r), expire);
    assert_int_equal(rd_u32(r), salt);
    assert_int_equal(rd_u16(r), nsvc);
}

static void test_reference_vector(void **state)
{
    accesstoken2_service_t s = {0};
    char *tok = NULL;
    (void)state;

    s.type = ACCESSTOKEN2_SERVICE_RTC;
    s.privs[0] = (accesstoken2_privilege_t){ACCESSTOKEN2_PRIV_JOIN_CHANNEL, 600};
    s.nprivs = 1;
    s.payload[0] = CHANNEL;
    s.payload[1] = "2882341273";
    s.npayload = 2;
    assert_int_equal(accesstoken2_build(APP_ID, APP_CERT, 1111111, 1, 600, &s, 1, &tok), 0);
    assert_string_equal(tok,
                        "007eJxTYBBbsMMnKq7p9Hf/HcIX5kce9b518kCiQgSr5Zrp4X1Tu6UUGCzNDZwdjU1TUs0Mk"
                        "k1MzExMk5ISUy0SjQxNDcwMk4yN3b8IMEQwMTAwMoAwBIL4CgzmKeZGxmamqUmWFsYmFqbGl"
                        "uapxqnGaZYpJmYGSSkpiVwMRhYWRsYmhkbmxgDCaiTj");
    free(tok);
}

static void test_rtc_publisher(void **state)
{
    char *tok = NULL;
    rd_t r;
    (void)state;

    assert_int_equal(accesstoken2_rtc_publisher(APP_ID, APP_CERT, "ms_abc_1767225600000",
                                                2882341273u, 1767225600, 424242, 3600, &tok),
                     0);
    inflate_token(tok, &r);
    expect_header(&r, 1767225600, 424242, 3600, 1);
    assert_int_equal(rd_u16(&r), ACCESSTOKEN2_SERVICE_RTC);
    assert_int_equal(rd_u16(&r), 4);
    for (uint16_t k = 1; k <= 4; k++) { /* join, audio, video, data in key order */
        assert_int_equal(rd_u16(&r), k);
        assert_int_equal(rd_u32(&r), 3600);
    }
    rd_expect_str(&r, "ms_abc_1767225600000");
    rd_expect_str(&r, "2882341273");
    assert_int_equal(r.pos, r.len);
    free(tok);

    /* uid 0 ("any uid") is written as an empty string. */
    assert_int_equal(accesstoken2_rtc_publisher(APP_ID, APP_CERT, "c", 0, 1, 2, 60, &tok), 0);
    inflate_token(tok, &r);
    expect_header(&r, 1, 2, 60, 1);
    r.pos += 2 + 2 + 4 * 6;
    rd_expect_str(&r, "c");
    rd_expect_str(&r, "");
    assert_int_equal(r.pos, r.len);
    free(tok);
}

static void test_rtm(void **state)
{
    char *tok = NULL;
    rd_t r;
    (void)state;

    assert_int_equal(accesstoken2_rtm(APP_ID, APP_CERT, "cjld2cjxh0000qzrmn831i7rn", 1767225600,
                                      99999999, 86400, &tok),
                     0);
    inflate_token(tok, &r);
    expect_header(&r, 1767225600, 99999999, 86400, 1);
    assert_int_equal(rd_u16(&r), ACCESSTOKEN2_SERVICE_RTM);
    assert_int_equal(rd_u16(&r), 1);
    assert_int_equal(rd_u16(&r), ACCESSTOKEN2_PRIV_RTM_LOGIN);
    assert_int_equal(rd_u32(&r), 86400);
    rd_expect_str(&r, "cjld2cjxh0000qzrmn831i7rn");
    assert_int_equal(r.pos, r.len);
    free(tok);
}

static void test_build_sorts_and_rejects(void **state)
{
    accesstoken2_service_t s[2] = {{0}, {0}};
    char *tok = NULL;
    rd_t r;
    (void)state;

    /* Services given RTM first and privileges out of order come out sorted. */
    s[0].type = ACCESSTOKEN2_SERVICE_RTM;
    s[0].privs[0] = (accesstoken2_privilege_t){1, 10};
    s[0].nprivs = 1;
    s[0].payload[0] = "u";
    s[0].npayload = 1;
    s[1].type = ACCESSTOKEN2_SERVICE_RTC;
    s[1].privs[0] = (accesstoken2_privilege_t){3, 30};
    s[1].privs[1] = (accesstoken2_privilege_t){1, 10};
    s[1].nprivs = 2;
    s[1].payload[0] = "ch";
    s[1].payload[1] = "";
    s[1].npayload = 2;
    assert_int_equal(accesstoken2_build(APP_ID, APP_CERT, 5, 6, 7, s, 2, &tok), 0);
    inflate_token(tok, &r);
    expect_header(&r, 5, 6, 7, 2);
    assert_int_equal(rd_u16(&r), ACCESSTOKEN2_SERVICE_RTC);
    assert_int_equal(rd_u16(&r), 2);
    assert_int_equal(rd_u16(&r), 1);
    assert_int_equal(rd_u32(&r), 10);
    assert_int_equal(rd_u16(&r), 3);
    assert_int_equal(rd_u32(&r), 30);
    rd_expect_str(&r, "ch");
    rd_expect_str(&r, "");
    assert_int_equal(rd_u16(&r), ACCESSTOKEN2_SERVICE_RTM);
    free(tok);

    tok = NULL;
    s[1].type = ACCESSTOKEN2_SERVICE_RTM; /* duplicate service type */
    assert_int_equal(accesstoken2_build(APP_ID, APP_CERT, 5, 6, 7, s, 2, &tok), DOMAIN_EINVAL);
    s[1].type = ACCESSTOKEN2_SERVICE_RTC;
    s[1].privs[1].key = 3; /* duplicate privilege */
    assert_int_equal(accesstoken2_build(APP_ID, APP_CERT, 5, 6, 7, s, 2, &tok), DOMAIN_EINVAL);
    s[1].privs[1].key = 1;
    s[1].payload[1] = NULL;
    assert_int_equal(accesstoken2_build(APP_ID, APP_CERT, 5, 6, 7, s, 2, &tok), DOMAIN_EINVAL);
    s[1].payload[1] = "";
    s[1].nprivs = ACCESSTOKEN2_MAX_PRIVS + 1;
    assert_int_equal(accesstoken2_build(APP_ID, APP_CERT, 5, 6, 7, s, 2, &tok), DOMAIN_EINVAL);
    assert_int_equal(accesstoken2_build(NULL, APP_CERT, 5, 6, 7, s, 1, &tok), DOMAIN_EINVAL);
    assert_int_equal(accesstoken2_rtm(APP_ID, NULL, "u", 1, 1, 1, &tok), DOMAIN_EINVAL);
    assert_int_equal(accesstoken2_rtm(APP_ID, APP_CERT, NULL, 1, 1, 1, &tok), DOMAIN_EINVAL);
    assert_null(tok);
}

static void test_uid_from_user(void **state)
{
    (void)state;
    /* First 4 bytes of SHA-256, big-endian, & 0x7fffffff (checked with Python hashlib). */
    assert_int_equal(accesstoken2_uid_from_user("ckx1"), 236345497u);
    assert_int_equal(accesstoken2_uid_from_user("clh3am8hi0000qwer1234abcd"), 1458958745u);
    assert_int_equal(accesstoken2_uid_from_user("user_1"), 2041620992u);
    /* Stable, positive, never 0. */
    for (int i = 0; i < 2000; i++) {
        char id[32];
        snprintf(id, sizeof id, "c%024d", i);
        uint32_t uid = accesstoken2_uid_from_user(id);
        assert_true(uid >= 1 && uid <= 0x7fffffffu);
        assert_int_equal(uid, accesstoken2_uid_from_user(id));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vector),
        cmocka_unit_test(test_rtc_publisher),
        cmocka_unit_test(test_rtm),
        cmocka_unit_test(test_build_sorts_and_rejects),
        cmocka_unit_test(test_uid_from_user),
    };
    return cmocka_run_group_tests_name("domain/accesstoken2", tests, NULL, NULL);
}
