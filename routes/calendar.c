/*
 * Personal calendar feeds (docs/api.md "Calendars"):
 *   POST   /api/users/me/calendar-feed   creates or rotates the caller's secret feed URL and
 *                                        returns it, the only time it is shown (201)
 *   DELETE /api/users/me/calendar-feed   revokes it (204; 404 when there is none)
 *   GET    /api/calendar/:token.ics      the feed: no cookie (calendar apps cannot send one),
 *                                        the token is the credential
 *
 * The token is 256 random bits stored as its SHA-256 hex only (domain/token.h); rotating
 * replaces the row, so the old URL answers 404 at once. The feed holds the user's sessions,
 * as coach or teacher, from CALENDAR_FEED_DAYS_BEFORE days back to CALENDAR_FEED_DAYS_AFTER
 * ahead, in the organizations where they are still an active member; cancelled ones carry
 * STATUS:CANCELLED. A user who is no longer active gets an empty calendar (their sessions
 * leave the subscribers' calendars). Its ETag is a hash of the rendered body (DTSTAMP is each
 * session's last change, not the time of the request, so an unchanged feed keeps its tag); the
 * rendering and the hash run on the thread pool.
 * Requests with an unknown token count against the auth limiter per client address (the
 * valid ones are given back), so the route cannot be used to scan for tokens.
 */
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/offload.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_calendar.h"
#include "domain/crypto.h"
#include "domain/growbuf.h"
#include "domain/ical.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/dbreq.h"
#include "routes/mentoring.h"
#include "routes/routes.h"

#define FEED_SUFFIX ".ics"

/* ---- create / rotate ---- */

typedef struct feed_state {
    char token[TOKEN_LEN + 1];
    char hash[TOKEN_HASH_LEN + 1];
} feed_state_t;

static void feed_set_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    feed_state_t *st = req->data;
    const char *url =
        arena_printf(&req->arena, "%s/api/calendar/%s" FEED_SUFFIX, cfg.public_url, st->token);
    const char *rest = strstr(url, "://");
    const char *webcal = arena_printf(&req->arena, "webcal://%s", rest ? rest + 3 : url);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":{\"url\":");
    buf_json_str(&b, url);
    buf_puts(&b, ",\"webcalUrl\":");
    buf_json_str(&b, webcal);
    buf_puts(&b, "}}");
    http_reply_jsonn(req, 201, b.data, b.len);
    buf_free(&b);
}

static void feed_create(http_req_t *req)
{
    feed_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    req->data = st;
    new_token(st->token, st->hash);
    const char *params[] = {context_caller(req)->user_id, st->hash};
    db_req_query(req, SQL_CALENDAR_FEED_SET, 2, params, feed_set_done);
}

/* ---- revoke ---- */

static void feed_delete_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *n = PQcmdTuples(r->pg);
    if (!n || strcmp(n, "0") == 0) {
        http_reply_error(req, 404, "NOT_FOUND", "There is no calendar feed to revoke");
        return;
    }
    http_reply_empty(req, 204);
}

static void feed_delete(http_req_t *req)
{
    const char *params[] = {context_caller(req)->user_id};
    db_req_query(req, SQL_CALENDAR_FEED_DELETE, 1, params, feed_delete_done);
}

/* ---- the feed ---- */

/* A feed is rendered and hashed on the thread pool: a coach's year of sessions is megabytes of
 * text (5,000 sessions: 4.7 MB, tens of ms of CPU), which the loop must not spend. The job owns
 * the rows and the body; both are freed with the request's arena, whether or not the client is
 * still there when the job ends.
 *
 * What the worker's feeds hold (rows while they wait and render, bodies while they are sent) is
 * counted against CALENDAR_FEED_MEMORY_MAX: a client that asks for its feed on many connections
 * and reads slowly or not at all (until the write deadline) would otherwise hold megabytes per
 * connection. Past it a fetch gets 503 with Retry-After; calendar apps fetch again later. */
