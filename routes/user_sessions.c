/*
 * The signed-in user's own sessions, on better-auth's paths and with its bodies and answers:
 * GET /api/auth/list-sessions, POST /api/auth/revoke-session {token},
 * POST /api/auth/revoke-other-sessions, POST /api/auth/revoke-sessions (docs/api.md "Sessions").
 *
 * Only the hash of a session token is stored, so the list cannot hand out other sessions' raw
 * tokens: its `token` is the session id, and revoke-session takes that id (or a raw token, which
 * only its holder has). Every revocation ends the sessions' open event streams (the user's control
 * channel, rt/streams) and drops their cached contexts on every worker before the answer
 * (routes/ctx_cache.h), as sign-out does; revoking the current session clears the cookie. The
 * administrators' POST /api/users/:id/revoke-sessions is in routes/users.c.
 */
#include <string.h>

#include "core/config.h"
#include "core/json.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_user_sessions.h"
#include "domain/ids.h"
#include "domain/token.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/ctx_cache.h"
#include "routes/dbreq.h"
#include "routes/routes.h"
#include "rt/events.h"

static const char status_true[] = "{\"status\":true}";

/* ---- GET /api/auth/list-sessions ---- */

static void list_on_rows(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    reply_db_json(req, 200, r);
}

static void list_sessions(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *params[] = {c->user_id, cfg.session_absolute_text, c->session_id};
    db_req_query(req, SQL_USER_SESSIONS_LIST, 3, params, list_on_rows);
}

/* ---- POST /api/auth/revoke-session ---- */

static void revoke_one_reply(http_req_t *req)
{
    http_reply_json(req, 200, status_true);
}

static void revoke_one_on_deleted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "No such session of yours");
        return;
    }
    caller_t *c = context_caller(req);
    const char *id = arena_strdup(&req->arena, db_get(r, 0, USER_SESSIONS_REVOKE_ONE_ID));
    if (strcmp(id, c->session_id) == 0) cookie_clear_session(req);
    /* Its streams close on every worker (rt/streams), then its cached contexts go. */
    char *msg = arena_printf(&req->arena, "{\"type\":\"session-ended\",\"sessionId\":\"%s\"}", id);
    events_control(c->user_id, msg);
    ctx_invalidate_then(req, 's', id, revoke_one_reply);
}

static void revoke_session(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    const char *token = field_str(req, body, "token", &v, true, 1, TOKEN_MAX_LEN, false);
    const char *id = NULL, *hash = NULL;
    if (token && ids_is_uuid(token)) {
        id = token;
    } else if (token && token_is_wellformed(token)) {
        char *h = arena_alloc(&req->arena, TOKEN_HASH_LEN + 1);
        token_hash(token, h);
        hash = h;
    } else if (token) {
        verr_add(&v, "token", "must be a session's token from list-sessions (its id)");
    }
    if (verr_reply(req, &v)) return;
    const char *params[] = {context_caller(req)->user_id, id, hash};
    db_req_query(req, SQL_USER_SESSIONS_REVOKE_ONE, 3, params, revoke_one_on_deleted);
}

/* ---- POST /api/auth/revoke-other-sessions ---- */

static void revoke_others_on_deleted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    events_sessions_ended(c->user_id, c->session_id);
    ctx_invalidate_then_reply(req, 'u', c->user_id, 200, status_true, sizeof(status_true) - 1);
}

static void revoke_other_sessions(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *params[] = {c->user_id, c->session_id};
    db_req_query(req, SQL_USER_SESSIONS_REVOKE_OTHERS, 2, params, revoke_others_on_deleted);
}

/* ---- POST /api/auth/revoke-sessions ---- */

static void revoke_all_on_deleted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    events_sessions_ended(c->user_id, NULL);
    cookie_clear_session(req);
    ctx_invalidate_then_reply(req, 'u', c->user_id, 200, status_true, sizeof(status_true) - 1);
}

static void revoke_sessions(http_req_t *req)
{
    const char *params[] = {context_caller(req)->user_id};
    db_req_query(req, SQL_USER_SESSIONS_REVOKE_ALL, 1, params, revoke_all_on_deleted);
}

/* Like sign-out, open to a caller whom invites hold at the gate. */
static const route_t user_sessions_routes[] = {
    {HTTP_M_GET, "/api/auth/list-sessions", list_sessions, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/revoke-session", revoke_session, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/revoke-other-sessions", revoke_other_sessions, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/revoke-sessions", revoke_sessions, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
};

void routes_user_sessions_register(void)
{
    router_add(user_sessions_routes,
               sizeof(user_sessions_routes) / sizeof(user_sessions_routes[0]));
}
