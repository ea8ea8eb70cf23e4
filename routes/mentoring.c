/* Shared helpers of the mentorship and session routes (see mentoring.h). */
#include "routes/mentoring.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/mem.h"
#include "db/queries.h"
#include "db/q_mentorships.h"
#include "db/q_sessions.h"
#include "domain/growbuf.h"
#include "domain/ical.h"
#include "domain/mail_templates.h"
#include "domain/timefmt.h"
#include "domain/validate.h"
#include "routes/common.h"
#include "routes/page_cache.h"
#include "rt/events.h"

bool mentoring_is_manager(const caller_t *c)
{
    perm_actor_t a = perm_actor(c);
    return perm_mentoring_all(&a);
}

const char *mentoring_show_notes(const caller_t *c)
{
    perm_actor_t a = perm_actor(c);
    return perm_notes_visible(&a) ? "true" : "false";
}

void mentoring_paging(http_req_t *req, verr_t *v, const char **limit, const char **offset)
{
    query_paging(req, v, MENTORING_LIMIT_DEFAULT, MENTORING_LIMIT_MAX, limit, offset);
}

void mentoring_json_time(buf_t *b, const db_result_t *r, int row, int col)
{
    if (db_isnull(r, row, col)) {
        buf_append(b, "null", 4);
        return;
    }
    char out[TIMEFMT_LEN + 3];
    out[0] = '"';
    timefmt_format(db_getll(r, row, col, 0), out + 1);
    out[TIMEFMT_LEN + 1] = '"';
    out[TIMEFMT_LEN + 2] = '\0';
    buf_append(b, out, TIMEFMT_LEN + 2);
}

void mentoring_json_mentorship_members(buf_t *b, const db_result_t *r, int row, int col,
                                       bool show_notes)
{
    json_member(b, "\"id\":", r, row, col + MENTORING_M_ID);
    json_member(b, ",\"organizationId\":", r, row, col + MENTORING_M_ORGANIZATION_ID);
    json_member(b, ",\"coachId\":", r, row, col + MENTORING_M_COACH_ID);
    json_member(b, ",\"teacherId\":", r, row, col + MENTORING_M_TEACHER_ID);
    json_member(b, ",\"status\":", r, row, col + MENTORING_M_STATUS);
    json_member(b, ",\"title\":", r, row, col + MENTORING_M_TITLE);
    json_member(b, ",\"description\":", r, row, col + MENTORING_M_DESCRIPTION);
    if (show_notes)
        json_member(b, ",\"notes\":", r, row, col + MENTORING_M_NOTES);
    else
        buf_puts(b, ",\"notes\":null");
    buf_puts(b, ",\"createdAt\":");
    mentoring_json_time(b, r, row, col + MENTORING_M_CREATED_MS);
    buf_puts(b, ",\"updatedAt\":");
    mentoring_json_time(b, r, row, col + MENTORING_M_UPDATED_MS);
}

void mentoring_json_user(buf_t *b, const db_result_t *r, int row, int col)
{
    if (db_isnull(r, row, col)) {
        buf_append(b, "null", 4);
        return;
    }
    json_member(b, "{\"id\":", r, row, col + MENTORING_U_ID);
    json_member(b, ",\"email\":", r, row, col + MENTORING_U_EMAIL);
    json_member(b, ",\"firstName\":", r, row, col + MENTORING_U_FIRST_NAME);
    json_member(b, ",\"lastName\":", r, row, col + MENTORING_U_LAST_NAME);
    json_member(b, ",\"avatarUrl\":", r, row, col + MENTORING_U_AVATAR_URL);
    buf_putc(b, '}');
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *j = json_object_get(o, key);
    return json_is_string(j) ? json_string_value(j) : NULL;
}

const char *mentoring_session_link_prefix(http_req_t *req)
{
    return arena_printf(&req->arena, "%s/sessions/", cfg.frontend_url);
}

