/*
 * The router guard: runs before every handler.
 *
 * 1. Global per-IP limiter (RATE_LIMITER_ENABLED), counted in Redis.
 * 2. CSRF origin check: a state-changing request that carries cookies and an Origin (or
 *    Referer) header must come from a trusted origin; requests without those headers (native
 *    clients, servers) pass.
 * 3. For routes that need a session: one query resolves the session cookie to the user, the
 *    active organization and membership, and the number of pending invites. Then: 401 without a
 *    valid session or when the user is not active; 400 / 403 / 404 for X-Organization-Id per
 *    docs/api.md; 400 ORG_CONTEXT_REQUIRED where an organization is needed; 403 INVITE_GATE
 *    while invites are pending; 403 below the route's minimum role.
 * The row of step 3 is kept per worker (routes/ctx_cache.h) and reused until a write that
 * changes it invalidates it, or for at most CONTEXT_CACHE_TTL_MS; the checks run on every
 * request either way.
 * Sessions get a sliding refresh (as better-auth's updateAge): once a day of use, the expiry
 * moves to seven days from now and the cookie is sent again, but never past the session's
 * creation plus SESSION_ABSOLUTE_DAYS (the absolute lifetime: the caller query applies the same
 * cap, so a session is refused from that moment however often it is used).
 */
#include "routes/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_context.h"
#include "domain/ids.h"
#include "domain/token.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/ctx_cache.h"
#include "routes/perm.h"
#include "rt/presence.h"
#include "rt/ratelimit.h"

/* The cached row still has the old expiry: the next request reads the new one. */
static void on_refreshed(db_result_t *r, void *data)
{
    char *session_id = data;
    if (!r->ok) log_warn("session refresh failed: %s", r->error ? r->error : "?");
    ctx_cache_drop_session_local(session_id);
    free(session_id);
}

/* Concurrent requests of one session would all see it due for a refresh until the first UPDATE
 * commits; a small direct-mapped memory of recent refreshes sends one UPDATE per session and
 * minute from this worker. */
static bool refresh_due(const char *session_id)
{
    static struct {
        char id[40];
        uint64_t at;
    } recent[1024];
    uint32_t h = fnv1a(session_id);
    uint64_t now = uv_now(http_loop());
    size_t i = h % 1024;
    if (strcmp(recent[i].id, session_id) == 0 && now - recent[i].at < 60000) return false;
    snprintf(recent[i].id, sizeof(recent[i].id), "%s", session_id);
    recent[i].at = now;
    return true;
}

typedef struct guard_state {
    http_req_cb next;
    const char *org_header;
    char hash[TOKEN_HASH_LEN + 1];
    unsigned cache_gen; /* ctx_cache_gen() when the caller query was sent */
} guard_state_t;

static void resolve_session(http_req_t *req);

static bool is_state_changing(int m)
{
    return m == HTTP_M_POST || m == HTTP_M_PUT || m == HTTP_M_PATCH || m == HTTP_M_DELETE;
}

/* Origin of a Referer URL: scheme://host[:port]. */
static size_t referer_origin_len(const char *ref)
{
    const char *p = strstr(ref, "://");
    if (!p) return 0;
    p += 3;
    const char *slash = strchr(p, '/');
    return slash ? (size_t)(slash - ref) : strlen(ref);
}

static bool csrf_ok(http_req_t *req)
{
    if (!is_state_changing(req->method) || !http_req_header(req, "Cookie")) return true;
    const char *origin = http_req_header(req, "Origin");
    if (origin && strcmp(origin, "null") != 0) return config_origin_trusted(origin, strlen(origin));
    if (origin) return false;
    const char *ref = http_req_header(req, "Referer");
    if (ref) {
        size_t n = referer_origin_len(ref);
        return n > 0 && config_origin_trusted(ref, n);
    }
    return true;
}

static void finish_guard(http_req_t *req)
{
    guard_state_t *g = req->data;
    http_req_cb next = g->next;
    req->data = NULL;
    next(req);
}

