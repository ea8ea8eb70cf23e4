/*
 * Video sessions of a mentorship (INTERFACE.md "Sessions"), the video token and call reactions.
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
 * Writes run in a transaction (routes/txreq.h): the mentorship (create) or the session (update)
 * is locked, the rules are checked in C, the notices are rendered from what the locking read
 * returned (start time in each recipient's zone and language), then one statement writes and
 * another queues the notices in the outbox, and COMMIT. session-update is published after
 * commit. The spacing rule is the exclusion constraint mentorship_sessions_spacing (23P01 ->
 * 409 SESSION_CONFLICT), so concurrent creates cannot both win.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "domain/accesstoken2.h"
#include "domain/ids.h"
#include "domain/reactions.h"
#include "domain/timefmt.h"
#include "domain/transitions.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/perm.h"
#include "routes/mentoring.h"
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

static bool is_sqlstate(const db_result_t *r, const char *state)
{
    return !r->ok && r->sqlstate && strcmp(r->sqlstate, state) == 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- list ---- */

/* $1 org, $2 status, $3 mentorship, $4 from, $5 to, $6 limit, $7 offset, $8 show mentorship
 * notes, $9 the participant. The from/to bounds are always present (infinite when unset) so
 * that the (organization_id, scheduled_at) index serves them in a generic plan too.
 *
 * Plain rows, rendered to JSON in C (on_list): column 0 the total count (an index-only count
 * over the covering org index), 1 the organization's mentoring-list version (same snapshot, for
 * the page cache of mentoring.h), then one session per row (S_COL_*), its mentorship, coach and
 * teacher joined once per page. A page past the end is one row whose session columns are NULL,
 * so the count still comes back. */
#define SQL_S_LIST(WHERE_)                                                                                                                                                                                     \
    "WITH f AS NOT MATERIALIZED (SELECT s.* FROM mentorship_sessions s WHERE " WHERE_                                                                                                                          \
    "   AND s.scheduled_at >= COALESCE($4::timestamptz, '-infinity')"                                                                                                                                          \
    "   AND s.scheduled_at <= COALESCE($5::timestamptz, 'infinity')"                                                                                                                                           \
    "   AND ($2::text IS NULL OR s.status = $2) AND ($3::uuid IS NULL OR s.mentorship_id = $3))"                                                                                                               \
    " SELECT h.total, h.ver, p.* FROM (SELECT count(*) AS total, (SELECT sum(version)::bigint"                                                                                                                 \
    "   FROM mentoring_list_versions WHERE organization_id = $1::uuid) AS ver FROM f) h"                                                                                                                       \
    " LEFT JOIN LATERAL ("                                                                                                                                                                                     \
    "   SELECT s.id AS sid, s.mentorship_id, " MENTORING_MS(                                                                                                                                                   \
        "s.scheduled_at") ", s.duration_minutes,"                                                                                                                                                              \
                          "     s.timezone, s.notes, s.status, s.video_channel, " MENTORING_MS(                                                                                                                \
                              "s.cancelled_at") ","                                                                                                                                                            \
                                                "     s.cancelled_by, " MENTORING_MS(                                                                                                                          \
                                                    "s.completed_at") ", " MENTORING_MS("s."                                                                                                                   \
                                                                                        "created_"                                                                                                             \
                                                                                        "at") ","                                                                                                              \
                                                                                              "  "                                                                                                             \
                                                                                              "  "                                                                                                             \
                                                                                              " " MENTORING_MS("s.updated_at") ", " MENTORING_MENTORSHIP_COLS(                                                 \
                                                                                                  "m",                                                                                                         \
                                                                                                  "$8::boolean") ","                                                                                           \
                                                                                                                 "     " MENTORING_USER_COLS("c") ", " MENTORING_USER_COLS(                                    \
                                                                                                                     "t") ", s.scheduled_at AS k1"                                                             \
                                                                                                                          "   FROM (SELECT * FROM f ORDER BY scheduled_at, id LIMIT $6::int OFFSET $7::int) s" \
                                                                                                                          "   JOIN mentorships m ON m.id = s.mentorship_id JOIN users c ON c.id = m.coach_id"  \
                                                                                                                          "   JOIN users t ON t.id = m.teacher_id) p ON true"                                  \
                                                                                                                          " ORDER BY p.k1, p.sid"

