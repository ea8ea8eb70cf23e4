/*
 * Users under /api/users (docs/api.md "Users"; GET /api/users/me and the password change live
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
 * POST /api/users/:id/revoke-sessions ends every session of a user (whoever may change the
 * user's status may) and leaves the account as it is. DELETE /api/users/:id/two-factor (the same
 * callers) turns off the two-factor sign-in of a user who lost their authenticator and backup
 * codes, after the administrator checked who asks: it also ends every session of the user and
 * tells them by mail.
 */
#include <limits.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_two_factor.h"
#include "db/q_user_sessions.h"
#include "db/q_users.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/phone.h"
#include "domain/text.h"
#include "domain/timefmt.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/ctx_cache.h"
#include "routes/files.h"
#include "routes/page_cache.h"
#include "routes/page_list.h"
#include "routes/routes.h"
#include "rt/events.h"
#include "rt/outbox.h"
#include "rt/presence.h"
#include "rt/redis.h"

#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX 1000
#define SEARCH_MAX_CP 200
#define PHONE_MAX_CP 50

/* SQL: db/queries/users.sql. user_get starts with user_target's columns (target_from_row
 * reads either). */
_Static_assert((int)USER_GET_STATUS == (int)USER_TARGET_STATUS &&
                   (int)USER_GET_OTHER_ACTIVE == (int)USER_TARGET_OTHER_ACTIVE &&
                   (int)USER_GET_JSON == (int)USER_TARGET_NCOLS,
               "user_get begins with the columns of user_target");

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
    /* PATCH avatar (me and :id): a file id, or NULL to clear (routes/files.h) */
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
    t->status = arena_strdup(&req->arena, db_get(r, 0, USER_TARGET_STATUS));
    const char *gr = db_get(r, 0, USER_TARGET_GLOBAL_ROLE);
    t->global_role = gr ? role_parse(gr) : ROLE_NONE;
    if (!role_is_global(t->global_role)) t->global_role = ROLE_NONE;
    const char *cc = db_get(r, 0, USER_TARGET_COUNTRY_CODE);
    t->country = cc ? arena_strdup(&req->arena, cc) : NULL;
    const char *mr = db_get(r, 0, USER_TARGET_MEMBER_ROLE);
    t->member = mr != NULL;
    t->org_role = mr ? role_parse(mr) : ROLE_NONE;
    const char *ms = db_get(r, 0, USER_TARGET_MEMBER_STATUS);
    t->active_member = ms && strcmp(ms, "active") == 0;
    const char *other = db_get(r, 0, USER_TARGET_OTHER_ACTIVE);
    t->elsewhere = other && other[0] == 't';
}

/* The :id parameter ("me" stands for the caller); false when it replied 400. */
static bool target_init_or_replied(http_req_t *req, target_t *t)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!path_user_id_ok_or_reply(req, 0, true, &id)) return false;
    t->id = id;
    t->self = strcmp(id, c->user_id) == 0;
    return true;
}

/* The target's row (SQL_USER_TARGET or SQL_USER_GET) is in: 404 without one, else it is read into
 * the state's target. False when it replied. */
static bool target_row_or_replied(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return false;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return false;
    }
    users_state_t *st = req->data;
    target_from_row(req, r, &st->t);
    return true;
}

/* target_row_or_replied, then the caller's access to the target for `act`. */
static bool target_allowed_or_replied(http_req_t *req, db_result_t *r, perm_user_action_t act)
{
    users_state_t *st = req->data;
    return target_row_or_replied(req, r) &&
           access_or_replied(req, context_caller(req), &st->t, act);
}

