/*
 * SigV4 query-string presigning (see sigv4.h), following the AWS "Authenticating Requests:
 * Using Query Parameters" algorithm: canonical request -> string to sign -> HMAC chain
 * kDate/kRegion/kService/kSigning -> hex signature.
 */
#include "domain/sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "domain/crypto.h"
#include "domain/err.h"
#include "domain/timefmt.h"

typedef struct sb {
    char *data;
    size_t len, cap;
} sb_t;

static void sb_put(sb_t *b, const char *s, size_t n);
static void sb_puts(sb_t *b, const char *s);
static void sb_uri_encode(sb_t *b, const char *s, bool keep_slash);
static bool amz_date_ok(const char *d);

static void sb_put(sb_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (p == NULL) abort(); /* out of memory aborts, per project policy */
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_puts(sb_t *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* RFC 3986 encoding as SigV4 wants it: unreserved characters stay, everything else is %XX with
 * upper-case hex; '/' stays in paths only. */
static void sb_uri_encode(sb_t *b, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            sb_put(b, (const char *)&c, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            sb_put(b, e, 3);
        }
    }
}

static bool amz_date_ok(const char *d)
{
    if (strlen(d) != SIGV4_AMZ_DATE_LEN || d[8] != 'T' || d[15] != 'Z') return false;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (d[i] < '0' || d[i] > '9')) return false;
    return true;
}

void sigv4_amz_date(int64_t epoch_ms, char out[SIGV4_AMZ_DATE_LEN + 1])
{
    char iso[TIMEFMT_LEN + 1];

    /* "2013-05-24T00:00:00.000Z" -> "20130524T000000Z" */
    timefmt_format(epoch_ms, iso);
    const int pick[] = {0, 1, 2, 3, 5, 6, 8, 9, 10, 11, 12, 14, 15, 17, 18};
    for (int i = 0; i < 15; i++)
        out[i] = iso[pick[i]];
    out[15] = 'Z';
    out[16] = '\0';
}

/* The shared part of both forms: host, canonical path and credential scope, checked inputs. */
typedef struct parts {
    sb_t host, path, scope;
    char date[9];
    bool https;
} parts_t;

static void parts_free(parts_t *s)
{
    free(s->host.data);
    free(s->path.data);
    free(s->scope.data);
}

static int parts_build(const sigv4_presign_t *p, bool allow_empty_key, parts_t *s)
{
    const char *h;
    size_t hostlen;

    memset(s, 0, sizeof(*s));
    if (p == NULL || p->method == NULL || p->endpoint == NULL || p->region == NULL ||
        p->bucket == NULL || p->key == NULL || p->access_key == NULL || p->secret_key == NULL ||
        p->amz_date == NULL || (p->key[0] == '\0' && !allow_empty_key) || p->bucket[0] == '\0' ||
        p->region[0] == '\0' || !amz_date_ok(p->amz_date))
        return DOMAIN_EINVAL;

    /* Host from the endpoint; curl sends Host without a default port, so it is dropped here
     * too or the signed host would differ from the one the server sees. */
    if (strncasecmp(p->endpoint, "https://", 8) == 0) {
        s->https = true;
    } else if (strncasecmp(p->endpoint, "http://", 7) == 0) {
        s->https = false;
    } else {
        return DOMAIN_EINVAL;
    }
    h = strstr(p->endpoint, "://") + 3;
    hostlen = strcspn(h, "/?#@");
    if (hostlen == 0 || (h[hostlen] != '\0' && strcmp(h + hostlen, "/") != 0)) return DOMAIN_EINVAL;
    if (hostlen > 4 && strncmp(h + hostlen - 4, ":443", 4) == 0 && s->https) hostlen -= 4;
    if (hostlen > 3 && strncmp(h + hostlen - 3, ":80", 3) == 0 && !s->https) hostlen -= 3;
    if (!p->path_style) {
        sb_puts(&s->host, p->bucket);
        sb_puts(&s->host, ".");
    }
    for (size_t i = 0; i < hostlen; i++) {
        char c = h[i] >= 'A' && h[i] <= 'Z' ? (char)(h[i] - 'A' + 'a') : h[i];
        sb_put(&s->host, &c, 1);
    }

    sb_puts(&s->path, "/");
    if (p->path_style) {
        sb_uri_encode(&s->path, p->bucket, false);
        if (p->key[0]) sb_puts(&s->path, "/");
    }
    sb_uri_encode(&s->path, p->key, true);

    memcpy(s->date, p->amz_date, 8);
    s->date[8] = '\0';
    sb_puts(&s->scope, s->date);
    sb_puts(&s->scope, "/");
    sb_puts(&s->scope, p->region);
    sb_puts(&s->scope, "/s3/aws4_request");
    return 0;
}

