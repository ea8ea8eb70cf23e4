/*
 * Invites: the organization's side (GET / POST /api/organizations/:id/invites) and the
 * invitee's side under /api/invites (token resolution, the legacy accept that creates the
 * account, the caller's pending list, accept and decline).
 *
 * Tokens are random (new_token) and only their hash is stored; a resend replaces the hash, so
 * the previous link stops resolving. `expired` is computed on read (pending past expiresAt); the
 * create path also persists it for the one invite it replaces. Every write is one statement:
 * the invite row and its outbox mail, or the account, membership, current organization and
 * invite status together, so a request commits whole or not at all.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_invites.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/roles.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/outbox.h"

#define INVITE_DAYS_DEFAULT 7
#define INVITE_DAYS_MIN 1
#define INVITE_DAYS_MAX 30

typedef struct invite_state {
    const char *org_id;
    const char *email;
    role_t role;
    int days;
    const char *lang; /* body preferredLanguage, else Accept-Language, else en */
    /* create: the write statement's parameters, kept for one retry after a unique race */
    const char *params[11];
    bool retried;
    /* legacy accept */
    const char *token;
    char token_h[TOKEN_HASH_LEN + 1];
    const char *first, *last, *password, *given_email;
    char hash[PASSWORD_ENCODED_MAX];
    int rc;
} invite_state_t;

static void list_on_done(http_req_t *req, db_result_t *r);
static void create_on_context(http_req_t *req, db_result_t *r);
static void create_on_written(http_req_t *req, db_result_t *r);
static void resolve_on_done(http_req_t *req, db_result_t *r);
static void accept_on_check(http_req_t *req, db_result_t *r);
static void accept_limited(http_req_t *req);
static void accept_on_hashed(http_req_t *req, void *data);
static void accept_on_written(http_req_t *req, db_result_t *r);
static void my_pending_on_done(http_req_t *req, db_result_t *r);
static void respond_on_done(http_req_t *req, db_result_t *r);

/* SQL: db/queries/invites.sql. Accept and decline by id answer outcome and json in the same
 * columns (respond_on_done reads either). */
_Static_assert((int)INVITE_ACCEPT_ID_OUTCOME == (int)INVITE_DECLINE_ID_OUTCOME &&
                   (int)INVITE_ACCEPT_ID_JSON == (int)INVITE_DECLINE_ID_JSON,
               "accept and decline by id share their columns");

/* ---- shared ---- */

/* The organization id of the path, or NULL after replying 400. */
static const char *org_param_or_reply(http_req_t *req)
{
    const char *id;
    return path_uuid_ok_or_reply(req, 0, &id) ? id : NULL;
}

/* The caller's role for the organization of the path (perm_invite_access()): the global role,
 * or the active membership's role, into *as. Replies and returns false when access is refused. */
static bool org_role_or_replied(http_req_t *req, bool org_exists, const char *member_role,
                                role_t *as)
{
    perm_actor_t a = perm_actor(context_caller(req));
    return perm_allowed_or_replied(req,
                                   perm_invite_access(&a, org_exists, role_parse(member_role), as));
}

static void reply_invalid(http_req_t *req, const char *field, const char *message)
{
    verr_t v = {0};
    verr_add(&v, field, message);
    verr_reply(req, &v);
}

/* The invite link of the frontend (never built from the Host header), in the mail's language. */
static const char *invite_link(http_req_t *req, const char *token, const char *lang)
{
    return arena_printf(&req->arena, "%s/invite?token=%s&lang=%s", cfg.frontend_url, token, lang);
}

/* ---- GET /api/organizations/:id/invites ---- */

static void list_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *exists = db_get(r, 0, INVITE_LIST_ORG_EXISTS);
    role_t as;
    if (!org_role_or_replied(req, exists && exists[0] == 't', db_get(r, 0, INVITE_LIST_MY_ROLE),
                             &as))
        return;
    reply_db_json(req, 200, r);
}

static void list_invites(http_req_t *req)
{
    const char *org_id = org_param_or_reply(req);
    if (!org_id) return;
    caller_t *c = context_caller(req);
    const char *params[] = {org_id, c->user_id, c->global_role != ROLE_NONE ? "true" : "false"};
    db_req_query(req, SQL_INVITE_LIST, 3, params, list_on_done);
}

/* ---- POST /api/organizations/:id/invites ---- */

/* Replies with the JSON document PostgreSQL rendered in column `col` of row 0. */
static void reply_col_json(http_req_t *req, int status, const db_result_t *r, int col)
{
    const char *json = db_get(r, 0, col);
    if (!json) {
        http_reply_error(req, 500, "INTERNAL", "Internal error");
        return;
    }
    http_reply_jsonn(req, status, json, db_getlen(r, 0, col));
}

