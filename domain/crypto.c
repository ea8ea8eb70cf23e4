/*
 * Hashing and encodings over mbedcrypto (see crypto.h). The software SHA-256 of mbedTLS cannot
 * fail with valid arguments, so a failure there is a broken invariant and aborts.
 */
#include "domain/crypto.h"

#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>
#include <mbedtls/md.h>
#include <mbedtls/sha256.h>

#include "domain/err.h"

static int b64_value(unsigned char c);

void crypto_sha256(const void *data, size_t n, uint8_t out[CRYPTO_SHA256_LEN])
{
    if (mbedtls_sha256_ret(data, n, out, 0) != 0) abort();
}

void crypto_sha256_hex(const void *data, size_t n, char out[CRYPTO_SHA256_HEX_LEN + 1])
{
    uint8_t d[CRYPTO_SHA256_LEN];

    crypto_sha256(data, n, d);
    crypto_hex_encode(d, sizeof d, out);
}

void crypto_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
                        uint8_t out[CRYPTO_SHA256_LEN])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);

    if (md == NULL || mbedtls_md_hmac(md, key, klen, msg, mlen, out) != 0) abort();
}

void crypto_hex_encode(const void *src, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *p = src;

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

size_t crypto_base64_len(size_t n)
{
    return 4 * ((n + 2) / 3) + 1;
}

int crypto_base64_encode(const void *src, size_t n, char *dst, size_t dstsz)
{
    size_t olen = 0;

    if (dstsz < crypto_base64_len(n)) return DOMAIN_ENOSPC;
    /* mbedTLS writes nothing at all, not even the NUL, for empty input. */
    dst[0] = '\0';
    if (n > 0 && mbedtls_base64_encode((unsigned char *)dst, dstsz, &olen, src, n) != 0)
        return DOMAIN_ENOSPC;
    return 0;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int crypto_base64_decode(const char *src, size_t srclen, uint8_t *dst, size_t dstsz, size_t *outlen)
{
    size_t pad = 0;

    /* mbedTLS tolerates line breaks and spaces; a token or signature must not carry any, so
     * the shape is checked here first. */
    if (srclen % 4 != 0) return DOMAIN_EINVAL;
    if (srclen > 0 && src[srclen - 1] == '=') pad++;
    if (srclen > 1 && src[srclen - 2] == '=') pad++;
    for (size_t i = 0; i < srclen - pad; i++)
        if (b64_value((unsigned char)src[i]) < 0) return DOMAIN_EINVAL;
    if (dstsz < srclen / 4 * 3 - pad) return DOMAIN_ENOSPC;

    size_t olen = 0;
    int rc = mbedtls_base64_decode(dst, dstsz, &olen, (const unsigned char *)src, srclen);
    if (rc == MBEDTLS_ERR_BASE64_BUFFER_TOO_SMALL) return DOMAIN_ENOSPC;
    if (rc != 0) return DOMAIN_EINVAL;
    *outlen = olen;
    return 0;
}

size_t crypto_base64url_len(size_t n)
{
    return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1) + 1;
}

int crypto_base64url_encode(const void *src, size_t n, char *dst, size_t dstsz)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const uint8_t *p = src;
    size_t o = 0, i = 0;

    if (dstsz < crypto_base64url_len(n)) return DOMAIN_ENOSPC;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        dst[o++] = alphabet[v >> 18];
        dst[o++] = alphabet[(v >> 12) & 63];
        dst[o++] = alphabet[(v >> 6) & 63];
        dst[o++] = alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        dst[o++] = alphabet[v >> 18];
        dst[o++] = alphabet[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        dst[o++] = alphabet[v >> 18];
        dst[o++] = alphabet[(v >> 12) & 63];
        dst[o++] = alphabet[(v >> 6) & 63];
    }
    dst[o] = '\0';
    return 0;
}

bool crypto_ct_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;

    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

bool crypto_ct_streq(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    const volatile char *x = a, *y = b;
    uint8_t diff = la != lb;

    /* Walk the longer string fully so the loop length does not reveal where they differ. */
    size_t n = la > lb ? la : lb;
    for (size_t i = 0; i < n; i++) {
        uint8_t ca = i < la ? (uint8_t)x[i] : 0, cb = i < lb ? (uint8_t)y[i] : 0;
        diff |= ca ^ cb;
    }
    return diff == 0;
}
