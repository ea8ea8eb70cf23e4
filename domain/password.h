/*
 * Password hashing with argon2id (OWASP minimum: m = 19456 KiB, t = 2, p = 1). Hashes are kept
 * in the PHC encoded form "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>", so the parameters
 * travel with each hash and can be raised later: password_verify() uses the parameters found
 * in the stored string, and password_needs_rehash() tells when they are below today's.
 *
 * Hashing costs about 19 MiB and tens of milliseconds: call these from the thread pool, never
 * on the loop. Every function is thread-safe (no shared state; argon2 allocates per call).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PASSWORD_SALT_LEN 16
#define PASSWORD_HASH_LEN 32
#define PASSWORD_M_COST 19456 /* KiB */
#define PASSWORD_T_COST 2
#define PASSWORD_PARALLELISM 1
#define PASSWORD_ENCODED_MAX 128 /* buffer size for password_hash() output, NUL included */
#define PASSWORD_MIN_CP 8
#define PASSWORD_MAX_CP 128

/* Hashes the NUL-terminated password with the given random salt into out (PHC string).
 * 0, DOMAIN_ENOSPC, or DOMAIN_EINTERNAL when argon2 fails (e.g. out of memory). */
int password_hash(const char *password, const uint8_t salt[PASSWORD_SALT_LEN], char *out,
                  size_t outsz);
/* Checks password against a stored argon2id PHC string, with that string's parameters, in
 * constant time. 0 on match, DOMAIN_EMISMATCH on a wrong password, DOMAIN_EINVAL when the
 * stored string is not a usable argon2id hash (also for absurd parameters: m above 1 GiB,
 * t above 16, p above 16), DOMAIN_EINTERNAL when argon2 fails. */
int password_verify(const char *encoded, const char *password);
/* Spends the time of one password_verify() against a fixed hash made with today's parameters,
 * for sign-in with an unknown email (no user enumeration by timing). Always DOMAIN_EMISMATCH. */
int password_verify_dummy(const char *password);
/* The fixed hash password_verify_dummy() uses (static storage). */
const char *password_dummy_hash(void);
/* True when the stored hash uses weaker parameters than today's (or is unparsable), so the
 * caller may store a fresh hash after a successful sign-in. */
bool password_needs_rehash(const char *encoded);
/* Length rule: valid UTF-8 of PASSWORD_MIN_CP..PASSWORD_MAX_CP code points. Passwords are never
 * truncated, trimmed or case-folded. */
bool password_length_ok(const char *password);
