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
#include "domain/growbuf.h"
#include "domain/timefmt.h"

static void sb_uri_encode(growbuf_t *b, const char *s, bool keep_slash);
static bool amz_date_ok(const char *d);

/* RFC 3986 encoding as SigV4 wants it: unreserved characters stay, everything else is %XX with
 * upper-case hex; '/' stays in paths only. */
static void sb_uri_encode(growbuf_t *b, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            growbuf_put(b, (const char *)&c, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            growbuf_put(b, e, 3);
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
    growbuf_t host, path, scope;
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
        growbuf_puts(&s->host, p->bucket);
        growbuf_puts(&s->host, ".");
    }
    for (size_t i = 0; i < hostlen; i++) {
        char c = h[i] >= 'A' && h[i] <= 'Z' ? (char)(h[i] - 'A' + 'a') : h[i];
        growbuf_put(&s->host, &c, 1);
    }

    growbuf_puts(&s->path, "/");
    if (p->path_style) {
        sb_uri_encode(&s->path, p->bucket, false);
        if (p->key[0]) growbuf_puts(&s->path, "/");
    }
    sb_uri_encode(&s->path, p->key, true);

    memcpy(s->date, p->amz_date, 8);
    s->date[8] = '\0';
    growbuf_puts(&s->scope, s->date);
    growbuf_puts(&s->scope, "/");
    growbuf_puts(&s->scope, p->region);
    growbuf_puts(&s->scope, "/s3/aws4_request");
    return 0;
}

