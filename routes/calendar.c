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
 * session's last change, not the time of the request, so an unchanged feed keeps its tag).
 * Requests with an unknown token count against the auth limiter per client address (the
 * valid ones are given back), so the route cannot be used to scan for tokens.
 */
#include <stdio.h>
#include <string.h>

#include "core/config.h"
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

static const char *col(const db_result_t *r, int row, int c)
{
    return db_isnull(r, row, c) ? NULL : db_get(r, row, c);
}

static void feed_not_found(http_req_t *req)
{
    http_reply_error(req, 404, "NOT_FOUND", "Calendar feed not found");
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
    const char *lang = col(r, 0, CALENDAR_FEED_ROWS_USER_LANG);
    bool es = lang && strcmp(lang, "es") == 0;
    ical_calendar_t cal = {.name = es ? "Sesiones de mentoría" : "Mentoring sessions",
                           .timezone = col(r, 0, CALENDAR_FEED_ROWS_USER_TZ),
                           .refresh_minutes = cfg.calendar_feed_refresh_minutes};
    growbuf_t b = GROWBUF_INIT;
    ical_begin(&b, &cal);
    for (int i = 0; i < db_nrows(r); i++) {
        if (db_isnull(r, i, CALENDAR_FEED_ROWS_ID)) continue; /* no sessions */
        const char *id = db_get(r, i, CALENDAR_FEED_ROWS_ID);
        long long updated = db_getll(r, i, CALENDAR_FEED_ROWS_UPDATED_MS, 0);
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
            .link = mentoring_session_link(req, id),
            .sequence = (int)db_getll(r, i, CALENDAR_FEED_ROWS_SEQUENCE, 0),
            .duration_minutes = (int)db_getll(r, i, CALENDAR_FEED_ROWS_DURATION_MINUTES, 0),
            .start_ms = db_getll(r, i, CALENDAR_FEED_ROWS_START_MS, 0),
            .stamp_ms = updated,
            .cancelled = strcmp(db_get(r, i, CALENDAR_FEED_ROWS_STATUS), "cancelled") == 0,
        };
        ical_session_event(&b, &s);
    }
    ical_end(&b);
    char hash[CRYPTO_SHA256_HEX_LEN + 1];
    crypto_sha256_hex(b.data, b.len, hash);
    const char *etag = arena_printf(&req->arena, "\"%.32s\"", hash);
    http_res_header(req, "ETag", etag);
    /* Private: the URL is a credential; revalidate every time so a change shows at once. */
    http_res_header(req, "Cache-Control", "private, no-cache");
    const char *inm = http_req_header(req, "If-None-Match");
    if (inm && header_lists(inm, etag, true)) {
        growbuf_free(&b);
        http_reply(req, 304, NULL, "", 0);
        return;
    }
    const char *body = arena_strndup(&req->arena, b.data, b.len);
    size_t len = b.len;
    growbuf_free(&b);
    http_reply(req, 200, "text/calendar; charset=utf-8", body, len);
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