static void create_on_written(http_req_t *req, db_result_t *r)
{
    invite_state_t *st = req->data;
    if (!r->ok && r->sqlstate && strcmp(r->sqlstate, "23505") == 0 && !st->retried) {
        /* Another request created the pending invite for this address between our snapshot and
         * the insert; run again, which now finds it and refreshes it. */
        st->retried = true;
        db_req_query(req, SQL_INVITE_CREATE, 11, st->params, create_on_written);
        return;
    }
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) != 1) {
        http_reply_error(req, 500, "INTERNAL", "The invite could not be saved");
        return;
    }
    outbox_kick();
    const char *created = db_get(r, 0, INVITE_CREATE_CREATED);
    /* The invitee's invite gate. */
    ctx_invalidate_then_reply(req, 'e', st->params[1], created && created[0] == 't' ? 201 : 200,
                              db_get(r, 0, INVITE_CREATE_JSON),
                              db_getlen(r, 0, INVITE_CREATE_JSON));
}

static void create_on_context(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    invite_state_t *st = req->data;
    caller_t *c = context_caller(req);
    const char *org_name = db_get(r, 0, INVITE_CREATE_CONTEXT_ORG_NAME);
    role_t caller_role;
    if (!org_role_or_replied(req, org_name != NULL, db_get(r, 0, INVITE_CREATE_CONTEXT_CALLER_ROLE),
                             &caller_role))
        return;
    const char *live_role = db_get(r, 0, INVITE_CREATE_CONTEXT_PENDING_ROLE);
    if (!perm_allowed_or_replied(req, perm_invite_grant(caller_role, st->role, live_role != NULL,
                                                        role_parse(live_role))))
        return;
    const char *member = db_get(r, 0, INVITE_CREATE_CONTEXT_ALREADY_MEMBER);
    if (member && member[0] == 't') {
        /* Accepting never changes an existing membership, so such an invite could only mislead;
         * a disabled member comes back through PATCH of the membership. */
        http_reply_error(req, 409, "CONFLICT",
                         "This email already has a membership in this organization");
        return;
    }
    /* The invitee's own language wins when they already have an account. */
    const char *profile_lang = db_get(r, 0, INVITE_CREATE_CONTEXT_INVITEE_LANGUAGE);
    const char *lang = profile_lang ? arena_strdup(&req->arena, profile_lang) : st->lang;

    char id[IDS_UUID_LEN + 1], token[TOKEN_LEN + 1], token_h[TOKEN_HASH_LEN + 1];
    new_uuid(id);
    new_token(token, token_h);
    mail_msg_t m = {0};
    if (mail_render_invite(lang, invite_link(req, token, lang), org_name, st->role,
                           c->display_name && *c->display_name ? c->display_name : NULL, &m) != 0) {
        http_reply_error(req, 500, "INTERNAL", "The invite could not be created");
        return;
    }
    const char **p = st->params;
    p[0] = st->org_id;
    p[1] = st->email;
    p[2] = role_name(st->role);
    p[3] = arena_printf(&req->arena, "%d", st->days);
    p[4] = arena_strdup(&req->arena, token_h);
    p[5] = c->user_id;
    p[6] = arena_strdup(&req->arena, id);
    p[7] = arena_strdup(&req->arena, m.subject);
    p[8] = arena_strdup(&req->arena, m.text);
    p[9] = arena_strdup(&req->arena, m.html);
    p[10] = cfg.production ? NULL : arena_strdup(&req->arena, token);
    mail_msg_free(&m);
    db_req_query(req, SQL_INVITE_CREATE, 11, st->params, create_on_written);
}

/* expiresInDays: an integer 1..30, default 7. */
static int field_days(json_t *body, verr_t *v)
{
    json_t *j = json_object_get(body, "expiresInDays");
    if (!j || json_is_null(j)) return INVITE_DAYS_DEFAULT;
    if (!json_is_integer(j) || json_integer_value(j) < INVITE_DAYS_MIN ||
        json_integer_value(j) > INVITE_DAYS_MAX) {
        verr_add(v, "expiresInDays", "must be an integer from 1 to 30");
        return 0;
    }
    return (int)json_integer_value(j);
}

/* roleInOrganization: one of the four organization roles (required). */
static role_t field_org_role(http_req_t *req, json_t *body, const char *key, verr_t *v)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, true, 1, 64, false);
    if (!s || v->n != before) return ROLE_NONE;
    role_t r = role_parse(s);
    if (!role_is_org_role(r)) {
        verr_add(v, key, "must be one of OrganizationAdmin, Manager, Coach, Teacher");
        return ROLE_NONE;
    }
    return r;
}