/* The :id of the path, its row in the caller's organization (SQL_USER_TARGET), then cb. */
static void target_load(http_req_t *req, db_req_cb cb)
{
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    if (!target_init_or_replied(req, &st->t)) return;
    const char *params[] = {st->t.id, c->org_id};
    db_req_query(req, SQL_USER_TARGET, 2, params, cb);
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

/* firstName or lastName. A last name may be null, which clears it (a one-word name from
 * sign-up is stored without one, and an answer's lastName null must be accepted back); a first
 * name may not. */
static void parse_name(http_req_t *req, json_t *body, const char *key, verr_t *v, users_state_t *st,
                       enum field f)
{
    if (!json_object_get(body, key)) return;
    if (is_null(body, key)) {
        if (f == F_LAST)
            st->set[f] = true;
        else
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
    const char *s = field_timezone(req, body, "timezone", v, true);
    if (!s) return;
    st->set[F_TZ] = true;
    st->val[F_TZ] = s;
}

/* avatar: a file id from POST /api/files/upload, or null to remove it; applied by
 * files_ref_set before the other fields, the same on PATCH /api/users/me and /:id. */
static void parse_avatar(http_req_t *req, json_t *body, verr_t *v, users_state_t *st)
{
    st->has_avatar = json_has(body, "avatar");
    if (!st->has_avatar) return;
    int before = v->n;
    st->avatar = field_str(req, body, "avatar", v, false, 1, 64, true);
    if (st->avatar && v->n == before && !ids_is_uuid(st->avatar))
        verr_add(v, "avatar", "must be a file id");
    if (st->avatar) st->avatar = lower_ascii(req, st->avatar);
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
    db_req_query(req, SQL_USER_UPDATE, 1 + 2 * F_COUNT, params, cb);
}

/* After an update: tells the streams when the status left `active`. False when none updated. */
static bool after_update(http_req_t *req, const db_result_t *r, const char *user_id)
{
    if (db_nrows(r) == 0) return false;
    /* Status and profile fields are in the caller context: the caller's reply waits for the
     * invalidation (ctx_invalidate_then_reply). */
    const char *before = db_get(r, 0, USER_UPDATE_STATUS_BEFORE),
               *after = db_get(r, 0, USER_UPDATE_STATUS_AFTER);
    if (before && after && strcmp(before, "active") == 0 && strcmp(after, "active") != 0)
        publish_inactive(req, user_id);
    return true;
}

/* ---- PATCH /api/users/me ---- */

static void patch_me_on_updated(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "User not found");
        return;
    }
    ctx_invalidate_then_reply(req, 'u', context_caller(req)->user_id, 200,
                              db_get(r, 0, USER_UPDATE_JSON), db_getlen(r, 0, USER_UPDATE_JSON));
}

/* The avatar first (its checks may refuse the request), then the other fields, as on
 * PATCH /api/users/:id. */
static void patch_me_on_avatar(http_req_t *req, bool ok)
{
    if (ok) run_update(req, req->data, patch_me_on_updated);
}

static void patch_me(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
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
    parse_avatar(req, body, &v, st);
    if (verr_reply(req, &v)) return;
    if (st->has_avatar) {
        files_ref_set(req, FILES_REF_AVATAR, st->t.id, st->avatar, patch_me_on_avatar);
        return;
    }
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
    if (!db_ok_or_reply(req, r)) return;
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

static long long render_org_list(http_req_t *req, page_list_t *pl, const db_result_t *r, buf_t *b)
{
    (void)req;
    (void)pl;
    int n = db_nrows(r), items = 0;
    buf_puts(b, "{\"data\":[");
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, USER_LIST_ORG_ID)) continue;
        json_member(b, items++ ? ",{\"id\":" : "{\"id\":", r, i, USER_LIST_ORG_ID);
        json_member(b, ",\"email\":", r, i, USER_LIST_ORG_EMAIL);
        json_member(b, ",\"status\":", r, i, USER_LIST_ORG_STATUS);
        json_member(b, ",\"globalRole\":", r, i, USER_LIST_ORG_GLOBAL_ROLE);
        json_member(b, ",\"firstName\":", r, i, USER_LIST_ORG_FIRST_NAME);
        json_member(b, ",\"lastName\":", r, i, USER_LIST_ORG_LAST_NAME);
        json_member(b, ",\"avatarUrl\":", r, i, USER_LIST_ORG_AVATAR_URL);
        json_member(b, ",\"role\":", r, i, USER_LIST_ORG_ROLE_IN_ORGANIZATION);
        json_member(b, ",\"membershipStatus\":", r, i, USER_LIST_ORG_MEMBERSHIP_STATUS);
        buf_putc(b, '}');
    }
    buf_printf(b, "],\"meta\":{\"total_count\":%lld}}",
               n > 0 ? db_getll(r, 0, USER_LIST_ORG_TOTAL, 0) : 0LL);
    return page_row_version(r, USER_LIST_ORG_VERSION);
}

