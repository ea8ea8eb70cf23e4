/*
 * Video sessions of a mentorship (docs/api.md), the video token and call reactions.
 *
 *   GET    /api/sessions                  participants: own mentorships; Manager+: the org
 *   POST   /api/sessions                  Coach (own mentorship) and above; mentorship active;
 *                                         confirmation mails and pushes
 *   GET    /api/sessions/:id
 *   PATCH  /api/sessions/:id              Teacher: status confirmed only; Coach: everything but
 *                                         confirmed (own); Manager+: all; status moves of
 *                                         domain/transitions.h; to cancelled: mails and pushes
 *   DELETE /api/sessions/:id              cancels (= PATCH status cancelled by Coach and above)
 *   GET    /api/sessions/:id/video-token  AccessToken2 RTC publisher token, 1 hour
 *   POST   /api/sessions/:id/reactions    call-reaction event
 *
 * SQL: db/queries/sessions.sql. Writes are the two steps of routes/txreq.h: BEGIN and the
 * locking read of the mentorship (create) or of the mentorship and then the session (update);
 * the rules are checked in C,
 * the notices rendered from what the locking read returned (start time in each recipient's
 * zone and language); then one statement writes, another queues the notices in the outbox, and
 * COMMIT. session-update is published after commit. The spacing rule is the exclusion constraint
 * mentorship_sessions_spacing (23P01 -> 409 SESSION_CONFLICT), so concurrent creates cannot both
 * win; the session writes of one mentorship take turns on its row lock, so they never wait on
 * each other's uncommitted rows in the constraint (that deadlocked: 40P01, a 500 per loser).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_sessions.h"
#include "domain/accesstoken2.h"
#include "domain/ids.h"
#include "domain/reactions.h"
#include "domain/timefmt.h"
#include "domain/transitions.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/mentoring.h"
#include "routes/perm.h"
#include "routes/page_list.h"
#include "routes/routes.h"
#include "routes/txreq.h"
#include "rt/events.h"
#include "rt/outbox.h"

#define VIDEO_TOKEN_SECONDS 3600

static void list_sessions(http_req_t *req);
static void create_session(http_req_t *req);
static void get_session(http_req_t *req);
static void patch_session(http_req_t *req);
static void delete_session(http_req_t *req);
static void video_token(http_req_t *req);
static void react(http_req_t *req);

/* ---- list ---- */

/* The three list statements (db/queries/sessions.sql) share one column layout; the mentorship,
 * coach and teacher blocks are those that mentoring.h renders. */
_Static_assert(SESSION_LIST_ORG_M_NOTES - SESSION_LIST_ORG_M_ID == MENTORING_M_NOTES &&
                   SESSION_LIST_ORG_M_UPDATED_MS - SESSION_LIST_ORG_M_ID ==
                       MENTORING_M_UPDATED_MS &&
                   SESSION_LIST_ORG_C_ID - SESSION_LIST_ORG_M_ID == MENTORING_M_NCOLS &&
                   SESSION_LIST_ORG_T_ID - SESSION_LIST_ORG_C_ID == MENTORING_U_NCOLS &&
                   SESSION_LIST_ORG_T_AVATAR_URL - SESSION_LIST_ORG_T_ID == MENTORING_U_AVATAR_URL,
               "session list columns match the blocks of mentoring.h");

static bool valid_session_status(const char *s)
{
    session_status_t st;
    return transitions_session_parse(s, &st) == 0;
}

/* An ISO 8601 query or body time, normalized to "YYYY-MM-DDTHH:MM:SS.mmmZ" (arena). */
static const char *iso_or_null(http_req_t *req, const char *s, int64_t *ms)
{
    int64_t v;
    if (!s || timefmt_parse(s, &v) != 0) return NULL;
    char out[TIMEFMT_LEN + 1];
    timefmt_format(v, out);
    if (ms) *ms = v;
    return arena_strdup(&req->arena, out);
}

static void json_time_member(buf_t *b, const char *key, const db_result_t *r, int row, int col)
{
    buf_puts(b, key);
    mentoring_json_time(b, r, row, col);
}

typedef struct list_state {
    page_list_t pl;  /* first: render gets it back */
    bool show_notes; /* the mentorship's notes (hidden from teachers) */
} list_state_t;