enum {
    S_COL_VERSION = 1,
    S_COL_ID,
    S_COL_MENTORSHIP_ID,
    S_COL_SCHEDULED,
    S_COL_DURATION,
    S_COL_TIMEZONE,
    S_COL_NOTES,
    S_COL_STATUS,
    S_COL_CHANNEL,
    S_COL_CANCELLED,
    S_COL_CANCELLED_BY,
    S_COL_COMPLETED,
    S_COL_CREATED,
    S_COL_UPDATED,
    S_COL_MENTORSHIP,
    S_COL_COACH = S_COL_MENTORSHIP + MENTORING_MENTORSHIP_NCOLS,
    S_COL_TEACHER = S_COL_COACH + MENTORING_USER_NCOLS,
};

static const char SQL_S_LIST_ORG[] = SQL_S_LIST("s.organization_id = $1 AND $9::text IS NULL");
static const char SQL_S_LIST_COACH[] =
    SQL_S_LIST("s.mentorship_id IN (SELECT id FROM mentorships WHERE coach_id = $9"
               " AND organization_id = $1)");
static const char SQL_S_LIST_TEACHER[] =
    SQL_S_LIST("s.mentorship_id IN (SELECT id FROM mentorships WHERE teacher_id = $9"
               " AND organization_id = $1)");

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

static void json_str_member(buf_t *b, const char *key, const db_result_t *r, int row, int col)
{
    buf_puts(b, key);
    buf_json_str(b, db_get(r, row, col));
}

static void json_time_member(buf_t *b, const char *key, const db_result_t *r, int row, int col)
{
    buf_puts(b, key);
    mentoring_json_time(b, r, row, col);
}

typedef struct list_state {
    const char *sql;
    const char *params[9];
    const char *key; /* page cache key */
} list_state_t;