/* Hex signature of a canonical request: string to sign, then the kDate..kSigning chain. */
static void sign(const sigv4_presign_t *p, const parts_t *s, const sb_t *creq,
                 char sighex[CRYPTO_SHA256_HEX_LEN + 1])
{
    sb_t sts = {NULL, 0, 0}, secret = {NULL, 0, 0};
    char creq_hash[CRYPTO_SHA256_HEX_LEN + 1];
    uint8_t kdate[CRYPTO_SHA256_LEN], kregion[CRYPTO_SHA256_LEN], kservice[CRYPTO_SHA256_LEN];
    uint8_t ksigning[CRYPTO_SHA256_LEN], sig[CRYPTO_SHA256_LEN];

    crypto_sha256_hex(creq->data, creq->len, creq_hash);
    sb_puts(&sts, "AWS4-HMAC-SHA256\n");
    sb_puts(&sts, p->amz_date);
    sb_puts(&sts, "\n");
    sb_puts(&sts, s->scope.data);
    sb_puts(&sts, "\n");
    sb_puts(&sts, creq_hash);
    sb_puts(&secret, "AWS4");
    sb_puts(&secret, p->secret_key);
    crypto_hmac_sha256(secret.data, secret.len, s->date, 8, kdate);
    free(secret.data);
    crypto_hmac_sha256(kdate, sizeof kdate, p->region, strlen(p->region), kregion);
    crypto_hmac_sha256(kregion, sizeof kregion, "s3", 2, kservice);
    crypto_hmac_sha256(kservice, sizeof kservice, "aws4_request", 12, ksigning);
    crypto_hmac_sha256(ksigning, sizeof ksigning, sts.data, sts.len, sig);
    free(sts.data);
    crypto_hex_encode(sig, sizeof sig, sighex);
}

/* Trims a header value as SigV4 canonical headers want it (outer spaces; inner runs of
 * spaces become one). */
static void sb_header_value(sb_t *b, const char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    bool space = false;
    for (; *v; v++) {
        if (*v == ' ' || *v == '\t') {
            space = true;
            continue;
        }
        if (space) sb_put(b, " ", 1);
        space = false;
        sb_put(b, v, 1);
    }
}

