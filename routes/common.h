/*
 * Helpers shared by the route files: ids and tokens, validation with the error details of
 * docs/api.md, the session cookie, language resolution. Handlers stay short: parse with the
 * field_* helpers, reply 400 once with every problem found, then run their plan.
 */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "core/buf.h"
#include "core/http.h"
#include "domain/ids.h"
#include "domain/mail_templates.h"
#include "domain/token.h"

/* Validation failures collected for one 400 reply. */
typedef struct verr {
    buf_t details; /* JSON array body without brackets */
    int n;
} verr_t;

void verr_add(verr_t *v, const char *field, const char *message);
/* Replies 400 VALIDATION_ERROR with `message` and details [{"field": field, "message": message}]:
 * the one-field failure found after the body's own checks (a stored state, a storage lookup). */
void reply_field_invalid(http_req_t *req, const char *field, const char *message);
/* When failures were collected: replies 400 VALIDATION_ERROR with details and returns true. */
bool verr_reply(http_req_t *req, verr_t *v);

/* Body field getters; each records a failure in v and returns NULL when the value is invalid.
 * Strings are copied into the request arena. `present` (optional) tells whether the key was
 * sent at all (null included). */
const char *field_str(http_req_t *req, json_t *body, const char *key, verr_t *v, bool required,
                      size_t min_cp, size_t max_cp, bool trim);
/* Valid email, lower-cased. */
const char *field_email(http_req_t *req, json_t *body, const char *key, verr_t *v, bool required);
/* Password of 8..128 code points, never trimmed, and not one of the 10,000 most common
 * passwords (domain/pwpolicy.h). */
const char *field_password(http_req_t *req, json_t *body, const char *key, verr_t *v,
                           bool required);
/* The rest of the password rules, once the account's email and names are known (any may be
 * NULL): the password must not contain the service's name, the email's local part or a part of
 * it, nor the first or last name. password NULL (already refused): true. On a refusal records
 * it under `key` and returns false; password_rules_or_reply() answers the 400 itself. */
bool password_rules_add(verr_t *v, const char *key, const char *password, const char *email,
                        const char *first, const char *last);
bool password_rules_or_reply(http_req_t *req, const char *key, const char *password,
                             const char *email, const char *first, const char *last);

/* An account notice (domain/mail_templates.h, mail_notice_t) rendered in both languages into
 * params[0..5] (English subject, text, html, then Spanish), copies in the request arena, for a
 * statement that queues it in the same transaction as the change it tells of:
 *     o AS (INSERT INTO outbox (kind, payload)
 *           SELECT 'mail', mail_in_language(u.email, COALESCE(u.preferred_language, 'en'),
 *                                           $4, $5, $6, $7, $8, $9) FROM users u WHERE ...)
 * then outbox_kick() once the statement succeeded (docs/api.md "Account notices"). */
void account_notice_params(http_req_t *req, mail_notice_t kind, const char **params);
/* A mail rendered in English and in Spanish as params[0..5] (subject, text, html of each, copies
 * in the request arena, for mail_in_language() in SQL); frees both messages. */
void mail_pair_params(http_req_t *req, mail_msg_t *en, mail_msg_t *es, const char **params);
/* "en" / "es" or absent (NULL). */
const char *field_lang(http_req_t *req, json_t *body, const char *key, verr_t *v);
/* Relative path or URL under TRUSTED_ORIGINS / FRONTEND_URL (no open redirects); absent: NULL. */
const char *field_redirect(http_req_t *req, json_t *body, const char *key, verr_t *v);
bool redirect_allowed(const char *url);

/* limit (default `def`, 1..max) and offset (default 0, 0..2^31-1) from the query string, as
 * decimal text in the arena; failures are recorded in v. */
void query_paging(http_req_t *req, verr_t *v, int def, int max, const char **limit,
                  const char **offset);

/* An IANA time zone under `key` (trimmed, arena): NULL when the key is absent, and when its
 * value is JSON null unless `present_required` (then null is a failure). A failure is recorded
 * in v. */
const char *field_timezone(http_req_t *req, json_t *body, const char *key, verr_t *v,
                           bool present_required);

