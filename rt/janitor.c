/* The janitor (see janitor.h). */
#include "rt/janitor.h"

#include <stdbool.h>
#include <stdio.h>

#include "core/config.h"
#include "core/log.h"
#include "db/db.h"

/* Batches bound the locks one run holds; a backlog drains over a few runs. */
static const char SQL_CLEAN[] =
    "WITH o AS (DELETE FROM outbox WHERE id IN (SELECT id FROM outbox"
    "   WHERE (sent_at IS NOT NULL AND sent_at < now() - make_interval(secs => $1::int))"
    "   OR (sent_at IS NULL AND attempts >= 10 AND created_at < now() - interval '30 days')"
    "   LIMIT 5000) RETURNING 1),"
    " s AS (DELETE FROM sessions WHERE id IN (SELECT id FROM sessions"
    "   WHERE expires_at < now() LIMIT 5000) RETURNING 1),"
    " v AS (DELETE FROM verifications WHERE id IN (SELECT id FROM verifications"
    "   WHERE (used_at IS NOT NULL AND used_at < now() - interval '1 day')"
    "   OR expires_at < now() - interval '1 day' LIMIT 5000) RETURNING 1)"
    " SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM s), (SELECT count(*) FROM v)";

static struct {
    uv_timer_t timer;
    bool started;
    bool running; /* a run is in flight */
    bool stopped;
    char keep[16];
} J;

static void on_cleaned(db_result_t *r, void *data)
{
    (void)data;
    J.running = false;
    if (!r->ok) {
        if (!r->conn_lost) log_warn("janitor: %s", r->error ? r->error : "query failed");
        return;
    }
    long long o = db_getll(r, 0, 0, 0), s = db_getll(r, 0, 1, 0), v = db_getll(r, 0, 2, 0);
    if (o || s || v)
        log_info("janitor: deleted %lld outbox row(s), %lld session(s), %lld token(s)", o, s, v);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    if (J.running || J.stopped) return;
    J.running = true;
    const char *params[] = {J.keep};
    db_query(SQL_CLEAN, 1, params, on_cleaned, NULL);
}

int janitor_init(uv_loop_t *loop)
{
    int every = cfg.janitor_interval_seconds;
    /* How long a sent outbox row stays (seconds): long enough to see what went out lately. */
    int keep = cfg.janitor_outbox_keep_seconds;
    snprintf(J.keep, sizeof(J.keep), "%d", keep);
    int rc = uv_timer_init(loop, &J.timer);
    if (rc != 0) return rc;
    uv_unref((uv_handle_t *)&J.timer);
    J.started = true;
    J.stopped = false;
    return uv_timer_start(&J.timer, on_tick, 5000, (uint64_t)every * 1000);
}

void janitor_shutdown(void)
{
    if (!J.started) return;
    J.started = false;
    J.stopped = true;
    uv_timer_stop(&J.timer);
    uv_close((uv_handle_t *)&J.timer, NULL);
}