static void create_invite(http_req_t *req)
{
    const char *org_id = org_param_or_reply(req);
    if (!org_id) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    invite_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->org_id = org_id;
    st->email = field_email(req, body, "email", &v, true);
    st->role = field_org_role(req, body, "roleInOrganization", &v);
    st->days = field_days(body, &v);
    const char *lang = field_lang(req, body, "preferredLanguage", &v);
    if (verr_reply(req, &v)) return;
    st->lang = resolve_lang(req, lang);
    req->data = st;
    caller_t *c = context_caller(req);
    const char *params[] = {org_id, c->user_id, st->email};
    db_req_query(req, SQL_INVITE_CREATE_CONTEXT, 3, params, create_on_context);
}

/* ---- GET /api/invites/:token ---- */

static void resolve_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "Invite not found");
        return;
    }
    reply_db_json(req, 200, r);
}

static void resolve_token(http_req_t *req)
{
    const char *token = http_req_param(req, 0);
    if (!token || !token_is_wellformed(token)) {
        path_param_reply_invalid(req, 0,
                                 "must be an invite token (43 to 128 characters of "
                                 "A-Z, a-z, 0-9, - and _)");
        return;
    }
    char th[TOKEN_HASH_LEN + 1];
    token_hash(token, th);
    const char *params[] = {th};
    db_req_query(req, SQL_INVITE_RESOLVE, 1, params, resolve_on_done);
}

/* ---- POST /api/invites/accept (legacy: creates the account) ---- */

static void accept_on_written(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *still = db_get(r, 0, INVITE_ACCEPT_ACCEPTABLE);
    if (!still || still[0] != 't') {
        reply_invalid(req, "token", "The invite is no longer available");
        return;
    }
    if (db_isnull(r, 0, INVITE_ACCEPT_JSON)) {
        http_reply_error(req, 409, "EMAIL_TAKEN", "An account with this email already exists");
        return;
    }
    reply_col_json(req, 200, r, INVITE_ACCEPT_JSON);
}

static void accept_on_hashed(http_req_t *req, void *data)
{
    invite_state_t *st = data;
    if (st->rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not create the account");
        return;
    }
    char user_id[IDS_CUID_LEN + 1];
    new_cuid(user_id);
    const char *params[] = {st->token_h, user_id, st->first, st->last, st->lang, st->hash};
    db_req_query(req, SQL_INVITE_ACCEPT, 6, params, accept_on_written);
}

static void hash_work(void *data)
{
    invite_state_t *st = data;
    st->rc = password_hash_fresh(st->password, st->hash);
}

static void accept_on_check(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    invite_state_t *st = req->data;
    if (db_nrows(r) == 0) {
        reply_invalid(req, "token", "Invalid invite token");
        return;
    }
    const char *email = db_get(r, 0, INVITE_ACCEPT_CHECK_EMAIL);
    const char *status = db_get(r, 0, INVITE_ACCEPT_CHECK_STATUS);
    const char *live = db_get(r, 0, INVITE_ACCEPT_CHECK_LIVE);
    const char *has_account = db_get(r, 0, INVITE_ACCEPT_CHECK_HAS_ACCOUNT);
    if (!status || strcmp(status, "pending") != 0) {
        reply_invalid(req, "token", "The invite is no longer available");
        return;
    }
    if (!live || live[0] != 't') {
        reply_invalid(req, "token", "The invite has expired");
        return;
    }
    if (st->given_email && (!email || strcasecmp(st->given_email, email) != 0)) {
        reply_invalid(req, "email", "does not match the invited email address");
        return;
    }
    if (has_account && has_account[0] == 't') {
        http_reply_error(req, 409, "EMAIL_TAKEN", "An account with this email already exists");
        return;
    }
    /* The account's email is the invite's, known only now. */
    if (!password_rules_or_reply(req, "password", st->password, email, st->first, st->last)) return;
    offload_run_kind(req, OFFLOAD_ACCOUNT, hash_work, accept_on_hashed, st);
}

static void accept_limited(http_req_t *req)
{
    invite_state_t *st = req->data;
    const char *params[] = {st->token_h};
    db_req_query(req, SQL_INVITE_ACCEPT_CHECK, 1, params, accept_on_check);
}