/* Hex signature of a canonical request: string to sign, then the kDate..kSigning chain. */
static void sign(const sigv4_presign_t *p, const parts_t *s, const growbuf_t *creq,
                 char sighex[CRYPTO_SHA256_HEX_LEN + 1])
{
    growbuf_t sts = GROWBUF_INIT, secret = GROWBUF_INIT;
    char creq_hash[CRYPTO_SHA256_HEX_LEN + 1];
    uint8_t kdate[CRYPTO_SHA256_LEN], kregion[CRYPTO_SHA256_LEN], kservice[CRYPTO_SHA256_LEN];
    uint8_t ksigning[CRYPTO_SHA256_LEN], sig[CRYPTO_SHA256_LEN];

    crypto_sha256_hex(creq->data, creq->len, creq_hash);
    growbuf_puts(&sts, "AWS4-HMAC-SHA256\n");
    growbuf_puts(&sts, p->amz_date);
    growbuf_puts(&sts, "\n");
    growbuf_puts(&sts, s->scope.data);
    growbuf_puts(&sts, "\n");
    growbuf_puts(&sts, creq_hash);
    growbuf_puts(&secret, "AWS4");
    growbuf_puts(&secret, p->secret_key);
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
static void sb_header_value(growbuf_t *b, const char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    bool space = false;
    for (; *v; v++) {
        if (*v == ' ' || *v == '\t') {
            space = true;
            continue;
        }
        if (space) growbuf_put(b, " ", 1);
        space = false;
        growbuf_put(b, v, 1);
    }
}

int sigv4_presign_url(const sigv4_presign_t *p, char **out)
{
    parts_t s;
    growbuf_t query = GROWBUF_INIT, creq = GROWBUF_INIT, url = GROWBUF_INIT, hdrs = GROWBUF_INIT;
    growbuf_t names = GROWBUF_INIT;
    int rc = DOMAIN_EINVAL;

    if (out == NULL) return DOMAIN_EINVAL;
    if (parts_build(p, false, &s) != 0) goto done;
    if (p->expires < 1 || p->expires > SIGV4_MAX_EXPIRES) goto done;
    if (p->content_type && strpbrk(p->content_type, "\r\n")) goto done;

    /* Signed headers, in sorted order: content-length < content-type < host < if-none-match. */
    if (p->sign_length) {
        char len[24];
        snprintf(len, sizeof len, "%llu", (unsigned long long)p->content_length);
        growbuf_puts(&hdrs, "content-length:");
        growbuf_puts(&hdrs, len);
        growbuf_puts(&hdrs, "\n");
        growbuf_puts(&names, "content-length;");
    }
    if (p->content_type) {
        growbuf_puts(&hdrs, "content-type:");
        sb_header_value(&hdrs, p->content_type);
        growbuf_puts(&hdrs, "\n");
        growbuf_puts(&names, "content-type;");
    }
    growbuf_puts(&hdrs, "host:");
    growbuf_puts(&hdrs, s.host.data);
    growbuf_puts(&hdrs, "\n");
    growbuf_puts(&names, "host");
    if (p->if_none_match_any) {
        growbuf_puts(&hdrs, "if-none-match:*\n");
        growbuf_puts(&names, ";if-none-match");
    }

    /* Parameters in sorted order (X-Amz-Algorithm < Content-Sha256 < Credential < Date < Expires <
     * SignedHeaders < response-content-disposition < response-content-type: upper case sorts
     * first), as the canonical query string requires. */
    char expires[16];
    snprintf(expires, sizeof expires, "%u", (unsigned)p->expires);
    growbuf_puts(&query, "X-Amz-Algorithm=AWS4-HMAC-SHA256");
    if (p->query_content_sha256)
        growbuf_puts(&query, "&X-Amz-Content-Sha256=" SIGV4_UNSIGNED_PAYLOAD);
    growbuf_puts(&query, "&X-Amz-Credential=");
    sb_uri_encode(&query, p->access_key, false);
    growbuf_puts(&query, "%2F");
    sb_uri_encode(&query, s.scope.data, false);
    growbuf_puts(&query, "&X-Amz-Date=");
    growbuf_puts(&query, p->amz_date);
    growbuf_puts(&query, "&X-Amz-Expires=");
    growbuf_puts(&query, expires);
    growbuf_puts(&query, "&X-Amz-SignedHeaders=");
    sb_uri_encode(&query, names.data, false);
    if (p->response_content_disposition) {
        growbuf_puts(&query, "&response-content-disposition=");
        sb_uri_encode(&query, p->response_content_disposition, false);
    }
    if (p->response_content_type) {
        growbuf_puts(&query, "&response-content-type=");
        sb_uri_encode(&query, p->response_content_type, false);
    }

    growbuf_puts(&creq, p->method);
    growbuf_puts(&creq, "\n");
    growbuf_puts(&creq, s.path.data);
    growbuf_puts(&creq, "\n");
    growbuf_puts(&creq, query.data);
    growbuf_puts(&creq, "\n");
    growbuf_puts(&creq, hdrs.data);
    growbuf_puts(&creq, "\n");
    growbuf_puts(&creq, names.data);
    growbuf_puts(&creq, "\n" SIGV4_UNSIGNED_PAYLOAD);

    char sighex[CRYPTO_SHA256_HEX_LEN + 1];
    sign(p, &s, &creq, sighex);

    growbuf_puts(&url, s.https ? "https://" : "http://");
    growbuf_puts(&url, s.host.data);
    growbuf_puts(&url, s.path.data);
    growbuf_puts(&url, "?");
    growbuf_puts(&url, query.data);
    growbuf_puts(&url, "&X-Amz-Signature=");
    growbuf_puts(&url, sighex);
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
    growbuf_t creq = GROWBUF_INIT, url = GROWBUF_INIT, auth = GROWBUF_INIT;
    int rc = DOMAIN_EINVAL;

    if (out == NULL) return DOMAIN_EINVAL;
    out->url = out->authorization = NULL;
    if (parts_build(p, true, &s) != 0) goto done;

    growbuf_puts(&creq, p->method);
    growbuf_puts(&creq, "\n");
    growbuf_puts(&creq, s.path.data);
    growbuf_puts(&creq, "\n\nhost:");
    growbuf_puts(&creq, s.host.data);
    growbuf_puts(&creq, "\nx-amz-content-sha256:" SIGV4_UNSIGNED_PAYLOAD "\nx-amz-date:");
    growbuf_puts(&creq, p->amz_date);
    growbuf_puts(&creq, "\n\nhost;x-amz-content-sha256;x-amz-date\n" SIGV4_UNSIGNED_PAYLOAD);

    char sighex[CRYPTO_SHA256_HEX_LEN + 1];
    sign(p, &s, &creq, sighex);

    growbuf_puts(&auth, "AWS4-HMAC-SHA256 Credential=");
    growbuf_puts(&auth, p->access_key);
    growbuf_puts(&auth, "/");
    growbuf_puts(&auth, s.scope.data);
    growbuf_puts(&auth, ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=");
    growbuf_puts(&auth, sighex);
    growbuf_puts(&url, s.https ? "https://" : "http://");
    growbuf_puts(&url, s.host.data);
    growbuf_puts(&url, s.path.data);
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
