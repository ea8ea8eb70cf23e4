/*
 * Mentorships (docs/api.md "Mentorships"): one coach and one teacher of an organization.
 *
 *   GET    /api/mentorships       Coach: own; Teacher: own; Manager and above: all in the org
 *   POST   /api/mentorships       Coach (for themselves) and above; 201 pending
 *   GET    /api/mentorships/:id   participants, or Manager and above in the org
 *   PATCH  /api/mentorships/:id   Coach: title/description/notes of own; Manager+: all, status
 *                                 moves of domain/transitions.h
 *   DELETE /api/mentorships/:id   Manager+: ends it and cancels its scheduled and confirmed
 *                                 sessions (cancellation mails and pushes)
 *
 * SQL: db/queries/mentorships.sql. Reads are one statement each (coach and teacher joined once
 * per page, never a query per row);
 * the list is rendered to JSON in C from plain rows, a single mentorship by PostgreSQL
 * (mentorship_full_json). The pair rule is the unique index
 * mentorships_pair_uniq. PATCH and DELETE are the two steps of routes/txreq.h: the mentorship row
 * is locked (FOR UPDATE), the transition is checked in C, and ending it cancels the open sessions,
 * which session creation respects because it locks the mentorship FOR SHARE. Notes are internal: a
 * Teacher caller gets notes null.
 */
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_mentorships.h"
#include "domain/ids.h"
#include "domain/transitions.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/dbreq.h"
#include "routes/perm.h"
#include "routes/mentoring.h"
#include "routes/page_list.h"
#include "routes/routes.h"
#include "routes/txreq.h"
#include "rt/outbox.h"

static void list_mentorships(http_req_t *req);
static void create_mentorship(http_req_t *req);
static void get_mentorship(http_req_t *req);
static void patch_mentorship(http_req_t *req);
static void delete_mentorship(http_req_t *req);

/* ---- list ---- */

/* The three list statements (db/queries/mentorships.sql) share one column layout; the
 * mentorship, coach and teacher blocks are those that mentoring.h renders. */
_Static_assert(MENTORSHIP_LIST_ORG_M_NOTES - MENTORSHIP_LIST_ORG_M_ID == MENTORING_M_NOTES &&
                   MENTORSHIP_LIST_ORG_M_UPDATED_MS - MENTORSHIP_LIST_ORG_M_ID ==
                       MENTORING_M_UPDATED_MS &&
                   MENTORSHIP_LIST_ORG_C_ID - MENTORSHIP_LIST_ORG_M_ID == MENTORING_M_NCOLS &&
                   MENTORSHIP_LIST_ORG_T_ID - MENTORSHIP_LIST_ORG_C_ID == MENTORING_U_NCOLS &&
                   MENTORSHIP_LIST_ORG_T_AVATAR_URL - MENTORSHIP_LIST_ORG_T_ID ==
                       MENTORING_U_AVATAR_URL,
               "mentorship list columns match the blocks of mentoring.h");

static bool valid_mentorship_status(const char *s)
{
    mentorship_status_t st;
    return transitions_mentorship_parse(s, &st) == 0;
}

typedef struct list_state {
    page_list_t pl;  /* first: render gets it back */
    bool show_notes; /* hidden from teachers */
} list_state_t;

/* The same members, in the same order, as mentorship_full_json() (0006_mentorships.sql). */
static long long render_list(http_req_t *req, page_list_t *pl, const db_result_t *r, buf_t *b)
{
    list_state_t *st = (list_state_t *)pl;
    (void)req;
    buf_puts(b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, MENTORSHIP_LIST_ORG_M_ID)) continue;
        buf_puts(b, items++ ? ",{" : "{");
        mentoring_json_mentorship_members(b, r, i, MENTORSHIP_LIST_ORG_M_ID, st->show_notes);
        buf_puts(b, ",\"coach\":");
        mentoring_json_user(b, r, i, MENTORSHIP_LIST_ORG_C_ID);
        buf_puts(b, ",\"teacher\":");
        mentoring_json_user(b, r, i, MENTORSHIP_LIST_ORG_T_ID);
        buf_putc(b, '}');
    }
    buf_printf(b, "],\"meta\":{\"total_count\":%lld}}",
               n > 0 ? db_getll(r, 0, MENTORSHIP_LIST_ORG_TOTAL, 0) : 0LL);
    return page_row_version(r, MENTORSHIP_LIST_ORG_VERSION);
}

