/*
 * Account authentication: sign-up, sign-in, sign-out, session under /api/auth.
 *
 * Passwords are hashed and verified with argon2id on libuv's thread pool (core/offload.h), so
 * the loop keeps serving while hashes run. Sign-in with an unknown email spends the same
 * hashing time as a wrong password and answers the same 401. Each write is one statement, so a
 * request either commits whole or not at all; mail rows go into the outbox in that statement.
 */
#include <string.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "core/url.h"
#include "domain/text.h"
#include "db/db.h"
#include "db/q_auth.h"
#include "db/queries.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/token.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/ctx_cache.h"
#include "routes/routes.h"
#include "routes/two_factor.h"
#include "rt/outbox.h"
#include "rt/redis.h"

typedef struct auth_state {
    const char *email;
    const char *password;
    const char *first, *last;
    const char *lang;
    const char *callback;
    char hash[PASSWORD_ENCODED_MAX];
    int rc;
    const char *user_id;
    const char *stored_hash;
    bool active;
    bool two_factor;    /* the second step follows the password (routes/two_factor.c) */
    const char *token;  /* new session token: the cookie is set only once the session exists */
    const char *answer; /* the sign-in / sign-up answer, sent once an ended session is gone */
    size_t answer_len;
} auth_state_t;

/* ---- shared: session creation ---- */

/* A link to the verification endpoint of this service (never built from the Host header). */
const char *auth_verify_link(http_req_t *req, const char *token, const char *callback)
{
    if (callback)
        return arena_printf(&req->arena, "%s/api/auth/verify-email?token=%s&callbackURL=%s",
                            cfg.public_url, token, url_encode(&req->arena, callback));
    return arena_printf(&req->arena, "%s/api/auth/verify-email?token=%s", cfg.public_url, token);
}

/* Closes the open streams of session `session_id` of `user_id` on every worker (rt/streams hears
 * the control message) and drops its cached contexts everywhere, then done(req): a reply sent
 * from done() is never overtaken by the ended session passing on another worker. */
void auth_end_session_then(http_req_t *req, const char *session_id, const char *user_id,
                           void (*done)(http_req_t *req))
{
    char *msg =
        arena_printf(&req->arena, "{\"type\":\"session-ended\",\"sessionId\":\"%s\"}", session_id);
    char *chan = arena_printf(&req->arena, "user:%s:control", user_id);
    redis_publish(chan, msg, strlen(msg));
    ctx_invalidate_then(req, 's', session_id, done);
}

/* ---- shared by sign-up and sign-in: the session cookie the request carried ends ---- */

/* The hash of the session cookie the request carried (NULL: none): signing in ends that session,
 * whoever's it is (docs/security.md 7.2.4). */
const char *auth_presented_session_hash(http_req_t *req)
{
    const char *token = http_req_cookie(req, SESSION_COOKIE);
    if (!token || !token_is_wellformed(token)) return NULL;
    char *h = arena_alloc(&req->arena, TOKEN_HASH_LEN + 1);
    token_hash(token, h);
    return h;
}

static void signed_in_reply(http_req_t *req)
{
    auth_state_t *st = req->data;
    cookie_set_session(req, st->token);
    http_reply_jsonn(req, 200, st->answer, st->answer_len);
}

/* The new session committed (row 0 of auth_sign_up or auth_sign_in_session: json, then the
 * ended session's id and user, NULL when the request carried no live session cookie): end that
 * one first, then answer. */
DB_SAME_COLUMN(AUTH_SIGN_IN_SESSION, AUTH_SIGN_UP, JSON);
DB_SAME_COLUMN(AUTH_SIGN_IN_SESSION, AUTH_SIGN_UP, ENDED_ID);
DB_SAME_COLUMN(AUTH_SIGN_IN_SESSION, AUTH_SIGN_UP, ENDED_USER_ID);
static void signed_in(http_req_t *req, db_result_t *r)
{
    auth_state_t *st = req->data;
    const char *json = db_get(r, 0, AUTH_SIGN_UP_JSON);
    if (!json) {
        http_reply_error(req, 500, "INTERNAL", "Internal error");
        return;
    }
    st->answer_len = (size_t)db_getlen(r, 0, AUTH_SIGN_UP_JSON);
    st->answer = arena_strndup(&req->arena, json, st->answer_len);
    const char *ended = db_get(r, 0, AUTH_SIGN_UP_ENDED_ID);
    if (ended) {
        auth_end_session_then(req, arena_strdup(&req->arena, ended),
                              arena_strdup(&req->arena, db_get(r, 0, AUTH_SIGN_UP_ENDED_USER_ID)),
                              signed_in_reply);
        return;
    }
    signed_in_reply(req);
}