const char *mentoring_session_link(http_req_t *req, const char *session_id)
{
    return arena_printf(&req->arena, "%s%s", mentoring_session_link_prefix(req), session_id);
}

/* The invitation of one notice element, for its recipient's language (arena), or NULL. */
static const char *notice_ics(http_req_t *req, mentoring_notice_t kind, json_t *r,
                              const char *const *notes)
{
    json_t *seq = json_object_get(r, "sequence");
    const char *session_id = jstr(r, "sessionId");
    json_t *start = json_object_get(r, "startMs");
    if (!session_id || !json_is_integer(start)) return NULL;
    ical_session_t s = {
        .lang = jstr(r, "lang"),
        .session_id = session_id,
        .title = jstr(r, "title"),
        .notes = notes ? *notes : jstr(r, "notes"),
        .start_text = jstr(r, "start"),
        .timezone = jstr(r, "timezone"),
        .coach_name = jstr(r, "coachName"),
        .coach_email = jstr(r, "coachEmail"),
        .teacher_name = jstr(r, "teacherName"),
        .teacher_email = jstr(r, "teacherEmail"),
        .link = mentoring_session_link(req, session_id),
        .sequence = (json_is_integer(seq) ? (int)json_integer_value(seq) : 0) +
                    (kind == MENTORING_NOTICE_SCHEDULED ? 0 : 1),
        .duration_minutes = (int)json_integer_value(json_object_get(r, "duration")),
        .start_ms = (int64_t)json_integer_value(start),
        .stamp_ms = wall_ms(),
        .cancelled = kind == MENTORING_NOTICE_CANCELLED,
    };
    ical_calendar_t cal = {.method = kind == MENTORING_NOTICE_CANCELLED ? "CANCEL" : "REQUEST",
                           .timezone = s.timezone};
    growbuf_t b = GROWBUF_INIT;
    ical_begin(&b, &cal);
    int rc = ical_session_event(&b, &s);
    ical_end(&b);
    const char *out = rc == 0 ? arena_strndup(&req->arena, b.data, b.len) : NULL;
    growbuf_free(&b);
    return out;
}

const char *mentoring_notices_render(http_req_t *req, mentoring_notice_t kind,
                                     const char *recipients, const char *const *notes)
{
    if (!recipients) return NULL;
    json_error_t jerr;
    json_t *in = json_loads(recipients, 0, &jerr);
    json_t *out = json_array();
    const char *result = NULL;
    size_t i;
    json_t *r;
    if (!json_is_array(in)) {
        log_error("req %s: session notice recipients are not an array", req->id);
        goto done;
    }
    json_array_foreach(in, i, r)
    {
        const char *email = jstr(r, "email");
        mail_session_t s = {
            .coach_name = jstr(r, "coachName"),
            .teacher_name = jstr(r, "teacherName"),
            .title = jstr(r, "title"),
            .start = jstr(r, "start"),
            .duration_minutes = (int)json_integer_value(json_object_get(r, "duration")),
        };
        const char *lang = jstr(r, "lang");
        mail_msg_t m = {0};
        int rc = kind == MENTORING_NOTICE_SCHEDULED ? mail_render_session_scheduled(lang, &s, &m)
                 : kind == MENTORING_NOTICE_CHANGED ? mail_render_session_changed(lang, &s, &m)
                                                    : mail_render_session_cancelled(lang, &s, &m);
        if (rc != 0 || !email) {
            log_error("req %s: session notice could not be rendered", req->id);
            mail_msg_free(&m);
            continue;
        }
        const char *type = kind == MENTORING_NOTICE_SCHEDULED ? "session-scheduled"
                           : kind == MENTORING_NOTICE_CHANGED ? "session-changed"
                                                              : "session-cancelled";
        json_t *data = json_pack("{s:s, s:O?, s:O?}", "type", type, "sessionId",
                                 json_object_get(r, "sessionId"), "mentorshipId",
                                 json_object_get(r, "mentorshipId"));
        const char *ics = notice_ics(req, kind, r, notes);
        json_t *n =
            json_pack("{s:O?, s:{s:s, s:s, s:s, s:s, s:s?, s:s?}, s:{s:s, s:s, s:o}}", "userId",
                      json_object_get(r, "userId"), "mail", "to", email, "subject", m.subject,
                      "text", m.text, "html", m.html, "ics", ics, "icsMethod",
                      ics ? (kind == MENTORING_NOTICE_CANCELLED ? "CANCEL" : "REQUEST") : NULL,
                      "push", "title", m.subject, "body", s.start, "data", data);
        if (n) json_array_append_new(out, n);
        mail_msg_free(&m);
    }
    if (json_array_size(out) > 0) {
        char *text = json_dumps(out, JSON_COMPACT);
        result = arena_strdup(&req->arena, text);
        free(text);
    }
done:
    json_decref(in);
    json_decref(out);
    return result;
}