static void list_mentorships(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *limit, *offset;
    verr_t v = {0}; /* paging and filters: every failing field in one answer */
    mentoring_paging(req, &v, &limit, &offset);
    const char *status = http_req_query(req, "status");
    const char *coach = http_req_query(req, "coachId");
    const char *teacher = http_req_query(req, "teacherId");
    if (status && !valid_mentorship_status(status))
        verr_add(&v, "status", "must be pending, active, paused or ended");
    if (verr_reply(req, &v)) return;
    if (coach && !*coach) coach = NULL;
    if (teacher && !*teacher) teacher = NULL;
    const char *sql = SQL_MENTORSHIP_LIST_ORG;
    perm_actor_t a = perm_actor(c);
    perm_scope_t scope = perm_mentoring_scope(&a);
    if (scope != PERM_SCOPE_ALL) {
        /* coachId / teacherId are filters for managers; a participant sees their own. */
        if (scope == PERM_SCOPE_COACH) {
            sql = SQL_MENTORSHIP_LIST_COACH;
            coach = c->user_id;
            teacher = NULL;
        } else {
            sql = SQL_MENTORSHIP_LIST_TEACHER;
            teacher = c->user_id;
            coach = NULL;
        }
    }
    const char *show_notes = mentoring_show_notes(c);
    list_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    const char *params[] = {c->org_id, status, coach, teacher, limit, offset};
    page_list_init(&st->pl, mentoring_mentorship_pages, sql, 6, params, SQL_MENTORING_VERSION,
                   c->org_id, render_list, 800);
    st->show_notes = show_notes[0] == 't';
    /* The visibility class is the statement (with the participant's id in coach / teacher)
     * and whether notes show; the rest is the normalized query. */
    const char *class = sql == SQL_MENTORSHIP_LIST_ORG     ? "all"
                        : sql == SQL_MENTORSHIP_LIST_COACH ? "coach"
                                                           : "teacher";
    const char *fields[] = {class, c->org_id, status, coach, teacher, limit, offset, show_notes};
    st->pl.key = page_cache_key(req, 8, fields);
    page_list_reply(req, &st->pl);
}

/* ---- create ---- */

static void on_created(http_req_t *req, db_result_t *r)
{
    /* mentorships_pair_uniq (23505) -> 409 CONFLICT through routes/dbreq.c (dberr_find) */
    if (!db_ok_or_reply(req, r)) return;
    const char *org_ok = db_get(r, 0, MENTORSHIP_CREATE_ORG_OK),
               *coach_ok = db_get(r, 0, MENTORSHIP_CREATE_COACH_OK),
               *teacher_ok = db_get(r, 0, MENTORSHIP_CREATE_TEACHER_OK);
    if (!org_ok || org_ok[0] != 't') {
        http_reply_error(req, 404, "NOT_FOUND", "Organization not found");
    } else if (!coach_ok || coach_ok[0] != 't') {
        http_reply_error(req, 422, "UNPROCESSABLE",
                         "coachId is not a user with the Coach role in this organization");
    } else if (!teacher_ok || teacher_ok[0] != 't') {
        http_reply_error(req, 422, "UNPROCESSABLE",
                         "teacherId is not a user with the Teacher role in this organization");
    } else {
        http_reply_jsonn(req, 201, db_get(r, 0, MENTORSHIP_CREATE_JSON),
                         db_getlen(r, 0, MENTORSHIP_CREATE_JSON));
    }
}

static void create_mentorship(http_req_t *req)
{
    caller_t *c = context_caller(req);
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
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
    db_req_query(req, SQL_MENTORSHIP_CREATE, 7, params, on_created);
}

/* ---- get ---- */

/* 404 / 403 for a mentorship row (organization, coach, teacher in columns 0..2) the caller may
 * not read; false after replying. */
static void on_get(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_MENTORSHIP)) return;
    http_reply_jsonn(req, 200, db_get(r, 0, MENTORSHIP_GET_JSON),
                     db_getlen(r, 0, MENTORSHIP_GET_JSON));
}