/* The same members, in the same order, as session_full_json() (0006_mentorships.sql). */
static void on_list(http_req_t *req, db_result_t *r)
{
    list_state_t *st = req->data;
    if (db_failed_or_reply(req, r)) return;
    buf_t b = BUF_INIT;
    buf_reserve(&b, 64 + (size_t)db_nrows(r) * 1400);
    buf_puts(&b, "{\"data\":[");
    int n = db_nrows(r), items = 0;
    for (int i = 0; i < n; i++) {
        if (db_isnull(r, i, S_COL_ID)) continue;
        json_str_member(&b, items++ ? ",{\"id\":" : "{\"id\":", r, i, S_COL_ID);
        json_str_member(&b, ",\"mentorshipId\":", r, i, S_COL_MENTORSHIP_ID);
        json_time_member(&b, ",\"scheduledAt\":", r, i, S_COL_SCHEDULED);
        buf_puts(&b, ",\"durationMinutes\":");
        buf_puts(&b, db_isnull(r, i, S_COL_DURATION) ? "null" : db_get(r, i, S_COL_DURATION));
        json_str_member(&b, ",\"timezone\":", r, i, S_COL_TIMEZONE);
        json_str_member(&b, ",\"notes\":", r, i, S_COL_NOTES);
        json_str_member(&b, ",\"status\":", r, i, S_COL_STATUS);
        json_str_member(&b, ",\"videoChannel\":", r, i, S_COL_CHANNEL);
        json_time_member(&b, ",\"cancelledAt\":", r, i, S_COL_CANCELLED);
        json_str_member(&b, ",\"cancelledBy\":", r, i, S_COL_CANCELLED_BY);
        json_time_member(&b, ",\"completedAt\":", r, i, S_COL_COMPLETED);
        json_time_member(&b, ",\"createdAt\":", r, i, S_COL_CREATED);
        json_time_member(&b, ",\"updatedAt\":", r, i, S_COL_UPDATED);
        buf_puts(&b, ",\"mentorship\":{");
        mentoring_json_mentorship_members(&b, r, i, S_COL_MENTORSHIP);
        buf_puts(&b, "},\"coach\":");
        mentoring_json_user(&b, r, i, S_COL_COACH);
        buf_puts(&b, ",\"teacher\":");
        mentoring_json_user(&b, r, i, S_COL_TEACHER);
        buf_putc(&b, '}');
    }
    buf_printf(&b, "],\"meta\":{\"total_count\":%lld}}", n > 0 ? db_getll(r, 0, 0, 0) : 0LL);
    if (n > 0)
        page_cache_put(mentoring_session_pages, st->key, page_row_version(r, S_COL_VERSION), b.data,
                       b.len);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

/* A cached page was found: reuse it when the version is still current, else read afresh. */
static void on_version(http_req_t *req, db_result_t *r)
{
    list_state_t *st = req->data;
    if (db_failed_or_reply(req, r)) return;
    if (page_cache_reply(mentoring_session_pages, st->key, page_row_version(r, 0), req)) return;
    db_req_query(req, st->sql, 9, st->params, on_list);
}

static void list_sessions(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *limit, *offset;
    if (!mentoring_page_or_reply(req, &limit, &offset)) return;
    verr_t v = {0};
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
    const char *sql = SQL_S_LIST_ORG, *who = NULL;
    perm_actor_t a = perm_actor(c);
    perm_scope_t scope = perm_mentoring_scope(&a);
    if (scope != PERM_SCOPE_ALL) {
        sql = scope == PERM_SCOPE_COACH ? SQL_S_LIST_COACH : SQL_S_LIST_TEACHER;
        who = c->user_id;
    }
    const char *show_notes = mentoring_show_notes(c);
    list_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    const char *params[] = {c->org_id, status, mentorship, from, to,
                            limit,     offset, show_notes, who};
    memcpy(st->params, params, sizeof(params));
    st->sql = sql;
    /* The visibility class is the statement, the participant (who) and whether notes show;
     * the rest is the normalized query (from / to as normalized ISO text). */
    const char *class = sql == SQL_S_LIST_ORG     ? "all"
                        : sql == SQL_S_LIST_COACH ? "coach"
                                                  : "teacher";
    const char *fields[] = {class, c->org_id, status, mentorship, from,
                            to,    limit,     offset, show_notes, who};
    st->key = page_cache_key(req, 10, fields);
    req->data = st;
    if (page_cache_has(mentoring_session_pages, st->key)) {
        db_req_query(req, SQL_MENTORING_VERSION, 1, params, on_version);
        return;
    }
    db_req_query(req, sql, 9, params, on_list);
}

/* ---- create ---- */

typedef struct create_state {
    txreq_t tx;
    char id[IDS_UUID_LEN + 1];
    const char *mentorship_id, *scheduled_at, *duration, *timezone, *notes;
    const char *coach_id, *teacher_id;
    const char *notices;
    char *json;
} create_state_t;

/* Locks the mentorship FOR SHARE (so it cannot end meanwhile) and prepares the notices. */
static const char SQL_S_CREATE_LOAD[] =
    "SELECT m.organization_id, m.coach_id, m.teacher_id, m.status,"
    "   session_notice_json($2::uuid, m, c, t, $3::timestamptz, $4::int, $5)"
    " FROM mentorships m JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id"
    " WHERE m.id = $1 FOR SHARE OF m";

static const char SQL_S_INSERT[] =
    "WITH s AS (INSERT INTO mentorship_sessions (id, mentorship_id, organization_id,"
    "   scheduled_at, duration_minutes, timezone, notes, video_channel)"
    "   SELECT $1::uuid, m.id, m.organization_id, $3::timestamptz, $4::int, $5, $6,"
    "     'ms_' || $1::uuid || '_' || floor(extract(epoch FROM now()) * 1000)::bigint"
    "   FROM mentorships m WHERE m.id = $2 RETURNING *)"
    " SELECT json_build_object('data', session_full_json(s::mentorship_sessions, m, c, t, true))"
    " FROM s JOIN mentorships m ON m.id = s.mentorship_id JOIN users c ON c.id = m.coach_id"
    " JOIN users t ON t.id = m.teacher_id";

static void create_on_commit(http_req_t *req, db_result_t *r)
{
    create_state_t *st = req->data;
    if (is_sqlstate(r, "23P01")) {
        http_reply_error(req, 409, "SESSION_CONFLICT",
                         "Another session of this mentorship is within 15 minutes");
        return;
    }
    if (db_failed_or_reply(req, r)) return;
    if (st->notices) outbox_kick();
    mentoring_publish_session_update(context_caller(req)->org_id, st->mentorship_id, st->coach_id,
                                     st->teacher_id);
    http_reply_json(req, 201, st->json);
}

static void create_on_queued(http_req_t *req, db_result_t *r)
{
    create_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    txreq_commit(&st->tx, create_on_commit);
}

static void create_on_inserted(http_req_t *req, db_result_t *r)
{
    create_state_t *st = req->data;
    if (is_sqlstate(r, "23P01")) {
        txreq_error(&st->tx, 409, "SESSION_CONFLICT",
                    "Another session of this mentorship is within 15 minutes");
        return;
    }
    if (txreq_failed_or_reply(&st->tx, r)) return;
    st->json = arena_strndup(&req->arena, db_get(r, 0, 0), db_getlen(r, 0, 0));
    if (st->notices) {
        const char *params[] = {st->notices};
        txreq_query(&st->tx, SQL_MENTORING_QUEUE_NOTICES, 1, params, create_on_queued);
        return;
    }
    txreq_commit(&st->tx, create_on_commit);
}

static void create_on_loaded(http_req_t *req, db_result_t *r)
{
    create_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    if (!mentoring_changeable_or_replied(&st->tx, r)) return;
    st->coach_id = arena_strdup(&req->arena, db_get(r, 0, 1));
    st->teacher_id = arena_strdup(&req->arena, db_get(r, 0, 2));
    if (strcmp(db_get(r, 0, 3), "active") != 0) {
        txreq_error(&st->tx, 422, "UNPROCESSABLE", "The mentorship is not active");
        return;
    }
    st->notices = mentoring_notices_render(req, MENTORING_NOTICE_SCHEDULED, db_get(r, 0, 4));
    const char *params[] = {st->id,       st->mentorship_id, st->scheduled_at,
                            st->duration, st->timezone,      st->notes};
    txreq_query(&st->tx, SQL_S_INSERT, 6, params, create_on_inserted);
}

static void create_on_begin(http_req_t *req, db_result_t *r)
{
    create_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    const char *params[] = {st->mentorship_id, st->id, st->scheduled_at, st->duration,
                            st->timezone};
    txreq_query(&st->tx, SQL_S_CREATE_LOAD, 5, params, create_on_loaded);
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
    if (ms <= now_ms()) {
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

static const char *field_timezone(http_req_t *req, json_t *body, verr_t *v)
{
    int before = v->n;
    const char *s = field_str(req, body, "timezone", v, false, 1, VALIDATE_TZ_MAX, true);
    if (!s || v->n != before) return NULL;
    if (!validate_is_timezone(s)) {
        verr_add(v, "timezone", "must be an IANA time zone");
        return NULL;
    }
    return s;
}

static void create_session(http_req_t *req)
{
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    create_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    verr_t v = {0};
    st->mentorship_id = field_str(req, body, "mentorshipId", &v, true, 1, 64, true);
    if (st->mentorship_id && !ids_is_uuid(st->mentorship_id)) {
        verr_add(&v, "mentorshipId", "must be a UUID");
        st->mentorship_id = NULL;
    }
    st->scheduled_at = field_future_time(req, body, &v, true);
    st->duration = field_duration(req, body, &v);
    st->timezone = field_timezone(req, body, &v);
    st->notes = field_str(req, body, "notes", &v, false, 0, 2000, false);
    if (verr_reply(req, &v)) return;
    if (!st->duration) st->duration = "60";
    if (!st->timezone) st->timezone = "UTC";
    new_uuid(st->id);
    req->data = st;
    txreq_begin(&st->tx, req, create_on_begin);
}

/* ---- get ---- */

static const char SQL_S_GET[] =
    "SELECT m.organization_id, m.coach_id, m.teacher_id,"
    "   json_build_object('data', session_full_json(s, m, c, t, $2::boolean)),"
    "   s.video_channel, s.mentorship_id"
    " FROM mentorship_sessions s JOIN mentorships m ON m.id = s.mentorship_id"
    " JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id WHERE s.id = $1";

static bool session_id_or_reply(http_req_t *req, const char **id)
{
    *id = http_req_param(req, 0);
    if (!*id || !ids_is_uuid(*id)) {
        http_reply_error(req, 400, "VALIDATION_ERROR", "The session id must be a UUID");
        return false;
    }
    return true;
}

/* 404 / 403 for a session whose organization, coach and teacher are in columns 0..2; managers
 * of the organization and both participants may read it. */
static void get_on_loaded(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_SESSION)) return;
    http_reply_jsonn(req, 200, db_get(r, 0, 3), db_getlen(r, 0, 3));
}

static void get_session(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *id;
    if (!session_id_or_reply(req, &id)) return;
    const char *params[] = {id, mentoring_show_notes(c)};
    db_req_query(req, SQL_S_GET, 2, params, get_on_loaded);
}

/* ---- update and cancel ---- */

typedef struct upd_state {
    txreq_t tx;
    const char *id;
    bool is_delete;
    const char *scheduled_at, *duration, *timezone, *status;
    bool has_notes;
    const char *notes;
    bool cancelling, changed;
    const char *notices;
    const char *mentorship_id, *coach_id, *teacher_id;
    char *json;
} upd_state_t;

static const char SQL_S_LOCK[] =
    "SELECT m.organization_id, m.coach_id, m.teacher_id, s.status, s.mentorship_id,"
    "   session_notice_json(s.id, m, c, t, s.scheduled_at, s.duration_minutes, s.timezone)"
    " FROM mentorship_sessions s JOIN mentorships m ON m.id = s.mentorship_id"
    " JOIN users c ON c.id = m.coach_id JOIN users t ON t.id = m.teacher_id"
    " WHERE s.id = $1 FOR UPDATE OF s";

/* $2 scheduledAt, $3 duration, $4 timezone, $5/$6 notes (flag, value), $7 status, $8 caller,
 * $9 show mentorship notes. */
static const char SQL_S_UPDATE[] =
    "WITH s AS (UPDATE mentorship_sessions SET"
    "   scheduled_at = COALESCE($2::timestamptz, scheduled_at),"
    "   duration_minutes = COALESCE($3::int, duration_minutes),"
    "   timezone = COALESCE($4, timezone),"
    "   notes = CASE WHEN $5::boolean THEN $6 ELSE notes END,"
    "   status = COALESCE($7, status),"
    "   cancelled_at = CASE WHEN $7 = 'cancelled' THEN now() ELSE cancelled_at END,"
    "   cancelled_by = CASE WHEN $7 = 'cancelled' THEN $8 ELSE cancelled_by END,"
    "   completed_at = CASE WHEN $7 = 'completed' THEN now() ELSE completed_at END,"
    "   updated_at = now()"
    "   WHERE id = $1 RETURNING *)"
    " SELECT json_build_object('data', session_full_json(s::mentorship_sessions, m, c, t,"
    "   $9::boolean))"
    " FROM s JOIN mentorships m ON m.id = s.mentorship_id JOIN users c ON c.id = m.coach_id"
    " JOIN users t ON t.id = m.teacher_id";

static void upd_on_commit(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (is_sqlstate(r, "23P01")) {
        http_reply_error(req, 409, "SESSION_CONFLICT",
                         "Another session of this mentorship is within 15 minutes");
        return;
    }
    if (db_failed_or_reply(req, r)) return;
    if (st->notices) outbox_kick();
    if (st->changed)
        mentoring_publish_session_update(context_caller(req)->org_id, st->mentorship_id,
                                         st->coach_id, st->teacher_id);
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
    if (is_sqlstate(r, "23P01")) {
        txreq_error(&st->tx, 409, "SESSION_CONFLICT",
                    "Another session of this mentorship is within 15 minutes");
        return;
    }
    if (txreq_failed_or_reply(&st->tx, r)) return;
    st->json = arena_strndup(&req->arena, db_get(r, 0, 0), db_getlen(r, 0, 0));
    if (st->notices) {
        const char *params[] = {st->notices};
        txreq_query(&st->tx, SQL_MENTORING_QUEUE_NOTICES, 1, params, upd_on_queued);
        return;
    }
    txreq_commit(&st->tx, upd_on_commit);
}

static void upd_on_current(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    st->json = arena_strndup(&req->arena, db_get(r, 0, 3), db_getlen(r, 0, 3));
    txreq_commit(&st->tx, upd_on_commit);
}

static void upd_on_locked(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    caller_t *c = context_caller(req);
    if (txreq_failed_or_reply(&st->tx, r)) return;
    bool found = db_nrows(r) > 0;
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_rolled_back(&st->tx,
                                     perm_session_change(&a, found ? db_get(r, 0, 0) : NULL,
                                                         found ? db_get(r, 0, 1) : NULL,
                                                         found ? db_get(r, 0, 2) : NULL)))
        return;
    st->coach_id = arena_strdup(&req->arena, db_get(r, 0, 1));
    st->teacher_id = arena_strdup(&req->arena, db_get(r, 0, 2));
    st->mentorship_id = arena_strdup(&req->arena, db_get(r, 0, 4));
    session_status_t from, to;
    if (transitions_session_parse(db_get(r, 0, 3), &from) != 0) {
        txreq_error(&st->tx, 500, "INTERNAL", "internal error");
        return;
    }
    to = from;
    if (st->status && transitions_session_parse(st->status, &to) != 0) to = from;
    if (transitions_session_check(from, to) != 0) {
        if (st->is_delete)
            txreq_error(
                &st->tx, 422, "INVALID_TRANSITION",
                arena_printf(&req->arena, "A %s session cannot be cancelled", db_get(r, 0, 3)));
        else
            txreq_error(&st->tx, 422, "INVALID_TRANSITION",
                        arena_printf(&req->arena, "A session cannot move from %s to %s",
                                     db_get(r, 0, 3), st->status));
        return;
    }
    bool reschedule = st->scheduled_at || st->duration || st->timezone;
    if (reschedule && transitions_session_is_final(from)) {
        txreq_error(
            &st->tx, 422, "INVALID_TRANSITION",
            arena_printf(&req->arena, "A %s session cannot be rescheduled", db_get(r, 0, 3)));
        return;
    }
    /* The same status again is a no-op: it keeps cancelledAt / completedAt as they were. */
    if (to == from) st->status = NULL;
    st->changed = reschedule || st->has_notes || st->status;
    st->cancelling = st->status && to == SESSION_STATUS_CANCELLED;
    if (st->cancelling)
        st->notices = mentoring_notices_render(req, MENTORING_NOTICE_CANCELLED, db_get(r, 0, 5));
    const char *show = mentoring_show_notes(c);
    if (!st->changed) {
        const char *params[] = {st->id, show};
        txreq_query(&st->tx, SQL_S_GET, 2, params, upd_on_current);
        return;
    }
    const char *params[] = {
        st->id,    st->scheduled_at, st->duration, st->timezone, st->has_notes ? "true" : "false",
        st->notes, st->status,       c->user_id,   show};
    txreq_query(&st->tx, SQL_S_UPDATE, 9, params, upd_on_updated);
}

