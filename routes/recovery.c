/*
 * Password reset and email verification (/api/auth/forget-password, reset-password,
 * resend-activation, verify-email).
 *
 * No user enumeration: forget-password and resend-activation run the same single statement
 * whether or not the address has an account (the statement writes the token and the outbox row
 * only when it does) and answer the same. Mail language is chosen inside that statement, from
 * the callback URL's lang, else the profile's preferred language, else English, so both
 * renderings are passed in.
 */
#include <string.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "core/url.h"
#include "db/db.h"
#include "db/q_recovery.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/urlcheck.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/ctx_cache.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/outbox.h"
#include "rt/ratelimit.h"

typedef struct rec_state {
    const char *email;
    const char *redirect;
    const char *token;
    const char *new_password;
    char hash[PASSWORD_ENCODED_MAX];
    int rc;
} rec_state_t;

/* Renders one message in both languages into params[first..first+5]; each rendering carries the
 * link of its language (link_es NULL: the same link in both). */
static void render_both(http_req_t *req, int (*render)(const char *, const char *, mail_msg_t *),
                        const char *link, const char *link_es, const char **params)
{
    mail_msg_t en = {0}, es = {0};
    render("en", link, &en);
    render("es", link_es ? link_es : link, &es);
    mail_pair_params(req, &en, &es, params);
}

/* ---- forget-password ---- */

/* r is NULL when the cooldown skipped the statement. */
static void forget_on_done(http_req_t *req, db_result_t *r)
{
    if (r && !db_ok_or_reply(req, r)) return;
    if (r) outbox_kick();
    http_reply_json(req, 200,
                    "{\"success\":true,\"message\":\"If an account exists for this email, a "
                    "password reset link has been sent.\"}");
}

/* The reset link: the client's redirectTo (relative ones resolve against FRONTEND_URL) with the
 * token appended, else FRONTEND_URL/reset-password with the token and the mail's language. */
static const char *reset_link(http_req_t *req, const char *redirect, const char *token,
                              const char *lang)
{
    if (!redirect)
        return arena_printf(&req->arena, "%s/reset-password?token=%s&lang=%s", cfg.frontend_url,
                            token, lang);
    const char *base = redirect[0] == '/'
                           ? arena_printf(&req->arena, "%s%s", cfg.frontend_url, redirect)
                           : redirect;
    return arena_printf(&req->arena, "%s%ctoken=%s", base, strchr(base, '?') ? '&' : '?', token);
}

/* Issues a single-use token for st->email and queues its mail in both languages with one
 * statement (SQL_RECOVERY_FORGET / SQL_RECOVERY_RESEND: $1 email, $2 id, $3 token hash, $4 the
 * redirect's lang, $5-$10 the renderings); the statement writes nothing for an unknown address. */
static void queue_token_mail(http_req_t *req, const char *sql, bool reset, db_req_cb done)
{
    rec_state_t *st = req->data;
    char id[IDS_UUID_LEN + 1], token[TOKEN_LEN + 1], hash[TOKEN_HASH_LEN + 1];
    new_uuid(id);
    new_token(token, hash);
    const char *params[10] = {st->email, id, hash,
                              st->redirect ? urlcheck_lang(st->redirect) : NULL};
    if (reset)
        render_both(req, mail_render_password_reset, reset_link(req, st->redirect, token, "en"),
                    reset_link(req, st->redirect, token, "es"), params + 4);
    else
        render_both(req, mail_render_verification, auth_verify_link(req, token, st->redirect), NULL,
                    params + 4);
    db_req_query(req, sql, 10, params, done);
}

static void forget_on_cooldown(bool allowed, int retry_after, bool error, void *data)
{
    (void)retry_after;
    http_req_t *req = data;
    if (http_req_gone(req)) goto done;
    if (error) {
        /* As resend-activation: without Redis the cooldown cannot be enforced. */
        http_reply_error(req, 503, "UNAVAILABLE", "Try again shortly");
        goto done;
    }
    if (!allowed) {
        /* Silent: the same answer as a sent mail, so the cooldown reveals nothing about the
         * address, and a flood of requests sends at most one reset mail per cooldown. */
        forget_on_done(req, NULL);
        goto done;
    }
    queue_token_mail(req, SQL_RECOVERY_FORGET, true, forget_on_done);
done:
    http_req_unref(req);
}