static void list_users(http_req_t *req)
{
    caller_t *c = context_caller(req);
    bool global = c->global_role != ROLE_NONE;
    if (!global && !staff_or_replied(req, c, ROLE_MANAGER)) return;
    verr_t v = {0};
    const char *lim, *off;
    query_paging(req, &v, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, &lim, &off);
    const char *search = http_req_query(req, "search");
    const char *status = http_req_query(req, "status");
    const char *role = http_req_query(req, "role");
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
    if (global) {
        const char *params[] = {search, status, role, lim, off, c->org_id};
        db_req_query(req, SQL_USER_LIST_ALL, 6, params, list_on_rows);
    } else {
        page_list_t *pl = arena_calloc(&req->arena, sizeof(*pl));
        const char *params[] = {search,
                                status,
                                role,
                                lim,
                                off,
                                c->org_id,
                                perm_member_view(c->org_role) == PERM_MEMBERS_MANAGER ? "t" : "f"};
        page_list_init(pl, &org_list_pages, search ? SQL_USER_LIST_ORG_SEARCH : SQL_USER_LIST_ORG,
                       7, params, SQL_USER_LIST_ORG_VERSION, c->org_id, render_org_list, 400);
        /* params[6] is the visibility class; the rest is the normalized query. */
        pl->key = page_cache_key(req, 7, params);
        page_list_reply(req, pl);
    }
}

/* ---- POST /api/users ---- */

static void create_on_inserted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
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
    st->rc = password_hash_fresh(st->password, st->hash);
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
    db_req_query(req, SQL_USER_CREATE, 11, params, create_on_inserted);
    mail_msg_free(&m);
}

