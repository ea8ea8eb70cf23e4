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
#include "domain/ids.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/urlcheck.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/page_cache.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/redis.h"

#define LIST_LIMIT_DEFAULT "100"
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

/* clang-format off: SQL text is laid out by hand. */
/* ---- SQL building blocks ---- */

/* The Organization resource of INTERFACE.md for a row alias. */
#define ORG_JSON(o)                                                                                \
    "json_build_object('id', " o ".id, 'name', " o ".name, 'description', " o ".description,"      \
    " 'logoUrl', " o ".logo_url, 'status', " o ".status, 'settings', " o ".settings,"              \
    " 'defaultTimezone', " o ".default_timezone, 'createdAt', iso(" o ".created_at),"              \
    " 'updatedAt', iso(" o ".updated_at))"

/*
 * The caller's access to organization $1: $2 caller id, $3 caller has a global role, $4 the
 * organization roles admitted (text[]). `acc` has one row when the organization exists, with the
 * caller's active role there; `ok` has that row only when the caller may act.
 */
#define ACC_CTE                                                                                    \
    "acc AS (SELECT o.id AS org_id, (SELECT m.role_in_organization"                                \
    "   FROM organization_memberships m WHERE m.organization_id = o.id AND m.user_id = $2"         \
    "   AND m.membership_status = 'active') AS my_role"                                            \
    "   FROM organizations o WHERE o.id = $1::uuid),"                                              \
    " ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[]))"
/* Columns 1 and 2 of every statement that uses ACC_CTE (read by org_access_or_replied). */
#define ACC_COLS " EXISTS (SELECT 1 FROM acc), (SELECT my_role FROM acc)"

/* The membership answer of POST / PATCH / DELETE .../users. */
#define MEMBER_JSON(m, ts_key, ts_col)                                                             \
    "json_build_object('organizationId', " m ".organization_id, 'userId', " m ".user_id,"          \
    " 'roleInOrganization', " m ".role_in_organization, 'isPrimary', " m ".is_primary,"            \
    " 'membershipStatus', " m ".membership_status, '" ts_key "', iso(" m "." ts_col "))"

/* At most one primary membership per user: setting one clears the user's others. */
#define PRIMARY_CTE(src)                                                                           \
    "prim AS (UPDATE organization_memberships pm SET is_primary = false, updated_at = now()"       \
    "   FROM " src " WHERE " src ".is_primary AND pm.user_id = " src ".user_id"                    \
    "   AND pm.organization_id <> " src ".organization_id AND pm.is_primary)"

static const char SQL_ORG_LIST[] =
    "WITH f AS (SELECT o.* FROM organizations o"
    "   WHERE ($1::boolean OR EXISTS (SELECT 1 FROM organization_memberships m"
    "     WHERE m.organization_id = o.id AND m.user_id = $2 AND m.membership_status = 'active'"
    "     AND m.role_in_organization = 'OrganizationAdmin'))"
    "   AND ($3::text IS NULL OR lower(o.name) LIKE lower($3))"
    "   AND ($4::text IS NULL OR o.status = $4))"
    " SELECT json_build_object('data', COALESCE((SELECT json_agg(" ORG_JSON(
        "p") "   ORDER BY p.created_at, p.id) FROM (SELECT * FROM f ORDER BY created_at, id"
             "   LIMIT $5::int OFFSET $6::int) p), '[]'::json),"
             "   'meta', json_build_object('total_count', (SELECT count(*) FROM f))),"
             " $1::boolean OR EXISTS (SELECT 1 FROM organization_memberships m WHERE m.user_id = $2"
             "   AND m.membership_status = 'active' AND m.role_in_organization = "
             "'OrganizationAdmin')";

static const char SQL_ORG_CREATE[] =
    "WITH o AS (INSERT INTO organizations (id, name, description, logo_url, status, settings,"
    "   default_timezone) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7) RETURNING *)"
    " SELECT json_build_object('data', " ORG_JSON("o") ") FROM o";

static const char SQL_ORG_GET[] =
    "WITH " ACC_CTE " SELECT (SELECT json_build_object('data', " ORG_JSON(
        "o") ")"
             "   FROM organizations o JOIN ok ON ok.org_id = o.id)," ACC_COLS;

