/*
 * Users under /api/users (INTERFACE.md "Users"; GET /api/users/me and the password change live
 * in routes/account.c): own-profile update, the user list, user creation by staff, read /
 * update / archive by id, and presence.
 *
 * Who may see whom ("scope"): a user always sees themselves; PlatformAdmin and Owner see every
 * user; Manager and OrganizationAdmin see the users that hold a membership (active or disabled)
 * in their active organization, except that a Manager never sees an OrganizationAdmin or a
 * user with a global role. Changing someone's status (PATCH status, DELETE) needs
 * OrganizationAdmin or above, never applies to oneself, and an organization-scoped caller never
 * changes a user with a global role (nor a PlatformAdmin an Owner). Status is global, so an
 * organization-scoped caller changes it only for a user with no active membership in another
 * organization, and edits other users' profiles only while their membership in the caller's
 * organization is active (docs/security.md).
 *
 * Each by-id handler loads the target with its membership in the caller's active organization,
 * decides access in access_or_replied() (domain/permissions.h), then runs one statement. When a
 * user's status leaves `active`, {"type":"user-inactive"} goes to the Redis channel
 * user:<id>:control after the statement committed, so open streams of that user close.
 */
#include <limits.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/phone.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/files.h"
#include "routes/page_cache.h"
#include "routes/routes.h"
#include "rt/outbox.h"
#include "rt/presence.h"
#include "rt/redis.h"

#define LIST_LIMIT_DEFAULT "100"
#define LIST_LIMIT_MAX 1000
#define SEARCH_MAX_CP 200
#define PHONE_MAX_CP 50

/* ---- SQL ---- */

/* Columns shared by the target lookups: 0 status, 1 global_role, 2 country_code,
 * 3 role in the caller's active organization ($2; NULL when no membership), 4 that membership's
 * status, 5 whether the user holds an active membership in any other organization. */
#define TARGET_COLS                                                                                \
    "u.status, u.global_role, u.country_code, m.role_in_organization, m.membership_status,"        \
    " EXISTS (SELECT 1 FROM organization_memberships om WHERE om.user_id = u.id"                   \
    "   AND om.organization_id IS DISTINCT FROM $2::uuid AND om.membership_status = 'active')"
#define TARGET_NCOLS 6
#define TARGET_FROM                                                                                \
    " FROM users u LEFT JOIN organization_memberships m ON m.user_id = u.id"                       \
    "   AND m.organization_id = $2::uuid"                                                          \
    " WHERE u.id = $1"

static const char SQL_TARGET[] = "SELECT " TARGET_COLS TARGET_FROM;

/* `role` of a user as others see it: the global role, else the role in the caller's active
 * organization, else the role in the user's own current organization. */
#define USER_ROLE_EXPR                                                                             \
    "COALESCE(u.global_role, (SELECT x.role_in_organization FROM organization_memberships x"       \
    "   WHERE x.user_id = u.id AND x.organization_id = $2::uuid),"                                 \
    "  (SELECT x.role_in_organization FROM organization_memberships x"                             \
    "   WHERE x.user_id = u.id AND x.organization_id = u.current_organization_id"                  \
    "     AND x.membership_status = 'active'))"

/* $3: own record (adds phone and birthDate); $4: every organization in orgRoles (else only
 * the caller's active organization). */
static const char SQL_GET[] =
    "SELECT " TARGET_COLS ","
    " jsonb_build_object('data', jsonb_build_object('id', u.id, 'email', u.email,"
    "   'status', u.status, 'globalRole', u.global_role, 'firstName', u.first_name,"
    "   'lastName', u.last_name, 'avatarUrl', u.avatar_url, 'role', " USER_ROLE_EXPR ","
    "   'orgRoles', COALESCE((SELECT jsonb_agg(jsonb_build_object('orgId', o.id,"
    "       'orgName', o.name, 'role', om.role_in_organization) ORDER BY om.joined_at, o.id)"
    "     FROM organization_memberships om JOIN organizations o ON o.id = om.organization_id"
    "     WHERE om.user_id = u.id AND om.membership_status = 'active'"
    "       AND ($4::boolean OR om.organization_id = $2::uuid)), '[]'::jsonb))"
    "   || CASE WHEN $3::boolean THEN jsonb_build_object('phone', u.phone,"
    "        'birthDate', to_char(u.birth_date, 'YYYY-MM-DD')) ELSE '{}'::jsonb END)" TARGET_FROM;

/* Search ($1, LIKE-escaped), status ($2), role ($3), limit ($4), offset ($5), caller's active
 * organization ($6). Every user; orgRoles lists every membership. */
/* The search runs first, on its own, through the trigram indexes of migration 0003 (the same
 * expressions: lower(email), lower(user_display_name(...))); materializing it keeps PostgreSQL's
 * generic plan for this prepared statement from scanning every user instead. A NULL $1 skips it. */