/* The same members, in the same order, as session_full_json() (0006_mentorships.sql). */
static long long render_list(http_req_t *req, page_list_t *pl, const db_result_t *r, buf_t *b)
{
    list_state_t *st = (list_state_t *)pl;
    (void)req;
    buf_puts(b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, SESSION_LIST_ORG_ID)) continue;
        json_member(b, items++ ? ",{\"id\":" : "{\"id\":", r, i, SESSION_LIST_ORG_ID);
        json_member(b, ",\"mentorshipId\":", r, i, SESSION_LIST_ORG_MENTORSHIP_ID);
        json_time_member(b, ",\"scheduledAt\":", r, i, SESSION_LIST_ORG_SCHEDULED_MS);
        buf_puts(b, ",\"durationMinutes\":");
        buf_puts(b, db_isnull(r, i, SESSION_LIST_ORG_DURATION_MINUTES)
                        ? "null"
                        : db_get(r, i, SESSION_LIST_ORG_DURATION_MINUTES));
        json_member(b, ",\"timezone\":", r, i, SESSION_LIST_ORG_TIMEZONE);
        json_member(b, ",\"notes\":", r, i, SESSION_LIST_ORG_NOTES);
        json_member(b, ",\"status\":", r, i, SESSION_LIST_ORG_STATUS);
        json_member(b, ",\"videoChannel\":", r, i, SESSION_LIST_ORG_VIDEO_CHANNEL);
        json_time_member(b, ",\"cancelledAt\":", r, i, SESSION_LIST_ORG_CANCELLED_MS);
        json_member(b, ",\"cancelledBy\":", r, i, SESSION_LIST_ORG_CANCELLED_BY);
        json_time_member(b, ",\"completedAt\":", r, i, SESSION_LIST_ORG_COMPLETED_MS);
        json_time_member(b, ",\"createdAt\":", r, i, SESSION_LIST_ORG_CREATED_MS);
        json_time_member(b, ",\"updatedAt\":", r, i, SESSION_LIST_ORG_UPDATED_MS);
        buf_puts(b, ",\"mentorship\":{");
        mentoring_json_mentorship_members(b, r, i, SESSION_LIST_ORG_M_ID, st->show_notes);
        buf_puts(b, "},\"coach\":");
        mentoring_json_user(b, r, i, SESSION_LIST_ORG_C_ID);
        buf_puts(b, ",\"teacher\":");
        mentoring_json_user(b, r, i, SESSION_LIST_ORG_T_ID);
        buf_putc(b, '}');
    }
    buf_printf(b, "],\"meta\":{\"total_count\":%lld}}",
               n > 0 ? db_getll(r, 0, SESSION_LIST_ORG_TOTAL, 0) : 0LL);
    return page_row_version(r, SESSION_LIST_ORG_VERSION);
}

static void list_sessions(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *limit, *offset;
    verr_t v = {0}; /* paging and filters: every failing field in one answer */
    mentoring_paging(req, &v, &limit, &offset);
    const char *status = http_req_query(req, "status");
    const char *mentorship = http_req_query(req, "mentorshipId");
    const char *from_s = http_req_query(req, "from");
    const char *to_s = http_req_query(req, "to");
    const char *from = NULL, *to = NULL;
    if (status && !valid_session_status(status))
        verr_add(&v, "status", "must be scheduled, confirmed, completed, cancelled or missed");
    if (mentorship && !ids_is_uuid(mentorship)) verr_add(&v, "mentorshipId", "must be a UUID");
    if (from_s && !(from = iso_or_null(req, from_s, NULL)))
        verr_add(&v, "from", "must be an ISO 8601 date-time");
    if (to_s && !(to = iso_or_null(req, to_s, NULL)))
        verr_add(&v, "to", "must be an ISO 8601 date-time");
    if (verr_reply(req, &v)) return;
    const char *sql = SQL_SESSION_LIST_ORG, *who = NULL;
    perm_actor_t a = perm_actor(c);
    perm_scope_t scope = perm_mentoring_scope(&a);
    if (scope != PERM_SCOPE_ALL) {
        sql = scope == PERM_SCOPE_COACH ? SQL_SESSION_LIST_COACH : SQL_SESSION_LIST_TEACHER;
        who = c->user_id;
    }
    const char *show_notes = mentoring_show_notes(c);
    list_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    const char *params[] = {c->org_id, status, mentorship, from, to, limit, offset, who};
    page_list_init(&st->pl, mentoring_session_pages, sql, 8, params, SQL_MENTORING_VERSION,
                   c->org_id, render_list, 1400);
    st->show_notes = show_notes[0] == 't';
    /* The visibility class is the statement, the participant (who) and whether notes show;
     * the rest is the normalized query (from / to as normalized ISO text). */
    const char *class = sql == SQL_SESSION_LIST_ORG     ? "all"
                        : sql == SQL_SESSION_LIST_COACH ? "coach"
                                                        : "teacher";
    const char *fields[] = {class, c->org_id, status, mentorship, from,
                            to,    limit,     offset, show_notes, who};
    st->pl.key = page_cache_key(req, 10, fields);
    page_list_reply(req, &st->pl);
}

