/*
 * Hashing and encodings: thin wrappers over mbedcrypto (SHA-256, HMAC-SHA256, base64) plus
 * the small pieces it lacks (base64url without padding, lower-case hex, constant-time compare).
 *
 * Every function is pure and thread-safe. Output buffers belong to the caller; the *_len()
 * helpers give the size to allocate, terminating NUL included.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRYPTO_SHA256_LEN 32
#define CRYPTO_SHA256_HEX_LEN 64

/* out receives the 32-byte digest of data[0..n). */
void crypto_sha256(const void *data, size_t n, uint8_t out[CRYPTO_SHA256_LEN]);
/* out receives the digest as 64 lower-case hex digits and a NUL. */
void crypto_sha256_hex(const void *data, size_t n, char out[CRYPTO_SHA256_HEX_LEN + 1]);
/* HMAC-SHA256(key, msg) into out (32 bytes). */
void crypto_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
                        uint8_t out[CRYPTO_SHA256_LEN]);

/* Lower-case hex of src[0..n); out must hold 2n+1 bytes (NUL-terminated). */
void crypto_hex_encode(const void *src, size_t n, char *out);

/* Size of the standard base64 (with padding) text of n bytes, NUL included. */
size_t crypto_base64_len(size_t n);
/* Standard base64 with padding into dst (NUL-terminated). 0, or DOMAIN_ENOSPC when dstsz is
 * below crypto_base64_len(n). */
int crypto_base64_encode(const void *src, size_t n, char *dst, size_t dstsz);
/* Strict standard base64 decode: length a multiple of 4, padding only at the end, no
 * whitespace. Writes *outlen bytes to dst. 0, DOMAIN_EINVAL (bad text) or DOMAIN_ENOSPC. */
int crypto_base64_decode(const char *src, size_t srclen, uint8_t *dst, size_t dstsz,
                         size_t *outlen);

/* Size of the unpadded base64url text of n bytes, NUL included. */
size_t crypto_base64url_len(size_t n);
/* base64url (RFC 4648 section 5) without padding, NUL-terminated. 0 or DOMAIN_ENOSPC. */
int crypto_base64url_encode(const void *src, size_t n, char *dst, size_t dstsz);

/* Compares n bytes in time that depends only on n. */
bool crypto_ct_equal(const void *a, const void *b, size_t n);
/* Compares two NUL-terminated strings; the time depends on their lengths, not their content. */
bool crypto_ct_streq(const char *a, const char *b);