#define USER_SEARCH                                                                                \
    " su AS MATERIALIZED (SELECT id FROM users WHERE $1::text IS NOT NULL"                         \
    "   AND (lower(email) LIKE '%' || lower($1) || '%'"                                            \
    "     OR lower(user_display_name(first_name, last_name)) LIKE '%' || lower($1) || '%')),"
#define USER_MATCHES(u) " ($1::text IS NULL OR " u ".id IN (SELECT id FROM su))"

static const char SQL_LIST_ALL[] =
    "WITH" USER_SEARCH " f AS (SELECT u.* FROM users u"
    "   WHERE" USER_MATCHES(
        "u") "     AND ($2::text IS NULL OR u.status = $2)"
             "     AND ($3::text IS NULL OR u.global_role = $3 OR EXISTS (SELECT 1"
             "       FROM organization_memberships r WHERE r.user_id = u.id"
             "         AND r.role_in_organization = $3 AND r.membership_status = 'active'))),"
             " p AS (SELECT * FROM f ORDER BY created_at DESC, id DESC LIMIT $4::int OFFSET "
             "$5::int)"
             " SELECT json_build_object('data', COALESCE((SELECT json_agg(json_build_object("
             "     'id', u.id, 'email', u.email, 'status', u.status, 'globalRole', u.global_role,"
             "     'firstName', u.first_name, 'lastName', u.last_name, 'avatarUrl', u.avatar_url,"
             "     'role', COALESCE(u.global_role, (SELECT x.role_in_organization"
             "         FROM organization_memberships x WHERE x.user_id = u.id"
             "           AND x.organization_id = $6::uuid),"
             "       (SELECT x.role_in_organization FROM organization_memberships x"
             "         WHERE x.user_id = u.id AND x.organization_id = u.current_organization_id"
             "           AND x.membership_status = 'active')),"
             "     'orgRoles', COALESCE((SELECT json_agg(json_build_object('orgId', o.id,"
             "         'orgName', o.name, 'role', om.role_in_organization,"
             "         'membershipStatus', om.membership_status) ORDER BY om.joined_at, o.id)"
             "       FROM organization_memberships om JOIN organizations o ON o.id = "
             "om.organization_id"
             "       WHERE om.user_id = u.id), '[]'::json))"
             "     ORDER BY u.created_at DESC, u.id DESC) FROM p u), '[]'::json),"
             "   'meta', json_build_object('total_count', (SELECT count(*) FROM f)))";

/* As SQL_LIST_ALL, for the members of one organization (below). $1 is only matched in the
 * search variant; the always-true test keeps it typed in both. */
#define SQL_LIST_ORG_BODY(FROM_)                                                                   \
    " f AS (SELECT u.id, u.email, u.status, u.global_role, u.first_name, u.last_name,"             \
    "     u.avatar_url, u.created_at, m.role_in_organization, m.membership_status"                 \
    "   FROM " FROM_ " WHERE m.organization_id = $6::uuid"                                         \
    "     AND (NOT $7::boolean OR (m.role_in_organization <> 'OrganizationAdmin'"                  \
    "       AND u.global_role IS NULL))"                                                           \
    "     AND ($1::text IS NULL OR $1 IS NOT NULL)"                                                \
    "     AND ($2::text IS NULL OR u.status = $2)"                                                 \
    "     AND ($3::text IS NULL OR m.role_in_organization = $3)),"                                 \
    " p AS (SELECT * FROM f ORDER BY created_at DESC, id DESC LIMIT $4::int OFFSET $5::int)"       \
    " SELECT h.total, h.ver, p.id, p.email, p.status, p.global_role, p.first_name, p.last_name,"   \
    "   p.avatar_url, p.role_in_organization, p.membership_status"                                 \
    " FROM (SELECT (SELECT count(*) FROM f) AS total, (SELECT version"                             \
    "   FROM organization_list_versions WHERE organization_id = $6::uuid) AS ver) h"               \
    " LEFT JOIN p ON true ORDER BY p.created_at DESC, p.id DESC"

/* Members of organization $6 (any membership status); $7 hides OrganizationAdmins and users with
 * a global role (Manager callers). The rows are rendered to JSON in C (list_org_on_rows):
 * columns 0 total_count, 1 the organization's list version (migration 0003, read in the same
 * snapshot for the page cache), then one user per row (2 id .. 10 membership_status); a page
 * without users is one row whose user columns are NULL. With a search the matching users come first
 * (a few hundred at most, through the trigram indexes) and their memberships and rows are probed by
 * key (the OFFSET 0 fences keep the planner from turning the probes into scans of the whole
 * organization); without one the organization's memberships are walked. */
static const char SQL_LIST_ORG[] =
    "WITH" SQL_LIST_ORG_BODY("organization_memberships m JOIN users u ON u.id = m.user_id");