typedef struct feed_render {
    PGresult *rows;          /* taken from the callback: read only, so a pool thread may read it */
    const char *link_prefix; /* mentoring_session_link_prefix, made on the loop */
    int refresh_minutes;
    growbuf_t body;
    char etag[CRYPTO_SHA256_HEX_LEN + 3];
    size_t counted; /* what this job adds to feeds_held (changed on the loop only) */
} feed_render_t;

static size_t feeds_held; /* bytes, this worker's feeds together */

static void feed_count(feed_render_t *f, size_t now)
{
    feeds_held = feeds_held - f->counted + now;
    f->counted = now;
}

static const char *col(const db_result_t *r, int row, int c)
{
    return db_isnull(r, row, c) ? NULL : db_get(r, row, c);
}

static void feed_not_found(http_req_t *req)
{
    http_reply_error(req, 404, "NOT_FOUND", "Calendar feed not found");
}

/* On a pool thread: touches only the job. */
static void feed_render_work(void *data)
{
    feed_render_t *f = data;
    const db_result_t rows = {.pg = f->rows, .ok = true}, *r = &rows;
    const char *lang = col(r, 0, CALENDAR_FEED_ROWS_USER_LANG);
    bool es = lang && strcmp(lang, "es") == 0;
    ical_calendar_t cal = {.name = es ? "Sesiones de mentoría" : "Mentoring sessions",
                           .timezone = col(r, 0, CALENDAR_FEED_ROWS_USER_TZ),
                           .refresh_minutes = f->refresh_minutes};
    growbuf_t link = GROWBUF_INIT;
    ical_begin(&f->body, &cal);
    for (int i = 0; i < db_nrows(r); i++) {
        if (db_isnull(r, i, CALENDAR_FEED_ROWS_ID)) continue; /* no sessions */
        const char *id = db_get(r, i, CALENDAR_FEED_ROWS_ID);
        link.len = 0;
        growbuf_puts(&link, f->link_prefix);
        growbuf_puts(&link, id);
        ical_session_t s = {
            .lang = lang,
            .session_id = id,
            .title = col(r, i, CALENDAR_FEED_ROWS_TITLE),
            .notes = col(r, i, CALENDAR_FEED_ROWS_NOTES),
            .start_text = col(r, i, CALENDAR_FEED_ROWS_START_TEXT),
            .timezone = col(r, i, CALENDAR_FEED_ROWS_TIMEZONE),
            .coach_name = col(r, i, CALENDAR_FEED_ROWS_COACH_NAME),
            .coach_email = col(r, i, CALENDAR_FEED_ROWS_COACH_EMAIL),
            .teacher_name = col(r, i, CALENDAR_FEED_ROWS_TEACHER_NAME),
            .teacher_email = col(r, i, CALENDAR_FEED_ROWS_TEACHER_EMAIL),
            .link = link.data,
            .sequence = (int)db_getll(r, i, CALENDAR_FEED_ROWS_SEQUENCE, 0),
            .duration_minutes = (int)db_getll(r, i, CALENDAR_FEED_ROWS_DURATION_MINUTES, 0),
            .start_ms = db_getll(r, i, CALENDAR_FEED_ROWS_START_MS, 0),
            /* DTSTAMP is the session's last change, not the time of the request, so an
             * unchanged feed keeps its ETag. */
            .stamp_ms = db_getll(r, i, CALENDAR_FEED_ROWS_UPDATED_MS, 0),
            .cancelled = strcmp(db_get(r, i, CALENDAR_FEED_ROWS_STATUS), "cancelled") == 0,
        };
        ical_session_event(&f->body, &s);
    }
    growbuf_free(&link);
    ical_end(&f->body);
    char hash[CRYPTO_SHA256_HEX_LEN + 1];
    crypto_sha256_hex(f->body.data, f->body.len, hash);
    snprintf(f->etag, sizeof(f->etag), "\"%.32s\"", hash);
    PQclear(f->rows); /* the body is all the answer needs now */
    f->rows = NULL;
}

