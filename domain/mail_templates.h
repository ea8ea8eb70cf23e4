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
/* Notice that a session was moved (start, duration or time zone). 0 or DOMAIN_EINVAL. */
int mail_render_session_changed(const char *lang, const mail_session_t *s, mail_msg_t *out);
/* Notice that a session was cancelled. 0 or DOMAIN_EINVAL. */
int mail_render_session_cancelled(const char *lang, const mail_session_t *s, mail_msg_t *out);

/* Security notices about the account: a short mail telling the owner what just happened to
 * their account, followed by the same closing paragraph for every kind ("if this was not you,
 * reset your password with Forgot password on the sign-in page and contact your organization's
 * administrator"). They carry no link, token, password or code. Adding a kind is one enum value
 * here and one row (English and Spanish subject and sentence) in account_notices[] of
 * mail_templates.c. */
typedef enum mail_notice {
    MAIL_NOTICE_PASSWORD_CHANGED, /* the password was changed while signed in */
    MAIL_NOTICE_PASSWORD_RESET,   /* the password was reset with a reset link */
    MAIL_NOTICE_TWO_FACTOR_ENABLED,
    MAIL_NOTICE_TWO_FACTOR_DISABLED,
    MAIL_NOTICE_BACKUP_CODE_USED, /* a two-factor backup code completed a sign-in */
    MAIL_NOTICE_COUNT
} mail_notice_t;
/* 0, or DOMAIN_EINVAL for a kind outside the enum. */
int mail_render_account_notice(const char *lang, mail_notice_t kind, mail_msg_t *out);