static const char SQL_LIST_ORG_SEARCH[] = "WITH" USER_SEARCH SQL_LIST_ORG_BODY(
    "su CROSS JOIN LATERAL (SELECT * FROM organization_memberships m1"
    " WHERE m1.organization_id = $6::uuid AND m1.user_id = su.id OFFSET 0) m"
    " CROSS JOIN LATERAL (SELECT * FROM users u1 WHERE u1.id = su.id OFFSET 0) u");

/* The account starts unverified and gets the verification mail sign-up sends ($7 verification
 * id, $8 its token hash, $9..$11 the mail): whoever made it, only the mailbox owner can prove
 * the address, which invites rely on (INVITE_REQUIRE_VERIFIED_EMAIL). */
static const char SQL_CREATE[] =
    "WITH u AS (INSERT INTO users (id, email, first_name, last_name, preferred_language)"
    "   VALUES ($1, $2, $3, $4, $5) ON CONFLICT (email) DO NOTHING"
    "   RETURNING id, email, first_name, last_name, preferred_language),"
    " a AS (INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u),"
    " v AS (INSERT INTO verifications (id, kind, user_id, token_hash, expires_at)"
    "   SELECT $7, 'email_verify', id, $8, now() + interval '24 hours' FROM u),"
    " o AS (INSERT INTO outbox (kind, payload) SELECT 'mail', jsonb_build_object('to', email,"
    "   'subject', $9::text, 'text', $10::text, 'html', $11::text) FROM u)"
    " SELECT json_build_object('data', json_build_object('id', id, 'email', email,"
    "   'firstName', first_name, 'lastName', last_name, 'preferredLanguage', preferred_language))"
    " FROM u";

/* Profile and status update: $1 user id, then one (set?, value) pair per field in the order of
 * enum field. Columns: 0 the PATCH /api/users/me response, 1 old status, 2 new status. */
static const char SQL_UPDATE[] =
    "WITH old AS (SELECT id, status FROM users WHERE id = $1 FOR UPDATE),"
    " u AS (UPDATE users SET"
    "   first_name = CASE WHEN $2::boolean THEN $3 ELSE first_name END,"
    "   last_name = CASE WHEN $4::boolean THEN $5 ELSE last_name END,"
    "   preferred_language = CASE WHEN $6::boolean THEN $7 ELSE preferred_language END,"
    "   phone = CASE WHEN $8::boolean THEN $9 ELSE phone END,"
    "   birth_date = CASE WHEN $10::boolean THEN $11::date ELSE birth_date END,"
    "   country_code = CASE WHEN $12::boolean THEN $13 ELSE country_code END,"
    "   timezone = CASE WHEN $14::boolean THEN $15 ELSE timezone END,"
    "   status = CASE WHEN $16::boolean THEN $17 ELSE users.status END,"
    "   updated_at = now()"
    "   FROM old WHERE users.id = old.id RETURNING users.*)"
    " SELECT json_build_object('data', json_build_object('id', u.id,"
    "   'firstName', u.first_name, 'lastName', u.last_name, 'phone', u.phone,"
    "   'birthDate', to_char(u.birth_date, 'YYYY-MM-DD'), 'countryCode', u.country_code,"
    "   'avatarUrl', u.avatar_url, 'currentOrganizationId', u.current_organization_id,"
    "   'createdAt', iso(u.created_at), 'updatedAt', iso(u.updated_at))),"
    "   old.status, u.status"
    " FROM u, old";

/* ---- state ---- */

enum field {
    F_FIRST,
    F_LAST,
    F_LANG,
    F_PHONE,
    F_BIRTH,
    F_COUNTRY,
    F_TZ,
    F_STATUS,
    F_COUNT,
};

typedef struct target {
    const char *id;
    bool self;
    const char *status;
    role_t global_role; /* ROLE_NONE, ROLE_PLATFORM_ADMIN or ROLE_OWNER */
    bool member;        /* holds a membership (any status) in the caller's active organization */
    bool active_member; /* ... and that membership is active */
    bool elsewhere;     /* holds an active membership in another organization */
    role_t org_role;    /* the role of that membership */
    const char *country;
} target_t;

typedef struct users_state {
    target_t t;
    bool set[F_COUNT];
    const char *val[F_COUNT];
    const char *phone_raw; /* phone as sent; normalized once the country is known */
    /* POST /api/users */
    const char *email, *password, *first, *last, *lang;
    char hash[PASSWORD_ENCODED_MAX];
    int rc;
    /* PATCH /api/users/:id avatar: a file id, or NULL to clear (routes/files.h) */
    bool has_avatar;
    const char *avatar;
} users_state_t;

static const char *const STATUSES[] = {"active", "inactive", "suspended", "archived"};

static bool is_status(const char *s)
{
    for (size_t i = 0; i < sizeof(STATUSES) / sizeof(STATUSES[0]); i++)
        if (strcmp(s, STATUSES[i]) == 0) return true;
    return false;
}

static users_state_t *state_new(http_req_t *req)
{
    users_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    req->data = st;
    return st;
}