/* ---- sign-up ---- */

static void sign_up_on_insert(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 409, "EMAIL_TAKEN", "An account with this email already exists");
        return;
    }
    outbox_kick();
    signed_in(req, r);
}

static void sign_up_on_hashed(http_req_t *req, void *data)
{
    auth_state_t *st = data;
    if (st->rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not create the account");
        return;
    }
    char user_id[IDS_CUID_LEN + 1], session_id[IDS_UUID_LEN + 1], ver_id[IDS_UUID_LEN + 1];
    char token[TOKEN_LEN + 1], token_h[TOKEN_HASH_LEN + 1];
    char vtoken[TOKEN_LEN + 1], vtoken_h[TOKEN_HASH_LEN + 1];
    new_cuid(user_id);
    new_uuid(session_id);
    new_uuid(ver_id);
    new_token(token, token_h);
    new_token(vtoken, vtoken_h);
    mail_msg_t m = {0};
    mail_render_verification(st->lang, auth_verify_link(req, vtoken, st->callback), &m);
    const char *ua = http_req_header(req, "User-Agent");
    const char *params[] = {user_id,
                            st->email,
                            st->first,
                            st->last,
                            st->lang,
                            st->hash,
                            session_id,
                            token_h,
                            req->client_ip,
                            ua,
                            ver_id,
                            vtoken_h,
                            m.subject,
                            m.text,
                            m.html,
                            cfg.session_absolute_text,
                            auth_presented_session_hash(req)};
    /* The cookie waits for the insert: a 409 must not replace the caller's valid session. */
    st->token = arena_strdup(&req->arena, token);
    db_req_query(req, SQL_AUTH_SIGN_UP, 17, params, sign_up_on_insert);
    mail_msg_free(&m);
}

static void hash_work(void *data)
{
    auth_state_t *st = data;
    st->rc = password_hash_fresh(st->password, st->hash);
}

static void sign_up_limited(http_req_t *req)
{
    offload_run_kind(req, OFFLOAD_SIGN_UP, hash_work, sign_up_on_hashed, req->data);
}

static void sign_up(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    auth_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->email = field_email(req, body, "email", &v, true);
    st->password = field_password(req, body, "password", &v, true);
    const char *name = field_str(req, body, "name", &v, true, 1, 201, true);
    const char *lang = field_lang(req, body, "preferredLanguage", &v);
    st->callback = field_redirect(req, body, "callbackURL", &v);
    if (name) {
        split_name(req, name, &st->first, &st->last);
        if (text_cp_count(st->first, strlen(st->first)) > 100 ||
            (st->last && text_cp_count(st->last, strlen(st->last)) > 100))
            verr_add(&v, "name", "first and last name must be at most 100 characters each");
    }
    password_rules_add(&v, "password", st->password, st->email, st->first, st->last);
    if (verr_reply(req, &v)) return;
    st->lang = resolve_lang(req, lang);
    req->data = st;
    auth_limit_then(req, "sign-up", st->email, sign_up_limited);
}

/* ---- sign-in ---- */

static void sign_in_on_session(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    signed_in(req, r);
}

static void sign_in_session(http_req_t *req)
{
    auth_state_t *st = req->data;
    char session_id[IDS_UUID_LEN + 1], token[TOKEN_LEN + 1], token_h[TOKEN_HASH_LEN + 1];
    new_uuid(session_id);
    new_token(token, token_h);
    const char *params[] = {session_id,
                            st->user_id,
                            token_h,
                            req->client_ip,
                            http_req_header(req, "User-Agent"),
                            cfg.session_absolute_text,
                            auth_presented_session_hash(req)};
    st->token = arena_strdup(&req->arena, token);
    db_req_query(req, SQL_AUTH_SIGN_IN_SESSION, 7, params, sign_in_on_session);
}

static void sign_in_on_verified(http_req_t *req, void *data)
{
    auth_state_t *st = data;
    if (st->rc != 0 || !st->user_id || !st->active) {
        http_reply_error(req, 401, "UNAUTHENTICATED", "Invalid email or password");
        return;
    }
    if (st->two_factor) {
        two_factor_sign_in(req, st->user_id, sign_in_session);
        return;
    }
    sign_in_session(req);
}

