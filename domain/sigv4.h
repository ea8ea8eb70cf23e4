/*
 * S3 presigned URLs with AWS Signature Version 4, query-string form (REFERENCE.md section 5):
 * UNSIGNED-PAYLOAD, the host header signed (and, when asked, the Content-Type, size and
 * If-None-Match of an upload), so a client can PUT or GET the object with a plain request before
 * the URL expires. Works with AWS and S3-compatible servers, path-style
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
    /* Optional. content_type (non-NULL) and content_length (when sign_length) are signed as
     * headers, so an upload through the URL must carry exactly that Content-Type and size. */
    const char *content_type;
    bool sign_length;
    uint64_t content_length;
    /* Signs "if-none-match: *" as a header: a PUT through the URL must carry it, so S3 refuses
     * the PUT (412) once the key holds an object and the URL cannot replace what it uploaded. */
    bool if_none_match_any;
    /* Optional response overrides of a presigned GET (response-content-disposition and
     * response-content-type query parameters, signed like the others). */
    const char *response_content_disposition;
    const char *response_content_type;
    /* Adds X-Amz-Content-Sha256=UNSIGNED-PAYLOAD to the query, as the AWS SDKs' presigners do
     * (the documented example has no such parameter). */
    bool query_content_sha256;
} sigv4_presign_t;

/* Header-signed request (Authorization header), for server-side calls. */
typedef struct sigv4_signed {
    char *url;           /* "scheme://host/path" (malloc'd) */
    char *authorization; /* "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." */
} sigv4_signed_t;
#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

/* Builds the presigned URL "scheme://host/path?X-Amz-...&X-Amz-Signature=..." into *out
 * (malloc'd, caller frees). The host is the endpoint's (default port dropped) with the bucket
 * prepended unless path_style. 0, or DOMAIN_EINVAL for missing fields, an endpoint that is not
 * http(s)://host[:port][/], a malformed amz_date, or expires out of range. */
int sigv4_presign_url(const sigv4_presign_t *p, char **out);
/* Signs a request with headers instead of the query string: the caller sends Authorization,
 * x-amz-date (= p->amz_date) and x-amz-content-sha256: UNSIGNED-PAYLOAD; host,
 * x-amz-content-sha256 and x-amz-date are signed. p->key may be "" (a bucket-level request:
 * "/bucket" path-style, "/" virtual-hosted); expires and the optional fields are ignored.
 * 0 or DOMAIN_EINVAL; on success the caller frees out->url and out->authorization. */
int sigv4_sign_headers(const sigv4_presign_t *p, sigv4_signed_t *out);
/* Formats epoch milliseconds as the X-Amz-Date "YYYYMMDDTHHMMSSZ" (17 bytes with the NUL). */
void sigv4_amz_date(int64_t epoch_ms, char out[SIGV4_AMZ_DATE_LEN + 1]);