/* Path parameters: one rule on every route. A malformed parameter is answered 400
 * VALIDATION_ERROR with details [{"field": <its name in the route pattern>, "message": ...}]
 * ("Invalid id" for ids, "Invalid path parameter" for the others: tokens, emoji, object types);
 * a well-formed one that names nothing the caller may see is the handler's 404. The path is
 * checked before the body, so a request with both wrong answers about the path. */

/* The name of route parameter i as the route pattern spells it ("id", "userId", ...). */
const char *path_param_name(http_req_t *req, int i);
/* Route parameter i as a lower-case UUID in *out; otherwise replies 400 "Invalid id" (detail
 * "must be a UUID") and returns false. */
bool path_uuid_ok_or_reply(http_req_t *req, int i, const char **out);
/* Route parameter i as a user id (CUID), or "me" (the caller's id) when allow_me; otherwise
 * replies 400 "Invalid id" and returns false. */
bool path_user_id_ok_or_reply(http_req_t *req, int i, bool allow_me, const char **out);
/* Replies 400 "Invalid path parameter" with `message` for route parameter i, which is not an
 * id and failed its own rule. */
void path_param_reply_invalid(http_req_t *req, int i, const char *message);

/* The one password-hash step (argon2id with a fresh random salt) into out, which holds
 * PASSWORD_ENCODED_MAX bytes; 0 or a DOMAIN_E* code. CPU-heavy: call it on the thread pool
 * (core/offload.h). */
int password_hash_fresh(const char *password, char *out);

/* Language: explicit value, else Accept-Language, else "en". */
const char *resolve_lang(http_req_t *req, const char *explicit_lang);

/* Fresh identifiers. */
void new_uuid(char out[IDS_UUID_LEN + 1]);
void new_cuid(char out[IDS_CUID_LEN + 1]);
/* A random token and the hash the database keeps. */
void new_token(char token[TOKEN_LEN + 1], char hash[TOKEN_HASH_LEN + 1]);

/* Splits a display name at the first space (arena copies; last may be NULL). */
void split_name(http_req_t *req, const char *name, const char **first, const char **last);

/* Session cookie (HttpOnly, SameSite=Lax, Path=/, Max-Age 7 days, Secure in production). */
void cookie_set_session(http_req_t *req, const char *token);
void cookie_clear_session(http_req_t *req);

/* Replies with a JSON document produced by PostgreSQL: row 0, column REPLY_DB_JSON_COL (every
 * statement answered this way selects its document first, as `json`). */
#define REPLY_DB_JSON_COL 0
struct db_result;
void reply_db_json(http_req_t *req, int status, const struct db_result *r);

/* Appends prefix (the member's key with its punctuation, as ",\"email\":") and then the text of
 * row's column col as a JSON string: the one writer of string members read from a result (null
 * for SQL NULL). */
void json_member(buf_t *b, const char *prefix, const struct db_result *r, int row, int col);

/* The stricter limiter of sign-in, sign-up, forget-password, invite accept and first run: per
 * client IP and per email (AUTH_RATE_LIMIT_*; 0 points turns it off). Replies 429 RATE_LIMITED
 * when over, naming the limit that was reached (rate_limit_reply), else calls next. Fails open
 * (logged) when Redis is unavailable. */
void auth_limit_then(http_req_t *req, const char *kind, const char *email, http_req_cb next);

/* 429 RATE_LIMITED (Retry-After and retryAfterSeconds = retry_after) whose message names the
 * limit and when it resets: "Too many <what> <whom>: at most <points> per <window> seconds; try
 * again in <retry_after> seconds". whom may be NULL. */
void rate_limit_reply(http_req_t *req, const char *what, const char *whom, int points, int window,
                      int retry_after);

/* The display name of a user: first and last name joined by a space. */
const char *display_name(http_req_t *req, const char *first, const char *last);
/* ASCII lower-case copy (emails are compared lower-cased). */
const char *lower_ascii(http_req_t *req, const char *s);

/* True when the header value lists `token` (an entity tag or an encoding) with a q above 0:
 * "gzip, deflate, br", "gzip;q=0.5", and for If-None-Match (etags) "\"a\", \"b\"" or "*",
 * compared weakly (W/"a" is "a"). Used by the API reference's bundle and the calendar feed. */
bool header_lists(const char *value, const char *token, bool etags);