/* ---- create ---- */

typedef struct create_state {
    txreq_t tx;
    char id[IDS_UUID_LEN + 1];
    const char *mentorship_id, *scheduled_at, *duration, *timezone, *notes;
    const char *coach_id, *teacher_id;
    const char *notices;
} create_state_t;

/* Step 2: the session is in, the notices queued, committed (23P01 -> 409 SESSION_CONFLICT
 * through routes/dbreq.c (dberr_find)). */
static void create_done(http_req_t *req, txreq_t *t, db_result_t *res)
{
    create_state_t *st = req->data;
    (void)t;
    if (st->notices) outbox_kick();
    mentoring_publish_session_update(context_caller(req)->org_id, st->mentorship_id, st->coach_id,
                                     st->teacher_id);
    http_reply_jsonn(req, 201, db_get(res, 0, SESSION_INSERT_JSON),
                     db_getlen(res, 0, SESSION_INSERT_JSON));
}

/* Step 1: the mentorship is locked (FOR NO KEY UPDATE: creates take turns); check it and render
 * the notices. */
static void create_decide(http_req_t *req, txreq_t *t, db_result_t *res)
{
    create_state_t *st = req->data;
    if (!mentoring_changeable_or_replied(t, res)) return;
    st->coach_id = arena_strdup(&req->arena, db_get(res, 0, SESSION_CREATE_LOCK_COACH_ID));
    st->teacher_id = arena_strdup(&req->arena, db_get(res, 0, SESSION_CREATE_LOCK_TEACHER_ID));
    const char *status = db_get(res, 0, SESSION_CREATE_LOCK_STATUS);
    if (strcmp(status, "active") != 0) {
        txreq_error(t, 422, "UNPROCESSABLE", perm_session_needs_active(status));
        return;
    }
    st->notices = mentoring_notices_render(req, MENTORING_NOTICE_SCHEDULED,
                                           db_get(res, 0, SESSION_CREATE_LOCK_NOTICES), &st->notes);
    const char *insert[] = {st->id,       st->mentorship_id, st->scheduled_at,
                            st->duration, st->timezone,      st->notes};
    mentoring_write_then(t, SQL_SESSION_INSERT, 6, insert, st->notices, create_done);
}

/* scheduledAt: ISO 8601 in the future. NULL (and a failure recorded) otherwise. */
static const char *field_future_time(http_req_t *req, json_t *body, verr_t *v, bool required)
{
    int before = v->n;
    const char *s = field_str(req, body, "scheduledAt", v, required, 1, 64, true);
    if (!s || v->n != before) return NULL;
    int64_t ms;
    const char *iso = iso_or_null(req, s, &ms);
    if (!iso) {
        verr_add(v, "scheduledAt", "must be an ISO 8601 date-time with a time zone");
        return NULL;
    }
    if (ms <= wall_ms()) {
        verr_add(v, "scheduledAt", "must be in the future");
        return NULL;
    }
    return iso;
}

/* durationMinutes: an integer 15..480 (as text), NULL when absent or invalid. */
static const char *field_duration(http_req_t *req, json_t *body, verr_t *v)
{
    json_t *j = json_object_get(body, "durationMinutes");
    if (!j || json_is_null(j)) return NULL;
    if (!json_is_integer(j) || json_integer_value(j) < 15 || json_integer_value(j) > 480) {
        verr_add(v, "durationMinutes", "must be an integer from 15 to 480");
        return NULL;
    }
    return arena_printf(&req->arena, "%d", (int)json_integer_value(j));
}

