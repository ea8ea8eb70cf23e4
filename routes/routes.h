/*
 * Route registration: each area file exports routes_<area>_register(); routes_init() registers
 * them all, installs the caller-context guard and starts the area timers (sweepers).
 */
#pragma once
#include <uv.h>

#include "core/http.h"

void routes_init(uv_loop_t *loop);
void routes_shutdown(void);

void routes_auth_register(void);
void routes_recovery_register(void);
void routes_account_register(void);
/* The caller's own sessions: list and revoke (routes/user_sessions.c). */
void routes_user_sessions_register(void);
/* Two-factor sign-in: TOTP, backup codes, trusted devices (routes/two_factor.c). */
void routes_two_factor_register(void);
void routes_setup_register(void);
void routes_health_register(void);
/* The coachd_health_check_ok gauges for /metrics (routes/health.c): cached probe results only,
 * never a probe on the scrape's path. */
void health_render_metrics(buf_t *b);
void routes_organizations_register(void);
void routes_invites_register(void);
void routes_users_register(void);
void routes_me_register(void);
void routes_push_tokens_register(void);
void routes_calendar_register(void);
void routes_events_register(void);
void routes_mentorships_register(void);
void routes_sessions_register(void);
/* The files area's three route files register apart (files.c, files_upload.c, files_local.c),
 * so that files.c, whose rules the other two use, calls none of them. */
void routes_files_register(void);
void routes_files_upload_register(void);
void routes_files_local_register(void);
void routes_chat_register(void);
void routes_metrics_register(uv_loop_t *loop);
void routes_openapi_register(void);
void routes_docs_register(void);
/* Only in development without FRONTEND_URL (cfg.dev_pages); else nothing is registered. */
void routes_dev_pages_register(void);

/* Verification link for a fresh email-verification token (routes/auth.c). */
const char *auth_verify_link(http_req_t *req, const char *token, const char *callback);
/* The hash of the session cookie the request carried, NULL when none: every way of signing in
 * ends that session, whoever's it is (routes/auth.c). */
const char *auth_presented_session_hash(http_req_t *req);
/* Closes the streams of session_id (of user_id) and drops its cached contexts on every worker,
 * then done(req) (routes/auth.c). */
void auth_end_session_then(http_req_t *req, const char *session_id, const char *user_id,
                           void (*done)(http_req_t *req));