static void after_rate_limit(bool allowed, int retry_after, bool error, void *data)
{
    http_req_t *req = data;
    if (!http_req_gone(req)) {
        if (error) {
            /* The global limiter fails open: losing Redis must not take the API down. */
            log_warn("rate limiter unavailable id=%s", req->id);
            resolve_session(req);
        } else if (!allowed) {
            rate_limit_reply(req, "requests", "from this address", cfg.rate_limiter_points,
                             cfg.rate_limiter_duration, retry_after);
        } else {
            resolve_session(req);
        }
    }
    http_req_unref(req);
}

static void guard(http_req_t *req, http_req_cb next)
{
    guard_state_t *g = arena_calloc(&req->arena, sizeof(*g));
    g->next = next;
    req->data = g;
    if (!csrf_ok(req)) {
        http_reply_error(req, 403, "FORBIDDEN", "Cross-site request from an untrusted origin");
        return;
    }
    if (cfg.rate_limiter_enabled && !(req->route->flags & ROUTE_NO_RATE_LIMIT)) {
        char key[96];
        snprintf(key, sizeof(key), "rl:g:%s", req->client_ip);
        http_req_ref(req);
        ratelimit_hit(key, NULL, cfg.rate_limiter_points, cfg.rate_limiter_duration,
                      after_rate_limit, req);
        return;
    }
    resolve_session(req);
}

static const char *dup_col(http_req_t *req, const ctx_row_t *r, int col)
{
    const char *v = r->v[col];
    return v ? arena_strndup(&req->arena, v, (size_t)r->len[col]) : NULL;
}

static caller_t *caller_from_row(http_req_t *req, const ctx_row_t *r)
{
    caller_t *c = arena_calloc(&req->arena, sizeof(*c));
    c->session_id = dup_col(req, r, CONTEXT_CALLER_SESSION_ID);
    c->session_expires_at = dup_col(req, r, CONTEXT_CALLER_SESSION_EXPIRES_AT);
    c->user_id = dup_col(req, r, CONTEXT_CALLER_USER_ID);
    c->email = dup_col(req, r, CONTEXT_CALLER_EMAIL);
    c->first_name = dup_col(req, r, CONTEXT_CALLER_FIRST_NAME);
    c->last_name = dup_col(req, r, CONTEXT_CALLER_LAST_NAME);
    const char *verified = r->v[CONTEXT_CALLER_EMAIL_VERIFIED];
    c->email_verified = verified && verified[0] == 't';
    c->status = dup_col(req, r, CONTEXT_CALLER_STATUS);
    c->created_at = dup_col(req, r, CONTEXT_CALLER_CREATED_AT);
    const char *gr = r->v[CONTEXT_CALLER_GLOBAL_ROLE];
    c->global_role = gr ? role_parse(gr) : ROLE_NONE;
    if (!role_is_global(c->global_role)) c->global_role = ROLE_NONE;
    c->preferred_language = dup_col(req, r, CONTEXT_CALLER_PREFERRED_LANGUAGE);
    c->current_org_id = dup_col(req, r, CONTEXT_CALLER_CURRENT_ORGANIZATION_ID);
    c->phone = dup_col(req, r, CONTEXT_CALLER_PHONE);
    c->birth_date = dup_col(req, r, CONTEXT_CALLER_BIRTH_DATE);
    c->country_code = dup_col(req, r, CONTEXT_CALLER_COUNTRY_CODE);
    c->timezone = dup_col(req, r, CONTEXT_CALLER_TIMEZONE);
    c->avatar_url = dup_col(req, r, CONTEXT_CALLER_AVATAR_URL);
    c->pending_invites = r->v[CONTEXT_CALLER_PENDING_INVITES]
                             ? (int)strtol(r->v[CONTEXT_CALLER_PENDING_INVITES], NULL, 10)
                             : 0;
    if (c->first_name && c->last_name) {
        size_t fl = (size_t)r->len[CONTEXT_CALLER_FIRST_NAME],
               ll = (size_t)r->len[CONTEXT_CALLER_LAST_NAME];
        char *name = arena_alloc(&req->arena, fl + ll + 2);
        memcpy(name, c->first_name, fl);
        name[fl] = ' ';
        memcpy(name + fl + 1, c->last_name, ll + 1);
        c->display_name = name;
    } else
        c->display_name = c->first_name ? c->first_name : (c->last_name ? c->last_name : "");
    return c;
}

