/*
 * Organizations and their members under /api/organizations (the invite endpoints live in
 * routes/invites.c).
 *
 * Every handler runs one statement (the member list: a one-row version check first when it holds
 * the page in its cache, see member_pages below). Routes on one organization (:id) run with
 * AUTH_SESSION and check the caller against :id inside that statement (the ACC_CTE below): a caller
 * with a global role may act on any existing organization (404 when it does not exist); anyone else
 * needs an active membership in :id with a role the route admits (403 otherwise, whether or not the
 * organization exists, so the answer reveals nothing about other organizations). Writes are
 * gated by the same check in the same statement, so a membership change that races with the
 * request can never let a write through.
 *
 * Member visibility (GET .../users): PlatformAdmin, Owner and OrganizationAdmin see every member;
 * a Manager every member except OrganizationAdmins; a Coach only active Teacher memberships.
 * The member list is the hot read (docs/performance.md): its total comes from trigger-kept
 * counts, its rows are rendered to JSON here, and rendered pages are cached per worker.
 *
 * Disabling a membership publishes {"type":"membership-disabled","organizationId":...} on the
 * Redis channel "user:<userId>:control" after the statement committed, so the user's open event
 * streams can close; the next request already fails (the guard requires an active membership).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "core/router.h"
#include "db/db.h"
#include "db/queries.h"
#include "db/q_organizations.h"
#include "domain/ids.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/urlcheck.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/page_cache.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/redis.h"

#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX 1000
#define SEARCH_MAX_CP 200
#define DESCRIPTION_MAX_CP 10000
#define URL_MAX_CP 2048

/* Roles (besides global roles) admitted by the ACC_CTE check, as a text[] literal. */
#define ROLES_ADMIN "{OrganizationAdmin}"
#define ROLES_COACH "{OrganizationAdmin,Manager,Coach}"

static void list_orgs(http_req_t *req);
static void create_org(http_req_t *req);
static void get_org(http_req_t *req);
static void patch_org(http_req_t *req);
static void delete_org(http_req_t *req);
static void list_members(http_req_t *req);
static void add_member(http_req_t *req);
static void patch_member(http_req_t *req);
static void delete_member(http_req_t *req);

/* SQL: db/queries/organizations.sql. Every statement on one organization answers the access
 * check's org_exists and my_role as columns 1 and 2 (read by org_access_or_replied). */
_Static_assert(ORG_GET_ORG_EXISTS == 1 && ORG_GET_MY_ROLE == 2 && MEMBER_LIST_ORG_EXISTS == 1 &&
                   MEMBER_LIST_MY_ROLE == 2 && MEMBER_CHECK_ORG_EXISTS == 1 &&
                   MEMBER_CHECK_MY_ROLE == 2 && MEMBER_ADD_ORG_EXISTS == 1 &&
                   MEMBER_ADD_MY_ROLE == 2 && MEMBER_UPDATE_ORG_EXISTS == 1 &&
                   MEMBER_UPDATE_MY_ROLE == 2 && ORG_PATCH_MY_ROLE == 2 &&
                   ORG_ARCHIVE_MY_ROLE == 2 && (int)ORG_PATCH_JSON == (int)ORG_GET_JSON &&
                   (int)ORG_ARCHIVE_JSON == (int)ORG_GET_JSON,
               "access columns of db/queries/organizations.sql");

/* ---- helpers ---- */

static const char *const ORG_STATUSES[] = {"active", "inactive", "suspended", "archived", NULL};
static const char *const USER_STATUSES[] = {"active", "inactive", "suspended", "archived", NULL};
static const char *const MEMBER_STATUSES[] = {"active", "disabled", NULL};
static const char *const ORG_ROLES[] = {"OrganizationAdmin", "Manager", "Coach", "Teacher", NULL};

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return true;
    return false;
}

/* An enumerated query parameter; absent or empty: NULL. */
static const char *query_enum(http_req_t *req, verr_t *v, const char *key,
                              const char *const *allowed, const char *message)
{
    const char *s = http_req_query(req, key);
    if (!s || !*s) return NULL;
    if (!in_list(s, allowed)) {
        verr_add(v, key, message);
        return NULL;
    }
    return s;
}