static const char SQL_ORG_PATCH[] =
    "WITH " ACC_CTE ","
    " u AS (UPDATE organizations o SET name = COALESCE($5, o.name),"
    "   description = CASE WHEN $6::boolean THEN $7 ELSE o.description END,"
    "   logo_url = CASE WHEN $8::boolean THEN $9 ELSE o.logo_url END,"
    "   status = COALESCE($10, o.status), settings = COALESCE($11::jsonb, o.settings),"
    "   default_timezone = COALESCE($12, o.default_timezone), updated_at = now()"
    "   FROM ok WHERE o.id = ok.org_id RETURNING o.*)"
    " SELECT (SELECT json_build_object('data', " ORG_JSON("u") ") FROM u)," ACC_COLS;

static const char SQL_ORG_ARCHIVE[] =
    "WITH " ACC_CTE ","
    " u AS (UPDATE organizations o SET status = 'archived', updated_at = now()"
    "   FROM ok WHERE o.id = ok.org_id RETURNING o.*)"
    " SELECT (SELECT json_build_object('data', " ORG_JSON("u") ") FROM u)," ACC_COLS;

/*
 * Members of $1 visible to the caller (v.v: 'all', 'Manager' or 'Coach' from the caller's role in
 * the organization, computed in SQL from `ok`), filtered by $5 role and $7 membership status:
 * conditions on the membership key alone, so they apply to organization_member_counts as well.
 */
#define MEMBER_KEYS(m)                                                                             \
    " " m ".organization_id = $1::uuid"                                                            \
    " AND (v.v = 'all' OR (v.v = 'Manager' AND " m ".role_in_organization <> 'OrganizationAdmin')" \
    "   OR (v.v = 'Coach' AND " m ".role_in_organization = 'Teacher'"                              \
    "   AND " m ".membership_status = 'active'))"                                                  \
    " AND ($5::text IS NULL OR " m ".role_in_organization = $5)"                                   \
    " AND ($7::text IS NULL OR " m ".membership_status = $7)"

/*
 * The user-side filters, $6 user status and $8 search pattern (LIKE, escaped and wrapped in %).
 * Each case has its own statement, so that no cached plan has to serve another case (the pool
 * keeps statements prepared, and PostgreSQL's generic plans assume an average organization):
 *   none          total_count from the trigger-kept counts;
 *   status only   a key probe into users per membership;
 *   search, 3 or more characters   users first: the trigram indexes of migration 0003 find the
 *                 matching users, then each is probed in the organization's memberships;
 *   shorter search  members first (no trigram to look up): a probe and a match per membership.
 */
#define USERS_NONE " AND $6::text IS NULL AND $8::text IS NULL"
#define USERS_STATUS                                                                               \
    " AND $8::text IS NULL AND EXISTS (SELECT 1 FROM users fu WHERE fu.id = m.user_id"             \
    "   AND fu.status = $6)"
#define USERS_MATCH(u)                                                                             \
    " (lower(" u ".email) LIKE lower($8)"                                                          \
    "   OR lower(user_display_name(" u ".first_name, " u ".last_name)) LIKE lower($8))"            \
    " AND ($6::text IS NULL OR " u ".status = $6)"
#define USERS_SHORT                                                                                \
    " AND EXISTS (SELECT 1 FROM users fu WHERE fu.id = m.user_id AND" USERS_MATCH("fu") ")"
#define COUNT_KEPT                                                                                 \
    "(SELECT COALESCE(sum(m.n), 0)::bigint FROM organization_member_counts m, v"                   \
    " WHERE" MEMBER_KEYS("m") ")"
#define COUNT_ROWS(users)                                                                          \
    "(SELECT count(*) FROM organization_memberships m, v WHERE" MEMBER_KEYS("m") users ")"

/* The organization's member-list version (migration 0003); NULL before its first membership. */
#define MEMBER_VERSION                                                                             \
    "(SELECT version FROM organization_list_versions WHERE organization_id = $1::uuid)"

#define MEMBER_V_CTE                                                                               \
    " v AS (SELECT CASE WHEN $3::boolean OR my_role = 'OrganizationAdmin' THEN 'all'"              \
    "   ELSE my_role END AS v FROM ok)"

