/*
 * S3 presigned URLs with AWS Signature Version 4, query-string form (REFERENCE.md section 5):
 * UNSIGNED-PAYLOAD, only the host header signed, so any client can PUT or GET the object with a
 * plain request before the URL expires. Works with AWS and S3-compatible servers, path-style
 * (endpoint/bucket/key) or virtual-hosted-style (bucket.endpoint/key).
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define SIGV4_AMZ_DATE_LEN 16 /* "YYYYMMDDTHHMMSSZ" */
#define SIGV4_MAX_EXPIRES 604800

typedef struct sigv4_presign {
    const char *method;   /* "GET", "PUT" (any upper-case method is signed as given) */
    const char *endpoint; /* "https://s3.amazonaws.com", "http://localhost:4568", ... */
    const char *region;   /* "us-east-1" */
    const char *bucket;
    const char *key; /* object key, not encoded, no leading '/'; '/' separates segments */
    const char *access_key;
    const char *secret_key;
    const char *amz_date; /* "YYYYMMDDTHHMMSSZ", UTC: the signing time */
    uint32_t expires;     /* seconds, 1..604800 */
    bool path_style;
} sigv4_presign_t;

/* Builds the presigned URL "scheme://host/path?X-Amz-...&X-Amz-Signature=..." into *out
 * (malloc'd, caller frees). The host is the endpoint's (default port dropped) with the bucket
 * prepended unless path_style. 0, or DOMAIN_EINVAL for missing fields, an endpoint that is not
 * http(s)://host[:port][/], a malformed amz_date, or expires out of range. */
int sigv4_presign_url(const sigv4_presign_t *p, char **out);
/* Formats epoch milliseconds as the X-Amz-Date "YYYYMMDDTHHMMSSZ" (17 bytes with the NUL). */
void sigv4_amz_date(int64_t epoch_ms, char out[SIGV4_AMZ_DATE_LEN + 1]);
