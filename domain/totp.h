/*
 * Two-factor pieces that need no I/O: TOTP (RFC 6238 over HOTP, RFC 4226: HMAC-SHA-1, 6 digits,
 * 30-second steps), base32 (RFC 4648) for the otpauth URI, sealing the TOTP secret at rest with
 * AES-256-GCM, and the backup codes (lookup secrets) and their keyed hashes.
 *
 * Randomness comes from the caller (core/random.h), so every function here is pure and
 * thread-safe.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOTP_PERIOD 30
#define TOTP_DIGITS 6
#define TOTP_SECRET_LEN 20 /* 160 bits, as RFC 4226 recommends */
#define TOTP_KEY_LEN 32    /* AES-256 */
/* Sealed secret: 12-byte nonce, ciphertext, 16-byte tag, as lower-case hex. */
#define TOTP_SEALED_HEX_MAX (2 * (12 + 64 + 16))
#define TOTP_BACKUP_CODES 10
/* A backup code is 20 characters of [A-Za-z0-9] (20 log2 62 = 119 bits, above the 112 that let a
 * keyed fast hash stand in for a password hash), shown as four groups of five. */
#define TOTP_BACKUP_CHARS 20
#define TOTP_BACKUP_GROUP 5
#define TOTP_BACKUP_CODE_LEN 23 /* "xxxxx-xxxxx-xxxxx-xxxxx" */
#define TOTP_BACKUP_RANDOM 20   /* random bytes per code: one per character */

/* HOTP value of counter `step` under key[0..klen): 0..999999. */
uint32_t totp_hotp(const uint8_t *key, size_t klen, uint64_t step, int digits);
/* The 30-second step of Unix time `now`. */
static inline uint64_t totp_step(int64_t now)
{
    return now < 0 ? 0 : (uint64_t)now / TOTP_PERIOD;
}
/* Checks a 6-digit code `otp` against the steps now-1, now, now+1 that are newer than `last_step`
 * (the last one used; -1: none). Returns the matching step, or -1. The code must be exactly six
 * ASCII digits. Every candidate is compared, in constant time. */
int64_t totp_verify(const uint8_t *key, size_t klen, const char *otp, int64_t now,
                    int64_t last_step);

/* Base32 (RFC 4648, upper case, no padding) of src[0..n) into out (NUL-terminated); out must
 * hold (n * 8 + 4) / 5 + 1 bytes. */
void totp_base32_encode(const uint8_t *src, size_t n, char *out);
/* Decodes base32 (either case, padding and spaces ignored); the byte count, or DOMAIN_EINVAL /
 * DOMAIN_ENOSPC. */
int totp_base32_decode(const char *src, uint8_t *out, size_t outsz);

/* AES-256-GCM of plain[0..n) (n <= 64) with a 12-byte nonce from the caller, as hex of
 * nonce || ciphertext || tag into out (TOTP_SEALED_HEX_MAX + 1 bytes). The associated data
 * (the user id) binds the secret to its row; `key` is the seal subkey of totp_subkeys. 0 or a
 * DOMAIN_E* code. */
int totp_seal(const uint8_t key[TOTP_KEY_LEN], const uint8_t nonce[12], const char *aad,
              const uint8_t *plain, size_t n, char *out, size_t outsz);
/* Opens what totp_seal made; the plain length, or DOMAIN_EINVAL (malformed, wrong key, wrong
 * associated data or tampered). */
int totp_open(const uint8_t key[TOTP_KEY_LEN], const char *aad, const char *sealed, uint8_t *out,
              size_t outsz);

/* The two keys TWO_FACTOR_ENCRYPTION_KEY stands for, one per purpose, so that no value is ever
 * computed under the same key for two uses: seal = HMAC-SHA256(key, TOTP_SEAL_LABEL) for
 * totp_seal / totp_open, backup = HMAC-SHA256(key, TOTP_BACKUP_LABEL) for totp_backup_hash. */
#define TOTP_SEAL_LABEL "coachd totp seal v1"
#define TOTP_BACKUP_LABEL "coachd backup codes v1"
void totp_subkeys(const uint8_t key[TOTP_KEY_LEN], uint8_t seal[TOTP_KEY_LEN],
                  uint8_t backup[TOTP_KEY_LEN]);

/* A backup code "xxxxx-xxxxx-xxxxx-xxxxx" of [A-Za-z0-9] from TOTP_BACKUP_RANDOM random bytes
 * (rejection sampling is not needed for a uniform pick: each byte is reduced from 0..247, a
 * multiple of 62, the caller redraws bytes of 248 and above; see totp_backup_code). Returns false
 * when a byte is out of range (the caller draws again). */
bool totp_backup_code(const uint8_t rnd[TOTP_BACKUP_RANDOM], char out[TOTP_BACKUP_CODE_LEN + 1]);
/* The code as typed, without its surrounding white space and without dashes (anywhere), into
 * out: false unless that leaves exactly TOTP_BACKUP_CHARS letters and digits. Case-sensitive:
 * the alphabet has both cases. */
bool totp_backup_normalize(const char *typed, char out[TOTP_BACKUP_CHARS + 1]);
/* The stored form of a backup code: hex HMAC-SHA256(key, user_id ":" code), 64 characters,
 * `key` being the backup subkey of totp_subkeys, over the code's normalized form
 * (totp_backup_normalize), so a code typed with or without its dashes has one hash. A `backup`
 * that does not normalize is hashed as the empty code, which no stored hash matches, and false
 * is returned. */
bool totp_backup_hash(const uint8_t key[TOTP_KEY_LEN], const char *user_id, const char *backup,
                      char out[65]);
