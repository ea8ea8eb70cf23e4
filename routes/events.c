/*
 * Server-Sent Event streams (docs/api.md):
 *   GET /api/events/mentorships/:mentorshipId/events  coach and teacher of the mentorship (with an
 *       active membership in its organization), or a PlatformAdmin/Owner; 403 otherwise, 404
 * unknown. GET /api/events/users/me/events                   any signed-in user. The streams
 * themselves live in rt/streams.c.
 */
#include <string.h>

#include "core/router.h"
#include "db/db.h"
#include "db/q_events.h"
#include "domain/ids.h"
#include "domain/timefmt.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/dbreq.h"
#include "routes/perm.h"
#include "routes/routes.h"
#include "rt/streams.h"

/* Where a reconnecting client resumes: the Last-Event-ID header (EventSource sends it on its
 * own reconnects), else the lastEventId query parameter, for a browser EventSource opened anew
 * (it cannot set headers). An empty value is no value. NULL: start at the newest event. */
static const char *last_event_id(http_req_t *req)
{
    const char *h = http_req_header(req, "last-event-id");
    if (h && h[0]) return h;
    const char *q = http_req_query(req, "lastEventId");
    return q && q[0] ? q : NULL;
}

/* What binds a stream to the caller's session (its expiry closes the stream). */
static stream_auth_t stream_auth(const caller_t *c)
{
    stream_auth_t a = {0};
    a.session_id = c->session_id;
    int64_t ms = 0;
    if (c->session_expires_at && timefmt_parse(c->session_expires_at, &ms) == 0)
        a.session_expires_ms = ms;
    a.all_orgs = role_at_least(c->global_role, ROLE_PLATFORM_ADMIN);
    return a;
}

static void on_mentorship(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    bool found = db_nrows(r) > 0;
    const char *participant = found ? db_get(r, 0, EVENTS_MENTORSHIP_ACCESS_PARTICIPANT) : NULL;
    perm_actor_t a = perm_actor(c);
    if (!perm_allowed_or_replied(
            req, perm_stream_mentorship(&a, found, participant && participant[0] == 't')))
        return;
    stream_auth_t auth = stream_auth(c);
    streams_open(req, STREAM_MENTORSHIP, c->user_id, &auth, req->params[0],
                 db_get(r, 0, EVENTS_MENTORSHIP_ACCESS_ORGANIZATION_ID), last_event_id(req));
}

static void mentorship_events(http_req_t *req)
{
    const char *id;
    if (!path_uuid_ok_or_reply(req, 0, &id)) return;
    caller_t *c = context_caller(req);
    const char *params[] = {id, c->user_id};
    db_req_query(req, SQL_EVENTS_MENTORSHIP_ACCESS, 2, params, on_mentorship);
}

static void on_active_orgs(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    caller_t *c = context_caller(req);
    stream_auth_t auth = stream_auth(c);
    int n = db_nrows(r);
    const char **orgs = arena_alloc(&req->arena, sizeof(*orgs) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        orgs[i] = db_get(r, i, EVENTS_ACTIVE_ORGS_ORGANIZATION_ID);
    auth.orgs = orgs;
    auth.norgs = n;
    streams_open(req, STREAM_USER, c->user_id, &auth, NULL, NULL, last_event_id(req));
}

static void user_events(http_req_t *req)
{
    caller_t *c = context_caller(req);
    const char *params[] = {c->user_id};
    db_req_query(req, SQL_EVENTS_ACTIVE_ORGS, 1, params, on_active_orgs);
}

static const route_t event_routes[] = {
    {HTTP_M_GET, "/api/events/mentorships/:mentorshipId/events", mentorship_events, AUTH_SESSION,
     ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/api/events/users/me/events", user_events, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
};

void routes_events_register(void)
{
    router_add(event_routes, sizeof(event_routes) / sizeof(event_routes[0]));
}
