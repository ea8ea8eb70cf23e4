/*
 * Opaque bearer tokens (session cookie, password reset, email verification, invite): random
 * bytes from the caller, encoded as base64url without padding. The database stores only
 * token_hash() of a token, so a leaked table cannot be replayed.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKEN_RANDOM_BYTES 32 /* 256 bits: no token is guessable (docs/security.md) */
#define TOKEN_LEN 43          /* base64url length of 32 bytes */
#define TOKEN_MAX_LEN 128     /* longest token token_is_wellformed() accepts */
#define TOKEN_HASH_LEN 64

/* Encodes rnd[0..n) (n >= TOKEN_RANDOM_BYTES) as base64url into out, NUL-terminated; 32 bytes
 * give TOKEN_LEN characters. 0, DOMAIN_EINVAL (n too small, or too large for TOKEN_MAX_LEN) or
 * DOMAIN_ENOSPC. */
int token_from_random(const uint8_t *rnd, size_t n, char *out, size_t outsz);
/* Lower-case hex SHA-256 of the token text: the value kept in the database. */
void token_hash(const char *token, char out[TOKEN_HASH_LEN + 1]);
/* Cheap shape check before any lookup: TOKEN_LEN..TOKEN_MAX_LEN characters of [A-Za-z0-9_-]. */
bool token_is_wellformed(const char *s);
