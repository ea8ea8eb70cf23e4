/*
 * Mentorships (INTERFACE.md "Mentorships"): one coach and one teacher of an organization.
 *
 *   GET    /api/mentorships       Coach: own; Teacher: own; Manager and above: all in the org
 *   POST   /api/mentorships       Coach (for themselves) and above; 201 pending
 *   GET    /api/mentorships/:id   participants, or Manager and above in the org
 *   PATCH  /api/mentorships/:id   Coach: title/description/notes of own; Manager+: all, status
 *                                 moves of domain/transitions.h
 *   DELETE /api/mentorships/:id   Manager+: ends it and cancels its scheduled and confirmed
 *                                 sessions (cancellation mails and pushes)
 *
 * Reads are one statement each (coach and teacher joined once per page, never a query per row);
 * the list is rendered to JSON in C from plain rows, a single mentorship by PostgreSQL
 * (mentorship_full_json). The pair rule is the unique index
 * mentorships_pair_uniq. PATCH and DELETE run in a transaction: the mentorship row is locked
 * (FOR UPDATE), the transition is checked in C, and ending it cancels the open sessions, which
 * session creation respects because it locks the mentorship FOR SHARE. Notes are internal: a
 * Teacher caller gets notes null.
 */
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "core/router.h"
#include "db/db.h"
#include "domain/ids.h"
#include "domain/transitions.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/mentoring.h"
#include "routes/routes.h"
#include "routes/txreq.h"
#include "rt/outbox.h"

static void list_mentorships(http_req_t *req);
static void create_mentorship(http_req_t *req);
static void get_mentorship(http_req_t *req);
static void patch_mentorship(http_req_t *req);
static void delete_mentorship(http_req_t *req);

/* ---- list ---- */

/* $1 org, $2 status, $3 coach, $4 teacher, $5 limit, $6 offset, $7 show notes. WHERE_ picks the
 * index: the organization for managers, the coach or teacher for participants.
 *
 * Plain rows, rendered to JSON in C (on_list): column 0 the total count, 1 the organization's
 * mentoring-list version (same snapshot, for the page cache of mentoring.h), then one mentorship
 * per row (M_COL_*) with its coach and teacher, joined once per page. A page past the end is
 * one row whose mentorship columns are NULL, so the count still comes back. */
#define SQL_M_LIST(WHERE_)                                                                         \
    "WITH f AS NOT MATERIALIZED (SELECT m.* FROM mentorships m WHERE " WHERE_                      \
    "   AND ($2::text IS NULL OR m.status = $2))"                                                  \
    " SELECT h.total, h.ver, p.* FROM (SELECT count(*) AS total, (SELECT sum(version)::bigint"     \
    "   FROM mentoring_list_versions WHERE organization_id = $1::uuid) AS ver FROM f) h"           \
    " LEFT JOIN LATERAL ("                                                                         \
    "   SELECT " MENTORING_MENTORSHIP_COLS("m", "$7::boolean") ", " MENTORING_USER_COLS(           \
        "c") ","                                                                                   \
             "     " MENTORING_USER_COLS("t") ", m.created_at AS k1, m.id AS k2"                   \
                                              "   FROM (SELECT * FROM f ORDER BY created_at "      \
                                              "DESC, id DESC LIMIT $5::int OFFSET $6::int) m"      \
                                              "   JOIN users c ON c.id = m.coach_id JOIN users t " \
                                              "ON t.id = m.teacher_id) p ON true"                  \
                                              " ORDER BY p.k1 DESC, p.k2 DESC"

enum {
    M_COL_VERSION = 1,
    M_COL_MENTORSHIP,
    M_COL_COACH = M_COL_MENTORSHIP + MENTORING_MENTORSHIP_NCOLS,
    M_COL_TEACHER = M_COL_COACH + MENTORING_USER_NCOLS,
};

static const char SQL_M_LIST_ORG[] =
    SQL_M_LIST("m.organization_id = $1 AND ($3::text IS NULL OR m.coach_id = $3)"
               " AND ($4::text IS NULL OR m.teacher_id = $4)");
static const char SQL_M_LIST_COACH[] =
    SQL_M_LIST("m.coach_id = $3 AND m.organization_id = $1 AND $4::text IS NULL");
