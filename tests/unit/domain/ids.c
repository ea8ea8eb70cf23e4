/* Unit tests for domain/ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/ids.h"

static void test_uuid_v4(void **state)
{
    uint8_t rnd[16];
    char out[IDS_UUID_LEN + 1];
    (void)state;

    for (int i = 0; i < 16; i++)
        rnd[i] = (uint8_t)i;
    ids_uuid_v4(rnd, out);
    assert_string_equal(out, "00010203-0405-4607-8809-0a0b0c0d0e0f");
    assert_true(ids_is_uuid(out));

    memset(rnd, 0xff, sizeof rnd);
    ids_uuid_v4(rnd, out);
    assert_string_equal(out, "ffffffff-ffff-4fff-bfff-ffffffffffff");

    memset(rnd, 0, sizeof rnd);
    ids_uuid_v4(rnd, out);
    assert_string_equal(out, "00000000-0000-4000-8000-000000000000");
}

static void test_is_uuid(void **state)
{
    (void)state;
    assert_true(ids_is_uuid("123e4567-e89b-12d3-a456-426614174000")); /* v1 */
    assert_true(ids_is_uuid("123E4567-E89B-12D3-A456-426614174000")); /* upper case */
    assert_true(ids_is_uuid("00000000-0000-0000-0000-000000000000"));
    assert_false(ids_is_uuid(NULL));
    assert_false(ids_is_uuid(""));
    assert_false(ids_is_uuid("123e4567e89b12d3a456426614174000"));      /* no dashes */
    assert_false(ids_is_uuid("123e4567-e89b-12d3-a456-42661417400"));   /* short */
    assert_false(ids_is_uuid("123e4567-e89b-12d3-a456-4266141740000")); /* long */
    assert_false(ids_is_uuid("123e4567-e89b-12d3-a456-42661417400g"));  /* not hex */
    assert_false(ids_is_uuid("{123e4567-e89b-12d3-a456-426614174000}"));
    assert_false(ids_is_uuid("123e4567-e89b-12d3a-456-426614174000")); /* dash misplaced */
    assert_false(ids_is_uuid(" 123e4567-e89b-12d3-a456-42661417400"));
}

static void test_cuid(void **state)
{
    const uint8_t rnd[8] = {0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xfe};
    const uint8_t zero[8] = {0};
    char out[IDS_CUID_LEN + 1];
    (void)state;

    /* 2026-01-01T00:00:00Z, counter 5, fingerprint 123456 (values checked independently). */
    ids_cuid(UINT64_C(1767225600000), 5, 123456, rnd, out);
    assert_string_equal(out, "cmjuohs0000052n9c2f4441z2");
    assert_int_equal(strlen(out), 25);
    assert_true(ids_is_cuid(out));

    ids_cuid(0, 0, 0, zero, out);
    assert_string_equal(out, "c000000000000000000000000");

    /* Counter wraps at 36^4 and never changes the length. */
    ids_cuid(UINT64_C(1767225600000), 36 * 36 * 36 * 36 + 1, UINT32_MAX, rnd, out);
    assert_int_equal(strlen(out), 25);
    assert_memory_equal(out + 9, "0001", 4);
}

static void test_is_cuid(void **state)
{
    (void)state;
    assert_true(ids_is_cuid("cjld2cjxh0000qzrmn831i7rn"));
    assert_false(ids_is_cuid(NULL));
    assert_false(ids_is_cuid(""));
    assert_false(ids_is_cuid("Cjld2cjxh0000qzrmn831i7rn"));  /* must start with c */
    assert_false(ids_is_cuid("cjld2cjxh0000qzrmn831i7rN"));  /* lower case only */
    assert_false(ids_is_cuid("cjld2cjxh0000qzrmn831i7r"));   /* 24 chars */
    assert_false(ids_is_cuid("cjld2cjxh0000qzrmn831i7rnn")); /* 26 chars */
    assert_false(ids_is_cuid("cjld2cjxh0000qzrmn831i7r-"));
    assert_false(ids_is_cuid("123e4567-e89b-12d3-a456-426614174000"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_v4),
        cmocka_unit_test(test_is_uuid),
        cmocka_unit_test(test_cuid),
        cmocka_unit_test(test_is_cuid),
    };
    return cmocka_run_group_tests_name("domain/ids", tests, NULL, NULL);
}