static void accept_with_token(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    invite_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->token = field_str(req, body, "token", &v, true, 1, TOKEN_MAX_LEN, true);
    st->first = field_str(req, body, "firstName", &v, true, 1, 100, true);
    st->last = field_str(req, body, "lastName", &v, true, 1, 100, true);
    st->password = field_password(req, body, "password", &v, true);
    /* Compared with the invite's address case-insensitively (docs/api.md); invites are stored
     * lower-cased. */
    st->given_email = field_str(req, body, "email", &v, false, 1, 320, false);
    const char *lang = field_lang(req, body, "preferredLanguage", &v);
    if (verr_reply(req, &v)) return;
    if (!token_is_wellformed(st->token)) {
        reply_invalid(req, "token", "Invalid invite token");
        return;
    }
    token_hash(st->token, st->token_h);
    st->lang = resolve_lang(req, lang);
    req->data = st;
    auth_limit_then(req, "invite-accept",
                    st->given_email ? lower_ascii(req, st->given_email) : NULL, accept_limited);
}

/* ---- GET /api/invites/my-pending ---- */

static void my_pending_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    reply_db_json(req, 200, r);
}

static void my_pending(http_req_t *req)
{
    caller_t *c = context_caller(req);
    if (cfg.invite_require_verified_email && !c->email_verified) {
        /* Whoever signed up with an address they do not own must not learn which organizations
         * invited it, nor be held by the invite gate for invites they cannot act on: until the
         * email is verified the list is empty (docs/security.md). */
        http_reply_json(req, 200, "{\"data\":[],\"meta\":{\"total_count\":0}}");
        return;
    }
    const char *params[] = {c->email};
    db_req_query(req, SQL_INVITE_MY_PENDING, 1, params, my_pending_on_done);
}

/* ---- POST /api/invites/:id/accept and /decline ---- */

static void respond_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *outcome = db_get(r, 0, INVITE_ACCEPT_ID_OUTCOME);
    if (!outcome || strcmp(outcome, "not_found") == 0)
        http_reply_error(req, 404, "NOT_FOUND", "Invite not found");
    else if (strcmp(outcome, "forbidden") == 0)
        http_reply_error(
            req, 403, "FORBIDDEN",
            "Only the invitee (signed in with the invite's email) may accept or decline it");
    else if (strcmp(outcome, "not_pending") == 0)
        http_reply_error(req, 400, "VALIDATION_ERROR", "The invite is not pending");
    else if (strcmp(outcome, "expired") == 0)
        http_reply_error(req, 400, "VALIDATION_ERROR", "The invite has expired");
    else {
        /* Invite gate, membership and maybe the current organization changed. */
        ctx_invalidate_then_reply(req, 'u', context_caller(req)->user_id, 200,
                                  db_get(r, 0, INVITE_ACCEPT_ID_JSON),
                                  db_getlen(r, 0, INVITE_ACCEPT_ID_JSON));
        if (req->data == (void *)SQL_INVITE_ACCEPT_ID) {
            /* The new membership's events now reach the caller's open user streams. */
            const char *org = db_get(r, 0, INVITE_ACCEPT_ID_ORGANIZATION_ID);
            if (org) {
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "{\"type\":\"membership-enabled\",\"organizationId\":\"%s\"}", org);
                events_control(context_caller(req)->user_id, msg);
            }
        }
    }
}

static void respond(http_req_t *req, const char *sql)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    caller_t *c = context_caller(req);
    if (cfg.invite_require_verified_email && !c->email_verified) {
        /* Only a verified email proves the caller owns the invited mailbox. */
        http_reply_error(req, 403, "EMAIL_NOT_VERIFIED",
                         "Verify your email address before answering invitations");
        return;
    }
    const char *params[] = {id, lower_ascii(req, c->email), c->user_id};
    req->data = (void *)sql;
    db_req_query(req, sql, sql == SQL_INVITE_ACCEPT_ID ? 3 : 2, params, respond_on_done);
}

static void accept_by_id(http_req_t *req)
{
    respond(req, SQL_INVITE_ACCEPT_ID);
}

static void decline_by_id(http_req_t *req)
{
    respond(req, SQL_INVITE_DECLINE_ID);
}

static const route_t invite_routes[] = {
    {HTTP_M_GET, "/api/organizations/:id/invites", list_invites, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/organizations/:id/invites", create_invite, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_GET, "/api/invites/my-pending", my_pending, AUTH_SESSION, ROLE_NONE, ROUTE_GATE_EXEMPT,
     0},
    {HTTP_M_GET, "/api/invites/:token", resolve_token, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/invites/accept", accept_with_token, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/invites/:id/accept", accept_by_id, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/invites/:id/decline", decline_by_id, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
};

void routes_invites_register(void)
{
    router_add(invite_routes, sizeof(invite_routes) / sizeof(invite_routes[0]));
}
