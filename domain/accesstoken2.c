/*
 * AccessToken2 builder (see accesstoken2.h). The byte layout follows AgoraIO/Tools
 * DynamicKey/AgoraDynamicKey AccessToken2: content = string(signature) || signing_info, where
 * signing_info = string(appId) u32 issueTs u32 expire u32 salt u16 count services...
 */
#include "domain/accesstoken2.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "domain/crypto.h"
#include "domain/err.h"
#include "domain/growbuf.h"

static void put_u16(growbuf_t *w, uint16_t v);
static void put_u32(growbuf_t *w, uint32_t v);
static int put_string(growbuf_t *w, const char *s, size_t n);
static int put_service(growbuf_t *w, const accesstoken2_service_t *s);
static int cmp_service(const void *a, const void *b);
static int cmp_priv(const void *a, const void *b);

static void put_u16(growbuf_t *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    growbuf_put(w, b, 2);
}

static void put_u32(growbuf_t *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    growbuf_put(w, b, 4);
}

static int put_string(growbuf_t *w, const char *s, size_t n)
{
    if (n > UINT16_MAX) return DOMAIN_EINVAL;
    put_u16(w, (uint16_t)n);
    growbuf_put(w, s, n);
    return 0;
}

static int cmp_priv(const void *a, const void *b)
{
    const accesstoken2_privilege_t *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

static int cmp_service(const void *a, const void *b)
{
    const accesstoken2_service_t *x = *(const accesstoken2_service_t *const *)a;
    const accesstoken2_service_t *y = *(const accesstoken2_service_t *const *)b;
    return (x->type > y->type) - (x->type < y->type);
}

static int put_service(growbuf_t *w, const accesstoken2_service_t *s)
{
    accesstoken2_privilege_t privs[ACCESSTOKEN2_MAX_PRIVS];

    if (s->nprivs > ACCESSTOKEN2_MAX_PRIVS || s->npayload > ACCESSTOKEN2_MAX_PAYLOAD)
        return DOMAIN_EINVAL;
    memcpy(privs, s->privs, s->nprivs * sizeof privs[0]);
    qsort(privs, s->nprivs, sizeof privs[0], cmp_priv);

    put_u16(w, s->type);
    put_u16(w, (uint16_t)s->nprivs);
    for (size_t i = 0; i < s->nprivs; i++) {
        if (i > 0 && privs[i].key == privs[i - 1].key) return DOMAIN_EINVAL;
        put_u16(w, privs[i].key);
        put_u32(w, privs[i].value);
    }
    for (size_t i = 0; i < s->npayload; i++) {
        if (s->payload[i] == NULL) return DOMAIN_EINVAL;
        if (put_string(w, s->payload[i], strlen(s->payload[i])) != 0) return DOMAIN_EINVAL;
    }
    return 0;
}

int accesstoken2_build(const char *app_id, const char *app_cert, uint32_t issue_ts, uint32_t salt,
                       uint32_t expire, const accesstoken2_service_t *services, size_t n,
                       char **out)
{
    growbuf_t info = GROWBUF_INIT, content = GROWBUF_INIT;
    const accesstoken2_service_t **sorted = NULL;
    uint8_t k1[32], k2[32], sig[32], key[4];
    uint8_t *z = NULL;
    char *tok = NULL;
    int rc = DOMAIN_EINVAL;

    if (app_id == NULL || app_cert == NULL || out == NULL || (n > 0 && services == NULL) ||
        n > UINT16_MAX)
        goto done;

    sorted = calloc(n ? n : 1, sizeof *sorted);
    if (sorted == NULL) abort();
    for (size_t i = 0; i < n; i++)
        sorted[i] = &services[i];
    qsort(sorted, n, sizeof *sorted, cmp_service);

    if (put_string(&info, app_id, strlen(app_id)) != 0) goto done;
    put_u32(&info, issue_ts);
    put_u32(&info, expire);
    put_u32(&info, salt);
    put_u16(&info, (uint16_t)n);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && sorted[i]->type == sorted[i - 1]->type) goto done;
        if (put_service(&info, sorted[i]) != 0) goto done;
    }

    /* k1 = HMAC(u32le(issueTs), cert); k2 = HMAC(u32le(salt), k1); sig = HMAC(k2, info). */
    key[0] = (uint8_t)issue_ts, key[1] = (uint8_t)(issue_ts >> 8);
    key[2] = (uint8_t)(issue_ts >> 16), key[3] = (uint8_t)(issue_ts >> 24);
    crypto_hmac_sha256(key, 4, app_cert, strlen(app_cert), k1);
    key[0] = (uint8_t)salt, key[1] = (uint8_t)(salt >> 8);
    key[2] = (uint8_t)(salt >> 16), key[3] = (uint8_t)(salt >> 24);
    crypto_hmac_sha256(key, 4, k1, sizeof k1, k2);
    crypto_hmac_sha256(k2, sizeof k2, (const uint8_t *)info.data, info.len, sig);

    put_string(&content, (const char *)sig, sizeof sig);
    growbuf_put(&content, info.data, info.len);

    /* compress() writes a zlib stream at the default level, as Node's deflateSync and
     * Python's zlib.compress do, so the bytes match the reference builders. */
    uLongf zlen = compressBound(content.len);
    z = malloc(zlen);
    if (z == NULL) abort();
    if (compress(z, &zlen, (const Bytef *)content.data, content.len) != Z_OK) {
        rc = DOMAIN_EINTERNAL;
        goto done;
    }

    size_t b64 = crypto_base64_len(zlen);
    tok = malloc(3 + b64);
    if (tok == NULL) abort();
    memcpy(tok, "007", 3);
    if (crypto_base64_encode(z, zlen, tok + 3, b64) != 0) {
        rc = DOMAIN_EINTERNAL;
        goto done;
    }
    *out = tok;
    tok = NULL;
    rc = 0;