/* perm_user_staff(): replies ORG_CONTEXT_REQUIRED / FORBIDDEN unless the caller is a global
 * admin or holds at least `min` in their active organization; false when it replied. */
static bool staff_or_replied(http_req_t *req, const caller_t *c, role_t min)
{
    perm_actor_t a = perm_actor(c);
    return perm_allowed_or_replied(req, perm_user_staff(&a, min));
}

/* perm_user_access() on the target (see the file comment); false when it replied. */
static bool access_or_replied(http_req_t *req, const caller_t *c, const target_t *t,
                              perm_user_action_t act)
{
    perm_actor_t a = perm_actor(c);
    perm_user_target_t pt = {t->self,          t->global_role, t->member,
                             t->active_member, t->elsewhere,   t->org_role};
    return perm_allowed_or_replied(req, perm_user_access(&a, &pt, act));
}

static void target_from_row(http_req_t *req, const db_result_t *r, target_t *t)
{
    t->status = arena_strdup(&req->arena, db_get(r, 0, 0));
    const char *gr = db_get(r, 0, 1);
    t->global_role = gr ? role_parse(gr) : ROLE_NONE;
    if (!role_is_global(t->global_role)) t->global_role = ROLE_NONE;
    const char *cc = db_get(r, 0, 2);
    t->country = cc ? arena_strdup(&req->arena, cc) : NULL;
    const char *mr = db_get(r, 0, 3);
    t->member = mr != NULL;
    t->org_role = mr ? role_parse(mr) : ROLE_NONE;
    const char *ms = db_get(r, 0, 4);
    t->active_member = ms && strcmp(ms, "active") == 0;
    const char *other = db_get(r, 0, 5);
    t->elsewhere = other && other[0] == 't';
}

/* The :id parameter ("me" stands for the caller). */
static void target_init(http_req_t *req, target_t *t)
{
    caller_t *c = context_caller(req);
    const char *id = http_req_param(req, 0);
    if (!id || strcmp(id, "me") == 0) id = c->user_id;
    t->id = id;
    t->self = strcmp(id, c->user_id) == 0;
}

static void publish_inactive(http_req_t *req, const char *user_id)
{
    const char *chan = arena_printf(&req->arena, "user:%s:control", user_id);
    static const char msg[] = "{\"type\":\"user-inactive\"}";
    redis_publish(chan, msg, sizeof(msg) - 1);
}

/* ---- body fields ---- */

static bool is_null(json_t *body, const char *key)
{
    json_t *j = json_object_get(body, key);
    return j && json_is_null(j);
}

static void parse_name(http_req_t *req, json_t *body, const char *key, verr_t *v, users_state_t *st,
                       enum field f)
{
    if (!json_object_get(body, key)) return;
    if (is_null(body, key)) {
        verr_add(v, key, "must be 1 to 100 characters");
        return;
    }
    int before = v->n;
    const char *s = field_str(req, body, key, v, true, 1, VALIDATE_NAME_MAX_CP, true);
    if (!s || v->n != before) return;
    if (text_has_control(s, strlen(s))) {
        verr_add(v, key, "must not contain control characters");
        return;
    }
    st->set[f] = true;
    st->val[f] = s;
}

/* A required first or last name of POST /api/users. */
static const char *required_name(http_req_t *req, json_t *body, const char *key, verr_t *v)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, true, 1, VALIDATE_NAME_MAX_CP, true);
    if (!s || v->n != before) return NULL;
    if (text_has_control(s, strlen(s))) {
        verr_add(v, key, "must not contain control characters");
        return NULL;
    }
    return s;
}

static void parse_phone(http_req_t *req, json_t *body, verr_t *v, users_state_t *st)
{
    if (!json_object_get(body, "phone")) return;
    if (is_null(body, "phone")) {
        st->set[F_PHONE] = true;
        return;
    }
    int before = v->n;
    const char *s = field_str(req, body, "phone", v, true, 0, PHONE_MAX_CP, true);
    if (!s || v->n != before) return;
    st->set[F_PHONE] = true;
    if (*s) st->phone_raw = s; /* "" clears */
}

/* Normalizes the phone sent to E.164 with the country (ISO alpha-2, may be NULL). */
static void normalize_phone(http_req_t *req, verr_t *v, users_state_t *st, const char *country)
{
    if (!st->phone_raw) return;
    char e164[PHONE_E164_MAX];
    if (phone_normalize(st->phone_raw, country, e164, sizeof(e164)) != 0) {
        verr_add(v, "phone",
                 country ? "must be a valid phone number of the country (countryCode) or in "
                           "international format (+<country code> <number>)"
                         : "must be in international format (+<country code> <number>) "
                           "while no countryCode is set");
        return;
    }
    st->val[F_PHONE] = arena_strdup(&req->arena, e164);
}