static const char SQL_M_LIST_TEACHER[] =
    SQL_M_LIST("m.teacher_id = $4 AND m.organization_id = $1 AND $3::text IS NULL");

static bool valid_mentorship_status(const char *s)
{
    mentorship_status_t st;
    return transitions_mentorship_parse(s, &st) == 0;
}

typedef struct list_state {
    const char *sql;
    const char *params[7];
    const char *key; /* page cache key */
} list_state_t;

/* The same members, in the same order, as mentorship_full_json() (0006_mentorships.sql). */
static void on_list(http_req_t *req, db_result_t *r)
{
    list_state_t *st = req->data;
    if (db_failed_or_reply(req, r)) return;
    buf_t b = BUF_INIT;
    buf_reserve(&b, 64 + (size_t)db_nrows(r) * 800);
    buf_puts(&b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, M_COL_MENTORSHIP)) continue;
        buf_puts(&b, items++ ? ",{" : "{");
        mentoring_json_mentorship_members(&b, r, i, M_COL_MENTORSHIP);
        buf_puts(&b, ",\"coach\":");
        mentoring_json_user(&b, r, i, M_COL_COACH);
        buf_puts(&b, ",\"teacher\":");
        mentoring_json_user(&b, r, i, M_COL_TEACHER);
        buf_putc(&b, '}');
    }
    buf_printf(&b, "],\"meta\":{\"total_count\":%lld}}", n > 0 ? db_getll(r, 0, 0, 0) : 0LL);
    if (n > 0)
        page_cache_put(mentoring_mentorship_pages, st->key, page_row_version(r, M_COL_VERSION),
                       b.data, b.len);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

/* A cached page was found: reuse it when the version is still current, else read afresh. */
static void on_version(http_req_t *req, db_result_t *r)
{
    list_state_t *st = req->data;
    if (db_failed_or_reply(req, r)) return;
    if (page_cache_reply(mentoring_mentorship_pages, st->key, page_row_version(r, 0), req)) return;
    db_req_query(req, st->sql, 7, st->params, on_list);
}

static void list_mentorships(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *limit, *offset;
    if (!mentoring_page_or_reply(req, &limit, &offset)) return;
    verr_t v = {0};
    const char *status = http_req_query(req, "status");
    const char *coach = http_req_query(req, "coachId");
    const char *teacher = http_req_query(req, "teacherId");
    if (status && !valid_mentorship_status(status))
        verr_add(&v, "status", "must be pending, active, paused or ended");
    if (verr_reply(req, &v)) return;
    if (coach && !*coach) coach = NULL;
    if (teacher && !*teacher) teacher = NULL;
    const char *sql = SQL_M_LIST_ORG;
    perm_actor_t a = perm_actor(c);
    perm_scope_t scope = perm_mentoring_scope(&a);
    if (scope != PERM_SCOPE_ALL) {
        /* coachId / teacherId are filters for managers; a participant sees their own. */
        if (scope == PERM_SCOPE_COACH) {
            sql = SQL_M_LIST_COACH;
            coach = c->user_id;
            teacher = NULL;
        } else {
            sql = SQL_M_LIST_TEACHER;
            teacher = c->user_id;
            coach = NULL;
        }
    }
    const char *show_notes = mentoring_show_notes(c);
    list_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    const char *params[] = {c->org_id, status, coach, teacher, limit, offset, show_notes};
    memcpy(st->params, params, sizeof(params));
    st->sql = sql;
    /* The visibility class is the statement (with the participant's id in coach / teacher)
     * and whether notes show; the rest is the normalized query. */
    const char *class = sql == SQL_M_LIST_ORG     ? "all"
                        : sql == SQL_M_LIST_COACH ? "coach"
                                                  : "teacher";
    const char *fields[] = {class, c->org_id, status, coach, teacher, limit, offset, show_notes};
    st->key = page_cache_key(req, 8, fields);
    req->data = st;
    if (page_cache_has(mentoring_mentorship_pages, st->key)) {
        db_req_query(req, SQL_MENTORING_VERSION, 1, params, on_version);
        return;
    }
    db_req_query(req, sql, 7, params, on_list);
}

