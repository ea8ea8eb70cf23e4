/*
 * Outbound mail: one message per call, sent over SMTP with libcurl multi (cfg.smtp_url, smtp://
 * or smtps://, optional user:password in the URL; envelope sender from cfg.mail_from). The
 * message is a proper RFC 5322 text: Date, Message-ID, MIME-Version, an RFC 2047 encoded
 * subject when it is not plain ASCII, CRLF line endings, text/plain or multipart/alternative
 * (text + html) bodies in UTF-8.
 *
 * Without cfg.smtp_url (development), each message is written as an .eml file under
 * cfg.mail_dir with uv_fs_* calls (never blocking the loop). In production without SMTP_URL
 * every send fails with "mail transport not configured".
 *
 * Callers are normally rt/outbox.c; routes queue mail through the outbox table.
 */
#pragma once
#include <stdbool.h>
#include <uv.h>

typedef struct mail_envelope {
    const char *to;      /* one address, required */
    const char *subject; /* UTF-8, required */
    const char *text;    /* UTF-8 plain-text body, required */
    const char *html;    /* UTF-8 HTML alternative, or NULL */
    /* Local part of the Message-ID ([0-9a-z.-] only), or NULL for a random one. The outbox
     * passes one derived from the row, so a mail sent again after a crash between the SMTP
     * server's acceptance and the row's "sent" mark carries the same Message-ID, and receivers
     * can tell it is the same message. */
    const char *message_id;
    /* An iCalendar invitation (RFC 5546) sent with the message, or NULL: the text and html go
     * into multipart/alternative inside multipart/mixed, next to a base64 part
     * "text/calendar; method=<ics_method>; charset=UTF-8" named invite.ics. */
    const char *ics;
    const char *ics_method; /* REQUEST or CANCEL (anything else: REQUEST) */
} mail_envelope_t;

/* error is NULL on success, else a message for logs (valid during the callback only). */
typedef void (*mail_done_cb)(const char *error, void *data);

/* Creates cfg.mail_dir when there is no SMTP_URL (synchronous: call before the loop runs).
 * SMTP needs curlm_init() first. Returns 0 or -1 (logged). */
int mail_init(uv_loop_t *loop);
/* Sends still in flight complete with an error (curlm_shutdown) or finish writing. */
void mail_shutdown(void);

/* The message fields are copied; cb fires exactly once, from the loop. */
void mail_send(const mail_envelope_t *msg, mail_done_cb cb, void *data);

/* Transport check for /api/health: connects to the SMTP server (greeting, EHLO, STARTTLS and
 * login when configured) without sending; in .eml mode checks that mail_dir is writable.
 * cb(ok) fires once, from the loop. */
void mail_verify(void (*cb)(bool ok, void *data), void *data);

/* Builds the full message text (exposed for tests). eight_bit keeps UTF-8 bodies unencoded
 * (.eml files); otherwise non-ASCII bodies use quoted-printable. Returns a heap string. */
char *mail_build(const mail_envelope_t *msg, const char *from, bool eight_bit, long long now_s);