static void create_user(http_req_t *req)
{
    caller_t *c = context_caller(req);
    if (!staff_or_replied(req, c, ROLE_MANAGER)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    users_state_t *st = state_new(req);
    verr_t v = {0};
    st->email = field_email(req, body, "email", &v, true);
    st->first = required_name(req, body, "firstName", &v);
    st->last = required_name(req, body, "lastName", &v);
    st->password = field_password(req, body, "password", &v, true);
    const char *lang = field_lang(req, body, "preferredLanguage", &v);
    password_rules_add(&v, "password", st->password, st->email, st->first, st->last);
    if (verr_reply(req, &v)) return;
    st->lang = resolve_lang(req, lang);
    offload_run_kind(req, OFFLOAD_ACCOUNT, create_work, create_on_hashed, st);
}

/* ---- GET /api/users/:id ---- */

static void get_on_row(http_req_t *req, db_result_t *r)
{
    if (!target_allowed_or_replied(req, r, PERM_USER_READ)) return;
    http_reply_jsonn(req, 200, db_get(r, 0, USER_GET_JSON), db_getlen(r, 0, USER_GET_JSON));
}

static void get_user(http_req_t *req)
{
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    if (!target_init_or_replied(req, &st->t)) return;
    bool all_orgs = st->t.self || c->global_role != ROLE_NONE;
    const char *params[] = {st->t.id, c->org_id, st->t.self ? "t" : "f", all_orgs ? "t" : "f"};
    db_req_query(req, SQL_USER_GET, 4, params, get_on_row);
}

/* ---- PATCH /api/users/:id ---- */

static void patch_on_updated(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
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
    if (!target_row_or_replied(req, r)) return;
    users_state_t *st = req->data;
    caller_t *c = context_caller(req);
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
    caller_t *c = context_caller(req);
    users_state_t *st = state_new(req);
    if (!target_init_or_replied(req, &st->t)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    parse_name(req, body, "firstName", &v, st, F_FIRST);
    parse_name(req, body, "lastName", &v, st, F_LAST);
    parse_phone(req, body, &v, st);
    parse_birth_date(req, body, &v, st);
    parse_status(req, body, &v, st);
    parse_avatar(req, body, &v, st);
    if (verr_reply(req, &v)) return;
    const char *params[] = {st->t.id, c->org_id};
    db_req_query(req, SQL_USER_TARGET, 2, params, patch_on_target);
}

/* ---- DELETE /api/users/:id ---- */

static void delete_on_target(http_req_t *req, db_result_t *r)
{
    if (!target_allowed_or_replied(req, r, PERM_USER_STATUS)) return;
    users_state_t *st = req->data;
    st->set[F_STATUS] = true;
    st->val[F_STATUS] = "archived";
    run_update(req, st, patch_on_updated);
}

static void delete_user(http_req_t *req)
{
    target_load(req, delete_on_target);
}

/* ---- POST /api/users/:id/revoke-sessions ---- */

/* Every session of the target has ended: their streams close on every worker, and the answer
 * waits until no worker serves a cached context of theirs. */
static void reply_sessions_ended(http_req_t *req)
{
    users_state_t *st = req->data;
    events_sessions_ended(st->t.id, NULL);
    static const char ok[] = "{\"success\":true}";
    ctx_invalidate_then_reply(req, 'u', st->t.id, 200, ok, sizeof(ok) - 1);
}

static void revoke_on_deleted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    reply_sessions_ended(req);
}

static void revoke_on_target(http_req_t *req, db_result_t *r)
{
    if (!target_allowed_or_replied(req, r, PERM_USER_SESSIONS)) return;
    users_state_t *st = req->data;
    const char *params[] = {st->t.id};
    db_req_query(req, SQL_USER_SESSIONS_REVOKE_ALL, 1, params, revoke_on_deleted);
}

static void revoke_sessions(http_req_t *req)
{
    target_load(req, revoke_on_target);
}

/* ---- DELETE /api/users/:id/two-factor ---- */

static void tf_reset_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *was = db_get(r, 0, TWO_FACTOR_RESET_WAS_ENABLED);
    if (was && was[0] == 't') outbox_kick();
    /* The cached contexts dropped hold two_factor_enabled too. */
    reply_sessions_ended(req);
}

static void tf_reset_on_target(http_req_t *req, db_result_t *r)
{
    if (!target_allowed_or_replied(req, r, PERM_USER_TWO_FACTOR)) return;
    users_state_t *st = req->data;
    const char *params[7] = {st->t.id};
    account_notice_params(req, MAIL_NOTICE_TWO_FACTOR_DISABLED, params + 1);
    db_req_query(req, SQL_TWO_FACTOR_RESET, 7, params, tf_reset_on_done);
}

static void reset_two_factor(http_req_t *req)
{
    target_load(req, tf_reset_on_target);
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
    if (!target_allowed_or_replied(req, r, PERM_USER_PRESENCE)) return;
    users_state_t *st = req->data;
    http_req_ref(req);
    presence_get(st->t.id, presence_on_state, req);
}

static void get_presence(http_req_t *req)
{
    target_load(req, presence_on_target);
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
    {HTTP_M_POST, "/api/users/:id/revoke-sessions", revoke_sessions, AUTH_SESSION, ROLE_NONE,
     ROUTE_ORG_OPTIONAL, 0},
    {HTTP_M_DELETE, "/api/users/:id/two-factor", reset_two_factor, AUTH_SESSION, ROLE_NONE,
     ROUTE_ORG_OPTIONAL, 0},
};

void routes_users_register(void)
{
    router_add(users_routes, sizeof(users_routes) / sizeof(users_routes[0]));
}