/* `search` as a LIKE pattern: trimmed, wildcards escaped, wrapped in %; absent or blank: NULL. */
static const char *query_search(http_req_t *req, verr_t *v)
{
    const char *s = http_req_query(req, "search");
    if (!s) return NULL;
    size_t n = strlen(s), off, len;
    if (!text_utf8_valid(s, n) || text_has_control(s, n)) {
        verr_add(v, "search", "must be valid text");
        return NULL;
    }
    text_trim(s, n, &off, &len);
    if (len == 0) return NULL;
    if (text_cp_count(s + off, len) > SEARCH_MAX_CP) {
        verr_add(v, "search", "must be at most 200 characters");
        return NULL;
    }
    char *out = arena_alloc(&req->arena, len * 2 + 3), *o = out;
    *o++ = '%';
    for (size_t i = off; i < off + len; i++) {
        if (s[i] == '%' || s[i] == '_' || s[i] == '\\') *o++ = '\\';
        *o++ = s[i];
    }
    *o++ = '%';
    *o = '\0';
    return out;
}

/* A string field that must be one of `allowed` when present (JSON null refused). */
static const char *field_enum(http_req_t *req, json_t *body, const char *key, verr_t *v,
                              bool required, const char *const *allowed, const char *message)
{
    json_t *j = json_object_get(body, key);
    if (!j && !required) return NULL;
    if (!j || !json_is_string(j) || !in_list(json_string_value(j), allowed)) {
        verr_add(v, key, j ? message : "is required");
        return NULL;
    }
    return arena_strdup(&req->arena, json_string_value(j));
}

/* A boolean field: "t" / "f", or NULL when absent. */
static const char *field_bool(json_t *body, const char *key, verr_t *v)
{
    json_t *j = json_object_get(body, key);
    if (!j) return NULL;
    if (!json_is_boolean(j)) {
        verr_add(v, key, "must be a boolean");
        return NULL;
    }
    return json_is_true(j) ? "t" : "f";
}

/* An optional nullable text field: *present tells whether the key was sent (null clears). */
static const char *field_nullable(http_req_t *req, json_t *body, const char *key, verr_t *v,
                                  size_t max_cp, bool *present)
{
    *present = json_object_get(body, key) != NULL;
    return field_str(req, body, key, v, false, 0, max_cp, true);
}

/* logoUrl: an absolute http(s) URL with a host; null or "" clear it. */
static const char *field_logo(http_req_t *req, json_t *body, verr_t *v, bool *present)
{
    int before = v->n;
    const char *s = field_nullable(req, body, "logoUrl", v, URL_MAX_CP, present);
    if (!s || v->n != before) return NULL;
    if (!*s) return NULL;
    char origin[URLCHECK_ORIGIN_MAX];
    if (urlcheck_origin(s, origin, sizeof(origin)) != 0) {
        verr_add(v, "logoUrl", "must be a valid http or https URL");
        return NULL;
    }
    return s;
}

/* settings: a JSON object, serialized for a jsonb parameter; absent: NULL. */
static const char *field_settings(http_req_t *req, json_t *body, verr_t *v)
{
    json_t *j = json_object_get(body, "settings");
    if (!j) return NULL;
    if (json_is_null(j)) return "{}";
    if (!json_is_object(j)) {
        verr_add(v, "settings", "must be an object");
        return NULL;
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        verr_add(v, "settings", "must be an object");
        return NULL;
    }
    const char *out = arena_strdup(&req->arena, s);
    free(s);
    return out;
}

/* The ACC_CTE parameters $1..$4. */
static void acc_params(http_req_t *req, const char **p, const char *org_id, const char *roles)
{
    caller_t *c = context_caller(req);
    p[0] = org_id;
    p[1] = c->user_id;
    p[2] = c->global_role != ROLE_NONE ? "t" : "f";
    p[3] = roles;
}

/* Every statement with the ACC_CTE check has org_exists and my_role at the column numbers of
 * org_get's, which org_access_or_replied reads with org_get's enum. */
#define SAME_ACCESS_COLS(S)                                                                        \
    DB_SAME_COLUMN(S, ORG_GET, ORG_EXISTS);                                                        \
    DB_SAME_COLUMN(S, ORG_GET, MY_ROLE)
SAME_ACCESS_COLS(ORG_PATCH);
SAME_ACCESS_COLS(ORG_ARCHIVE);
SAME_ACCESS_COLS(MEMBER_LIST);
SAME_ACCESS_COLS(MEMBER_CHECK);
SAME_ACCESS_COLS(MEMBER_ADD);
SAME_ACCESS_COLS(MEMBER_UPDATE);