void mentoring_write_then(txreq_t *t, const char *sql, int nparams, const char *const *params,
                          const char *notices, txreq_cb done)
{
    const char *notice_params[] = {notices};
    txreq_stmt_t writes[] = {{sql, nparams, params},
                             {SQL_MENTORING_QUEUE_NOTICES, 1, notice_params}};
    txreq_write(t, writes, notices ? 2 : 1, done);
}

void mentoring_publish_session_update(const char *organization_id, const char *mentorship_id,
                                      const char *coach_id, const char *teacher_id)
{
    char data[128];
    snprintf(data, sizeof(data), "{\"action\":\"updated\",\"mentorshipId\":\"%s\"}", mentorship_id);
    events_publish(organization_id, mentorship_id, coach_id, teacher_id, "session-update", data,
                   true);
}

/* The statements these two read start with organization_id, coach_id and teacher_id, at the
 * column numbers of mentorship_get's, whose enum they read with. */
#define SAME_ACCESS_COLS(S)                                                                        \
    DB_SAME_COLUMN(S, MENTORSHIP_GET, ORGANIZATION_ID);                                            \
    DB_SAME_COLUMN(S, MENTORSHIP_GET, COACH_ID);                                                   \
    DB_SAME_COLUMN(S, MENTORSHIP_GET, TEACHER_ID)
SAME_ACCESS_COLS(MENTORSHIP_LOCK);
SAME_ACCESS_COLS(SESSION_GET);
SAME_ACCESS_COLS(SESSION_CREATE_LOCK);
SAME_ACCESS_COLS(SESSION_LOCK);

bool mentoring_readable_or_replied(http_req_t *req, const db_result_t *r, perm_thing_t what)
{
    perm_actor_t a = perm_actor(context_caller(req));
    bool found = db_nrows(r) > 0;
    return perm_allowed_or_replied(
        req,
        perm_mentoring_read(&a, what, found ? db_get(r, 0, MENTORSHIP_GET_ORGANIZATION_ID) : NULL,
                            found ? db_get(r, 0, MENTORSHIP_GET_COACH_ID) : NULL,
                            found ? db_get(r, 0, MENTORSHIP_GET_TEACHER_ID) : NULL));
}

bool mentoring_changeable_or_replied(txreq_t *tx, const db_result_t *r)
{
    perm_actor_t a = perm_actor(context_caller(tx->req));
    bool found = db_nrows(r) > 0;
    return perm_allowed_or_rolled_back(
        tx, perm_mentorship_change(&a, found ? db_get(r, 0, MENTORSHIP_GET_ORGANIZATION_ID) : NULL,
                                   found ? db_get(r, 0, MENTORSHIP_GET_COACH_ID) : NULL));
}

/* ---- rendered list pages ---- */

static page_cache_t mentorship_pages, session_pages;
page_cache_t *const mentoring_mentorship_pages = &mentorship_pages;
page_cache_t *const mentoring_session_pages = &session_pages;