/*
 * The member list answers rows, rendered to JSON in C (on_member_list): building 100 JSON
 * objects and ISO timestamps in PostgreSQL costs several times the query itself, and this is
 * the hot read of the area. Columns: 0 total_count, 1-2 the ACC_COLS, then one member per row
 * (3 id .. 12 joinedAt in epoch milliseconds), 13 the member-list version read in the same
 * snapshot; a page without members is one row whose member columns are NULL. `page` yields the
 * page's memberships as m; each user is a key probe (LIMIT 1 keeps the lateral subquery from
 * turning into a hash over every user).
 */
#define MEMBER_ROWS_SQL(with, page, count)                                                         \
    "WITH " ACC_CTE "," MEMBER_V_CTE with                                                          \
    " SELECT h.total, h.e, h.r, p.user_id, p.email, p.status, p.first_name, p.last_name,"          \
    "   p.avatar_url, p.role_in_organization, p.is_primary, p.membership_status, p.joined_ms,"     \
    "   h.ver"                                                                                     \
    " FROM (SELECT " count " AS total, EXISTS (SELECT 1 FROM acc) AS e,"                           \
    "   (SELECT my_role FROM acc) AS r, " MEMBER_VERSION " AS ver) h"                              \
    " LEFT JOIN LATERAL (SELECT m.user_id, u.email, u.status, u.first_name, u.last_name,"          \
    "   u.avatar_url, m.role_in_organization, m.is_primary, m.membership_status, m.joined_at,"     \
    "   floor(extract(epoch FROM m.joined_at) * 1000)::bigint AS joined_ms"                        \
    "   FROM (" page ") m CROSS JOIN LATERAL (SELECT * FROM users u WHERE u.id = m.user_id"        \
    "   LIMIT 1) u) p ON true"                                                                     \
    " ORDER BY p.joined_at, p.user_id"

#define MEMBER_PAGE(users)                                                                         \
    "SELECT m.* FROM organization_memberships m, v WHERE" MEMBER_KEYS("m") users                   \
        " ORDER BY m.joined_at, m.user_id LIMIT $9::int OFFSET $10::int"

static const char SQL_MEMBER_LIST[] = MEMBER_ROWS_SQL("", MEMBER_PAGE(USERS_NONE), COUNT_KEPT);
static const char SQL_MEMBER_LIST_STATUS[] =
    MEMBER_ROWS_SQL("", MEMBER_PAGE(USERS_STATUS), COUNT_ROWS(USERS_STATUS));
static const char SQL_MEMBER_SEARCH_SHORT[] =
    MEMBER_ROWS_SQL("", MEMBER_PAGE(USERS_SHORT), COUNT_ROWS(USERS_SHORT));
/* The MATERIALIZED CTEs fix the order: matching users first, then their memberships here
 * (LIMIT 1, the key being unique, keeps the lateral subquery a key probe per matching user). */
static const char SQL_MEMBER_SEARCH[] = MEMBER_ROWS_SQL(
    ", su AS MATERIALIZED (SELECT su.id FROM users su WHERE" USERS_MATCH(
        "su") "),"
              " f AS MATERIALIZED (SELECT m.* FROM su CROSS JOIN LATERAL (SELECT * FROM"
              "   organization_memberships om WHERE om.organization_id = $1::uuid AND om.user_id = "
              "su.id"
              "   LIMIT 1) m, v WHERE" MEMBER_KEYS("m") ")",
    "SELECT * FROM f ORDER BY joined_at, user_id LIMIT $9::int OFFSET $10::int",
    "(SELECT count(*) FROM f)");

/* Revalidates a cached member list: column 0 the current version, 1-2 the ACC_COLS. */
static const char SQL_MEMBER_CHECK[] = "WITH " ACC_CTE " SELECT " MEMBER_VERSION "," ACC_COLS;

