/*
 * The caller's own account: GET /api/users/me (the own-profile record) and
 * POST /api/users/me/password (change password: verify the current one, store the new one, end
 * every other session, the current session staying, and mail the owner a notice in the same
 * statement). The other sessions' open streams are closed
 * through the user's control channel once the change committed. Wrong current passwords are
 * limited per user (PW_FAIL_POINTS per PW_FAIL_WINDOW seconds, counted in Redis before the check
 * and given back when it was right, so parallel guesses cannot pass together), since each
 * attempt costs an argon2 verify and a stolen session must not guess the password.
 */
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_account.h"
#include "domain/password.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/ctx_cache.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/outbox.h"
#include "rt/ratelimit.h"

#define PW_FAIL_POINTS 5
#define PW_FAIL_WINDOW (15 * 60)

static void json_field(buf_t *b, const char *key, const char *value, bool first)
{
    if (!first) buf_putc(b, ',');
    buf_json_str(b, key);
    buf_putc(b, ':');
    buf_json_str(b, value);
}

static void get_me(http_req_t *req)
{
    caller_t *c = context_caller(req);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{");
    json_field(&b, "id", c->user_id, true);
    json_field(&b, "email", c->email, false);
    json_field(&b, "status", c->status, false);
    json_field(&b, "globalRole", c->global_role ? role_name(c->global_role) : NULL, false);
    json_field(&b, "preferredLanguage", c->preferred_language, false);
    json_field(&b, "firstName", c->first_name, false);
    json_field(&b, "lastName", c->last_name, false);
    json_field(&b, "phone", c->phone, false);
    json_field(&b, "birthDate", c->birth_date, false);
    json_field(&b, "countryCode", c->country_code, false);
    json_field(&b, "timezone", c->timezone, false);
    json_field(&b, "avatarUrl", c->avatar_url, false);
    json_field(&b, "currentOrganizationId", c->current_org_id, false);
    json_field(&b, "role", c->role ? role_name(c->role) : NULL, false);
    json_field(&b, "orgId", c->org_id, false);
    buf_printf(&b, ",\"emailVerified\":%s", c->email_verified ? "true" : "false");
    json_field(&b, "createdAt", c->created_at, false);
    buf_puts(&b, "}}");
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

typedef struct pw_state {
    const char *current;
    const char *next;
    const char *stored;
    char hash[PASSWORD_ENCODED_MAX];
    int verify_rc;
    int hash_rc;
} pw_state_t;

static void pw_on_saved(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    outbox_kick(); /* the "password changed" notice, queued by the statement */
    events_sessions_ended(c->user_id, c->session_id);
    static const char ok[] = "{\"success\":true}";
    ctx_invalidate_then_reply(req, 'u', c->user_id, 200, ok, sizeof(ok) - 1);
}

static const char *fail_key(http_req_t *req)
{
    return arena_printf(&req->arena, "rl:pw-change:%s", context_caller(req)->user_id);
}

static void pw_work(void *data)
{
    pw_state_t *st = data;
    st->verify_rc =
        st->stored ? password_verify(st->stored, st->current) : password_verify_dummy(st->current);
    if (!st->stored) st->verify_rc = -1;
    if (st->verify_rc != 0) return;
    st->hash_rc = password_hash_fresh(st->next, st->hash);
}

static void pw_on_worked(http_req_t *req, void *data)
{
    pw_state_t *st = data;
    if (st->verify_rc != 0) {
        /* Counted before the check (change_password). */
        verr_t v = {0};
        verr_add(&v, "currentPassword", "is incorrect");
        verr_reply(req, &v);
        return;
    }
    ratelimit_refund(fail_key(req));
    if (st->hash_rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not store the password");
        return;
    }
    caller_t *c = context_caller(req);
    const char *params[9] = {c->user_id, st->hash, c->session_id};
    account_notice_params(req, MAIL_NOTICE_PASSWORD_CHANGED, params + 3);
    db_req_query(req, SQL_ACCOUNT_PASSWORD_SET, 9, params, pw_on_saved);
}

static void pw_on_loaded(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    pw_state_t *st = req->data;
    const char *h = db_get(r, 0, ACCOUNT_PASSWORD_GET_PASSWORD_HASH);
    st->stored = h ? arena_strdup(&req->arena, h) : NULL;
    offload_run_kind(req, OFFLOAD_PASSWORD, pw_work, pw_on_worked, st);
}

static void pw_on_taken(bool allowed, int retry_after, bool error, void *data)
{
    http_req_t *req = data;
    if (http_req_gone(req)) goto done;
    if (error) {
        /* Fails open like the other auth limiters: losing Redis must not lock accounts. */
        log_warn("password-change limiter unavailable id=%s", req->id);
    } else if (!allowed) {
        rate_limit_reply(req, "wrong current passwords", "for this account", PW_FAIL_POINTS,
                         PW_FAIL_WINDOW, retry_after);
        goto done;
    }
    const char *params[] = {context_caller(req)->user_id};
    db_req_query(req, SQL_ACCOUNT_PASSWORD_GET, 1, params, pw_on_loaded);
done:
    http_req_unref(req);
}

static void change_password(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    pw_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->current = field_str(req, body, "currentPassword", &v, true, 1, 4096, false);
    st->next = field_password(req, body, "newPassword", &v, true);
    caller_t *c = context_caller(req);
    password_rules_add(&v, "newPassword", st->next, c->email, c->first_name, c->last_name);
    if (verr_reply(req, &v)) return;
    req->data = st;
    http_req_ref(req);
    /* The attempt counts before the check, so parallel ones cannot all pass; a right password
     * gives it back (pw_on_worked). */
    ratelimit_hit(fail_key(req), NULL, PW_FAIL_POINTS, PW_FAIL_WINDOW, pw_on_taken, req);
}

static const route_t account_routes[] = {
    {HTTP_M_GET, "/api/users/me", get_me, AUTH_SESSION, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/users/me/password", change_password, AUTH_SESSION, ROLE_NONE, 0, 0},
    /* The path better-auth's own client (changePassword) calls. */
    {HTTP_M_POST, "/api/auth/change-password", change_password, AUTH_SESSION, ROLE_NONE, 0, 0},
};

void routes_account_register(void)
{
    router_add(account_routes, sizeof(account_routes) / sizeof(account_routes[0]));
}