static void forget_limited(http_req_t *req)
{
    rec_state_t *st = req->data;
    http_req_ref(req);
    ratelimit_cooldown(arena_printf(&req->arena, "cooldown:forget:%s", st->email),
                       cfg.resend_activation_cooldown, forget_on_cooldown, req);
}

static void forget_password(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    rec_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->email = field_email(req, body, "email", &v, true);
    st->redirect = field_redirect(req, body, "redirectTo", &v);
    if (verr_reply(req, &v)) return;
    req->data = st;
    auth_limit_then(req, "forget-password", st->email, forget_limited);
}

/* ---- reset-password ---- */

static void reset_on_applied(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        reply_field_invalid(req, "token", "Invalid or expired token");
        return;
    }
    outbox_kick(); /* the "password reset" notice, queued by the statement */
    /* The deleted sessions' open streams close on every worker. */
    caller_t *c = context_caller(req);
    events_sessions_ended(db_get(r, 0, RECOVERY_RESET_APPLY_USER_ID), c ? c->session_id : NULL);
    static const char ok[] = "{\"success\":true}";
    ctx_invalidate_then_reply(req, 'u', db_get(r, 0, RECOVERY_RESET_APPLY_USER_ID), 200, ok,
                              sizeof(ok) - 1);
}

static void hash_work(void *data)
{
    rec_state_t *st = data;
    st->rc = password_hash_fresh(st->new_password, st->hash);
}

static void reset_on_hashed(http_req_t *req, void *data)
{
    rec_state_t *st = data;
    if (st->rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not store the password");
        return;
    }
    caller_t *c = context_caller(req);
    char th[TOKEN_HASH_LEN + 1];
    token_hash(st->token, th);
    const char *params[9] = {th, st->hash, c ? c->session_id : NULL};
    account_notice_params(req, MAIL_NOTICE_PASSWORD_RESET, params + 3);
    db_req_query(req, SQL_RECOVERY_RESET_APPLY, 9, params, reset_on_applied);
}

static void reset_on_check(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        reply_field_invalid(req, "token", "Invalid or expired token");
        return;
    }
    /* The rules that need the account; the token stays usable after a refusal. */
    rec_state_t *st = req->data;
    if (!password_rules_or_reply(req, "newPassword", st->new_password,
                                 db_get(r, 0, RECOVERY_RESET_CHECK_EMAIL),
                                 db_get(r, 0, RECOVERY_RESET_CHECK_FIRST_NAME),
                                 db_get(r, 0, RECOVERY_RESET_CHECK_LAST_NAME)))
        return;
    offload_run_kind(req, OFFLOAD_PASSWORD, hash_work, reset_on_hashed, req->data);
}

static void reset_password(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    rec_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->token = field_str(req, body, "token", &v, true, 1, TOKEN_MAX_LEN, true);
    st->new_password = field_password(req, body, "newPassword", &v, true);
    if (verr_reply(req, &v)) return;
    if (!token_is_wellformed(st->token)) {
        reply_field_invalid(req, "token", "Invalid or expired token");
        return;
    }
    req->data = st;
    char th[TOKEN_HASH_LEN + 1];
    token_hash(st->token, th);
    const char *params[] = {th};
    db_req_query(req, SQL_RECOVERY_RESET_CHECK, 1, params, reset_on_check);
}

/* ---- resend-activation ---- */

static void resend_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    outbox_kick();
    char *body = arena_printf(&req->arena,
                              "{\"success\":true,\"message\":\"If an unverified account exists for "
                              "this email, a verification email has been sent.\","
                              "\"cooldownSeconds\":%d}",
                              cfg.resend_activation_cooldown);
    http_reply_json(req, 200, body);
}