/* ---- create ---- */

static const char SQL_M_CREATE[] =
    "WITH chk AS (SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $2) AS org_ok,"
    "   EXISTS (SELECT 1 FROM organization_memberships WHERE organization_id = $2"
    "     AND user_id = $3 AND role_in_organization = 'Coach'"
    "     AND membership_status = 'active') AS coach_ok,"
    "   EXISTS (SELECT 1 FROM organization_memberships WHERE organization_id = $2"
    "     AND user_id = $4 AND role_in_organization = 'Teacher'"
    "     AND membership_status = 'active') AS teacher_ok),"
    " m AS (INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, title,"
    "   description, notes)"
    "   SELECT $1, $2, $3, $4, $5, $6, $7 FROM chk WHERE org_ok AND coach_ok AND teacher_ok"
    "   RETURNING *)"
    " SELECT chk.org_ok, chk.coach_ok, chk.teacher_ok,"
    "   (SELECT json_build_object('data', mentorship_full_json(m::mentorships, c, t, true))"
    "    FROM m JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id)"
    " FROM chk";

static void on_created(http_req_t *req, db_result_t *r)
{
    if (!r->ok && r->sqlstate && strcmp(r->sqlstate, "23505") == 0) {
        http_reply_error(req, 409, "CONFLICT",
                         "A mentorship for this coach and teacher exists in the organization");
        return;
    }
    if (db_failed_or_reply(req, r)) return;
    const char *org_ok = db_get(r, 0, 0), *coach_ok = db_get(r, 0, 1),
               *teacher_ok = db_get(r, 0, 2);
    if (!org_ok || org_ok[0] != 't') {
        http_reply_error(req, 404, "NOT_FOUND", "Organization not found");
    } else if (!coach_ok || coach_ok[0] != 't') {
        http_reply_error(req, 422, "UNPROCESSABLE",
                         "coachId is not a user with the Coach role in this organization");
    } else if (!teacher_ok || teacher_ok[0] != 't') {
        http_reply_error(req, 422, "UNPROCESSABLE",
                         "teacherId is not a user with the Teacher role in this organization");
    } else {
        const char *json = db_get(r, 0, 3);
        http_reply_jsonn(req, 201, json, db_getlen(r, 0, 3));
    }
}

static void create_mentorship(http_req_t *req)
{
    caller_t *c = context_caller(req);
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    verr_t v = {0};
    const char *org = field_str(req, body, "organizationId", &v, true, 1, 64, true);
    const char *coach = field_str(req, body, "coachId", &v, true, 1, 64, true);
    const char *teacher = field_str(req, body, "teacherId", &v, true, 1, 64, true);
    const char *title = field_str(req, body, "title", &v, false, 0, 255, false);
    const char *desc = field_str(req, body, "description", &v, false, 0, 2000, false);
    const char *notes = field_str(req, body, "notes", &v, false, 0, 1000, false);
    if (org && !ids_is_uuid(org)) verr_add(&v, "organizationId", "must be a UUID");
    if (verr_reply(req, &v)) return;
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_replied(req, perm_mentorship_create(&a, org, coach))) return;
    char id[IDS_UUID_LEN + 1];
    new_uuid(id);
    const char *params[] = {id, org, coach, teacher, title, desc, notes};
    db_req_query(req, SQL_M_CREATE, 7, params, on_created);
}

/* ---- get ---- */

static const char SQL_M_GET[] =
    "SELECT m.organization_id, m.coach_id, m.teacher_id,"
    "   json_build_object('data', mentorship_full_json(m, c, t, $2::boolean))"
    " FROM mentorships m JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id"
    " WHERE m.id = $1";

/* 404 / 403 for a mentorship row (organization, coach, teacher in columns 0..2) the caller may
 * not read; false after replying. */
static void on_get(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_MENTORSHIP)) return;
    http_reply_jsonn(req, 200, db_get(r, 0, 3), db_getlen(r, 0, 3));
}

static bool id_param_or_reply(http_req_t *req, const char **id)
{
    *id = http_req_param(req, 0);
    if (!*id || !ids_is_uuid(*id)) {
        http_reply_error(req, 400, "VALIDATION_ERROR", "The mentorship id must be a UUID");
        return false;
    }
    return true;
}