done:
    free(tok);
    free(z);
    free(sorted);
    free(info.data);
    free(content.data);
    return rc;
}

int accesstoken2_rtc_publisher(const char *app_id, const char *app_cert, const char *channel,
                               uint32_t uid, uint32_t issue_ts, uint32_t salt, uint32_t expire,
                               char **out)
{
    accesstoken2_service_t s = {0};
    char uidbuf[11] = "";

    if (uid != 0) snprintf(uidbuf, sizeof uidbuf, "%u", uid);
    s.type = ACCESSTOKEN2_SERVICE_RTC;
    s.privs[0] = (accesstoken2_privilege_t){ACCESSTOKEN2_PRIV_JOIN_CHANNEL, expire};
    s.privs[1] = (accesstoken2_privilege_t){ACCESSTOKEN2_PRIV_PUBLISH_AUDIO, expire};
    s.privs[2] = (accesstoken2_privilege_t){ACCESSTOKEN2_PRIV_PUBLISH_VIDEO, expire};
    s.privs[3] = (accesstoken2_privilege_t){ACCESSTOKEN2_PRIV_PUBLISH_DATA, expire};
    s.nprivs = 4;
    s.payload[0] = channel;
    s.payload[1] = uidbuf;
    s.npayload = 2;
    return accesstoken2_build(app_id, app_cert, issue_ts, salt, expire, &s, 1, out);
}

int accesstoken2_rtm(const char *app_id, const char *app_cert, const char *user_id,
                     uint32_t issue_ts, uint32_t salt, uint32_t expire, char **out)
{
    accesstoken2_service_t s = {0};

    s.type = ACCESSTOKEN2_SERVICE_RTM;
    s.privs[0] = (accesstoken2_privilege_t){ACCESSTOKEN2_PRIV_RTM_LOGIN, expire};
    s.nprivs = 1;
    s.payload[0] = user_id;
    s.npayload = 1;
    return accesstoken2_build(app_id, app_cert, issue_ts, salt, expire, &s, 1, out);
}

uint32_t accesstoken2_uid_from_user(const char *user_id)
{
    uint8_t d[CRYPTO_SHA256_LEN];

    crypto_sha256(user_id, strlen(user_id), d);
    uint32_t uid =
        ((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]) & 0x7fffffffu;
    return uid == 0 ? 1 : uid;
}