static void parse_birth_date(http_req_t *req, json_t *body, verr_t *v, users_state_t *st)
{
    if (!json_object_get(body, "birthDate")) return;
    if (is_null(body, "birthDate")) {
        st->set[F_BIRTH] = true;
        return;
    }
    int before = v->n;
    const char *s = field_str(req, body, "birthDate", v, true, 0, 32, false);
    if (!s || v->n != before) return;
    int y, m, d;
    if (validate_date_parse(s, &y, &m, &d) != 0) {
        verr_add(v, "birthDate", "must be a real date YYYY-MM-DD");
        return;
    }
    /* Not in the future anywhere on Earth (UTC+14), and not before 1900. */
    int64_t today = ((int64_t)time(NULL) + 14 * 3600) / 86400;
    if (y < 1900 || timefmt_days_from_civil(y, m, d) > today) {
        verr_add(v, "birthDate", "must be a date between 1900-01-01 and today");
        return;
    }
    st->set[F_BIRTH] = true;
    st->val[F_BIRTH] = s;
}

static void parse_country(http_req_t *req, json_t *body, verr_t *v, users_state_t *st)
{
    if (!json_object_get(body, "countryCode")) return;
    st->set[F_COUNTRY] = true;
    if (is_null(body, "countryCode")) return;
    int before = v->n;
    const char *s = field_str(req, body, "countryCode", v, true, 0, 8, true);
    char up[3];
    if (!s || v->n != before || validate_country_upper(s, up) != 0) {
        st->set[F_COUNTRY] = false;
        if (v->n == before) verr_add(v, "countryCode", "must be an ISO 3166-1 alpha-2 code");
        return;
    }
    st->val[F_COUNTRY] = arena_strdup(&req->arena, up);
}

static void parse_timezone(http_req_t *req, json_t *body, verr_t *v, users_state_t *st)
{
    if (!json_object_get(body, "timezone")) return;
    if (is_null(body, "timezone")) {
        st->set[F_TZ] = true;
        return;
    }
    int before = v->n;
    const char *s = field_str(req, body, "timezone", v, true, 1, VALIDATE_TZ_MAX, false);
    if (!s || v->n != before) return;
    if (!validate_is_timezone(s)) {
        verr_add(v, "timezone", "must be an IANA time zone such as Europe/Madrid");
        return;
    }
    st->set[F_TZ] = true;
    st->val[F_TZ] = s;
}

static void parse_status(http_req_t *req, json_t *body, verr_t *v, users_state_t *st)
{
    if (!json_object_get(body, "status")) return;
    int before = v->n;
    const char *s = field_str(req, body, "status", v, true, 1, 16, false);
    if (!s || v->n != before) return;
    if (!is_status(s)) {
        verr_add(v, "status", "must be active, inactive, suspended or archived");
        return;
    }
    st->set[F_STATUS] = true;
    st->val[F_STATUS] = s;
}

static void run_update(http_req_t *req, users_state_t *st, db_req_cb cb)
{
    const char *params[1 + 2 * F_COUNT];
    params[0] = st->t.id;
    for (int f = 0; f < F_COUNT; f++) {
        params[1 + 2 * f] = st->set[f] ? "t" : "f";
        params[2 + 2 * f] = st->set[f] ? st->val[f] : NULL;
    }
    db_req_query(req, SQL_UPDATE, 1 + 2 * F_COUNT, params, cb);
}

/* After an update: tells the streams when the status left `active`. False when none updated. */
static bool after_update(http_req_t *req, const db_result_t *r, const char *user_id)
{
    if (db_nrows(r) == 0) return false;
    ctx_invalidate_user(user_id); /* status and profile fields are in the caller context */
    const char *before = db_get(r, 0, 1), *after = db_get(r, 0, 2);
    if (before && after && strcmp(before, "active") == 0 && strcmp(after, "active") != 0)
        publish_inactive(req, user_id);
    return true;
}

/* ---- PATCH /api/users/me ---- */

static void patch_me_on_updated(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    ctx_invalidate_then_reply(req, 'u', context_caller(req)->user_id, 200, db_get(r, 0, 0),
                              db_getlen(r, 0, 0));
}

static void patch_me(http_req_t *req)
{
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    st->t.id = c->user_id;
    st->t.self = true;
    verr_t v = {0};
    parse_name(req, body, "firstName", &v, st, F_FIRST);
    parse_name(req, body, "lastName", &v, st, F_LAST);
    if (json_object_get(body, "preferredLanguage")) {
        const char *lang = field_lang(req, body, "preferredLanguage", &v);
        if (lang) {
            st->set[F_LANG] = true;
            st->val[F_LANG] = lang;
        } else if (is_null(body, "preferredLanguage")) {
            verr_add(&v, "preferredLanguage", "must be en or es");
        }
    }
    parse_phone(req, body, &v, st);
    parse_birth_date(req, body, &v, st);
    int before = v.n;
    parse_country(req, body, &v, st);
    bool country_ok = v.n == before;
    parse_timezone(req, body, &v, st);
    /* The phone is read with the country sent now, else the stored one. */
    if (country_ok)
        normalize_phone(req, &v, st, st->set[F_COUNTRY] ? st->val[F_COUNTRY] : c->country_code);
    if (verr_reply(req, &v)) return;
    run_update(req, st, patch_me_on_updated);
}