static void create_session(http_req_t *req)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    create_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    verr_t v = {0};
    st->mentorship_id = field_str(req, body, "mentorshipId", &v, true, 1, 64, true);
    if (st->mentorship_id && !ids_is_uuid(st->mentorship_id)) {
        verr_add(&v, "mentorshipId", "must be a UUID");
        st->mentorship_id = NULL;
    }
    st->scheduled_at = field_future_time(req, body, &v, true);
    st->duration = field_duration(req, body, &v);
    st->timezone = field_timezone(req, body, "timezone", &v, false);
    st->notes = field_str(req, body, "notes", &v, false, 0, 2000, false);
    if (verr_reply(req, &v)) return;
    if (!st->duration) st->duration = "60";
    if (!st->timezone) st->timezone = "UTC";
    new_uuid(st->id);
    req->data = st;
    const char *params[] = {st->mentorship_id, st->id, st->scheduled_at, st->duration,
                            st->timezone};
    txreq_stmt_t lock = {SQL_SESSION_CREATE_LOCK, 5, params};
    txreq_read(&st->tx, req, &lock, 1, create_decide);
}

/* ---- get ---- */

/* 404 / 403 for a session whose organization, coach and teacher are in columns 0..2; managers
 * of the organization and both participants may read it. */
static void get_on_loaded(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_SESSION)) return;
    http_reply_jsonn(req, 200, db_get(r, 0, SESSION_GET_JSON), db_getlen(r, 0, SESSION_GET_JSON));
}

static void get_session(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[] = {id, mentoring_show_notes(c)};
    db_req_query(req, SQL_SESSION_GET, 2, params, get_on_loaded);
}

/* ---- update and cancel ---- */

typedef struct upd_state {
    txreq_t tx;
    const char *id;
    bool is_delete;
    const char *scheduled_at, *duration, *timezone, *status;
    bool has_notes;
    const char *notes;
    bool changed;
    const char *notices;
    const char *mentorship_id, *coach_id, *teacher_id;
} upd_state_t;

/* Step 2: the session is written (or, when nothing changed, read again), the notices queued,
 * committed. */
static void upd_done(http_req_t *req, txreq_t *t, db_result_t *res)
{
    upd_state_t *st = req->data;
    (void)t;
    if (st->notices) outbox_kick();
    if (st->changed)
        mentoring_publish_session_update(context_caller(req)->org_id, st->mentorship_id,
                                         st->coach_id, st->teacher_id);
    int col = st->changed ? SESSION_UPDATE_JSON : SESSION_GET_JSON;
    http_reply_jsonn(req, 200, db_get(res, 0, col), db_getlen(res, 0, col));
}

/* Step 1: the mentorship and the session are locked; check the caller and the status move.
 * res[0] is the mentorship's lock, res[1] the session. */