static void get_mentorship(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[] = {id, mentoring_show_notes(c)};
    db_req_query(req, SQL_MENTORSHIP_GET, 2, params, on_get);
}

/* ---- update and end ---- */

typedef struct upd_state {
    txreq_t tx;
    const char *id;
    bool has_status, has_title, has_desc, has_notes;
    const char *status, *title, *desc, *notes;
    const char *notices; /* rendered cancellation notices, or NULL */
    const char *coach_id, *teacher_id;
} upd_state_t;

/* Step 2: written, notices queued, committed. */
static void upd_done(http_req_t *req, txreq_t *t, db_result_t *res)
{
    upd_state_t *st = req->data;
    (void)t;
    if (st->notices) outbox_kick();
    if (db_getll(res, 0, MENTORSHIP_UPDATE_SESSIONS_CANCELLED, 0) > 0)
        mentoring_publish_session_update(context_caller(req)->org_id, st->id, st->coach_id,
                                         st->teacher_id);
    http_reply_jsonn(req, 200, db_get(res, 0, MENTORSHIP_UPDATE_JSON),
                     db_getlen(res, 0, MENTORSHIP_UPDATE_JSON));
}

/* Step 1: the mentorship is locked (and, when the request ends it, its open sessions, in
 * res[1]); check the caller and the status move. */
static void upd_decide(http_req_t *req, txreq_t *t, db_result_t *res)
{
    upd_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!mentoring_changeable_or_replied(t, res)) return;
    st->coach_id = arena_strdup(&req->arena, db_get(res, 0, MENTORSHIP_LOCK_COACH_ID));
    st->teacher_id = arena_strdup(&req->arena, db_get(res, 0, MENTORSHIP_LOCK_TEACHER_ID));
    bool ending = false;
    if (st->has_status) {
        const char *current = db_get(res, 0, MENTORSHIP_LOCK_STATUS);
        mentorship_status_t from, to;
        if (transitions_mentorship_parse(current, &from) != 0 ||
            transitions_mentorship_parse(st->status, &to) != 0) {
            txreq_error(t, 500, "INTERNAL", "internal error");
            return;
        }
        if (transitions_mentorship_check(from, to) != 0) {
            char *msg = arena_printf(&req->arena, "A mentorship cannot move from %s to %s", current,
                                     st->status);
            txreq_error(t, 422, "INVALID_TRANSITION", msg);
            return;
        }
        ending = to == MENTORSHIP_STATUS_ENDED && from != MENTORSHIP_STATUS_ENDED;
    }
    const db_result_t *open = &res[1];
    if (ending && db_getll(open, 0, MENTORSHIP_OPEN_SESSIONS_COUNT, 0) > 0)
        st->notices =
            mentoring_notices_render(req, MENTORING_NOTICE_CANCELLED,
                                     db_get(open, 0, MENTORSHIP_OPEN_SESSIONS_NOTICES), NULL);
    const char *update[] = {st->id,
                            st->has_status ? st->status : NULL,
                            st->has_title ? "true" : "false",
                            st->title,
                            st->has_desc ? "true" : "false",
                            st->desc,
                            st->has_notes ? "true" : "false",
                            st->notes,
                            c->user_id,
                            mentoring_show_notes(c),
                            ending ? "true" : "false"};
    mentoring_write_then(t, SQL_MENTORSHIP_UPDATE, 11, update, st->notices, upd_done);
}

/* Locks the mentorship; a request that ends it also locks and reads its open sessions, after
 * the mentorship, so a session created meanwhile is among them. */
static void upd_start(http_req_t *req, upd_state_t *st)
{
    req->data = st;
    const char *params[] = {st->id};
    txreq_stmt_t reads[] = {{SQL_MENTORSHIP_LOCK, 1, params},
                            {SQL_MENTORSHIP_OPEN_SESSIONS, 1, params}};
    bool ends = st->has_status && st->status && strcmp(st->status, "ended") == 0;
    txreq_read(&st->tx, req, reads, ends ? 2 : 1, upd_decide);
}

static void patch_mentorship(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
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
    upd_start(req, st);
}

static void delete_mentorship(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    st->has_status = true;
    st->status = "ended";
    upd_start(req, st);
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
