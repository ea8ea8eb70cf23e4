/* Opaque tokens and their stored hash (see token.h). */
#include "domain/token.h"

#include <string.h>

#include "domain/crypto.h"
#include "domain/err.h"

int token_from_random(const uint8_t *rnd, size_t n, char *out, size_t outsz)
{
    if (n < TOKEN_RANDOM_BYTES || crypto_base64url_len(n) > TOKEN_MAX_LEN + 1) return DOMAIN_EINVAL;
    return crypto_base64url_encode(rnd, n, out, outsz);
}

void token_hash(const char *token, char out[TOKEN_HASH_LEN + 1])
{
    crypto_sha256_hex(token, strlen(token), out);
}

bool token_is_wellformed(const char *s)
{
    size_t n = 0;

    if (s == NULL) return false;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (n >= TOKEN_MAX_LEN) return false;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return n >= TOKEN_LEN;
}