/*
 * Reads org_exists and my_role (the caller's active role there) of an ACC_CTE statement and
 * asks perm_org_access(). Replies 404 / 403 and returns false when the caller may not act;
 * otherwise *as is the caller's role there (the global role for global callers).
 */
static bool org_access_or_replied(http_req_t *req, const db_result_t *r, role_t need, role_t *as)
{
    perm_actor_t a = perm_actor(context_caller(req));
    const char *exists = db_get(r, 0, ORG_GET_ORG_EXISTS);
    return perm_allowed_or_replied(req, perm_org_access(&a, exists && exists[0] == 't',
                                                        role_parse(db_get(r, 0, ORG_GET_MY_ROLE)),
                                                        need, as));
}

/* ---- organizations ---- */

static void on_org_list(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    /* The caller is an OrganizationAdmin somewhere (or global: the statement lists all). */
    const char *admin = db_get(r, 0, ORG_LIST_ALLOWED);
    perm_actor_t a = perm_actor(context_caller(req));
    if (!perm_allowed_or_replied(req, perm_org_list(&a, admin && admin[0] == 't'))) return;
    reply_db_json(req, 200, r);
}

static void list_orgs(http_req_t *req)
{
    caller_t *c = context_caller(req);
    verr_t v = {0};
    const char *limit, *offset;
    query_paging(req, &v, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &limit, &offset);
    const char *search = query_search(req, &v);
    const char *status = query_enum(req, &v, "status", ORG_STATUSES,
                                    "must be active, inactive, suspended or archived");
    if (verr_reply(req, &v)) return;
    const char *params[] = {
        c->global_role != ROLE_NONE ? "t" : "f", c->user_id, search, status, limit, offset};
    db_req_query(req, SQL_ORG_LIST, 6, params, on_org_list);
}

static void on_org_created(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    reply_db_json(req, 201, r);
}

static void create_org(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    bool has_desc, has_logo;
    const char *name = field_str(req, body, "name", &v, true, 1, 255, true);
    const char *desc = field_nullable(req, body, "description", &v, DESCRIPTION_MAX_CP, &has_desc);
    const char *logo = field_logo(req, body, &v, &has_logo);
    const char *status = field_enum(req, body, "status", &v, false, ORG_STATUSES,
                                    "must be active, inactive, suspended or archived");
    const char *settings = field_settings(req, body, &v);
    const char *tz = field_timezone(req, body, "defaultTimezone", &v, true);
    if (verr_reply(req, &v)) return;
    char id[IDS_UUID_LEN + 1];
    new_uuid(id);
    const char *params[] = {id,
                            name,
                            desc,
                            logo,
                            status ? status : "active",
                            settings ? settings : "{}",
                            tz ? tz : "UTC"};
    db_req_query(req, SQL_ORG_CREATE, 7, params, on_org_created);
}

/* Shared by GET, PATCH and DELETE on one organization: access, then the organization. A
 * change (changed) replies once every caller context naming the organization is dropped on
 * every worker (its status is in the context). */
static void org_one_reply(http_req_t *req, db_result_t *r, bool changed)
{
    if (!db_ok_or_reply(req, r)) return;
    role_t as;
    if (!org_access_or_replied(req, r, ROLE_ORG_ADMIN, &as)) return;
    if (db_isnull(r, 0, ORG_GET_JSON)) {
        http_reply_error(req, 404, "NOT_FOUND", "Organization not found");
        return;
    }
    if (changed)
        ctx_invalidate_then_reply(req, 'o', lower_ascii(req, http_req_param(req, 0)), 200,
                                  db_get(r, 0, ORG_GET_JSON), db_getlen(r, 0, ORG_GET_JSON));
    else
        reply_db_json(req, 200, r);
}

static void on_org_one(http_req_t *req, db_result_t *r)
{
    org_one_reply(req, r, false);
}

static void get_org(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[4];
    acc_params(req, params, id, ROLES_ADMIN);
    db_req_query(req, SQL_ORG_GET, 4, params, on_org_one);
}

/* An organization-level change (status, archive). */
static void on_org_changed(http_req_t *req, db_result_t *r)
{
    org_one_reply(req, r, true);
}

