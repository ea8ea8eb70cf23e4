/*
 * The caller context: session cookie -> user -> active organization (X-Organization-Id, else
 * the profile's current organization) -> effective role, plus the invite gate. Resolved by one
 * query in the router guard before every handler whose route needs a session.
 */
#pragma once
#include <stdbool.h>

#include "core/http.h"
#include "domain/roles.h"

#define SESSION_COOKIE "auth.session_token"
#define SESSION_TTL_SECONDS (7 * 24 * 3600)

typedef struct caller {
    const char *session_id;
    const char *session_expires_at; /* ISO 8601 */
    const char *token;              /* raw cookie token */
    const char *user_id;
    const char *email;
    const char *first_name; /* NULL when unset */
    const char *last_name;
    const char *display_name; /* first and last name joined by a space */
    bool email_verified;
    const char *status;
    const char *created_at;
    role_t global_role; /* ROLE_NONE, ROLE_PLATFORM_ADMIN or ROLE_OWNER */
    const char *preferred_language;
    const char *current_org_id; /* profile's current organization, or NULL */
    const char *phone, *birth_date, *country_code, *timezone, *avatar_url;
    const char *org_id; /* resolved active organization, or NULL */
    role_t org_role;    /* role in org_id (ROLE_NONE for global callers without membership) */
    role_t role;        /* effective: global role when set, else org_role */
    int pending_invites;
} caller_t;

/* Installs the guard on the router. */
void context_init(uv_loop_t *loop);
/* The caller of an authenticated request (NULL on AUTH_PUBLIC / unauthenticated optional). */
static inline caller_t *context_caller(http_req_t *req)
{
    return (caller_t *)req->caller;
}