/* $5 user, $6 role, $7 isPrimary. The user's current organization is set when they have none. */
static const char SQL_MEMBER_ADD[] =
    "WITH " ACC_CTE ","
    " tu AS (SELECT id FROM users WHERE id = $5),"
    " ins AS (INSERT INTO organization_memberships (organization_id, user_id,"
    "   role_in_organization, is_primary) SELECT ok.org_id, tu.id, $6, $7::boolean FROM ok, tu"
    "   ON CONFLICT (organization_id, user_id) DO NOTHING RETURNING *),"
    " " PRIMARY_CTE(
        "ins") ","
               " cur AS (UPDATE users cu SET current_organization_id = ins.organization_id FROM ins"
               "   WHERE cu.id = ins.user_id AND cu.current_organization_id IS NULL)"
               " SELECT (SELECT json_build_object('data', " MEMBER_JSON(
                   "ins", "joinedAt", "joined_at") ")"
                                                   "   FROM ins)," ACC_COLS
                                                   ", EXISTS (SELECT 1 FROM tu)";

/*
 * $5 user, $6 role, $7 isPrimary, $8 membershipStatus (NULL: unchanged). Columns 3 and 4 are
 * the membership status before and after the change. Re-enabling gives the user a current
 * organization when they have none; disabling moves a current organization pointing here to their
 * primary (else oldest) other active membership, or to none.
 */
static const char SQL_MEMBER_UPDATE[] =
    "WITH " ACC_CTE ","
    " old AS (SELECT m.membership_status FROM organization_memberships m, ok"
    "   WHERE m.organization_id = ok.org_id AND m.user_id = $5),"
    " upd AS (UPDATE organization_memberships m SET"
    "   role_in_organization = COALESCE($6, m.role_in_organization),"
    "   is_primary = COALESCE($7::boolean, m.is_primary),"
    "   membership_status = COALESCE($8, m.membership_status), updated_at = now()"
    "   FROM ok WHERE m.organization_id = ok.org_id AND m.user_id = $5 RETURNING m.*),"
    " " PRIMARY_CTE(
        "upd") ","
               " cur AS (UPDATE users cu SET current_organization_id = CASE"
               "   WHEN upd.membership_status = 'active' THEN upd.organization_id"
               "   ELSE (SELECT om.organization_id FROM organization_memberships om"
               "     WHERE om.user_id = upd.user_id AND om.organization_id <> upd.organization_id"
               "     AND om.membership_status = 'active' ORDER BY om.is_primary DESC, om.joined_at"
               "     LIMIT 1) END"
               "   FROM upd WHERE cu.id = upd.user_id AND ((upd.membership_status = 'active'"
               "   AND cu.current_organization_id IS NULL) OR (upd.membership_status = 'disabled'"
               "   AND cu.current_organization_id = upd.organization_id)))"
               " SELECT (SELECT json_build_object('data', " MEMBER_JSON(
                   "upd", "updatedAt", "updated_at") ")"
                                                     "   FROM upd)," ACC_COLS
                                                     ", (SELECT membership_status FROM old),"
                                                     " (SELECT membership_status FROM upd)";

/* clang-format on */

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

/* Path :id (position i) as a lower-case UUID; replies 400 and returns NULL otherwise. */
static const char *path_uuid_or_reply(http_req_t *req, int i, const char *field)
{
    const char *id = http_req_param(req, i);
    if (!id || !ids_is_uuid(id)) {
        verr_t v = {0};
        verr_add(&v, field, "must be a UUID");
        verr_reply(req, &v);
        return NULL;
    }
    return lower_ascii(req, id);
}

static const char *path_cuid_or_reply(http_req_t *req, int i, const char *field)
{
    const char *id = http_req_param(req, i);
    if (!id || !ids_is_cuid(id)) {
        verr_t v = {0};
        verr_add(&v, field, "must be a user id (CUID)");
        verr_reply(req, &v);
        return NULL;
    }
    return id;
}