/* ---- GET /api/users ---- */

/* LIKE pattern text with %, _ and \ escaped (PostgreSQL's default escape is \). */
static const char *like_escape(http_req_t *req, const char *s)
{
    size_t n = strlen(s);
    char *o = arena_alloc(&req->arena, 2 * n + 1), *p = o;
    for (; *s; s++) {
        if (*s == '%' || *s == '_' || *s == '\\') *p++ = '\\';
        *p++ = *s;
    }
    *p = '\0';
    return o;
}

static void list_on_rows(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    reply_db_json(req, 200, r);
}

/*
 * The organization-scoped list (Manager and OrganizationAdmin callers) is rendered in C and its
 * pages are kept in a page cache (routes/page_cache.h) at the organization's list version
 * (organization_list_versions, migration 0003; migration 0008 makes a change of a member's
 * global role move it too). The key is the organization, the visibility class (a Manager does
 * not see OrganizationAdmins nor users with a global role) and the normalized query. The guard
 * read the caller's organization and role for this request, so a reuse after the one-row
 * version check shows nothing a fresh read would not.
 */
static page_cache_t org_list_pages;

static const char SQL_LIST_ORG_VERSION[] =
    "SELECT (SELECT version FROM organization_list_versions WHERE organization_id = $1::uuid)";

typedef struct org_list {
    const char *params[7];
    const char *sql;
    const char *key;
} org_list_t;

static void json_str_member(buf_t *b, const char *key, const db_result_t *r, int row, int col)
{
    buf_printf(b, ",\"%s\":", key);
    buf_json_str(b, db_get(r, row, col));
}

static void list_org_on_rows(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    org_list_t *st = req->data;
    int n = db_nrows(r), items = 0;
    buf_t b = BUF_INIT;
    buf_reserve(&b, 64 + (size_t)n * 400);
    buf_puts(&b, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, 2)) continue;
        buf_puts(&b, items++ ? ",{\"id\":" : "{\"id\":");
        buf_json_str(&b, db_get(r, i, 2));
        json_str_member(&b, "email", r, i, 3);
        json_str_member(&b, "status", r, i, 4);
        json_str_member(&b, "globalRole", r, i, 5);
        json_str_member(&b, "firstName", r, i, 6);
        json_str_member(&b, "lastName", r, i, 7);
        json_str_member(&b, "avatarUrl", r, i, 8);
        json_str_member(&b, "role", r, i, 9);
        json_str_member(&b, "membershipStatus", r, i, 10);
        buf_putc(&b, '}');
    }
    buf_printf(&b, "],\"meta\":{\"total_count\":%lld}}", n > 0 ? db_getll(r, 0, 0, 0) : 0LL);
    if (n > 0) page_cache_put(&org_list_pages, st->key, page_row_version(r, 1), b.data, b.len);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

/* A cached page was found: reuse it when the version is still current, else read afresh. */
static void list_org_on_version(http_req_t *req, db_result_t *r)
{
    org_list_t *st = req->data;
    if (db_failed_or_reply(req, r)) return;
    if (page_cache_reply(&org_list_pages, st->key, page_row_version(r, 0), req)) return;
    db_req_query(req, st->sql, 7, st->params, list_org_on_rows);
}

