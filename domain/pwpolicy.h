/*
 * Password choice rules beyond length (password.h): a new password must not be one of the
 * 10,000 most common passwords, nor contain the name of the service, the user's email address
 * (its local part or a part of it) or the user's first or last name.
 *
 * Comparison is case-insensitive: ASCII letters and the Latin-1 letters À..Þ (as in Ñ, Á, Ü)
 * are folded to lower case; every other character compares as it is. Context words (parts of
 * the local part of the email and of the names, split at ASCII characters that are neither
 * letters nor digits, and each whole value) shorter than PWPOLICY_CONTEXT_MIN_CP code points
 * are ignored: "Al", "Li" or "jo" are too common inside strong passwords to refuse them.
 *
 * The list (domain/wordlists/common_passwords.txt, origin and licence in the README there) is
 * compiled in as a sorted array at build time: a lookup is a bsearch(), with no file read and
 * nothing built at start. Every function is thread-safe and cheap enough for the loop thread.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define PWPOLICY_CONTEXT_MIN_CP 4
#define PWPOLICY_SERVICE_NAME "coachd"

typedef enum pwpolicy_rule {
    PWPOLICY_OK = 0,
    PWPOLICY_COMMON,  /* one of the most common passwords */
    PWPOLICY_SERVICE, /* contains the service's name */
    PWPOLICY_EMAIL,   /* contains the email's local part or a part of it */
    PWPOLICY_NAME,    /* contains the first or last name or a part of them */
} pwpolicy_rule_t;

/* True when password, case-folded, is in the list of common passwords. NULL: false. */
bool pwpolicy_is_common(const char *password);
/* Number of words in the compiled-in list. */
size_t pwpolicy_common_count(void);
/* The first rule password breaks, in the order of the enum; email, first and last may be NULL
 * (unknown). password NULL: PWPOLICY_OK (the length rule refuses it). */
pwpolicy_rule_t pwpolicy_check(const char *password, const char *email, const char *first,
                               const char *last);
/* The message of a refusal, as the API answers it in the details of the password field ("is one
 * of the 10,000 most common passwords", ...). PWPOLICY_OK: NULL. Static storage. */
const char *pwpolicy_message(pwpolicy_rule_t rule);
