/* Registers every route table and the guard (see routes.h). */
#include "routes/routes.h"

#include "routes/context.h"
#include "routes/file_urls.h"
#include "rt/streams.h"
#include "rt/sweeper.h"
#include "rt/janitor.h"

/* The access log's userId: the caller the guard resolved, if any. */
static const char *log_user_of(http_req_t *req)
{
    caller_t *c = context_caller(req);
    return c ? c->user_id : NULL;
}

void routes_init(uv_loop_t *loop)
{
    http_set_log_user(log_user_of);
    http_set_body_filter(file_urls_body_filter);
    context_init(loop);
    streams_init(loop);
    routes_auth_register();
    routes_recovery_register();
    routes_account_register();
    routes_user_sessions_register();
    routes_two_factor_register();
    routes_setup_register();
    routes_health_register();
    routes_organizations_register();
    routes_invites_register();
    routes_users_register();
    routes_me_register();
    routes_push_tokens_register();
    routes_calendar_register();
    routes_events_register();
    routes_mentorships_register();
    routes_sessions_register();
    routes_files_register();
    routes_files_upload_register();
    routes_files_local_register();
    routes_chat_register();
    routes_metrics_register(loop);
    routes_openapi_register();
    routes_docs_register();
    routes_dev_pages_register();
    sweeper_init(loop);
    janitor_init(loop);
}

void routes_shutdown(void)
{
    streams_shutdown();
    sweeper_shutdown();
    janitor_shutdown();
}