static void patch_org(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    bool has_desc, has_logo;
    const char *name =
        json_object_get(body, "name") ? field_str(req, body, "name", &v, true, 1, 255, true) : NULL;
    const char *desc = field_nullable(req, body, "description", &v, DESCRIPTION_MAX_CP, &has_desc);
    const char *logo = field_logo(req, body, &v, &has_logo);
    const char *status = field_enum(req, body, "status", &v, false, ORG_STATUSES,
                                    "must be active, inactive, suspended or archived");
    const char *settings = field_settings(req, body, &v);
    const char *tz = field_timezone(req, body, "defaultTimezone", &v, true);
    /* The two-factor policy for its OrganizationAdmins and Managers (routes/context.c). */
    json_t *tf = json_object_get(body, "requireTwoFactorForAdmins");
    if (tf && !json_is_boolean(tf)) verr_add(&v, "requireTwoFactorForAdmins", "must be a boolean");
    if (verr_reply(req, &v)) return;
    const char *params[13];
    acc_params(req, params, id, ROLES_ADMIN);
    params[4] = name;
    params[5] = has_desc ? "t" : "f";
    params[6] = desc && *desc ? desc : NULL;
    params[7] = has_logo ? "t" : "f";
    params[8] = logo;
    params[9] = status;
    params[10] = settings;
    params[11] = tz;
    params[12] = tf ? (json_is_true(tf) ? "t" : "f") : NULL;
    db_req_query(req, SQL_ORG_PATCH, 13, params, on_org_changed);
}

static void delete_org(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[4];
    acc_params(req, params, id, "{}");
    db_req_query(req, SQL_ORG_ARCHIVE, 4, params, on_org_changed);
}

/* ---- members ---- */

/* Rendered member lists, per worker process (routes/page_cache.h): a list is cached under its
 * visibility class, organization and query with the organization's member-list version. */
static page_cache_t member_pages;

typedef struct member_list {
    const char *params[10];
    const char *sql;
    const char *key; /* cache key, or NULL when the visibility class is not known up front */
} member_list_t;

/* The visibility class of a caller with role r in the organization ("all", "Manager",
 * "Coach"), or NULL when r may not list members. */
static const char *member_visibility(role_t r)
{
    switch (perm_member_view(r)) {
    case PERM_MEMBERS_ALL:
        return "all";
    case PERM_MEMBERS_MANAGER:
        return "Manager";
    case PERM_MEMBERS_COACH:
        return "Coach";
    case PERM_MEMBERS_NONE:
        break;
    }
    return NULL;
}

/* True when the cache key was built for the visibility class of role r (the caller's role may
 * have changed since the guard ran). */
static bool key_matches_role(const char *key, role_t r)
{
    const char *vis = member_visibility(r);
    size_t n = vis ? strlen(vis) : 0;
    return key && vis && strncmp(key, vis, n) == 0 && key[n] == '\x1f';
}

static void on_member_list(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    role_t role;
    if (!org_access_or_replied(req, r, ROLE_COACH, &role)) return;
    member_list_t *st = req->data;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, MEMBER_LIST_USER_ID)) continue;
        char joined[TIMEFMT_LEN + 1];
        timefmt_format(db_getll(r, i, MEMBER_LIST_JOINED_MS, 0), joined);
        const char *primary = db_get(r, i, MEMBER_LIST_IS_PRIMARY);
        json_member(&b, items++ ? ",{\"id\":" : "{\"id\":", r, i, MEMBER_LIST_USER_ID);
        json_member(&b, ",\"email\":", r, i, MEMBER_LIST_EMAIL);
        json_member(&b, ",\"status\":", r, i, MEMBER_LIST_STATUS);
        json_member(&b, ",\"firstName\":", r, i, MEMBER_LIST_FIRST_NAME);
        json_member(&b, ",\"lastName\":", r, i, MEMBER_LIST_LAST_NAME);
        json_member(&b, ",\"avatarUrl\":", r, i, MEMBER_LIST_AVATAR_URL);
        json_member(&b, ",\"roleInOrganization\":", r, i, MEMBER_LIST_ROLE_IN_ORGANIZATION);
        buf_printf(&b, ",\"isPrimary\":%s", primary && primary[0] == 't' ? "true" : "false");
        json_member(&b, ",\"membershipStatus\":", r, i, MEMBER_LIST_MEMBERSHIP_STATUS);
        buf_printf(&b, ",\"joinedAt\":\"%s\"}", joined);
    }
    buf_printf(&b, "],\"meta\":{\"total_count\":%lld}}", db_getll(r, 0, MEMBER_LIST_TOTAL, 0));
    if (key_matches_role(st->key, role))
        page_cache_put(&member_pages, st->key, page_row_version(r, MEMBER_LIST_VERSION), b.data,
                       b.len);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void on_member_check(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    role_t role;
    if (!org_access_or_replied(req, r, ROLE_COACH, &role)) return;
    member_list_t *st = req->data;
    if (key_matches_role(st->key, role) &&
        page_cache_reply(&member_pages, st->key, page_row_version(r, MEMBER_CHECK_VERSION), req))
        return;
    db_req_query(req, st->sql, 10, st->params, on_member_list);
}

