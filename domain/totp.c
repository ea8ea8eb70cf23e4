/* Two-factor pieces without I/O (see totp.h). */
#include "domain/totp.h"

#include <string.h>

#include <mbedtls/gcm.h>
#include <mbedtls/md.h>

#include "domain/crypto.h"
#include "domain/err.h"

uint32_t totp_hotp(const uint8_t *key, size_t klen, uint64_t step, int digits)
{
    uint8_t msg[8], mac[20];
    for (int i = 7; i >= 0; i--) {
        msg[i] = (uint8_t)(step & 0xff);
        step >>= 8;
    }
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA1);
    if (md == NULL || mbedtls_md_hmac(md, key, klen, msg, sizeof msg, mac) != 0) return UINT32_MAX;
    int off = mac[19] & 0x0f;
    uint32_t bin = ((uint32_t)(mac[off] & 0x7f) << 24) | ((uint32_t)mac[off + 1] << 16) |
                   ((uint32_t)mac[off + 2] << 8) | (uint32_t)mac[off + 3];
    uint32_t mod = 1;
    for (int i = 0; i < digits; i++)
        mod *= 10;
    return bin % mod;
}

int64_t totp_verify(const uint8_t *key, size_t klen, const char *otp, int64_t now,
                    int64_t last_step)
{
    if (!otp || strlen(otp) != TOTP_DIGITS) return -1;
    uint32_t want = 0;
    for (int i = 0; i < TOTP_DIGITS; i++) {
        if (otp[i] < '0' || otp[i] > '9') return -1;
        want = want * 10 + (uint32_t)(otp[i] - '0');
    }
    uint64_t cur = totp_step(now);
    int64_t found = -1;
    for (int d = -1; d <= 1; d++) {
        if (d < 0 && cur == 0) continue;
        uint64_t s = cur + (uint64_t)(int64_t)d;
        uint32_t got = totp_hotp(key, klen, s, TOTP_DIGITS);
        /* Compared without a data-dependent branch on the digits. */
        uint32_t diff = got ^ want;
        bool match = diff == 0;
        if (match && (int64_t)s > last_step && found < 0) found = (int64_t)s;
    }
    return found;
}

static const char B32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

void totp_base32_encode(const uint8_t *src, size_t n, char *out)
{
    size_t o = 0;
    uint32_t buf = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        buf = (buf << 8) | src[i];
        bits += 8;
        while (bits >= 5) {
            out[o++] = B32[(buf >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits > 0) out[o++] = B32[(buf << (5 - bits)) & 31];
    out[o] = '\0';
}

int totp_base32_decode(const char *src, uint8_t *out, size_t outsz)
{
    uint32_t buf = 0;
    int bits = 0;
    size_t o = 0;
    for (const char *p = src; *p; p++) {
        char c = *p;
        if (c == '=' || c == ' ') continue;
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        const char *q = strchr(B32, c);
        if (!q || !c) return DOMAIN_EINVAL;
        buf = (buf << 5) | (uint32_t)(q - B32);
        bits += 5;
        if (bits >= 8) {
            if (o >= outsz) return DOMAIN_ENOSPC;
            out[o++] = (uint8_t)(buf >> (bits - 8));
            bits -= 8;
        }
    }
    return (int)o;
}

int totp_seal(const uint8_t key[TOTP_KEY_LEN], const uint8_t nonce[12], const char *aad,
              const uint8_t *plain, size_t n, char *out, size_t outsz)
{
    if (n > 64) return DOMAIN_EINVAL;
    if (outsz < 2 * (12 + n + 16) + 1) return DOMAIN_ENOSPC;
    uint8_t raw[12 + 64 + 16];
    memcpy(raw, nonce, 12);
    mbedtls_gcm_context g;
    mbedtls_gcm_init(&g);
    int rc = mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, 256);
    if (rc == 0)
        rc = mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, n, nonce, 12,
                                       (const unsigned char *)aad, strlen(aad), plain, raw + 12, 16,
                                       raw + 12 + n);
    mbedtls_gcm_free(&g);
    if (rc != 0) return DOMAIN_EINTERNAL;
    crypto_hex_encode(raw, 12 + n + 16, out);
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int totp_open(const uint8_t key[TOTP_KEY_LEN], const char *aad, const char *sealed, uint8_t *out,
              size_t outsz)
{
    size_t hl = sealed ? strlen(sealed) : 0;
    if (hl % 2 || hl < 2 * (12 + 1 + 16) || hl > TOTP_SEALED_HEX_MAX) return DOMAIN_EINVAL;
    uint8_t raw[12 + 64 + 16];
    size_t rl = hl / 2;
    for (size_t i = 0; i < rl; i++) {
        int a = hexval(sealed[2 * i]), b = hexval(sealed[2 * i + 1]);
        if (a < 0 || b < 0) return DOMAIN_EINVAL;
        raw[i] = (uint8_t)(a * 16 + b);
    }
    size_t n = rl - 12 - 16;
    if (n > outsz) return DOMAIN_ENOSPC;
    mbedtls_gcm_context g;
    mbedtls_gcm_init(&g);
    int rc = mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, 256);
    if (rc == 0)
        rc = mbedtls_gcm_auth_decrypt(&g, n, raw, 12, (const unsigned char *)aad, strlen(aad),
                                      raw + 12 + n, 16, raw + 12, out);
    mbedtls_gcm_free(&g);
    return rc == 0 ? (int)n : DOMAIN_EINVAL;
}