/* limit (1..1000, default 100) and offset (0.., default 0) as decimal strings. */
static void query_paging(http_req_t *req, verr_t *v, const char **limit, const char **offset)
{
    int n;
    const char *s = http_req_query(req, "limit");
    *limit = LIST_LIMIT_DEFAULT;
    if (s) {
        if (validate_int(s, 1, LIST_LIMIT_MAX, &n) != 0)
            verr_add(v, "limit", "must be an integer from 1 to 1000");
        else
            *limit = arena_printf(&req->arena, "%d", n);
    }
    s = http_req_query(req, "offset");
    *offset = "0";
    if (s) {
        if (validate_int(s, 0, 2147483647, &n) != 0)
            verr_add(v, "offset", "must be a non-negative integer");
        else
            *offset = arena_printf(&req->arena, "%d", n);
    }
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

static const char *field_timezone(http_req_t *req, json_t *body, verr_t *v)
{
    int before = v->n;
    json_t *j = json_object_get(body, "defaultTimezone");
    if (!j) return NULL;
    const char *s = field_str(req, body, "defaultTimezone", v, true, 1, VALIDATE_TZ_MAX, true);
    if (!s || v->n != before) return NULL;
    if (!validate_is_timezone(s)) {
        verr_add(v, "defaultTimezone", "must be an IANA time zone");
        return NULL;
    }
    return s;
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

/*
 * Reads columns 1 (organization exists) and 2 (caller's active role there) of an ACC_CTE
 * statement and asks perm_org_access(). Replies 404 / 403 and returns false when the caller may
 * not act; otherwise *as is the caller's role there (the global role for global callers).
 */
static bool org_access_or_replied(http_req_t *req, const db_result_t *r, role_t need, role_t *as)
{
    perm_actor_t a = perm_actor(context_caller(req));
    const char *exists = db_get(r, 0, 1);
    return perm_allowed_or_replied(req, perm_org_access(&a, exists && exists[0] == 't',
                                                        role_parse(db_get(r, 0, 2)), need, as));
}

/* ---- organizations ---- */

static void on_org_list(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    /* Column 1: the caller is an OrganizationAdmin somewhere (or global: the statement lists all).
     */
    const char *admin = db_get(r, 0, 1);
    perm_actor_t a = perm_actor(context_caller(req));
    if (!perm_allowed_or_replied(req, perm_org_list(&a, admin && admin[0] == 't'))) return;
    reply_db_json(req, 200, r);
}

static void list_orgs(http_req_t *req)
{
    caller_t *c = context_caller(req);
    verr_t v = {0};
    const char *limit, *offset;
    query_paging(req, &v, &limit, &offset);
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
    if (db_failed_or_reply(req, r)) return;
    reply_db_json(req, 201, r);
}

static void create_org(http_req_t *req)
{
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    verr_t v = {0};
    bool has_desc, has_logo;
    const char *name = field_str(req, body, "name", &v, true, 1, 255, true);
    const char *desc = field_nullable(req, body, "description", &v, DESCRIPTION_MAX_CP, &has_desc);
    const char *logo = field_logo(req, body, &v, &has_logo);
    const char *status = field_enum(req, body, "status", &v, false, ORG_STATUSES,
                                    "must be active, inactive, suspended or archived");
    const char *settings = field_settings(req, body, &v);
    const char *tz = field_timezone(req, body, &v);
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

/* Shared by GET, PATCH and DELETE on one organization: access, then the organization. */
static void on_org_one(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    role_t as;
    if (!org_access_or_replied(req, r, ROLE_ORG_ADMIN, &as)) return;
    if (db_isnull(r, 0, 0)) {
        http_reply_error(req, 404, "NOT_FOUND", "Organization not found");
        return;
    }
    reply_db_json(req, 200, r);
}

static void get_org(http_req_t *req)
{
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
    const char *params[4];
    acc_params(req, params, id, ROLES_ADMIN);
    db_req_query(req, SQL_ORG_GET, 4, params, on_org_one);
}

/* An organization-level change (status, archive): every caller context naming the
 * organization is dropped, on every worker. */
static void on_org_changed(http_req_t *req, db_result_t *r)
{
    if (r->ok && db_nrows(r) > 0) ctx_invalidate_org(lower_ascii(req, http_req_param(req, 0)));
    on_org_one(req, r);
}

static void patch_org(http_req_t *req)
{
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    verr_t v = {0};
    bool has_desc, has_logo;
    const char *name =
        json_object_get(body, "name") ? field_str(req, body, "name", &v, true, 1, 255, true) : NULL;
    const char *desc = field_nullable(req, body, "description", &v, DESCRIPTION_MAX_CP, &has_desc);
    const char *logo = field_logo(req, body, &v, &has_logo);
    const char *status = field_enum(req, body, "status", &v, false, ORG_STATUSES,
                                    "must be active, inactive, suspended or archived");
    const char *settings = field_settings(req, body, &v);
    const char *tz = field_timezone(req, body, &v);
    if (verr_reply(req, &v)) return;
    const char *params[12];
    acc_params(req, params, id, ROLES_ADMIN);
    params[4] = name;
    params[5] = has_desc ? "t" : "f";
    params[6] = desc && *desc ? desc : NULL;
    params[7] = has_logo ? "t" : "f";
    params[8] = logo;
    params[9] = status;
    params[10] = settings;
    params[11] = tz;
    db_req_query(req, SQL_ORG_PATCH, 12, params, on_org_changed);
}

static void delete_org(http_req_t *req)
{
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
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

static void json_member_str(buf_t *b, const char *key, const db_result_t *r, int row, int col)
{
    buf_printf(b, ",\"%s\":", key);
    buf_json_str(b, db_get(r, row, col));
}

static void on_member_list(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    role_t role;
    if (!org_access_or_replied(req, r, ROLE_COACH, &role)) return;
    member_list_t *st = req->data;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, 3)) continue;
        char joined[TIMEFMT_LEN + 1];
        timefmt_format(db_getll(r, i, 12, 0), joined);
        const char *primary = db_get(r, i, 10);
        buf_puts(&b, items++ ? ",{\"id\":" : "{\"id\":");
        buf_json_str(&b, db_get(r, i, 3));
        json_member_str(&b, "email", r, i, 4);
        json_member_str(&b, "status", r, i, 5);
        json_member_str(&b, "firstName", r, i, 6);
        json_member_str(&b, "lastName", r, i, 7);
        json_member_str(&b, "avatarUrl", r, i, 8);
        json_member_str(&b, "roleInOrganization", r, i, 9);
        buf_printf(&b, ",\"isPrimary\":%s", primary && primary[0] == 't' ? "true" : "false");
        json_member_str(&b, "membershipStatus", r, i, 11);
        buf_printf(&b, ",\"joinedAt\":\"%s\"}", joined);
    }
    buf_printf(&b, "],\"meta\":{\"total_count\":%lld}}", db_getll(r, 0, 0, 0));
    if (key_matches_role(st->key, role))
        page_cache_put(&member_pages, st->key, page_row_version(r, 13), b.data, b.len);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void on_member_check(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    role_t role;
    if (!org_access_or_replied(req, r, ROLE_COACH, &role)) return;
    member_list_t *st = req->data;
    if (key_matches_role(st->key, role) &&
        page_cache_reply(&member_pages, st->key, page_row_version(r, 0), req))
        return;
    db_req_query(req, st->sql, 10, st->params, on_member_list);
}

static void list_members(http_req_t *req)
{
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
    verr_t v = {0};
    const char *limit, *offset;
    query_paging(req, &v, &limit, &offset);
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
    if (db_failed_or_reply(req, r)) return;
    role_t as;
    if (!org_access_or_replied(req, r, ROLE_ORG_ADMIN, &as)) return;
    const char *user_exists = db_get(r, 0, 3);
    if (!user_exists || user_exists[0] != 't') {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    if (db_isnull(r, 0, 0)) {
        http_reply_error(req, 409, "CONFLICT", "The user is already a member of this organization");
        return;
    }
    membership_enabled(req, req->data);
    /* Membership, maybe the current organization. */
    ctx_invalidate_then_reply(req, 'u', req->data, 201, db_get(r, 0, 0), db_getlen(r, 0, 0));
}

static void add_member(http_req_t *req)
{
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
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
    if (db_failed_or_reply(req, r)) return;
    role_t as;
    if (!org_access_or_replied(req, r, ROLE_ORG_ADMIN, &as)) return;
    if (db_isnull(r, 0, 0)) {
        http_reply_error(req, 404, "NOT_FOUND", "Membership not found");
        return;
    }
    const char *before = db_get(r, 0, 3);
    const char *after = db_get(r, 0, 4);
    const char *org_id = http_req_param(req, 0);
    const char *user_id = http_req_param(req, 1);
    /* Role, status, maybe the current organization. */
    ctx_invalidate_then_reply(req, 'u', user_id, 200, db_get(r, 0, 0), db_getlen(r, 0, 0));
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
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
    const char *user = path_cuid_or_reply(req, 1, "userId");
    if (!user) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
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
    const char *id = path_uuid_or_reply(req, 0, "id");
    if (!id) return;
    const char *user = path_cuid_or_reply(req, 1, "userId");
    if (!user) return;
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
