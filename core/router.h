/*
 * Router: method + path pattern ("/api/organizations/:id/users") to a handler. Unknown paths get
 * 404; a known path with another method gets 405 with an Allow header. Before a handler runs,
 * the guard set with router_set_guard() (routes/context.c: session, organization, role, invite
 * gate) gets the request and calls next() to continue, or replies itself.
 */
#pragma once
#include <stddef.h>

#include "core/http.h"

enum route_auth {
    AUTH_PUBLIC = 0,   /* no session needed */
    AUTH_OPTIONAL = 1, /* session read when present */
    AUTH_SESSION = 2,  /* valid session required, no organization context */
    AUTH_ORG = 3,      /* valid session and organization context required */
};

enum route_flags {
    ROUTE_STREAM_BODY = 1u << 0,   /* handler consumes the body as a stream (http_req_read_body) */
    ROUTE_GATE_EXEMPT = 1u << 1,   /* stays usable while the caller has pending invites */
    ROUTE_ORG_OPTIONAL = 1u << 2,  /* resolve organization context when there is one */
    ROUTE_NO_RATE_LIMIT = 1u << 3, /* health probes: outside the global per-IP limiter, which
                                    * would answer a load balancer's polls 429 */
};

struct route {
    int method;
    const char *pattern;
    http_req_cb handler;
    int auth;          /* enum route_auth */
    int min_role;      /* domain/roles.h role_t; ROLE_NONE admits any signed-in caller */
    unsigned flags;    /* enum route_flags */
    size_t body_limit; /* 0: HTTP_JSON_LIMIT */
};

typedef void (*router_guard_fn)(http_req_t *req, http_req_cb next);

/* Registers a static table (kept by pointer). */
void router_add(const route_t *table, size_t n);
void router_set_guard(router_guard_fn guard);

/* Matches method+path. Returns the route and fills req->params / req->nparams, or NULL with
 * *status 404 or 405 (and *allow set to the "GET, POST" list in the arena). */
const route_t *router_match(http_req_t *req, int *status, const char **allow);
/* Runs the guard (when the route needs one) and then the handler. */
void router_dispatch(http_req_t *req);