_Static_assert(AUTH_PUBLIC == (int)PERM_AUTH_PUBLIC && AUTH_OPTIONAL == (int)PERM_AUTH_OPTIONAL &&
                   AUTH_SESSION == (int)PERM_AUTH_SESSION && AUTH_ORG == (int)PERM_AUTH_ORG,
               "route auth levels are the rules' auth levels");

static void on_caller_row(http_req_t *req, const ctx_row_t *r);
static void two_factor_policy_then(http_req_t *req, bool enabled, bool org_requires);

static void on_caller(http_req_t *req, db_result_t *r)
{
    guard_state_t *g = req->data;
    const route_t *route = req->route;
    if (!db_ok_or_reply(req, r)) return;
    bool optional = route->auth == AUTH_OPTIONAL || route->auth == AUTH_PUBLIC;
    if (db_nrows(r) == 0) {
        if (optional) {
            finish_guard(req);
            return;
        }
        http_reply_error(req, 401, "UNAUTHENTICATED", "Authentication required");
        return;
    }
    ctx_row_t row;
    for (int i = 0; i < CONTEXT_CALLER_NCOLS; i++) {
        row.v[i] = db_get(r, 0, i);
        row.len[i] = (int)db_getlen(r, 0, i);
    }
    ctx_cache_put(g->hash, g->org_header, g->cache_gen, &row);
    on_caller_row(req, &row);
}

/* Decides on the caller's row, fresh from the database or from the cache. */
static void on_caller_row(http_req_t *req, const ctx_row_t *r)
{
    guard_state_t *g = req->data;
    const route_t *route = req->route;
    bool optional = route->auth == AUTH_OPTIONAL || route->auth == AUTH_PUBLIC;
    caller_t *c = caller_from_row(req, r);
    const char *org_id = r->v[CONTEXT_CALLER_ORG_ID];
    const char *member_role = r->v[CONTEXT_CALLER_MEMBER_ROLE];
    bool global = c->global_role != ROLE_NONE;
    perm_guard_facts_t f = {
        .auth = (perm_auth_t)route->auth,
        .min_role = (role_t)route->min_role,
        .gate_exempt = (route->flags & ROUTE_GATE_EXEMPT) != 0,
        .session = true,
        .user_active = strcmp(c->status, "active") == 0,
        .org_header = g->org_header != NULL,
        .org_found = org_id != NULL,
        .member = member_role != NULL,
        .pending_invites = c->pending_invites,
    };
    /* An optional route serves an inactive account as no session at all. */
    if (optional && !f.user_active) {
        finish_guard(req);
        return;
    }
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_replied(req, perm_guard_identity(&a, &f))) return;
    c->token = http_req_cookie(req, SESSION_COOKIE);
    /* The active organization: the header's, else the profile's current one, where the caller
     * may act (an optional route without such an organization goes on without one). */
    if (org_id && (global || member_role)) c->org_id = dup_col(req, r, CONTEXT_CALLER_ORG_ID);
    c->org_role = member_role && c->org_id ? role_parse(member_role) : ROLE_NONE;
    c->role = global ? c->global_role : c->org_role;
    req->caller = (struct caller *)c;

    /* Due once less than six of the seven days are left (the cached row's flag may be old). */
    long long expires_ms = r->v[CONTEXT_CALLER_SESSION_EXPIRES_MS]
                               ? strtoll(r->v[CONTEXT_CALLER_SESSION_EXPIRES_MS], NULL, 10)
                               : 0;
    long long now_ms = wall_ms();
    /* A session at its absolute cap has nothing to gain from a refresh. */
    long long cap_ms = r->v[CONTEXT_CALLER_SESSION_CAP_MS]
                           ? strtoll(r->v[CONTEXT_CALLER_SESSION_CAP_MS], NULL, 10)
                           : 0;
    bool refresh = expires_ms < now_ms + (long long)(SESSION_TTL_SECONDS - 24 * 3600) * 1000 &&
                   expires_ms < cap_ms;
    if (refresh && c->token && refresh_due(c->session_id)) {
        const char *params[] = {c->session_id, cfg.session_absolute_text};
        db_query(SQL_CONTEXT_REFRESH, 2, params, on_refreshed, xstrdup(c->session_id));
        cookie_set_session(req, c->token);
    }
    presence_touch(c->user_id);

    a = perm_actor(c);
    if (!perm_allowed_or_replied(req, perm_guard_route(&a, &f))) return;
    const char *tf = r->v[CONTEXT_CALLER_TWO_FACTOR_ENABLED];
    const char *req_tf = r->v[CONTEXT_CALLER_ORG_REQUIRES_TWO_FACTOR];
    two_factor_policy_then(req, tf && tf[0] == 't', req_tf && req_tf[0] == 't');
}

