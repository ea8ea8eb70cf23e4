/*
 * Helpers shared by routes/mentorships.c and routes/sessions.c: who manages an organization's
 * mentorships, list pagination, session notices (mail + push through the outbox) and the
 * session-update event.
 */
#pragma once
#include <stdbool.h>

#include "core/buf.h"
#include "core/http.h"
#include "db/db.h"
#include "db/q_mentoring.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/page_cache.h"
#include "routes/perm.h"
#include "routes/txreq.h"

#define MENTORING_LIMIT_DEFAULT 50
#define MENTORING_LIMIT_MAX 200

/* Manager, OrganizationAdmin, PlatformAdmin, Owner: any mentorship of the active organization. */
bool mentoring_is_manager(const caller_t *c);
/* "true" when the caller sees the notes of mentorships and sessions (SQL parameter). */
const char *mentoring_show_notes(const caller_t *c);
/* Read access to a mentorship or one of its sessions (perm_mentoring_read()), from a row that
 * starts with the organization, coach and teacher ids like mentorship_get's (no row: 404;
 * mentoring.c checks the statements it serves at compile time). Replies and returns
 * false when access is refused. */
bool mentoring_readable_or_replied(http_req_t *req, const db_result_t *r, perm_thing_t what);
/* perm_mentorship_change() for a row that starts like mentorship_get's (no row: 404), inside the
 * write's transaction: a refusal rolls back, replies and returns false. */
bool mentoring_changeable_or_replied(txreq_t *tx, const db_result_t *r);

/* limit (default 50, 1..200) and offset (default 0, 0..2^31-1) from the query string, as
 * decimal text into the arena; a bad one is added to v, which the caller answers together with
 * its filters' failures. */
void mentoring_paging(http_req_t *req, verr_t *v, const char **limit, const char **offset);

/*
 * Lists render their items in C from plain columns (as the member list does): building the
 * objects with json_build_object and iso() in PostgreSQL cost more than the query itself.
 * Timestamps are selected as epoch milliseconds (epoch_ms(), migration 0011) and written with
 * timefmt_format. The list statements select the column blocks of the views
 * mentorship_list_rows and session_list_rows; these are the offsets inside a block (checked
 * against the generated column enums where they are used).
 */
enum {
    MENTORING_M_ID,
    MENTORING_M_ORGANIZATION_ID,
    MENTORING_M_COACH_ID,
    MENTORING_M_TEACHER_ID,
    MENTORING_M_STATUS,
    MENTORING_M_TITLE,
    MENTORING_M_DESCRIPTION,
    MENTORING_M_NOTES,
    MENTORING_M_CREATED_MS,
    MENTORING_M_UPDATED_MS,
    MENTORING_M_NCOLS
};
enum {
    MENTORING_U_ID,
    MENTORING_U_EMAIL,
    MENTORING_U_FIRST_NAME,
    MENTORING_U_LAST_NAME,
    MENTORING_U_AVATAR_URL,
    MENTORING_U_NCOLS
};

/* Appends the members of a Mentorship (id .. updatedAt, no braces) from the MENTORING_M_*
 * block starting at col; notes are null unless show_notes. */
void mentoring_json_mentorship_members(buf_t *b, const db_result_t *r, int row, int col,
                                       bool show_notes);
/* Appends the user brief object {id, email, firstName, lastName, avatarUrl} from the
 * MENTORING_U_* block starting at col, or null when the id is NULL. */
void mentoring_json_user(buf_t *b, const db_result_t *r, int row, int col);
/* Appends ms as a JSON ISO 8601 string, or null when the column is NULL. */
void mentoring_json_time(buf_t *b, const db_result_t *r, int row, int col);

typedef enum mentoring_notice {
    MENTORING_NOTICE_SCHEDULED,
    MENTORING_NOTICE_CANCELLED,
    MENTORING_NOTICE_CHANGED, /* moved: start, duration or time zone */
} mentoring_notice_t;

/* Renders the notices of sessions for their participants. `recipients` is the JSON array that
 * the SQL function session_notice_json() produces (one element per participant and session:
 * sessionId, mentorshipId, userId, email, lang, start, coachName, teacherName, title,
 * duration, startMs, timezone, coachEmail, teacherEmail, role, sequence, notes), or NULL /
 * "[]" for none. Returns (arena) a JSON array of
 * {userId, mail: {to, subject, text, html, ics, icsMethod}, push: {title, body, data}} for
 * SQL_MENTORING_QUEUE_NOTICES, or NULL when there is nothing to send. Each mail carries the
 * session's iCalendar invitation: REQUEST at SEQUENCE 0 when scheduled, REQUEST when changed
 * and CANCEL when cancelled, each at the stored sequence plus one (the write bumps it).
 * `notes`, when not NULL, points at the notes the session has after the write (the stored
 * ones otherwise). */
const char *mentoring_notices_render(http_req_t *req, mentoring_notice_t kind,
                                     const char *recipients, const char *const *notes);

/* The app's page of a session (FRONTEND_URL/sessions/<id>): the link of invitations and feeds.
 * The prefix alone (FRONTEND_URL/sessions/) is for a renderer off the loop, which appends ids. */
const char *mentoring_session_link(http_req_t *req, const char *session_id);
const char *mentoring_session_link_prefix(http_req_t *req);

/* SQL_MENTORING_QUEUE_NOTICES (db/queries/mentoring.sql) queues what this returns; run it in
 * the transaction of the change (mentoring_write_then) and call outbox_kick() after commit. */

/* The write step of a mentorship or session change (routes/txreq.h): the statement, then the
 * notices (when not NULL) queued in the outbox, then COMMIT, then done(). */
void mentoring_write_then(txreq_t *t, const char *sql, int nparams, const char *const *params,
                          const char *notices, txreq_cb done);

/* Publishes session-update {action: "updated", mentorshipId} on the mentorship's channel and to
 * the coach's and teacher's user streams. Call after commit. */
void mentoring_publish_session_update(const char *organization_id, const char *mentorship_id,
                                      const char *coach_id, const char *teacher_id);

/* Rendered list pages (GET /api/mentorships, GET /api/sessions; routes/page_cache.h), keyed by
 * the list, the organization, the caller's visibility class — manager-level, or the Coach or
 * Teacher with their user id — and the normalized query, at the organization's mentoring-list
 * version (migrations 0007 and 0011: the sum of its slots). */
extern page_cache_t *const mentoring_mentorship_pages;
extern page_cache_t *const mentoring_session_pages;