static void upd_decide(http_req_t *req, txreq_t *t, db_result_t *locks)
{
    upd_state_t *st = req->data;
    db_result_t *res = &locks[1];
    caller_t *c = context_caller(req);
    bool found = db_nrows(res) > 0;
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_rolled_back(
            t, perm_session_change(&a, found ? db_get(res, 0, SESSION_LOCK_ORGANIZATION_ID) : NULL,
                                   found ? db_get(res, 0, SESSION_LOCK_COACH_ID) : NULL,
                                   found ? db_get(res, 0, SESSION_LOCK_TEACHER_ID) : NULL)))
        return;
    st->coach_id = arena_strdup(&req->arena, db_get(res, 0, SESSION_LOCK_COACH_ID));
    st->teacher_id = arena_strdup(&req->arena, db_get(res, 0, SESSION_LOCK_TEACHER_ID));
    st->mentorship_id = arena_strdup(&req->arena, db_get(res, 0, SESSION_LOCK_MENTORSHIP_ID));
    const char *current = db_get(res, 0, SESSION_LOCK_STATUS);
    session_status_t from, to;
    if (transitions_session_parse(current, &from) != 0) {
        txreq_error(t, 500, "INTERNAL", "internal error");
        return;
    }
    to = from;
    if (st->status && transitions_session_parse(st->status, &to) != 0) to = from;
    if (transitions_session_check(from, to) != 0) {
        if (st->is_delete)
            txreq_error(t, 422, "INVALID_TRANSITION",
                        arena_printf(&req->arena, "A %s session cannot be cancelled", current));
        else
            txreq_error(t, 422, "INVALID_TRANSITION",
                        arena_printf(&req->arena, "A session cannot move from %s to %s", current,
                                     st->status));
        return;
    }
    bool reschedule = st->scheduled_at || st->duration || st->timezone;
    if (reschedule && transitions_session_is_final(from)) {
        txreq_error(t, 422, "INVALID_TRANSITION",
                    arena_printf(&req->arena, "A %s session cannot be rescheduled", current));
        return;
    }
    /* The same status again is a no-op: it keeps cancelledAt / completedAt as they were. */
    if (to == from) st->status = NULL;
    st->changed = reschedule || st->has_notes || st->status;
    /* A cancellation sends its notices (iCalendar CANCEL); a move, its own (REQUEST). Either
     * takes the session to its next iCalendar SEQUENCE. Both tell the times the session is
     * stored with after this update (a cancellation may move it too), which the feed shows
     * under that same SEQUENCE. */
    const char *const *notes = st->has_notes ? &st->notes : NULL;
    bool cancelling = st->status && to == SESSION_STATUS_CANCELLED;
    if (cancelling)
        st->notices = mentoring_notices_render(req, MENTORING_NOTICE_CANCELLED,
                                               db_get(res, 0, SESSION_LOCK_CHANGED_NOTICES), notes);
    else if (reschedule)
        st->notices = mentoring_notices_render(req, MENTORING_NOTICE_CHANGED,
                                               db_get(res, 0, SESSION_LOCK_CHANGED_NOTICES), notes);
    const char *show = mentoring_show_notes(c);
    if (!st->changed) {
        const char *get[] = {st->id, show};
        txreq_stmt_t read = {SQL_SESSION_GET, 2, get};
        txreq_write(t, &read, 1, upd_done);
        return;
    }
    const char *update[] = {st->id,
                            st->scheduled_at,
                            st->duration,
                            st->timezone,
                            st->has_notes ? "true" : "false",
                            st->notes,
                            st->status,
                            c->user_id,
                            show,
                            cancelling || reschedule ? "true" : "false"};
    mentoring_write_then(t, SQL_SESSION_UPDATE, 10, update, st->notices, upd_done);
}

static void upd_start(http_req_t *req, upd_state_t *st)
{
    req->data = st;
    const char *params[] = {st->id, st->scheduled_at, st->duration, st->timezone};
    /* The mentorship first: the session writes of one mentorship take turns (db/queries). */
    txreq_stmt_t locks[] = {{SQL_SESSION_MENTORSHIP_LOCK, 1, params},
                            {SQL_SESSION_LOCK, 4, params}};
    txreq_read(&st->tx, req, locks, 2, upd_decide);
}

/* A key sent as JSON null where a value is needed. */
static void refuse_null(json_t *body, const char *key, verr_t *v)
{
    json_t *j = json_object_get(body, key);
    if (j && json_is_null(j)) verr_add(v, key, "must not be null");
}

static void patch_session(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    verr_t v = {0};
    refuse_null(body, "scheduledAt", &v);
    refuse_null(body, "durationMinutes", &v);
    refuse_null(body, "timezone", &v);
    refuse_null(body, "status", &v);
    st->scheduled_at = field_future_time(req, body, &v, false);
    st->duration = field_duration(req, body, &v);
    st->timezone = field_timezone(req, body, "timezone", &v, false);
    st->has_notes = json_has(body, "notes");
    st->notes = field_str(req, body, "notes", &v, false, 0, 2000, false);
    int before = v.n;
    st->status = field_str(req, body, "status", &v, false, 1, 16, false);
    if (st->status && v.n == before && !valid_session_status(st->status)) {
        verr_add(&v, "status", "must be scheduled, confirmed, completed, cancelled or missed");
        st->status = NULL;
    }
    if (verr_reply(req, &v)) return;
    perm_actor_t a = perm_actor(c);
    bool other_fields = json_has(body, "scheduledAt") || json_has(body, "durationMinutes") ||
                        json_has(body, "timezone") || st->has_notes;
    if (!perm_allowed_or_replied(req, perm_session_fields(&a, other_fields, st->status))) return;
    upd_start(req, st);
}

static void delete_session(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    st->is_delete = true;
    st->status = "cancelled";
    upd_start(req, st);
}

/* ---- video token ---- */