/* ---- the organization's two-factor policy ---- */

static void reply_two_factor_required(http_req_t *req)
{
    http_reply_error(req, 403, "TWO_FACTOR_REQUIRED",
                     "This organization requires two-factor sign-in of its OrganizationAdmins and "
                     "Managers: turn it on with POST /api/auth/two-factor/enable");
}

static void on_org_policy(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *v = db_nrows(r) == 1 ? db_get(r, 0, CONTEXT_ORG_POLICY_REQUIRED) : NULL;
    if (v && v[0] == 't') {
        reply_two_factor_required(req);
        return;
    }
    finish_guard(req);
}

/* requireTwoFactorForAdmins: an OrganizationAdmin or Manager of the organization a route acts
 * in, without two-factor on, gets 403 TWO_FACTOR_REQUIRED. The organization is the path's on
 * /api/organizations/:id/... (read here, uncached), else the context's (AUTH_ORG, and
 * ORG_OPTIONAL routes with one), whose policy and two-factor state are columns of the cached
 * caller row: the organization PATCH invalidates 'o', two-factor changes invalidate 'u'. The
 * auth and two-factor paths act in no organization, so they stay open. */
static void two_factor_policy_then(http_req_t *req, bool enabled, bool org_requires)
{
    caller_t *c = context_caller(req);
    const route_t *route = req->route;
    static const char org_path[] = "/api/organizations/:id";
    if (!enabled && strncmp(route->pattern, org_path, sizeof org_path - 1) == 0 &&
        req->nparams > 0 && ids_is_uuid(http_req_param(req, 0))) {
        const char *params[] = {http_req_param(req, 0), c->user_id};
        db_req_query(req, SQL_CONTEXT_ORG_POLICY, 2, params, on_org_policy);
        return;
    }
    bool in_org = c->org_id && (route->auth == AUTH_ORG || (route->flags & ROUTE_ORG_OPTIONAL));
    if (!enabled && in_org && org_requires &&
        (c->org_role == ROLE_ORG_ADMIN || c->org_role == ROLE_MANAGER)) {
        reply_two_factor_required(req);
        return;
    }
    finish_guard(req);
}

static void resolve_session(http_req_t *req)
{
    guard_state_t *g = req->data;
    const route_t *route = req->route;
    if (route->auth == AUTH_PUBLIC) {
        finish_guard(req);
        return;
    }
    bool optional = route->auth == AUTH_OPTIONAL;
    const char *token = http_req_cookie(req, SESSION_COOKIE);
    if (!token || !token_is_wellformed(token)) {
        if (optional)
            finish_guard(req);
        else
            http_reply_error(req, 401, "UNAUTHENTICATED", "Authentication required");
        return;
    }
    const char *org = http_req_header(req, "X-Organization-Id");
    if (org && !*org) org = NULL;
    if (org && !ids_is_uuid(org)) {
        if (optional) {
            org = NULL;
        } else {
            reply_field_invalid(req, "X-Organization-Id", "X-Organization-Id must be a UUID");
            return;
        }
    }
    g->org_header = org;
    token_hash(token, g->hash);
    ctx_row_t row;
    if (ctx_cache_get(g->hash, org, &row)) {
        on_caller_row(req, &row);
        return;
    }
    g->cache_gen = ctx_cache_gen();
    /* $3: invites of an unverified email do not gate it when they cannot be answered. */
    const char *params[] = {g->hash, org, cfg.invite_require_verified_email ? "true" : "false",
                            cfg.session_absolute_text};
    db_req_query(req, SQL_CONTEXT_CALLER, 4, params, on_caller);
}

void context_init(uv_loop_t *loop)
{
    ctx_cache_init(loop);
    router_set_guard(guard);
}
