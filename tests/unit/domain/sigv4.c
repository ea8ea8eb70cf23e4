/*
 * Unit tests for domain/sigv4: the AWS documented presigned-GET example (REFERENCE.md
 * section 5), two URLs produced independently by botocore's presigner (path-style PUT with
 * characters that need encoding, virtual-hosted GET in another region) and one by the AWS SDK for
 * JavaScript v3's SignatureV4 (an upload bound to its type, size and If-None-Match: *).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/sigv4.h"

static void test_aws_example(void **state)
{
    sigv4_presign_t p = {
        .method = "GET",
        .endpoint = "https://s3.amazonaws.com",
        .region = "us-east-1",
        .bucket = "examplebucket",
        .key = "test.txt",
        .access_key = "AKIAIOSFODNN7EXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        .amz_date = "20130524T000000Z",
        .expires = 86400,
        .path_style = false,
    };
    char *url = NULL;
    (void)state;

    assert_int_equal(sigv4_presign_url(&p, &url), 0);
    assert_string_equal(
        url, "https://examplebucket.s3.amazonaws.com/test.txt"
             "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
             "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
             "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
             "&X-Amz-Signature="
             "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
    free(url);
}

static void test_botocore_path_style_put(void **state)
{
    sigv4_presign_t p = {
        .method = "PUT",
        .endpoint = "http://localhost:4568",
        .region = "us-east-1",
        .bucket = "coach-files",
        .key = "org/1/a b+ñ.pdf",
        .access_key = "S3RVER",
        .secret_key = "S3RVER",
        .amz_date = "20261122T023657Z",
        .expires = 900,
        .path_style = true,
    };
    char *url = NULL;
    (void)state;

    assert_int_equal(sigv4_presign_url(&p, &url), 0);
    assert_string_equal(url,
                        "http://localhost:4568/coach-files/org/1/a%20b%2B%C3%B1.pdf"
                        "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                        "&X-Amz-Credential=S3RVER%2F20261122%2Fus-east-1%2Fs3%2Faws4_request"
                        "&X-Amz-Date=20261122T023657Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host"
                        "&X-Amz-Signature="
                        "1902def4eab342d867a242ea2cf20c015ef6c47e1b086968ed4843f56ec8e118");
    free(url);

    /* A trailing slash on the endpoint changes nothing. */
    p.endpoint = "http://localhost:4568/";
    assert_int_equal(sigv4_presign_url(&p, &url), 0);
    assert_non_null(
        strstr(url, "1902def4eab342d867a242ea2cf20c015ef6c47e1b086968ed4843f56ec8e118"));
    free(url);
}

static void test_botocore_virtual_get(void **state)
{
    sigv4_presign_t p = {
        .method = "GET",
        .endpoint = "https://s3.eu-west-1.amazonaws.com:443",
        .region = "eu-west-1",
        .bucket = "coach-files",
        .key = "uploads/x~y_z.png",
        .access_key = "S3RVER",
        .secret_key = "S3RVER",
        .amz_date = "20261122T023657Z",
        .expires = 3600,
        .path_style = false,
    };
    char *url = NULL;
    (void)state;

    assert_int_equal(sigv4_presign_url(&p, &url), 0);
    assert_string_equal(url,
                        "https://coach-files.s3.eu-west-1.amazonaws.com/uploads/x~y_z.png"
                        "?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                        "&X-Amz-Credential=S3RVER%2F20261122%2Feu-west-1%2Fs3%2Faws4_request"
                        "&X-Amz-Date=20261122T023657Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
                        "&X-Amz-Signature="
                        "7f047fa9d95778902abdfe1fc2f2e1f9d9b46559bb8488ee725ca21c1add1e99");
    free(url);
}

static void test_sdk_put_if_none_match(void **state)
{
    sigv4_presign_t p = {
        .method = "PUT",
        .endpoint = "http://127.0.0.1:4568",
        .region = "us-east-1",
        .bucket = "coach-files",
        .key = "uploads/x/a b.pdf",
        .access_key = "AKIAIOSFODNN7EXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        .amz_date = "20261123T194501Z",
        .expires = 900,
        .path_style = true,
        .content_type = "application/pdf",
        .sign_length = true,
        .content_length = 123456,
        .if_none_match_any = true,
        .query_content_sha256 = true,
    };
    char *url = NULL;
    (void)state;

    assert_int_equal(sigv4_presign_url(&p, &url), 0);
    assert_string_equal(
        url, "http://127.0.0.1:4568/coach-files/uploads/x/a%20b.pdf"
             "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Content-Sha256=UNSIGNED-PAYLOAD"
             "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20261123%2Fus-east-1%2Fs3%2Faws4_request"
             "&X-Amz-Date=20261123T194501Z&X-Amz-Expires=900"
             "&X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost%3Bif-none-match"
             "&X-Amz-Signature="
             "57cf119ead363fd626e40c5d324d39928fb60a622e176a352f00cd709366b490");
    free(url);
}

static void test_rejects(void **state)
{
    sigv4_presign_t base = {
        .method = "GET",
        .endpoint = "https://s3.amazonaws.com",
        .region = "us-east-1",
        .bucket = "b",
        .key = "k",
        .access_key = "A",
        .secret_key = "S",
        .amz_date = "20130524T000000Z",
        .expires = 60,
        .path_style = true,
    };
    sigv4_presign_t p;
    char *url = NULL;
    (void)state;

    p = base, p.expires = 0;
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.expires = SIGV4_MAX_EXPIRES + 1;
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.amz_date = "2013-05-24T00:00:00Z";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.amz_date = "20130524T000000";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.endpoint = "ftp://s3.amazonaws.com";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.endpoint = "https://s3.amazonaws.com/prefix";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.endpoint = "https://user@s3.amazonaws.com";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.endpoint = "https://";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.key = "";
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.bucket = NULL;
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    p = base, p.secret_key = NULL;
    assert_int_equal(sigv4_presign_url(&p, &url), DOMAIN_EINVAL);
    assert_int_equal(sigv4_presign_url(NULL, &url), DOMAIN_EINVAL);
    assert_null(url);
}

static void test_amz_date(void **state)
{
    char out[SIGV4_AMZ_DATE_LEN + 1];
    (void)state;

    sigv4_amz_date(INT64_C(1369353600000), out); /* 2013-05-24T00:00:00Z */
    assert_string_equal(out, "20130524T000000Z");
    sigv4_amz_date(INT64_C(1767323045678), out); /* 2026-01-02T03:04:05.678Z */
    assert_string_equal(out, "20260102T030405Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aws_example),
        cmocka_unit_test(test_botocore_path_style_put),
        cmocka_unit_test(test_botocore_virtual_get),
        cmocka_unit_test(test_sdk_put_if_none_match),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_amz_date),
    };
    return cmocka_run_group_tests_name("domain/sigv4", tests, NULL, NULL);
}