static void upd_on_begin(http_req_t *req, db_result_t *r)
{
    upd_state_t *st = req->data;
    if (txreq_failed_or_reply(&st->tx, r)) return;
    const char *params[] = {st->id};
    txreq_query(&st->tx, SQL_S_LOCK, 1, params, upd_on_locked);
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
    if (!session_id_or_reply(req, &id)) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    verr_t v = {0};
    refuse_null(body, "scheduledAt", &v);
    refuse_null(body, "durationMinutes", &v);
    refuse_null(body, "timezone", &v);
    refuse_null(body, "status", &v);
    st->scheduled_at = field_future_time(req, body, &v, false);
    st->duration = field_duration(req, body, &v);
    st->timezone = field_timezone(req, body, &v);
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
    req->data = st;
    txreq_begin(&st->tx, req, upd_on_begin);
}

static void delete_session(http_req_t *req)
{
    const char *id;
    if (!session_id_or_reply(req, &id)) return;
    upd_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->id = id;
    st->is_delete = true;
    st->status = "cancelled";
    req->data = st;
    txreq_begin(&st->tx, req, upd_on_begin);
}

/* ---- video token ---- */

static void video_on_loaded(http_req_t *req, db_result_t *r)
{
    caller_t *c = context_caller(req);
    if (db_failed_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_SESSION)) return;
    const char *channel = db_get(r, 0, 4);
    if (!channel || !*channel) {
        http_reply_error(req, 422, "UNPROCESSABLE", "The session has no video channel");
        return;
    }
    if (!cfg.video_app_id || !*cfg.video_app_id || !cfg.video_app_certificate ||
        !*cfg.video_app_certificate) {
        http_reply_error(req, 503, "UNAVAILABLE", "Video is not configured");
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
    if (!session_id_or_reply(req, &id)) return;
    const char *params[] = {id, "false"};
    db_req_query(req, SQL_S_GET, 2, params, video_on_loaded);
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
    if (db_failed_or_reply(req, r)) return;
    if (!mentoring_readable_or_replied(req, r, PERM_SESSION)) return;
    buf_t d = BUF_INIT;
    buf_puts(&d, "{\"emoji\":");
    buf_json_str(&d, st->emoji);
    buf_puts(&d, ",\"userId\":");
    buf_json_str(&d, c->user_id);
    buf_puts(&d, ",\"sessionId\":");
    buf_json_str(&d, st->id);
    buf_putc(&d, '}');
    events_publish(c->org_id, db_get(r, 0, 5), NULL, NULL, "call-reaction", d.data, false);
    char *json = arena_printf(&req->arena, "{\"data\":%s}", d.data);
    buf_free(&d);
    http_reply_json(req, 200, json);
}

static void react(http_req_t *req)
{
    const char *id;
    if (!session_id_or_reply(req, &id)) return;
    json_t *body = json_body_or_reply(req);
    if (!body) return;
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
    db_req_query(req, SQL_S_GET, 2, params, react_on_loaded);
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
