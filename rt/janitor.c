/* The janitor (see janitor.h). */
#include "rt/janitor.h"

#include <stdbool.h>
#include <stdio.h>

#include "core/config.h"
#include "core/log.h"
#include "db/db.h"
#include "db/q_janitor.h"
#include "rt/outbox.h"
#include "rt/storage.h"

static struct {
    uv_timer_t timer;
    uv_timer_t uploads_timer;
    bool started;
    bool running;         /* a run is in flight */
    bool uploads_running; /* an uploads run is in flight */
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
    long long o = db_getll(r, 0, JANITOR_CLEAN_OUTBOX, 0);
    long long s = db_getll(r, 0, JANITOR_CLEAN_SESSIONS, 0);
    long long v = db_getll(r, 0, JANITOR_CLEAN_VERIFICATIONS, 0);
    if (o || s || v)
        log_info("janitor: deleted %lld outbox row(s), %lld session(s), %lld token(s)", o, s, v);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    if (J.running || J.stopped) return;
    J.running = true;
    const char *params[] = {J.keep};
    db_query(SQL_JANITOR_CLEAN, 1, params, on_cleaned, NULL);
}

static void on_uploads_done(db_result_t *r, void *data)
{
    (void)data;
    J.uploads_running = false;
    if (!r->ok) {
        if (!r->conn_lost) log_warn("storage janitor: %s", r->error ? r->error : "failed");
        return;
    }
    long long n = db_getll(r, 0, JANITOR_UPLOADS_QUEUED, 0);
    if (n > 0) {
        log_info("storage janitor: %lld unregistered upload(s) queued for deletion", n);
        outbox_kick();
    }
}

static void on_uploads_tick(uv_timer_t *t)
{
    (void)t;
    if (J.stopped) return;
    storage_sweep_tmp();
    if (J.uploads_running) return;
    J.uploads_running = true;
    db_query(SQL_JANITOR_UPLOADS, 0, NULL, on_uploads_done, NULL);
}

int janitor_init(uv_loop_t *loop)
{
    int every = cfg.janitor_interval_seconds;
    /* How long a sent outbox row stays (seconds): long enough to see what went out lately. */
    int keep = cfg.janitor_outbox_keep_seconds;
    snprintf(J.keep, sizeof(J.keep), "%d", keep);
    int rc = uv_timer_init(loop, &J.timer);
    if (rc == 0) rc = uv_timer_init(loop, &J.uploads_timer);
    if (rc != 0) return rc;
    uv_unref((uv_handle_t *)&J.timer);
    J.started = true;
    J.stopped = false;
    rc = uv_timer_start(&J.timer, on_tick, 5000, (uint64_t)every * 1000);
    if (rc != 0) return rc;
    every = cfg.storage_janitor_interval_seconds;
    return uv_timer_start(&J.uploads_timer, on_uploads_tick, 5000, (uint64_t)every * 1000);
}

void janitor_shutdown(void)
{
    if (!J.started) return;
    J.started = false;
    J.stopped = true;
    uv_timer_stop(&J.timer);
    uv_timer_stop(&J.uploads_timer);
    uv_close((uv_handle_t *)&J.timer, NULL);
    uv_close((uv_handle_t *)&J.uploads_timer, NULL);
}