static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

bool totp_backup_code(const uint8_t rnd[TOTP_BACKUP_RANDOM], char out[TOTP_BACKUP_CODE_LEN + 1])
{
    size_t o = 0;
    for (int i = 0; i < TOTP_BACKUP_RANDOM; i++) {
        if (rnd[i] >= 248) return false; /* 248 = 4 * 62: keeps the pick uniform */
        if (i > 0 && i % TOTP_BACKUP_GROUP == 0) out[o++] = '-';
        out[o++] = ALNUM[rnd[i] % 62];
    }
    out[o] = '\0';
    return true;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool totp_backup_normalize(const char *typed, char out[TOTP_BACKUP_CHARS + 1])
{
    size_t b = 0, e = strlen(typed), n = 0;
    while (b < e && is_space(typed[b]))
        b++;
    while (e > b && is_space(typed[e - 1]))
        e--;
    for (size_t i = b; i < e; i++) {
        if (typed[i] == '-') continue;
        if (!is_alnum(typed[i]) || n == TOTP_BACKUP_CHARS) {
            out[0] = '\0';
            return false;
        }
        out[n++] = typed[i];
    }
    out[n] = '\0';
    if (n != TOTP_BACKUP_CHARS) {
        out[0] = '\0';
        return false;
    }
    return true;
}

void totp_subkeys(const uint8_t key[TOTP_KEY_LEN], uint8_t seal[TOTP_KEY_LEN],
                  uint8_t backup[TOTP_KEY_LEN])
{
    _Static_assert(CRYPTO_SHA256_LEN == TOTP_KEY_LEN, "a subkey is one HMAC-SHA256");
    crypto_hmac_sha256(key, TOTP_KEY_LEN, TOTP_SEAL_LABEL, sizeof TOTP_SEAL_LABEL - 1, seal);
    crypto_hmac_sha256(key, TOTP_KEY_LEN, TOTP_BACKUP_LABEL, sizeof TOTP_BACKUP_LABEL - 1, backup);
}

bool totp_backup_hash(const uint8_t key[TOTP_KEY_LEN], const char *user_id, const char *backup,
                      char out[65])
{
    char code[TOTP_BACKUP_CHARS + 1];
    bool ok = totp_backup_normalize(backup, code);
    size_t ul = strlen(user_id), cl = strlen(code);
    char msg[256];
    if (ul > sizeof msg - 2 - TOTP_BACKUP_CHARS) ul = sizeof msg - 2 - TOTP_BACKUP_CHARS;
    memcpy(msg, user_id, ul);
    msg[ul] = ':';
    memcpy(msg + ul + 1, code, cl);
    uint8_t mac[CRYPTO_SHA256_LEN];
    crypto_hmac_sha256(key, TOTP_KEY_LEN, msg, ul + 1 + cl, mac);
    crypto_hex_encode(mac, sizeof mac, out);
    return ok;
}
