/* The missed-session sweeper (see sweeper.h). */
#include "rt/sweeper.h"

#include <stdbool.h>
#include <stdio.h>

#include "core/config.h"
#include "core/log.h"
#include "db/db.h"
#include "db/q_sweeper.h"
#include "rt/events.h"

static struct {
    uv_timer_t timer;
    bool started;
    bool running; /* a sweep query is in flight */
    bool stopped;
} sw;

static void on_tick(uv_timer_t *t);
static void on_swept(db_result_t *r, void *data);

static void on_swept(db_result_t *r, void *data)
{
    (void)data;
    sw.running = false;
    if (!r->ok) {
        if (!r->conn_lost) log_warn("sweeper: %s", r->error ? r->error : "query failed");
        return;
    }
    int n = db_nrows(r);
    if (n == 0) return;
    log_info("sweeper: %lld session(s) missed in %d mentorship(s)",
             db_getll(r, 0, SWEEPER_MISSED_SESSIONS, 0), n);
    if (sw.stopped) return;
    for (int i = 0; i < n; i++) {
        const char *id = db_get(r, i, SWEEPER_MISSED_MENTORSHIP_ID);
        char data_json[128];
        snprintf(data_json, sizeof(data_json), "{\"action\":\"updated\",\"mentorshipId\":\"%s\"}",
                 id);
        events_publish(db_get(r, i, SWEEPER_MISSED_ORGANIZATION_ID), id,
                       db_get(r, i, SWEEPER_MISSED_COACH_ID),
                       db_get(r, i, SWEEPER_MISSED_TEACHER_ID), "session-update", data_json, true);
    }
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    if (sw.running || sw.stopped) return;
    sw.running = true;
    db_query(SQL_SWEEPER_MISSED, 0, NULL, on_swept, NULL);
}

int sweeper_init(uv_loop_t *loop)
{
    int every = cfg.sweeper_interval_seconds;
    int rc = uv_timer_init(loop, &sw.timer);
    if (rc != 0) return rc;
    sw.started = true;
    sw.stopped = false;
    return uv_timer_start(&sw.timer, on_tick, 1000, (uint64_t)every * 1000);
}

void sweeper_shutdown(void)
{
    if (!sw.started) return;
    sw.started = false;
    sw.stopped = true;
    uv_timer_stop(&sw.timer);
    uv_close((uv_handle_t *)&sw.timer, NULL);
}
