/*
 * Transactional email texts in English and Spanish: subject, plain text and a simple HTML
 * part. Routes render a message here and queue it through the outbox (rt/outbox.h).
 *
 * Language: "es" gives Spanish; anything else (NULL included) English. Links arrive fully built
 * by the caller (from PUBLIC_URL / FRONTEND_URL, never from the request's Host). Interpolated
 * values are HTML-escaped in the HTML part; in the subject, control characters become spaces so
 * a hostile organization name cannot inject mail headers. RFC 2047 encoding of the (UTF-8)
 * subject is the mail sender's job.
 *
 * Ownership: the three strings of a mail_msg_t are malloc'd and owned by the caller, who
 * releases them with mail_msg_free(). Allocation failure aborts.
 */
#pragma once
#include "domain/roles.h"

typedef struct mail_msg {
    char *subject;
    char *text;
    char *html;
} mail_msg_t;

/* Fields of the session mails. title may be NULL (untitled mentorship). start is the start
 * time already formatted in the recipient's time zone, e.g. "Monday, March 2, 2026 10:00
 * (America/New_York)". */
typedef struct mail_session {
    const char *coach_name;
    const char *teacher_name;
    const char *title;
    const char *start;
    int duration_minutes;
} mail_session_t;

/* Frees the strings and clears the struct; safe on a cleared or already freed message. */
void mail_msg_free(mail_msg_t *m);

/* Email-verification message with the verification link. 0 or DOMAIN_EINVAL (NULL link). */
int mail_render_verification(const char *lang, const char *link, mail_msg_t *out);
/* Password-reset message with the reset link. 0 or DOMAIN_EINVAL. */
int mail_render_password_reset(const char *lang, const char *link, mail_msg_t *out);
/* Organization invite: link, organization name and the organization role granted (translated
 * in the text); inviter_name may be NULL. 0 or DOMAIN_EINVAL (NULL link or org name, or a role
 * that is not an organization role). */
int mail_render_invite(const char *lang, const char *link, const char *org_name, role_t role,
                       const char *inviter_name, mail_msg_t *out);
/* Confirmation that a session was scheduled. 0 or DOMAIN_EINVAL (missing names or start). */
int mail_render_session_scheduled(const char *lang, const mail_session_t *s, mail_msg_t *out);
/* Notice that a session was cancelled. 0 or DOMAIN_EINVAL. */
int mail_render_session_cancelled(const char *lang, const mail_session_t *s, mail_msg_t *out);

/* Two-factor notices to the account's owner. */
typedef enum mail_two_factor {
    MAIL_TWO_FACTOR_ENABLED,
    MAIL_TWO_FACTOR_DISABLED,
    MAIL_TWO_FACTOR_BACKUP_CODE_USED,
} mail_two_factor_t;
void mail_render_two_factor(const char *lang, mail_two_factor_t kind, mail_msg_t *out);