static void get_mentorship(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!id_param_or_reply(req, &id)) return;
    const char *params[] = {id, mentoring_show_notes(c)};
    db_req_query(req, SQL_M_GET, 2, params, on_get);
}

/* ---- update and end ---- */

typedef struct upd_state {
    txreq_t tx;
    const char *id;
    bool has_status, has_title, has_desc, has_notes;
    const char *status, *title, *desc, *notes;
    bool ending;         /* moving to ended: cancel the open sessions */
    const char *notices; /* rendered cancellation notices, or NULL */
    const char *coach_id, *teacher_id;
    bool sessions_changed;
    char *json;
} upd_state_t;

static const char SQL_M_LOCK[] =
    "SELECT organization_id, coach_id, teacher_id, status FROM mentorships WHERE id = $1"
    " FOR UPDATE";

/* The open sessions that ending the mentorship cancels, locked, with their notices. */
static const char SQL_M_OPEN_SESSIONS[] =
    "SELECT count(*), json_agg(e) FROM ("
    "   SELECT session_notice_json(s.id, m, c, t, s.scheduled_at, s.duration_minutes,"
    "     s.timezone) AS n"
    "   FROM mentorship_sessions s JOIN mentorships m ON m.id = s.mentorship_id"
    "   JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id"
    "   WHERE s.mentorship_id = $1 AND s.status IN ('scheduled', 'confirmed')"
    "   FOR UPDATE OF s) x, json_array_elements(x.n) e";

/* $2 status, $3..$8 title/description/notes (flag, value), $9 cancelling user, $10 show notes,
 * $11 ending (cancel the open sessions). A PATCH that changes nothing keeps updatedAt. */
static const char SQL_M_UPDATE[] =
    "WITH m AS (UPDATE mentorships SET status = COALESCE($2, status),"
    "   title = CASE WHEN $3::boolean THEN $4 ELSE title END,"
    "   description = CASE WHEN $5::boolean THEN $6 ELSE description END,"
    "   notes = CASE WHEN $7::boolean THEN $8 ELSE notes END,"
    "   updated_at = CASE WHEN ROW(COALESCE($2, status),"
    "     CASE WHEN $3::boolean THEN $4 ELSE title END,"
    "     CASE WHEN $5::boolean THEN $6 ELSE description END,"
    "     CASE WHEN $7::boolean THEN $8 ELSE notes END)"
    "     IS DISTINCT FROM ROW(status, title, description, notes) THEN now()"
    "     ELSE updated_at END"
    "   WHERE id = $1 RETURNING *),"
    " s AS (UPDATE mentorship_sessions SET status = 'cancelled', cancelled_at = now(),"
    "   cancelled_by = $9, updated_at = now()"
    "   WHERE mentorship_id = $1 AND status IN ('scheduled', 'confirmed') AND $11::boolean"
    "   RETURNING 1)"
    " SELECT (SELECT count(*) FROM s), json_build_object('data',"
    "   mentorship_full_json(m::mentorships, c, t, $10::boolean))"
    " FROM m JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id";

static void upd_on_commit(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (db_failed_or_reply(req, r)) return;
    if (st->notices) outbox_kick();
    if (st->sessions_changed)
        mentoring_publish_session_update(context_caller(req)->org_id, st->id, st->coach_id,
                                         st->teacher_id);
    http_reply_json(req, 200, st->json);
}

static void upd_on_queued(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    txreq_commit(&st->tx, upd_on_commit);
}

static void upd_on_updated(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    st->sessions_changed = db_getll(r, 0, 0, 0) > 0;
    st->json = arena_strndup(&req->arena, db_get(r, 0, 1), db_getlen(r, 0, 1));
    if (st->notices) {
        const char *params[] = {st->notices};
        txreq_query(&st->tx, SQL_MENTORING_QUEUE_NOTICES, 1, params, upd_on_queued);
        return;
    }
    txreq_commit(&st->tx, upd_on_commit);
}