static void list_members(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    verr_t v = {0};
    const char *limit, *offset;
    query_paging(req, &v, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &limit, &offset);
    const char *search = query_search(req, &v);
    const char *role = query_enum(req, &v, "role", ORG_ROLES,
                                  "must be OrganizationAdmin, Manager, Coach or Teacher");
    const char *status = query_enum(req, &v, "status", USER_STATUSES,
                                    "must be active, inactive, suspended or archived");
    const char *mstatus =
        query_enum(req, &v, "membershipStatus", MEMBER_STATUSES, "must be active or disabled");
    if (verr_reply(req, &v)) return;
    member_list_t *st = arena_calloc(&req->arena, sizeof(*st));
    req->data = st;
    acc_params(req, st->params, id, ROLES_COACH);
    st->params[4] = role;
    st->params[5] = status;
    st->params[6] = mstatus;
    st->params[7] = search;
    st->params[8] = limit;
    st->params[9] = offset;
    /* Three characters make a trigram (the pattern is the term wrapped in two '%'). */
    st->sql = SQL_MEMBER_LIST;
    if (search)
        st->sql = text_cp_count(search + 1, strlen(search) - 2) >= 3 ? SQL_MEMBER_SEARCH
                                                                     : SQL_MEMBER_SEARCH_SHORT;
    else if (status)
        st->sql = SQL_MEMBER_LIST_STATUS;

    /* The visibility class is known up front for global callers and in the active organization
     * (whose role the guard just read); other callers always read afresh. */
    caller_t *c = context_caller(req);
    const char *vis = NULL;
    if (c->global_role != ROLE_NONE)
        vis = member_visibility(c->global_role);
    else if (c->org_id && strcmp(c->org_id, id) == 0)
        vis = member_visibility(c->org_role);
    if (vis) {
        /* Fields are separated by 0x1f, which no validated value contains. */
        st->key = arena_printf(&req->arena, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", vis, id,
                               role ? role : "", status ? status : "", mstatus ? mstatus : "",
                               search ? search : "", limit, offset);
        if (page_cache_has(&member_pages, st->key)) {
            db_req_query(req, SQL_MEMBER_CHECK, 4, st->params, on_member_check);
            return;
        }
    }
    db_req_query(req, st->sql, 10, st->params, on_member_list);
}

/* After commit: the user's open user streams start carrying this organization's events. */
static void membership_enabled(http_req_t *req, const char *user_id)
{
    char msg[160];
    snprintf(msg, sizeof(msg), "{\"type\":\"membership-enabled\",\"organizationId\":\"%s\"}",
             lower_ascii(req, http_req_param(req, 0)));
    events_control(user_id, msg);
}

