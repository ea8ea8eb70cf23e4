/*
 * domain/accesstoken2.c and domain/sigv4.c: the video/chat token and S3 URL builders, fed with
 * hostile strings (channel names, user ids, object keys, content types and dispositions come
 * from clients or from stored file names). The first byte picks the builder and its flags; the
 * rest is cut at NUL bytes into the string arguments. Oracles: a built token starts with "007"
 * and is base64; a presigned URL starts with the endpoint's scheme and carries a 64-hex-digit
 * signature; nothing a caller passes reaches the URL unescaped (no space, CR, LF or '#').
 */
#include <stdbool.h>
#include <stdio.h>

#include "domain/accesstoken2.h"
#include "domain/sigv4.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Endpoint, region and bucket are the operator's configuration, not client input: the
 * character oracle applies when they are ordinary ones. */
static bool plain(const char *e)
{
    for (; *e; e++)
        if (!((*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9') || strchr(".:/-[]", *e)))
            return false;
    return true;
}

static bool plain_config(const sigv4_presign_t *p)
{
    return plain(p->endpoint) && plain(p->region) && plain(p->bucket);
}

static void check_url(const char *url)
{
    FUZZ_CHECK(strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0);
    for (const char *p = url; *p; p++)
        FUZZ_CHECK(*p > ' ' && *p != 0x7f && *p != '#' && (unsigned char)*p < 0x80);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    uint8_t sel = data[0];
    uint32_t num;
    memcpy(&num, data + 1, 4);
    fuzz_fields_t f;
    fuzz_split(&f, data + 5, size - 5, 9);
    char *out = NULL;
    switch (sel % 4) {
    case 0:
        if (accesstoken2_rtc_publisher(f.s[0], f.s[1], f.s[2], num, 1700000000u,
                                       1 + num % 99999999u, 3600, &out) == 0) {
            FUZZ_CHECK(strncmp(out, "007", 3) == 0);
            for (const char *p = out; *p; p++)
                FUZZ_CHECK((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                           (*p >= '0' && *p <= '9') || *p == '+' || *p == '/' || *p == '=');
        }
        break;
    case 1:
        if (accesstoken2_rtm(f.s[0], f.s[1], f.s[2], 1700000000u, 1 + num % 99999999u, num, &out) ==
            0)
            FUZZ_CHECK(strncmp(out, "007", 3) == 0);
        (void)accesstoken2_uid_from_user(f.s[2]);
        break;
    default: {
        sigv4_presign_t p = {
            .method = (sel & 4) ? "PUT" : "GET",
            .endpoint = f.s[0],
            .region = f.s[1],
            .bucket = f.s[2],
            .key = f.s[3],
            .access_key = f.s[4],
            .secret_key = "secret",
            .amz_date = f.s[5],
            .expires = num,
            .path_style = (sel & 8) != 0,
            .content_type = (sel & 16) ? f.s[6] : NULL,
            .sign_length = (sel & 32) != 0,
            .content_length = num,
            .if_none_match_any = (sel & 32) != 0, /* as the s3 driver's upload URLs */
            .response_content_disposition = (sel & 64) ? f.s[7] : NULL,
            .response_content_type = (sel & 128) ? f.s[8] : NULL,
        };
        if (sel % 4 == 2) {
            if (sigv4_presign_url(&p, &out) == 0 && plain_config(&p)) {
                check_url(out);
                const char *sig = strstr(out, "X-Amz-Signature=");
                FUZZ_CHECK(sig && strlen(sig + 16) == 64);
            }
        } else {
            sigv4_signed_t s;
            if (sigv4_sign_headers(&p, &s) == 0) {
                if (plain_config(&p)) check_url(s.url);
                FUZZ_CHECK(strncmp(s.authorization, "AWS4-HMAC-SHA256 Credential=", 28) == 0);
                free(s.url);
                free(s.authorization);
            }
        }
        char date[SIGV4_AMZ_DATE_LEN + 1];
        sigv4_amz_date((int64_t)num * 1000, date);
        FUZZ_CHECK(strlen(date) == SIGV4_AMZ_DATE_LEN);
    }
    }
    free(out);
    fuzz_fields_free(&f);
    return 0;
}