static void upd_write(http_req_t *req)
{
    upd_state_t *st = req->data;
    caller_t *c = context_caller(req);
    const char *params[] = {st->id,
                            st->has_status ? st->status : NULL,
                            st->has_title ? "true" : "false",
                            st->title,
                            st->has_desc ? "true" : "false",
                            st->desc,
                            st->has_notes ? "true" : "false",
                            st->notes,
                            c->user_id,
                            mentoring_show_notes(c),
                            st->ending ? "true" : "false"};
    txreq_query(&st->tx, SQL_M_UPDATE, 11, params, upd_on_updated);
}

static void upd_on_sessions(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    if (db_getll(r, 0, 0, 0) > 0)
        st->notices = mentoring_notices_render(req, MENTORING_NOTICE_CANCELLED, db_get(r, 0, 1));
    upd_write(req);
}

static void upd_on_locked(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    if (!mentoring_changeable_or_replied(&st->tx, r)) return;
    st->coach_id = arena_strdup(&req->arena, db_get(r, 0, 1));
    st->teacher_id = arena_strdup(&req->arena, db_get(r, 0, 2));
    if (st->has_status) {
        mentorship_status_t from, to;
        if (transitions_mentorship_parse(db_get(r, 0, 3), &from) != 0 ||
            transitions_mentorship_parse(st->status, &to) != 0) {
            txreq_error(&st->tx, 500, "INTERNAL", "internal error");
            return;
        }
        if (transitions_mentorship_check(from, to) != 0) {
            char *msg = arena_printf(&req->arena, "A mentorship cannot move from %s to %s",
                                     db_get(r, 0, 3), st->status);
            txreq_error(&st->tx, 422, "INVALID_TRANSITION", msg);
            return;
        }
        st->ending = to == MENTORSHIP_STATUS_ENDED && from != MENTORSHIP_STATUS_ENDED;
    }
    if (st->ending) {
        const char *params[] = {st->id};
        txreq_query(&st->tx, SQL_M_OPEN_SESSIONS, 1, params, upd_on_sessions);
        return;
    }
    upd_write(req);
}

static void upd_on_begin(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    const char *params[] = {st->id};
    txreq_query(&st->tx, SQL_M_LOCK, 1, params, upd_on_locked);
}

static void patch_mentorship(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!id_param_or_reply(req, &id)) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    verr_t v = {0};
    st->has_status = json_has(body, "status");
    st->has_title = json_has(body, "title");
    st->has_desc = json_has(body, "description");
    st->has_notes = json_has(body, "notes");
    if (st->has_status) {
        st->status = field_str(req, body, "status", &v, true, 1, 16, false);
        if (st->status && !valid_mentorship_status(st->status)) {
            verr_add(&v, "status", "must be pending, active, paused or ended");
            st->status = NULL;
        }
    }
    st->title = field_str(req, body, "title", &v, false, 0, 255, false);
    st->desc = field_str(req, body, "description", &v, false, 0, 2000, false);
    st->notes = field_str(req, body, "notes", &v, false, 0, 1000, false);
    if (verr_reply(req, &v)) return;
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_replied(req, perm_mentorship_patch(&a, st->has_status))) return;
    req->data = st;
    txreq_begin(&st->tx, req, upd_on_begin);
}

static void delete_mentorship(http_req_t *req)
{
    const char *id;
    if (!id_param_or_reply(req, &id)) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    st->has_status = true;
    st->status = "ended";
    req->data = st;
    txreq_begin(&st->tx, req, upd_on_begin);
}

static const route_t mentorship_routes[] = {
    {HTTP_M_GET, "/api/mentorships", list_mentorships, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_POST, "/api/mentorships", create_mentorship, AUTH_ORG, ROLE_COACH, 0, 0},
    {HTTP_M_GET, "/api/mentorships/:id", get_mentorship, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_PATCH, "/api/mentorships/:id", patch_mentorship, AUTH_ORG, ROLE_COACH, 0, 0},
    {HTTP_M_DELETE, "/api/mentorships/:id", delete_mentorship, AUTH_ORG, ROLE_MANAGER, 0, 0},
};

void routes_mentorships_register(void)
{
    router_add(mentorship_routes, sizeof(mentorship_routes) / sizeof(mentorship_routes[0]));
}