static void verify_work(void *data)
{
    auth_state_t *st = data;
    /* Unknown email or no credential: spend the same time, then fail. */
    if (!st->stored_hash)
        st->rc = password_verify_dummy(st->password);
    else
        st->rc = password_verify(st->stored_hash, st->password);
    if (!st->user_id) st->rc = -1;
}

static void sign_in_on_lookup(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    auth_state_t *st = req->data;
    if (db_nrows(r) == 1) {
        st->user_id = arena_strdup(&req->arena, db_get(r, 0, AUTH_SIGN_IN_LOOKUP_ID));
        const char *status = db_get(r, 0, AUTH_SIGN_IN_LOOKUP_STATUS);
        st->active = status && strcmp(status, "active") == 0;
        st->stored_hash =
            arena_strdup(&req->arena, db_get(r, 0, AUTH_SIGN_IN_LOOKUP_PASSWORD_HASH));
        const char *tf = db_get(r, 0, AUTH_SIGN_IN_LOOKUP_TWO_FACTOR_ENABLED);
        st->two_factor = tf && tf[0] == 't';
    }
    offload_run_kind(req, OFFLOAD_SIGN_IN, verify_work, sign_in_on_verified, st);
}

static void sign_in_limited(http_req_t *req)
{
    auth_state_t *st = req->data;
    const char *params[] = {st->email};
    db_req_query(req, SQL_AUTH_SIGN_IN_LOOKUP, 1, params, sign_in_on_lookup);
}

static void sign_in(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    auth_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    const char *email = field_str(req, body, "email", &v, true, 1, 320, true);
    st->password = field_str(req, body, "password", &v, true, 1, 4096, false);
    if (verr_reply(req, &v)) return;
    st->email = lower_ascii(req, email);
    req->data = st;
    auth_limit_then(req, "sign-in", st->email, sign_in_limited);
}

/* ---- sign-out ---- */

static void sign_out_reply(http_req_t *req)
{
    http_reply_json(req, 200, "{\"success\":true}");
}

static void sign_out_on_delete(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    cookie_clear_session(req);
    /* Streams held by this session close; the reply waits for the invalidation: a revoked
     * session must not pass on another worker after it. */
    auth_end_session_then(req, c->session_id, c->user_id, sign_out_reply);
}

static void sign_out(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *params[] = {c->session_id};
    db_req_query(req, SQL_AUTH_SIGN_OUT, 1, params, sign_out_on_delete);
}

/* ---- session ---- */

static void get_session(http_req_t *req)
{
    caller_t *c = context_caller(req);
    if (!c) {
        http_reply_json(req, 200, "{\"session\":null,\"user\":null}");
        return;
    }
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"session\":{\"id\":");
    buf_json_str(&b, c->session_id);
    buf_puts(&b, ",\"userId\":");
    buf_json_str(&b, c->user_id);
    buf_puts(&b, ",\"expiresAt\":");
    buf_json_str(&b, c->session_expires_at);
    buf_puts(&b, "},\"user\":{\"id\":");
    buf_json_str(&b, c->user_id);
    buf_puts(&b, ",\"email\":");
    buf_json_str(&b, c->email);
    buf_puts(&b, ",\"name\":");
    buf_json_str(&b, c->display_name);
    buf_puts(&b, c->email_verified ? ",\"emailVerified\":true,\"createdAt\":"
                                   : ",\"emailVerified\":false,\"createdAt\":");
    buf_json_str(&b, c->created_at);
    buf_puts(&b, "}}");
    req->body_compact = true; /* written compact above: no scan for white space */
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

/* better-auth's client (getSession) reads a signed-out caller as a null body, not as an object of
 * nulls; the path and the null are its own (docs/api.md "Real clients"). */
static void get_session_client(http_req_t *req)
{
    if (!context_caller(req)) {
        http_reply_json(req, 200, "null");
        return;
    }
    get_session(req);
}

static const route_t auth_routes[] = {
    {HTTP_M_POST, "/api/auth/sign-up/email", sign_up, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/auth/sign-in/email", sign_in, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/auth/sign-out", sign_out, AUTH_SESSION, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/api/auth/session", get_session, AUTH_OPTIONAL, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    /* The path better-auth's own client calls. */
    {HTTP_M_GET, "/api/auth/get-session", get_session_client, AUTH_OPTIONAL, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
};

void routes_auth_register(void)
{
    router_add(auth_routes, sizeof(auth_routes) / sizeof(auth_routes[0]));
}
