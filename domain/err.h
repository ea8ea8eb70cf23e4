/*
 * Error codes shared by the domain modules. Every synchronous domain call returns 0 or one of
 * these negative values; domain_strerror() names them for logs (never for clients: routes map
 * a failure to the HTTP error of docs/api.md themselves).
 */
#pragma once

enum domain_err {
    DOMAIN_EINVAL = -1,      /* malformed or out-of-range input */
    DOMAIN_ENOSPC = -2,      /* caller's output buffer is too small */
    DOMAIN_EMISMATCH = -3,   /* password does not match the stored hash */
    DOMAIN_ETRANSITION = -4, /* the state machine refuses this move */
    DOMAIN_EINTERNAL = -5,   /* a library (mbedcrypto, argon2, zlib) failed */
};

/* Static text for a domain error code; "unknown error" for anything else. */
const char *domain_strerror(int code);