int sigv4_presign_url(const sigv4_presign_t *p, char **out)
{
    parts_t s;
    sb_t query = {NULL, 0, 0}, creq = {NULL, 0, 0}, url = {NULL, 0, 0}, hdrs = {NULL, 0, 0};
    sb_t names = {NULL, 0, 0};
    int rc = DOMAIN_EINVAL;

    if (out == NULL) return DOMAIN_EINVAL;
    if (parts_build(p, false, &s) != 0) goto done;
    if (p->expires < 1 || p->expires > SIGV4_MAX_EXPIRES) goto done;
    if (p->content_type && strpbrk(p->content_type, "\r\n")) goto done;

    /* Signed headers, in sorted order: content-length < content-type < host. */
    if (p->sign_length) {
        char len[24];
        snprintf(len, sizeof len, "%llu", (unsigned long long)p->content_length);
        sb_puts(&hdrs, "content-length:");
        sb_puts(&hdrs, len);
        sb_puts(&hdrs, "\n");
        sb_puts(&names, "content-length;");
    }
    if (p->content_type) {
        sb_puts(&hdrs, "content-type:");
        sb_header_value(&hdrs, p->content_type);
        sb_puts(&hdrs, "\n");
        sb_puts(&names, "content-type;");
    }
    sb_puts(&hdrs, "host:");
    sb_puts(&hdrs, s.host.data);
    sb_puts(&hdrs, "\n");
    sb_puts(&names, "host");

    /* Parameters in sorted order (X-Amz-Algorithm < Content-Sha256 < Credential < Date < Expires <
     * SignedHeaders < response-content-disposition < response-content-type: upper case sorts
     * first), as the canonical query string requires. */
    char expires[16];
    snprintf(expires, sizeof expires, "%u", (unsigned)p->expires);
    sb_puts(&query, "X-Amz-Algorithm=AWS4-HMAC-SHA256");
    if (p->query_content_sha256) sb_puts(&query, "&X-Amz-Content-Sha256=" SIGV4_UNSIGNED_PAYLOAD);
    sb_puts(&query, "&X-Amz-Credential=");
    sb_uri_encode(&query, p->access_key, false);
    sb_puts(&query, "%2F");
    sb_uri_encode(&query, s.scope.data, false);
    sb_puts(&query, "&X-Amz-Date=");
    sb_puts(&query, p->amz_date);
    sb_puts(&query, "&X-Amz-Expires=");
    sb_puts(&query, expires);
    sb_puts(&query, "&X-Amz-SignedHeaders=");
    sb_uri_encode(&query, names.data, false);
    if (p->response_content_disposition) {
        sb_puts(&query, "&response-content-disposition=");
        sb_uri_encode(&query, p->response_content_disposition, false);
    }
    if (p->response_content_type) {
        sb_puts(&query, "&response-content-type=");
        sb_uri_encode(&query, p->response_content_type, false);
    }

    sb_puts(&creq, p->method);
    sb_puts(&creq, "\n");
    sb_puts(&creq, s.path.data);
    sb_puts(&creq, "\n");
    sb_puts(&creq, query.data);
    sb_puts(&creq, "\n");
    sb_puts(&creq, hdrs.data);
    sb_puts(&creq, "\n");
    sb_puts(&creq, names.data);
    sb_puts(&creq, "\n" SIGV4_UNSIGNED_PAYLOAD);

    char sighex[CRYPTO_SHA256_HEX_LEN + 1];
    sign(p, &s, &creq, sighex);

    sb_puts(&url, s.https ? "https://" : "http://");
    sb_puts(&url, s.host.data);
    sb_puts(&url, s.path.data);
    sb_puts(&url, "?");
    sb_puts(&url, query.data);
    sb_puts(&url, "&X-Amz-Signature=");
    sb_puts(&url, sighex);
    *out = url.data;
    url.data = NULL;
    rc = 0;

done:
    parts_free(&s);
    free(query.data);
    free(creq.data);
    free(url.data);
    free(hdrs.data);
    free(names.data);
    return rc;
}

int sigv4_sign_headers(const sigv4_presign_t *p, sigv4_signed_t *out)
{
    parts_t s;
    sb_t creq = {NULL, 0, 0}, url = {NULL, 0, 0}, auth = {NULL, 0, 0};
    int rc = DOMAIN_EINVAL;

    if (out == NULL) return DOMAIN_EINVAL;
    out->url = out->authorization = NULL;
    if (parts_build(p, true, &s) != 0) goto done;

    sb_puts(&creq, p->method);
    sb_puts(&creq, "\n");
    sb_puts(&creq, s.path.data);
    sb_puts(&creq, "\n\nhost:");
    sb_puts(&creq, s.host.data);
    sb_puts(&creq, "\nx-amz-content-sha256:" SIGV4_UNSIGNED_PAYLOAD "\nx-amz-date:");
    sb_puts(&creq, p->amz_date);
    sb_puts(&creq, "\n\nhost;x-amz-content-sha256;x-amz-date\n" SIGV4_UNSIGNED_PAYLOAD);

    char sighex[CRYPTO_SHA256_HEX_LEN + 1];
    sign(p, &s, &creq, sighex);

    sb_puts(&auth, "AWS4-HMAC-SHA256 Credential=");
    sb_puts(&auth, p->access_key);
    sb_puts(&auth, "/");
    sb_puts(&auth, s.scope.data);
    sb_puts(&auth, ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=");
    sb_puts(&auth, sighex);
    sb_puts(&url, s.https ? "https://" : "http://");
    sb_puts(&url, s.host.data);
    sb_puts(&url, s.path.data);
    out->url = url.data;
    out->authorization = auth.data;
    url.data = auth.data = NULL;
    rc = 0;

done:
    parts_free(&s);
    free(creq.data);
    free(url.data);
    free(auth.data);
    return rc;
}
