/*
 * GET /metrics: this worker's figures in the Prometheus text format (exposition 0.0.4).
 *
 * Never public by default: without METRICS_TOKEN the path answers 404, and with it the scraper
 * must send "Authorization: Bearer <METRICS_TOKEN>" (401 otherwise). The figures are per worker
 * process (WORKERS > 1: each scrape reaches one of them; the outbox figures are global).
 * Process RSS and open files are read from /proc on the thread pool (no file I/O on the loop);
 * outbox depth and age come from one query. The worker's pid and the supervisor's count of
 * replaced workers let a scraper (and tests/abuse/endings.py) tell that a worker died.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/metrics.h"
#include "core/offload.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_metrics.h"
#include "domain/crypto.h"
#include "domain/roles.h"
#include "routes/dbreq.h"
#include "routes/routes.h"
#include "rt/redis.h"
#include "rt/streams.h"

typedef struct metrics_state {
    long long rss_bytes; /* -1: unknown */
    long long open_fds;
} metrics_state_t;

static void proc_work(void *data)
{
    metrics_state_t *st = data;
    st->rss_bytes = -1;
    st->open_fds = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        long long size, rss;
        if (fscanf(f, "%lld %lld", &size, &rss) == 2) st->rss_bytes = rss * sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long long n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') n++;
        closedir(d);
        st->open_fds = n - 1; /* not the descriptor of this listing */
    }
}

static void gauge(buf_t *b, const char *name, const char *help, const char *type, double v)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void on_outbox(http_req_t *req, db_result_t *r)
{
    metrics_state_t *st = req->data;
    buf_t b = BUF_INIT;
    metrics_render_requests(&b);

    db_pool_stats_t p;
    db_pool_stats(&p);
    buf_puts(&b, "# HELP coachd_db_pool_connections Database connections by state.\n"
                 "# TYPE coachd_db_pool_connections gauge\n");
    buf_printf(&b, "coachd_db_pool_connections{state=\"busy\"} %d\n", p.busy);
    buf_printf(&b, "coachd_db_pool_connections{state=\"idle\"} %d\n", p.idle);
    buf_printf(&b, "coachd_db_pool_connections{state=\"broken\"} %d\n", p.broken);
    gauge(&b, "coachd_db_pool_queued", "Statements waiting for a free database connection.",
          "gauge", p.queued);
    gauge(&b, "coachd_db_pool_reconnects_total", "Database connections lost and re-dialled.",
          "counter", (double)p.reconnects);
    gauge(&b, "coachd_redis_up", "1 when the Redis connection is up.", "gauge",
          redis_connected() ? 1 : 0);
    health_render_metrics(&b);
    bool ok = r && r->ok && db_nrows(r) == 1;
    gauge(&b, "coachd_outbox_up", "1 when the outbox figures below could be read.", "gauge",
          ok ? 1 : 0);
    if (ok) {
        gauge(&b, "coachd_outbox_depth", "Mail and push messages not yet sent.", "gauge",
              (double)db_getll(r, 0, METRICS_OUTBOX_DEPTH, 0));
        gauge(&b, "coachd_outbox_oldest_age_seconds", "Age of the oldest unsent message.", "gauge",
              strtod(db_get(r, 0, METRICS_OUTBOX_OLDEST_AGE_SECONDS)
                         ? db_get(r, 0, METRICS_OUTBOX_OLDEST_AGE_SECONDS)
                         : "0",
                     NULL));
    }
    gauge(&b, "coachd_streams_open", "Open event streams (SSE) on this worker.", "gauge",
          (double)streams_count());
    streams_fanout_stats_t fo = streams_fanout_stats();
    buf_printf(&b,
               "# HELP coachd_stream_fanout_seconds Time from a live event's arrival from Redis "
               "to its write on the last stream of this worker.\n"
               "# TYPE coachd_stream_fanout_seconds summary\n"
               "coachd_stream_fanout_seconds_sum %.9f\ncoachd_stream_fanout_seconds_count %llu\n",
               fo.seconds_sum, (unsigned long long)fo.events);
    gauge(&b, "coachd_stream_fanout_max_seconds", "Longest fan-out of one live event.", "gauge",
          fo.seconds_max);
    gauge(&b, "coachd_stream_deliveries_total", "Live events written to streams.", "counter",
          (double)fo.deliveries);
    streams_replay_stats_t rp = streams_replay_stats();
    gauge(&b, "coachd_replay_pending_bytes",
          "History being replayed to streams (Last-Event-ID) held by this worker: encoded entries "
          "not yet flushed to every stream they go to; at most REPLAY_MEMORY_MAX.",
          "gauge", (double)rp.pending_bytes);
    gauge(&b, "coachd_replay_reserved_bytes", "Memory reserved by history reads in flight.",
          "gauge", (double)rp.reserved_bytes);
    gauge(&b, "coachd_replay_held_bytes",
          "Live events held by streams while they replay history (each stream's share).", "gauge",
          (double)rp.held_bytes);
    gauge(&b, "coachd_replay_waiting_streams",
          "Streams whose next history read waits for memory under REPLAY_MEMORY_MAX.", "gauge",
          (double)rp.waiting);
    gauge(&b, "coachd_http_connections", "Open HTTP connections on this worker.", "gauge",
          (double)http_server_conn_count());
    int running, queued;
    offload_stats(&running, &queued);
    gauge(&b, "coachd_offload_running", "Jobs (password hashing, image work) on the thread pool.",
          "gauge", running);
    gauge(&b, "coachd_offload_queued", "Jobs waiting for the thread pool.", "gauge", queued);
    gauge(&b, "coachd_worker_restarts_total",
          "Workers the supervisor had replaced (one died) before this worker started.", "counter",
          (double)metrics_worker_restarts);
    gauge(&b, "coachd_worker_pid", "Process id of this worker.", "gauge", (double)getpid());
    if (st->rss_bytes >= 0)
        gauge(&b, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge",
              (double)st->rss_bytes);
    if (st->open_fds >= 0)
        gauge(&b, "process_open_fds", "Number of open file descriptors.", "gauge",
              (double)st->open_fds);
    http_reply_buf(req, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static void on_proc(http_req_t *req, void *data)
{
    (void)data;
    db_req_query(req, SQL_METRICS_OUTBOX, 0, NULL, on_outbox);
}

static void get_metrics(http_req_t *req)
{
    const char *token = getenv("METRICS_TOKEN");
    if (!token || !*token) {
        http_reply_error(req, 404, "NOT_FOUND", "Not found");
        return;
    }
    const char *auth = http_req_header(req, "Authorization");
    size_t tl = strlen(token);
    if (!auth || strncmp(auth, "Bearer ", 7) != 0 || strlen(auth + 7) != tl ||
        !crypto_ct_equal(auth + 7, token, tl)) {
        http_reply_error(req, 401, "UNAUTHENTICATED", "Metrics need the bearer token");
        return;
    }
    metrics_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    req->data = st;
    offload_run(req, proc_work, on_proc, st);
}

static const route_t metrics_routes[] = {
    {HTTP_M_GET, "/metrics", get_metrics, AUTH_PUBLIC, ROLE_NONE, 0, 0},
};

void routes_metrics_register(void)
{
    router_add(metrics_routes, sizeof(metrics_routes) / sizeof(metrics_routes[0]));
}