static void video_on_loaded(http_req_t *req, db_result_t *r)
{
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_SESSION)) return;
    const char *channel = db_get(r, 0, SESSION_GET_VIDEO_CHANNEL);
    if (!channel || !*channel) {
        http_reply_error(req, 422, "UNPROCESSABLE", "The session has no video channel");
        return;
    }
    if (!cfg.video_app_id || !*cfg.video_app_id || !cfg.video_app_certificate ||
        !*cfg.video_app_certificate) {
        http_reply_error(req, 503, "UNAVAILABLE",
                         "Video is not configured: set VIDEO_APP_ID and VIDEO_APP_CERTIFICATE");
        return;
    }
    uint32_t rnd;
    random_bytes(&rnd, sizeof(rnd));
    uint32_t salt = rnd % 99999999u + 1u;
    uint32_t issue = (uint32_t)time(NULL);
    uint32_t uid = accesstoken2_uid_from_user(c->user_id);
    char *token = NULL;
    if (accesstoken2_rtc_publisher(cfg.video_app_id, cfg.video_app_certificate, channel, uid, issue,
                                   salt, VIDEO_TOKEN_SECONDS, &token) != 0) {
        log_error("req %s: video token could not be built", req->id);
        http_reply_error(req, 500, "INTERNAL", "internal error");
        return;
    }
    char expires[TIMEFMT_LEN + 1];
    timefmt_format(((int64_t)issue + VIDEO_TOKEN_SECONDS) * 1000, expires);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"token\":");
    buf_json_str(&b, token);
    buf_puts(&b, ",\"channel\":");
    buf_json_str(&b, channel);
    buf_puts(&b, ",\"appId\":");
    buf_json_str(&b, cfg.video_app_id);
    buf_printf(&b, ",\"uid\":%u,\"expiresAt\":", (unsigned)uid);
    buf_json_str(&b, expires);
    buf_puts(&b, "}}");
    free(token);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void video_token(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    const char *params[] = {id, "false"};
    db_req_query(req, SQL_SESSION_GET, 2, params, video_on_loaded);
}

/* ---- reactions ---- */

typedef struct react_state {
    const char *emoji; /* canonical */
    const char *id;
} react_state_t;

static void react_on_loaded(http_req_t *req, db_result_t *r)
{
    react_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (!db_ok_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_SESSION)) return;
    buf_t d = BUF_INIT;
    buf_puts(&d, "{\"emoji\":");
    buf_json_str(&d, st->emoji);
    buf_puts(&d, ",\"userId\":");
    buf_json_str(&d, c->user_id);
    buf_puts(&d, ",\"sessionId\":");
    buf_json_str(&d, st->id);
    buf_putc(&d, '}');
    events_publish(c->org_id, db_get(r, 0, SESSION_GET_MENTORSHIP_ID), NULL, NULL, "call-reaction",
                   d.data, false);
    char *json = arena_printf(&req->arena, "{\"data\":%s}", d.data);
    buf_free(&d);
    http_reply_json(req, 200, json);
}

static void react(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    react_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    json_t *e = json_object_get(body, "emoji");
    if (!e || json_is_null(e))
        verr_add(&v, "emoji", "is required");
    else if (!json_is_string(e) ||
             !(st->emoji = reactions_canonical(json_string_value(e), json_string_length(e))))
        verr_add(&v, "emoji", "must be one of 👍 ❤️ 😂 🎉 👏 🙌");
    if (verr_reply(req, &v)) return;
    st->id = lower_ascii(req, id);
    req->data = st;
    const char *params[] = {id, "false"};
    db_req_query(req, SQL_SESSION_GET, 2, params, react_on_loaded);
}

static const route_t session_routes[] = {
    {HTTP_M_GET, "/api/sessions", list_sessions, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_POST, "/api/sessions", create_session, AUTH_ORG, ROLE_COACH, 0, 0},
    {HTTP_M_GET, "/api/sessions/:id", get_session, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_PATCH, "/api/sessions/:id", patch_session, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_DELETE, "/api/sessions/:id", delete_session, AUTH_ORG, ROLE_COACH, 0, 0},
    {HTTP_M_GET, "/api/sessions/:id/video-token", video_token, AUTH_ORG, ROLE_TEACHER, 0, 0},
    {HTTP_M_POST, "/api/sessions/:id/reactions", react, AUTH_ORG, ROLE_TEACHER, 0, 0},
};

void routes_sessions_register(void)
{
    router_add(session_routes, sizeof(session_routes) / sizeof(session_routes[0]));
}