static void list_users(http_req_t *req)
{
    caller_t *c = context_caller(req);
    bool global = c->global_role != ROLE_NONE;
    if (!global && !staff_or_replied(req, c, ROLE_MANAGER)) return;
    verr_t v = {0};
    int limit = 0, offset = 0;
    const char *q_limit = http_req_query(req, "limit");
    const char *q_offset = http_req_query(req, "offset");
    const char *search = http_req_query(req, "search");
    const char *status = http_req_query(req, "status");
    const char *role = http_req_query(req, "role");
    if (q_limit && validate_int(q_limit, 1, LIST_LIMIT_MAX, &limit) != 0)
        verr_add(&v, "limit", "must be an integer from 1 to 1000");
    if (q_offset && validate_int(q_offset, 0, INT_MAX, &offset) != 0)
        verr_add(&v, "offset", "must be a non-negative integer");
    if (search) {
        size_t n = strlen(search);
        if (!text_utf8_valid(search, n) || text_has_control(search, n))
            verr_add(&v, "search", "must be valid text");
        else if (text_cp_count(search, n) > SEARCH_MAX_CP)
            verr_add(&v, "search", "must be at most 200 characters");
        else if (n == 0)
            search = NULL;
        else
            search = like_escape(req, search);
    }
    if (status && !is_status(status))
        verr_add(&v, "status", "must be active, inactive, suspended or archived");
    if (role) {
        role_t rr = role_parse(role);
        if (global ? rr == ROLE_NONE : !role_is_org_role(rr))
            verr_add(&v, "role", global ? "must be a role name" : "must be an organization role");
    }
    if (verr_reply(req, &v)) return;
    const char *lim = q_limit ? arena_printf(&req->arena, "%d", limit) : LIST_LIMIT_DEFAULT;
    const char *off = arena_printf(&req->arena, "%d", offset);
    if (global) {
        const char *params[] = {search, status, role, lim, off, c->org_id};
        db_req_query(req, SQL_LIST_ALL, 6, params, list_on_rows);
    } else {
        org_list_t *st = arena_calloc(&req->arena, sizeof(*st));
        const char *params[] = {search,
                                status,
                                role,
                                lim,
                                off,
                                c->org_id,
                                perm_member_view(c->org_role) == PERM_MEMBERS_MANAGER ? "t" : "f"};
        memcpy(st->params, params, sizeof(params));
        st->sql = search ? SQL_LIST_ORG_SEARCH : SQL_LIST_ORG;
        /* params[6] is the visibility class; the rest is the normalized query. */
        st->key = page_cache_key(req, 7, params);
        req->data = st;
        if (page_cache_has(&org_list_pages, st->key)) {
            const char *vparams[] = {c->org_id};
            db_req_query(req, SQL_LIST_ORG_VERSION, 1, vparams, list_org_on_version);
            return;
        }
        db_req_query(req, st->sql, 7, params, list_org_on_rows);
    }
}

/* ---- POST /api/users ---- */

static void create_on_inserted(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 409, "EMAIL_TAKEN", "An account with this email already exists");
        return;
    }
    outbox_kick();
    reply_db_json(req, 201, r);
}

static void create_work(void *data)
{
    users_state_t *st = data;
    uint8_t salt[PASSWORD_SALT_LEN];
    random_bytes(salt, sizeof(salt));
    st->rc = password_hash(st->password, salt, st->hash, sizeof(st->hash));
}

static void create_on_hashed(http_req_t *req, void *data)
{
    users_state_t *st = data;
    if (st->rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not create the user");
        return;
    }
    char id[IDS_CUID_LEN + 1], ver_id[IDS_UUID_LEN + 1];
    char vtoken[TOKEN_LEN + 1], vtoken_h[TOKEN_HASH_LEN + 1];
    new_cuid(id);
    new_uuid(ver_id);
    new_token(vtoken, vtoken_h);
    mail_msg_t m = {0};
    if (mail_render_verification(st->lang, auth_verify_link(req, vtoken, NULL), &m) != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not create the user");
        return;
    }
    const char *params[] = {id,     st->email, st->first, st->last, st->lang, st->hash,
                            ver_id, vtoken_h,  m.subject, m.text,   m.html};
    db_req_query(req, SQL_CREATE, 11, params, create_on_inserted);
    mail_msg_free(&m);
}

static void create_user(http_req_t *req)
{
    caller_t *c = context_caller(req);
    if (!staff_or_replied(req, c, ROLE_MANAGER)) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    users_state_t *st = state_new(req);
    verr_t v = {0};
    st->email = field_email(req, body, "email", &v, true);
    st->first = required_name(req, body, "firstName", &v);
    st->last = required_name(req, body, "lastName", &v);
    st->password = field_password(req, body, "password", &v, true);
    const char *lang = field_lang(req, body, "preferredLanguage", &v);
    if (verr_reply(req, &v)) return;
    st->lang = resolve_lang(req, lang);
    offload_run_kind(req, OFFLOAD_ACCOUNT, create_work, create_on_hashed, st);
}

/* ---- GET /api/users/:id ---- */

static void get_on_row(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    users_state_t *st = req->data;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    target_from_row(req, r, &st->t);
    if (!access_or_replied(req, context_caller(req), &st->t, PERM_USER_READ)) return;
    http_reply_jsonn(req, 200, db_get(r, 0, TARGET_NCOLS), db_getlen(r, 0, TARGET_NCOLS));
}

static void get_user(http_req_t *req)
{
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    target_init(req, &st->t);
    bool all_orgs = st->t.self || c->global_role != ROLE_NONE;
    const char *params[] = {st->t.id, c->org_id, st->t.self ? "t" : "f", all_orgs ? "t" : "f"};
    db_req_query(req, SQL_GET, 4, params, get_on_row);
}

/* ---- PATCH /api/users/:id ---- */

static void patch_on_updated(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    users_state_t *st = req->data;
    if (!after_update(req, r, st->t.id)) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    static const char ok[] = "{\"success\":true}";
    ctx_invalidate_then_reply(req, 'u', st->t.id, 200, ok, sizeof(ok) - 1);
}

/* The avatar is set first (its checks may refuse the request), then the other fields. */
static void patch_on_avatar(http_req_t *req, bool ok)
{
    if (ok) run_update(req, req->data, patch_on_updated);
}

