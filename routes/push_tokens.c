/*
 * Device push tokens (docs/api.md): the caller registers or removes the
 * token of one of their devices. A token belongs to one user at a time: registering a token
 * that another account holds moves it to the caller (a shared device changed hands), so pushes
 * never reach the previous account. Delivery itself lives in rt/push.c.
 *
 * Tokens are opaque: Expo's "ExponentPushToken[...]" is the usual form, but FCM / APNs tokens
 * are accepted as well, as 1..255 visible ASCII characters. Both routes stay usable while the
 * caller has pending invites (apps register the device right after sign-in).
 */
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_push_tokens.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/routes.h"

#define PUSH_TOKEN_MAX 255

/* Column 0: response; 1: true when the row is new. A token registered again keeps its
 * creation time unless it changes hands. The user keeps at most PUSH_TOKENS_PER_USER tokens:
 * beyond that the oldest go (every push fans out to every token, so an unbounded list would
 * make each notification cost more, and a stolen session could fill it). */
#define PUSH_TOKENS_PER_USER 20
/* 1..255 visible ASCII characters (no spaces or controls). */
static bool token_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > PUSH_TOKEN_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return false;
    return true;
}

static void register_on_row(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *inserted = db_get(r, 0, PUSH_TOKEN_REGISTER_FRESH);
    reply_db_json(req, inserted && inserted[0] == 't' ? 201 : 200, r);
}

static void register_token(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    int before = v.n;
    const char *token = field_str(req, body, "token", &v, true, 1, 4096, true);
    if (token && v.n == before && !token_ok(token))
        verr_add(&v, "token", "must be 1 to 255 visible ASCII characters");
    before = v.n;
    const char *platform = field_str(req, body, "platform", &v, true, 1, 16, true);
    if (platform && v.n == before && strcmp(platform, "ios") != 0 &&
        strcmp(platform, "android") != 0 && strcmp(platform, "web") != 0)
        verr_add(&v, "platform", "must be ios, android or web");
    if (verr_reply(req, &v)) return;
    caller_t *c = context_caller(req);
    char keep[16];
    snprintf(keep, sizeof(keep), "%d", PUSH_TOKENS_PER_USER - 1);
    const char *params[] = {token, c->user_id, platform, keep};
    db_req_query(req, SQL_PUSH_TOKEN_REGISTER, 4, params, register_on_row);
}

static void delete_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *n = PQcmdTuples(r->pg);
    if (!n || strcmp(n, "0") == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "Push token not found");
        return;
    }
    http_reply_empty(req, 204);
}

static void delete_token(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *token = http_req_param(req, 0);
    if (!token || !token_ok(token)) {
        path_param_reply_invalid(req, 0, "must be 1 to 255 visible ASCII characters");
        return;
    }
    const char *params[] = {token, c->user_id};
    db_req_query(req, SQL_PUSH_TOKEN_DELETE, 2, params, delete_on_done);
}

static const route_t push_token_routes[] = {
    {HTTP_M_POST, "/api/users/me/push-tokens", register_token, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_DELETE, "/api/users/me/push-tokens/:token", delete_token, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
};

void routes_push_tokens_register(void)
{
    router_add(push_token_routes, sizeof(push_token_routes) / sizeof(push_token_routes[0]));
}
