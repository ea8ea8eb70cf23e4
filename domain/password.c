/*
 * argon2id password hashing (see password.h). The stored PHC string is parsed here only to
 * bound its parameters; argon2id_verify() itself re-reads them, so a hash made with other
 * parameters still verifies.
 */
#include "domain/password.h"

#include <argon2.h>
#include <stdio.h>
#include <string.h>

#include "domain/err.h"
#include "domain/text.h"

/* Bounds on parameters read from a stored hash: a corrupted row must not make one sign-in
 * allocate gigabytes or spin for minutes. */
#define MAX_M_COST (1024u * 1024u) /* KiB = 1 GiB */
#define MAX_T_COST 16u
#define MAX_P 16u

/* password_hash("coachd dummy password", salt = 16 x 0x2a) with today's parameters. Generated
 * once; regenerate it whenever PASSWORD_M_COST/T_COST/PARALLELISM change. */
static const char dummy_hash[] = "$argon2id$v=19$m=19456,t=2,p=1$KioqKioqKioqKioqKioqKg"
                                 "$u3I3wkEbeSFLl7J7ZVKd3L4XMt79PG7Umt9aXGxmYZE";

static int parse_params(const char *encoded, unsigned *m, unsigned *t, unsigned *p);

static int parse_params(const char *encoded, unsigned *m, unsigned *t, unsigned *p)
{
    unsigned v = 0;
    int end = -1;

    if (encoded == NULL || strncmp(encoded, "$argon2id$", 10) != 0) return DOMAIN_EINVAL;
    if (sscanf(encoded, "$argon2id$v=%u$m=%u,t=%u,p=%u$%n", &v, m, t, p, &end) != 4 || end < 0)
        return DOMAIN_EINVAL;
    if (v != ARGON2_VERSION_13) return DOMAIN_EINVAL;
    if (*m == 0 || *m > MAX_M_COST || *t == 0 || *t > MAX_T_COST || *p == 0 || *p > MAX_P)
        return DOMAIN_EINVAL;
    return 0;
}

int password_hash(const char *password, const uint8_t salt[PASSWORD_SALT_LEN], char *out,
                  size_t outsz)
{
    size_t need = argon2_encodedlen(PASSWORD_T_COST, PASSWORD_M_COST, PASSWORD_PARALLELISM,
                                    PASSWORD_SALT_LEN, PASSWORD_HASH_LEN, Argon2_id);
    if (outsz < need) return DOMAIN_ENOSPC;

    int rc = argon2id_hash_encoded(PASSWORD_T_COST, PASSWORD_M_COST, PASSWORD_PARALLELISM, password,
                                   strlen(password), salt, PASSWORD_SALT_LEN, PASSWORD_HASH_LEN,
                                   out, outsz);
    return rc == ARGON2_OK ? 0 : DOMAIN_EINTERNAL;
}

int password_verify(const char *encoded, const char *password)
{
    unsigned m, t, p;

    if (parse_params(encoded, &m, &t, &p) != 0) return DOMAIN_EINVAL;

    int rc = argon2id_verify(encoded, password, strlen(password));
    switch (rc) {
    case ARGON2_OK:
        return 0;
    case ARGON2_VERIFY_MISMATCH:
        return DOMAIN_EMISMATCH;
    case ARGON2_MEMORY_ALLOCATION_ERROR:
    case ARGON2_THREAD_FAIL:
        return DOMAIN_EINTERNAL;
    default:
        /* Decoding errors: bad base64, salt or hash of the wrong length, and so on. */
        return DOMAIN_EINVAL;
    }
}

int password_verify_dummy(const char *password)
{
    (void)password_verify(dummy_hash, password);
    return DOMAIN_EMISMATCH;
}

const char *password_dummy_hash(void)
{
    return dummy_hash;
}

bool password_needs_rehash(const char *encoded)
{
    unsigned m, t, p;

    if (parse_params(encoded, &m, &t, &p) != 0) return true;
    return m < PASSWORD_M_COST || t < PASSWORD_T_COST;
}

bool password_length_ok(const char *password)
{
    size_t n;

    if (password == NULL) return false;
    n = strlen(password);
    if (!text_utf8_valid(password, n)) return false;
    size_t cp = text_cp_count(password, n);
    return cp >= PASSWORD_MIN_CP && cp <= PASSWORD_MAX_CP;
}