static void resend_on_cooldown(bool allowed, int retry_after, bool error, void *data)
{
    http_req_t *req = data;
    if (http_req_gone(req)) goto done;
    if (error) {
        /* Without Redis the cooldown cannot be enforced; refuse rather than allow a mail flood. */
        http_reply_error(req, 503, "UNAVAILABLE", "Try again shortly");
        goto done;
    }
    if (!allowed) {
        http_reply_rate_limited(req, "COOLDOWN",
                                "A verification email was sent recently; try again later",
                                retry_after);
        goto done;
    }
    queue_token_mail(req, SQL_RECOVERY_RESEND, false, resend_on_done);
done:
    http_req_unref(req);
}

static void resend_activation(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    rec_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->email = field_email(req, body, "email", &v, true);
    st->redirect = field_redirect(req, body, "callbackURL", &v);
    if (verr_reply(req, &v)) return;
    req->data = st;
    http_req_ref(req);
    ratelimit_cooldown(arena_printf(&req->arena, "cooldown:resend:%s", st->email),
                       cfg.resend_activation_cooldown, resend_on_cooldown, req);
}

/* ---- verify-email ---- */

static void verify_redirect(http_req_t *req)
{
    http_reply_redirect(req, 302, req->data);
}

static void verify_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *outcome = db_get(r, 0, RECOVERY_VERIFY_OUTCOME);
    const char *profile_lang = db_get(r, 0, RECOVERY_VERIFY_PREFERRED_LANGUAGE);
    const char *callback = req->data;
    const char *lang = callback ? urlcheck_lang(callback) : NULL;
    if (!lang) lang = profile_lang && strcmp(profile_lang, "es") == 0 ? "es" : "en";
    const char *loc;
    if (outcome && strcmp(outcome, "ok") == 0)
        loc = arena_printf(&req->arena, "%s/email-verification?lang=%s", cfg.frontend_url, lang);
    else
        loc = arena_printf(&req->arena, "%s/email-verification?lang=%s&error=%s", cfg.frontend_url,
                           lang, outcome ? outcome : "invalid_token");
    const char *user_id = db_get(r, 0, RECOVERY_VERIFY_VERIFIED_USER_ID);
    if (!user_id) {
        http_reply_redirect(req, 302, loc);
        return;
    }
    /* email_verified is part of the invite gate: the redirect waits for the invalidation. */
    req->data = (void *)loc;
    ctx_invalidate_then(req, 'u', user_id, verify_redirect);
}

static void verify_email(http_req_t *req)
{
    const char *token = http_req_query(req, "token");
    const char *callback = http_req_query(req, "callbackURL");
    if (callback && *callback && !redirect_allowed(callback)) {
        reply_field_invalid(req, "callbackURL",
                            "callbackURL must be a relative path or a URL of a trusted origin");
        return;
    }
    req->data = (void *)(callback && *callback ? callback : NULL);
    if (!token || !token_is_wellformed(token)) {
        const char *lang = callback ? urlcheck_lang(callback) : NULL;
        http_reply_redirect(req, 302,
                            arena_printf(&req->arena,
                                         "%s/email-verification?lang=%s&error=invalid_token",
                                         cfg.frontend_url, lang ? lang : "en"));
        return;
    }
    char th[TOKEN_HASH_LEN + 1];
    token_hash(token, th);
    const char *params[] = {th};
    db_req_query(req, SQL_RECOVERY_VERIFY, 1, params, verify_on_done);
}

static const route_t recovery_routes[] = {
    {HTTP_M_POST, "/api/auth/forget-password", forget_password, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/auth/reset-password", reset_password, AUTH_OPTIONAL, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/resend-activation", resend_activation, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_GET, "/api/auth/verify-email", verify_email, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    /* The paths better-auth's own client calls for the same two actions. */
    {HTTP_M_POST, "/api/auth/request-password-reset", forget_password, AUTH_PUBLIC, ROLE_NONE, 0,
     0},
    {HTTP_M_POST, "/api/auth/send-verification-email", resend_activation, AUTH_PUBLIC, ROLE_NONE, 0,
     0},
};

void routes_recovery_register(void)
{
    router_add(recovery_routes, sizeof(recovery_routes) / sizeof(recovery_routes[0]));
}
