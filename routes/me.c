/*
 * The caller's organization context under /api/me: the active memberships, switching the
 * current organization (stored in users.current_organization_id, which the guard falls back to
 * when a request carries no X-Organization-Id), and the active organization's details.
 *
 * The GET routes stay usable while invites are pending (the invite gate), so a client can show
 * where the user already belongs while it asks them to answer their invitations.
 */
#include <string.h>

#include "core/json.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_me.h"
#include "domain/ids.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/routes.h"

static void my_organizations(http_req_t *req);
static void switch_organization(http_req_t *req);
static void current_organization(http_req_t *req);

static void on_my_orgs(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    reply_db_json(req, 200, r);
}

static void my_organizations(http_req_t *req)
{
    const char *params[] = {context_caller(req)->user_id};
    db_req_query(req, SQL_ME_ORGANIZATIONS, 1, params, on_my_orgs);
}

static void on_switched(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    const char *exists = db_get(r, 0, ME_SWITCH_ORG_EXISTS);
    const char *member_role = db_get(r, 0, ME_SWITCH_MEMBER_ROLE);
    const char *current = db_get(r, 0, ME_SWITCH_CURRENT_ORGANIZATION_ID);
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_replied(req,
                                 perm_switch_org(&a, exists && exists[0] == 't', current != NULL)))
        return;
    role_t role = c->global_role != ROLE_NONE ? c->global_role : role_parse(member_role);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"currentOrganizationId\":");
    buf_json_str(&b, current);
    buf_puts(&b, ",\"role\":");
    buf_json_str(&b, role_name(role));
    buf_puts(&b, "}}");
    ctx_invalidate_then_reply(req, 'u', c->user_id, 200, b.data, b.len);
    buf_free(&b);
}

static void switch_organization(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    const char *org = field_str(req, body, "organizationId", &v, true, 1, 64, true);
    if (org && !ids_is_uuid(org)) verr_add(&v, "organizationId", "must be a UUID");
    if (verr_reply(req, &v)) return;
    caller_t *c = context_caller(req);
    const char *params[] = {c->user_id, lower_ascii(req, org),
                            c->global_role != ROLE_NONE ? "t" : "f"};
    db_req_query(req, SQL_ME_SWITCH, 3, params, on_switched);
}

static void on_current_org(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_json(req, 200, "{\"data\":null}");
        return;
    }
    reply_db_json(req, 200, r);
}

static void current_organization(http_req_t *req)
{
    caller_t *c = context_caller(req);
    if (!c->org_id) {
        http_reply_json(req, 200, "{\"data\":null}");
        return;
    }
    const char *params[] = {c->org_id, c->org_role != ROLE_NONE ? role_name(c->org_role) : NULL};
    db_req_query(req, SQL_ME_CURRENT_ORG, 2, params, on_current_org);
}

static const route_t me_routes[] = {
    {HTTP_M_GET, "/api/me/organizations", my_organizations, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/me/switch-organization", switch_organization, AUTH_SESSION, ROLE_NONE, 0,
     0},
    {HTTP_M_GET, "/api/me/current-organization", current_organization, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
};

void routes_me_register(void)
{
    router_add(me_routes, sizeof(me_routes) / sizeof(me_routes[0]));
}