static void feed_rendered(http_req_t *req, void *data)
{
    feed_render_t *f = data;
    http_res_header(req, "ETag", f->etag);
    /* Private: the URL is a credential; revalidate every time so a change shows at once. */
    http_res_header(req, "Cache-Control", "private, no-cache");
    const char *inm = http_req_header(req, "If-None-Match");
    bool unchanged = inm && header_lists(inm, f->etag, true);
    if (unchanged)
        http_reply(req, 304, NULL, "", 0);
    else
        http_reply(req, 200, "text/calendar; charset=utf-8", f->body.data, f->body.len);
    /* The answer is in the socket, or its unwritten tail in a copy of its own (http_reply): the
     * body is not needed any more. What may still be held until the request ends, that copy, is
     * at most the body's length, which stays counted. */
    feed_count(f, unchanged ? 0 : f->body.len);
    growbuf_free(&f->body);
}

static void feed_render_free(void *data)
{
    feed_render_t *f = data;
    feed_count(f, 0);
    PQclear(f->rows);
    growbuf_free(&f->body);
}

static void feed_rows(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) == 0) {
        /* Only misses count against the address's auth limit, after the lookup: calendar
         * services fetch many users' feeds from a few shared addresses and keep polling
         * rotated or revoked URLs, and those must never lock the valid feeds out (a 256-bit
         * token is not found by trying). */
        auth_limit_then(req, "calendar-feed", NULL, feed_not_found);
        return;
    }
    if (feeds_held >= (size_t)cfg.calendar_feed_memory_max) {
        http_res_header(req, "Retry-After", "30");
        http_reply_error(req, 503, "UNAVAILABLE", "Calendar feeds are busy; try again later");
        return;
    }
    feed_render_t *f = arena_calloc(&req->arena, sizeof(*f));
    f->rows = db_result_take(r);
    feed_count(f, PQresultMemorySize(f->rows));
    f->link_prefix = mentoring_session_link_prefix(req);
    f->refresh_minutes = cfg.calendar_feed_refresh_minutes;
    arena_on_free(&req->arena, feed_render_free, f);
    offload_run_kind(req, OFFLOAD_CALENDAR, feed_render_work, feed_rendered, f);
}

static void feed_lookup(http_req_t *req, const char *hash)
{
    char before[16], after[16];
    snprintf(before, sizeof(before), "%d", cfg.calendar_feed_days_before);
    snprintf(after, sizeof(after), "%d", cfg.calendar_feed_days_after);
    const char *params[] = {hash, before, after};
    db_req_query(req, SQL_CALENDAR_FEED_ROWS, 3, params, feed_rows);
}

static void feed_get(http_req_t *req)
{
    const char *seg = http_req_param(req, 0);
    size_t n = seg ? strlen(seg) : 0, sl = strlen(FEED_SUFFIX);
    const char *token = n > sl && strcmp(seg + n - sl, FEED_SUFFIX) == 0
                            ? arena_strndup(&req->arena, seg, n - sl)
                            : NULL;
    if (!token || !token_is_wellformed(token)) {
        path_param_reply_invalid(req, 0, "must be a calendar feed token followed by .ics");
        return;
    }
    char *hash = arena_alloc(&req->arena, TOKEN_HASH_LEN + 1);
    token_hash(token, hash);
    feed_lookup(req, hash);
}

static const route_t calendar_routes[] = {
    {HTTP_M_POST, "/api/users/me/calendar-feed", feed_create, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_DELETE, "/api/users/me/calendar-feed", feed_delete, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/api/calendar/:token.ics", feed_get, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT,
     0},
};

void routes_calendar_register(void)
{
    router_add(calendar_routes, sizeof(calendar_routes) / sizeof(calendar_routes[0]));
}