static void on_member_added(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    role_t as;
    if (!org_access_or_replied(req, r, ROLE_ORG_ADMIN, &as)) return;
    const char *user_exists = db_get(r, 0, MEMBER_ADD_USER_EXISTS);
    if (!user_exists || user_exists[0] != 't') {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    if (db_isnull(r, 0, MEMBER_ADD_JSON)) {
        http_reply_error(req, 409, "CONFLICT", "The user is already a member of this organization");
        return;
    }
    membership_enabled(req, req->data);
    /* Membership, maybe the current organization. */
    ctx_invalidate_then_reply(req, 'u', req->data, 201, db_get(r, 0, MEMBER_ADD_JSON),
                              db_getlen(r, 0, MEMBER_ADD_JSON));
}

static void add_member(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    const char *user = field_str(req, body, "userId", &v, true, 1, 64, true);
    if (user && !ids_is_cuid(user)) verr_add(&v, "userId", "must be a user id (CUID)");
    const char *role = field_enum(req, body, "roleInOrganization", &v, true, ORG_ROLES,
                                  "must be OrganizationAdmin, Manager, Coach or Teacher");
    const char *primary = field_bool(body, "isPrimary", &v);
    if (verr_reply(req, &v)) return;
    const char *params[7];
    acc_params(req, params, id, ROLES_ADMIN);
    params[4] = user;
    params[5] = role;
    params[6] = primary ? primary : "f";
    req->data = (void *)user;
    db_req_query(req, SQL_MEMBER_ADD, 7, params, on_member_added);
}

/* PATCH and DELETE: reply, then tell the user's streams when the membership went disabled. */
static void on_member_updated(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    role_t as;
    if (!org_access_or_replied(req, r, ROLE_ORG_ADMIN, &as)) return;
    if (db_isnull(r, 0, MEMBER_UPDATE_JSON)) {
        http_reply_error(req, 404, "NOT_FOUND", "Membership not found");
        return;
    }
    const char *before = db_get(r, 0, MEMBER_UPDATE_STATUS_BEFORE);
    const char *after = db_get(r, 0, MEMBER_UPDATE_STATUS_AFTER);
    const char *org_id = http_req_param(req, 0);
    const char *user_id = http_req_param(req, 1);
    /* Role, status, maybe the current organization. */
    ctx_invalidate_then_reply(req, 'u', user_id, 200, db_get(r, 0, MEMBER_UPDATE_JSON),
                              db_getlen(r, 0, MEMBER_UPDATE_JSON));
    if (before && strcmp(before, "active") == 0 && after && strcmp(after, "disabled") == 0) {
        char channel[96];
        char msg[160];
        snprintf(channel, sizeof(channel), "user:%s:control", user_id);
        int n = snprintf(msg, sizeof(msg),
                         "{\"type\":\"membership-disabled\",\"organizationId\":\"%s\"}",
                         lower_ascii(req, org_id));
        redis_publish(channel, msg, (size_t)n);
    }
    if (before && strcmp(before, "active") != 0 && after && strcmp(after, "active") == 0)
        membership_enabled(req, user_id);
}

static void patch_member(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *user;
    if (!path_user_id_ok_or_reply(req, 1, false, &user)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    const char *role = field_enum(req, body, "roleInOrganization", &v, false, ORG_ROLES,
                                  "must be OrganizationAdmin, Manager, Coach or Teacher");
    const char *primary = field_bool(body, "isPrimary", &v);
    const char *mstatus = field_enum(req, body, "membershipStatus", &v, false, MEMBER_STATUSES,
                                     "must be active or disabled");
    if (verr_reply(req, &v)) return;
    const char *params[8];
    acc_params(req, params, id, ROLES_ADMIN);
    params[4] = user;
    params[5] = role;
    params[6] = primary;
    params[7] = mstatus;
    db_req_query(req, SQL_MEMBER_UPDATE, 8, params, on_member_updated);
}

static void delete_member(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *user;
    if (!path_user_id_ok_or_reply(req, 1, false, &user)) return;
    const char *params[8];
    acc_params(req, params, id, ROLES_ADMIN);
    params[4] = user;
    params[5] = NULL;
    params[6] = NULL;
    params[7] = "disabled";
    db_req_query(req, SQL_MEMBER_UPDATE, 8, params, on_member_updated);
}

/*
 * Min roles: the guard checks only what holds in every organization (POST and DELETE need a
 * global role); the role in :id is checked by the statement itself (ACC_CTE), because the
 * caller's active organization may be another one.
 */
static const route_t organization_routes[] = {
    {HTTP_M_GET, "/api/organizations", list_orgs, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/organizations", create_org, AUTH_SESSION, ROLE_PLATFORM_ADMIN, 0, 0},
    {HTTP_M_GET, "/api/organizations/:id", get_org, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_PATCH, "/api/organizations/:id", patch_org, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_DELETE, "/api/organizations/:id", delete_org, AUTH_SESSION, ROLE_PLATFORM_ADMIN, 0, 0},
    {HTTP_M_GET, "/api/organizations/:id/users", list_members, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_POST, "/api/organizations/:id/users", add_member, AUTH_SESSION, ROLE_NONE, 0, 0},
    {HTTP_M_PATCH, "/api/organizations/:id/users/:userId", patch_member, AUTH_SESSION, ROLE_NONE, 0,
     0},
    {HTTP_M_DELETE, "/api/organizations/:id/users/:userId", delete_member, AUTH_SESSION, ROLE_NONE,
     0, 0},
};

void routes_organizations_register(void)
{
    router_add(organization_routes, sizeof(organization_routes) / sizeof(organization_routes[0]));
}