static void patch_on_target(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    users_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    target_from_row(req, r, &st->t);
    bool profile = false;
    for (int f = 0; f < F_COUNT; f++)
        if (f != F_STATUS && st->set[f]) profile = true;
    if ((profile || !st->set[F_STATUS]) && !access_or_replied(req, c, &st->t, PERM_USER_WRITE))
        return;
    if (st->set[F_STATUS] && !access_or_replied(req, c, &st->t, PERM_USER_STATUS)) return;
    verr_t v = {0};
    normalize_phone(req, &v, st, st->t.country);
    if (verr_reply(req, &v)) return;
    if (st->has_avatar) {
        files_ref_set(req, FILES_REF_AVATAR, st->t.id, st->avatar, patch_on_avatar);
        return;
    }
    run_update(req, st, patch_on_updated);
}

static void patch_user(http_req_t *req)
{
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    target_init(req, &st->t);
    verr_t v = {0};
    parse_name(req, body, "firstName", &v, st, F_FIRST);
    parse_name(req, body, "lastName", &v, st, F_LAST);
    parse_phone(req, body, &v, st);
    parse_birth_date(req, body, &v, st);
    parse_status(req, body, &v, st);
    st->has_avatar = json_has(body, "avatar");
    if (st->has_avatar) {
        st->avatar = field_str(req, body, "avatar", &v, false, 1, 64, true);
        if (st->avatar && !ids_is_uuid(st->avatar)) verr_add(&v, "avatar", "must be a file id");
    }
    if (verr_reply(req, &v)) return;
    const char *params[] = {st->t.id, c->org_id};
    db_req_query(req, SQL_TARGET, 2, params, patch_on_target);
}

/* ---- DELETE /api/users/:id ---- */

static void delete_on_target(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    users_state_t *st = req->data;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    target_from_row(req, r, &st->t);
    if (!access_or_replied(req, context_caller(req), &st->t, PERM_USER_STATUS)) return;
    st->set[F_STATUS] = true;
    st->val[F_STATUS] = "archived";
    run_update(req, st, patch_on_updated);
}

static void delete_user(http_req_t *req)
{
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    target_init(req, &st->t);
    const char *params[] = {st->t.id, c->org_id};
    db_req_query(req, SQL_TARGET, 2, params, delete_on_target);
}

/* ---- GET /api/users/:id/presence ---- */

static void presence_on_state(bool ok, bool online, int64_t last_seen_ms, void *data)
{
    http_req_t *req = data;
    if (!http_req_gone(req)) {
        users_state_t *st = req->data;
        if (!ok) {
            http_reply_error(req, 503, "UNAVAILABLE", "Presence is unavailable");
        } else {
            buf_t b = BUF_INIT;
            buf_puts(&b, "{\"data\":{\"userId\":");
            buf_json_str(&b, st->t.id);
            buf_printf(&b, ",\"online\":%s,\"lastSeen\":", online ? "true" : "false");
            if (last_seen_ms > 0) {
                char iso[TIMEFMT_LEN + 1];
                timefmt_format(last_seen_ms, iso);
                buf_json_str(&b, iso);
            } else {
                buf_puts(&b, "null");
            }
            buf_puts(&b, "}}");
            http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
        }
    }
    http_req_unref(req);
}

static void presence_on_target(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    users_state_t *st = req->data;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    target_from_row(req, r, &st->t);
    if (!access_or_replied(req, context_caller(req), &st->t, PERM_USER_PRESENCE)) return;
    http_req_ref(req);
    presence_get(st->t.id, presence_on_state, req);
}

static void get_presence(http_req_t *req)
{
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    target_init(req, &st->t);
    const char *params[] = {st->t.id, c->org_id};
    db_req_query(req, SQL_TARGET, 2, params, presence_on_target);
}

/* Roles are checked by the handlers: the rules depend on the target (self, scope) and an
 * organization-scoped caller without organization context gets 400 ORG_CONTEXT_REQUIRED. */
static const route_t users_routes[] = {
    {HTTP_M_PATCH, "/api/users/me", patch_me, AUTH_SESSION, ROLE_NONE, ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_GET, "/api/users", list_users, AUTH_SESSION, ROLE_NONE, ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_POST, "/api/users", create_user, AUTH_SESSION, ROLE_NONE, ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_GET, "/api/users/:id", get_user, AUTH_SESSION, ROLE_NONE, ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_PATCH, "/api/users/:id", patch_user, AUTH_SESSION, ROLE_NONE, ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_DELETE, "/api/users/:id", delete_user, AUTH_SESSION, ROLE_NONE, ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_GET, "/api/users/:id/presence", get_presence, AUTH_SESSION, ROLE_NONE,
     ROUTE_ORG_OPTIONAL, 0},
};

void routes_users_register(void)
{
    router_add(users_routes, sizeof(users_routes) / sizeof(users_routes[0]));
}
