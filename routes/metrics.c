/*
 * GET /metrics: the figures of every worker in the Prometheus text format (exposition 0.0.4),
 * whichever worker answers (core/metrics.h: each worker publishes into a shared slot, on each
 * scrape it serves and once a second).
 *
 * Where it answers: with METRICS_PORT set, only on that listener (METRICS_HOST, default
 * 127.0.0.1), without a token, and nothing else there; the main port then answers 404, so the
 * figures cannot leak through the proxy whatever METRICS_TOKEN says. Without METRICS_PORT, on
 * the main port, never public: without METRICS_TOKEN the path answers 404, and with it the
 * scraper must send "Authorization: Bearer <METRICS_TOKEN>" (401 otherwise).
 *
 * What it says: request counters and histograms, and the other counters, summed over the
 * workers under the names and labels a single worker had; gauges that belong to one worker
 * (pool, Redis, streams, connections, thread pool, pid, memory, descriptors) once per worker
 * with a `worker` label (the slot, 0 .. WORKERS-1, which a replacement takes over); the outbox
 * figures (one query) and the supervisor's count of replaced workers once. A worker that has not
 * published for METRICS_STALE_MS, or whose process is gone, shows in
 * coachd_workers{state="missing"} instead of with gauges. Memory and open descriptors of each
 * worker are read from /proc/<pid> on the thread pool (no file I/O on the loop).
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

/* The figures a worker publishes next to its request counts (metrics_publish). */
enum {
    V_DB_BUSY,
    V_DB_IDLE,
    V_DB_BROKEN,
    V_DB_QUEUED,
    V_DB_RECONNECTS, /* counters: continued by a replacement (metrics_base_values) */
    V_FANOUT_SUM,
    V_FANOUT_COUNT,
    V_DELIVERIES,
    V_REDIS_UP,
    V_STREAMS_OPEN,
    V_FANOUT_MAX,
    V_REPLAY_PENDING,
    V_REPLAY_RESERVED,
    V_REPLAY_HELD,
    V_REPLAY_WAITING,
    V_CONNECTIONS,
    V_OFFLOAD_RUNNING,
    V_OFFLOAD_QUEUED,
    V_RESTARTS,
    NVALUES
};
_Static_assert(NVALUES <= METRICS_MAX_VALUES, "a slot holds METRICS_MAX_VALUES figures");

static uv_timer_t publish_timer;

static void publish(void)
{
    double v[NVALUES];
    const double *base = metrics_base_values();
    db_pool_stats_t p;
    db_pool_stats(&p);
    v[V_DB_BUSY] = p.busy;
    v[V_DB_IDLE] = p.idle;
    v[V_DB_BROKEN] = p.broken;
    v[V_DB_QUEUED] = p.queued;
    v[V_DB_RECONNECTS] = base[V_DB_RECONNECTS] + (double)p.reconnects;
    streams_fanout_stats_t fo = streams_fanout_stats();
    v[V_FANOUT_SUM] = base[V_FANOUT_SUM] + fo.seconds_sum;
    v[V_FANOUT_COUNT] = base[V_FANOUT_COUNT] + (double)fo.events;
    v[V_DELIVERIES] = base[V_DELIVERIES] + (double)fo.deliveries;
    v[V_FANOUT_MAX] = fo.seconds_max;
    v[V_REDIS_UP] = redis_connected() ? 1 : 0;
    v[V_STREAMS_OPEN] = (double)streams_count();
    streams_replay_stats_t rp = streams_replay_stats();
    v[V_REPLAY_PENDING] = (double)rp.pending_bytes;
    v[V_REPLAY_RESERVED] = (double)rp.reserved_bytes;
    v[V_REPLAY_HELD] = (double)rp.held_bytes;
    v[V_REPLAY_WAITING] = (double)rp.waiting;
    v[V_CONNECTIONS] = (double)http_server_conn_count();
    int running, queued;
    offload_stats(&running, &queued);
    v[V_OFFLOAD_RUNNING] = running;
    v[V_OFFLOAD_QUEUED] = queued;
    v[V_RESTARTS] = (double)metrics_worker_restarts;
    metrics_publish(v, NVALUES);
}

static void on_publish_timer(uv_timer_t *t)
{
    (void)t;
    publish();
}

typedef struct metrics_state {
    metrics_view_t *view;
    buf_t text; /* the request series, rendered on the thread pool (the bulk of the answer) */
    long long *rss_bytes; /* per worker, -1: unknown */
    long long *open_fds;
} metrics_state_t;

static void state_free(void *p)
{
    metrics_state_t *st = p;
    metrics_view_free(st->view);
    buf_free(&st->text);
    free(st->rss_bytes);
    free(st->open_fds);
}

static void proc_read(long pid, long long *rss_bytes, long long *open_fds)
{
    char path[64];
    *rss_bytes = -1;
    *open_fds = -1;
    snprintf(path, sizeof(path), "/proc/%ld/statm", pid);
    FILE *f = fopen(path, "r");
    if (f) {
        long long size, rss;
        if (fscanf(f, "%lld %lld", &size, &rss) == 2) *rss_bytes = rss * sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
    DIR *d = opendir(path);
    if (d) {
        long long n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') n++;
        closedir(d);
        *open_fds = pid == (long)getpid() ? n - 1 : n; /* not the descriptor of this listing */
    }
}

static void collect_work(void *data)
{
    metrics_state_t *st = data;
    st->view = metrics_collect();
    metrics_render_requests(&st->text, st->view);
    int n = st->view->nworkers;
    st->rss_bytes = calloc((size_t)(n ? n : 1), sizeof(long long));
    st->open_fds = calloc((size_t)(n ? n : 1), sizeof(long long));
    if (!st->rss_bytes || !st->open_fds) return; /* rendered without the two */
    for (int i = 0; i < n; i++) {
        const metrics_worker_t *w = &st->view->workers[i];
        if (w->reporting)
            proc_read(w->pid, &st->rss_bytes[i], &st->open_fds[i]);
        else
            st->rss_bytes[i] = st->open_fds[i] = -1;
    }
}

static void head(buf_t *b, const char *name, const char *help, const char *type)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static double value(const metrics_worker_t *w, int i)
{
    return i < w->nvalues ? w->values[i] : 0;
}

/* One line per reporting worker: name{[label,]worker="slot"} value. */
static void per_worker_lines(buf_t *b, const metrics_view_t *v, const char *name, const char *label,
                             int i)
{
    for (int k = 0; k < v->nworkers; k++) {
        const metrics_worker_t *w = &v->workers[k];
        if (!w->reporting) continue;
        buf_printf(b, "%s{%s%sworker=\"%d\"} %.17g\n", name, label ? label : "", label ? "," : "",
                   w->slot, value(w, i));
    }
}

static void per_worker(buf_t *b, const metrics_view_t *v, const char *name, const char *help, int i)
{
    head(b, name, help, "gauge");
    per_worker_lines(b, v, name, NULL, i);
}

/* A counter of every worker that ever published, whether it still reports or not: its
 * replacement continues from the slot's last figure, so the sum never goes backwards. */
static double summed(const metrics_view_t *v, int i)
{
    double s = 0;
    for (int k = 0; k < v->nworkers; k++)
        if (v->workers[k].pid) s += value(&v->workers[k], i);
    return s;
}

/* Per-worker gauges rendered alike, with a worker="<slot>" label each. */
static const struct {
    const char *name, *help;
    int value; /* V_* */
} worker_gauges[] = {
    {"coachd_replay_pending_bytes",
     "History being replayed to streams (Last-Event-ID) held by the worker: encoded entries not "
     "yet flushed to every stream they go to; at most REPLAY_MEMORY_MAX.",
     V_REPLAY_PENDING},
    {"coachd_replay_reserved_bytes", "Memory reserved by history reads in flight.",
     V_REPLAY_RESERVED},
    {"coachd_replay_held_bytes",
     "Live events held by streams while they replay history (each stream's share).", V_REPLAY_HELD},
    {"coachd_replay_waiting_streams",
     "Streams whose next history read waits for memory under REPLAY_MEMORY_MAX.", V_REPLAY_WAITING},
    {"coachd_http_connections", "Open HTTP connections on the worker.", V_CONNECTIONS},
    {"coachd_offload_running", "Jobs (password hashing, image work) on the worker's thread pool.",
     V_OFFLOAD_RUNNING},
    {"coachd_offload_queued", "Jobs waiting for the worker's thread pool.", V_OFFLOAD_QUEUED},
};

static void counter(buf_t *b, const metrics_view_t *v, const char *name, const char *help, int i)
{
    head(b, name, help, "counter");
    buf_printf(b, "%s %.17g\n", name, summed(v, i));
}

static void gauge(buf_t *b, const char *name, const char *help, double x)
{
    head(b, name, help, "gauge");
    buf_printf(b, "%s %.17g\n", name, x);
}

static void on_outbox(http_req_t *req, db_result_t *r)
{
    metrics_state_t *st = req->data;
    const metrics_view_t *v = st->view;
    buf_t b = st->text;
    st->text = (buf_t)BUF_INIT;
    head(&b, "coachd_worker_http_requests_total",
         "HTTP requests answered by each worker slot (its replacements continue its count).",
         "counter");
    for (int k = 0; k < v->nworkers; k++)
        if (v->workers[k].pid)
            buf_printf(&b, "coachd_worker_http_requests_total{worker=\"%d\"} %llu\n", k,
                       (unsigned long long)v->workers[k].requests);

    head(&b, "coachd_db_pool_connections", "Database connections by state.", "gauge");
    per_worker_lines(&b, v, "coachd_db_pool_connections", "state=\"busy\"", V_DB_BUSY);
    per_worker_lines(&b, v, "coachd_db_pool_connections", "state=\"idle\"", V_DB_IDLE);
    per_worker_lines(&b, v, "coachd_db_pool_connections", "state=\"broken\"", V_DB_BROKEN);
    per_worker(&b, v, "coachd_db_pool_queued", "Statements waiting for a free database connection.",
               V_DB_QUEUED);
    counter(&b, v, "coachd_db_pool_reconnects_total", "Database connections lost and re-dialled.",
            V_DB_RECONNECTS);
    per_worker(&b, v, "coachd_redis_up", "1 when the worker's Redis connection is up.", V_REDIS_UP);

    health_render_metrics(&b);
    bool ok = r && r->ok && db_nrows(r) == 1;
    gauge(&b, "coachd_outbox_up", "1 when the outbox figures below could be read.", ok ? 1 : 0);
    if (ok) {
        gauge(&b, "coachd_outbox_depth", "Mail and push messages not yet sent.",
              (double)db_getll(r, 0, METRICS_OUTBOX_DEPTH, 0));
        const char *age = db_get(r, 0, METRICS_OUTBOX_OLDEST_AGE_SECONDS);
        gauge(&b, "coachd_outbox_oldest_age_seconds", "Age of the oldest unsent message.",
              strtod(age ? age : "0", NULL));
    }

    per_worker(&b, v, "coachd_streams_open", "Open event streams (SSE) on the worker.",
               V_STREAMS_OPEN);
    buf_printf(&b,
               "# HELP coachd_stream_fanout_seconds Time from a live event's arrival from Redis "
               "to its write on the last stream of the worker.\n"
               "# TYPE coachd_stream_fanout_seconds summary\n"
               "coachd_stream_fanout_seconds_sum %.9f\ncoachd_stream_fanout_seconds_count %.17g\n",
               summed(v, V_FANOUT_SUM), summed(v, V_FANOUT_COUNT));
    per_worker(&b, v, "coachd_stream_fanout_max_seconds",
               "Longest fan-out of one live event on the worker.", V_FANOUT_MAX);
    counter(&b, v, "coachd_stream_deliveries_total", "Live events written to streams.",
            V_DELIVERIES);
    for (size_t i = 0; i < sizeof(worker_gauges) / sizeof(worker_gauges[0]); i++)
        per_worker(&b, v, worker_gauges[i].name, worker_gauges[i].help, worker_gauges[i].value);

    /* The supervisor counts; the newest worker was forked with its latest count. */
    double restarts = 0;
    int reporting = 0;
    for (int k = 0; k < v->nworkers; k++) {
        const metrics_worker_t *w = &v->workers[k];
        if (w->pid && value(w, V_RESTARTS) > restarts) restarts = value(w, V_RESTARTS);
        reporting += w->reporting;
    }
    head(&b, "coachd_worker_restarts_total", "Workers the supervisor replaced because one died.",
         "counter");
    buf_printf(&b, "coachd_worker_restarts_total %.17g\n", restarts);
    head(&b, "coachd_workers",
         "Worker slots whose figures are in this answer (reporting) and those that are not "
         "(missing: dead, stuck or starting).",
         "gauge");
    buf_printf(&b, "coachd_workers{state=\"reporting\"} %d\n", reporting);
    buf_printf(&b, "coachd_workers{state=\"missing\"} %d\n", v->nworkers - reporting);
    head(&b, "coachd_worker_pid", "Process id of the worker in each slot.", "gauge");
    for (int k = 0; k < v->nworkers; k++)
        if (v->workers[k].reporting)
            buf_printf(&b, "coachd_worker_pid{worker=\"%d\"} %ld\n", k, v->workers[k].pid);
    if (st->rss_bytes && st->open_fds) {
        head(&b, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge");
        for (int k = 0; k < v->nworkers; k++)
            if (st->rss_bytes[k] >= 0)
                buf_printf(&b, "process_resident_memory_bytes{worker=\"%d\"} %lld\n", k,
                           st->rss_bytes[k]);
        head(&b, "process_open_fds", "Number of open file descriptors.", "gauge");
        for (int k = 0; k < v->nworkers; k++)
            if (st->open_fds[k] >= 0)
                buf_printf(&b, "process_open_fds{worker=\"%d\"} %lld\n", k, st->open_fds[k]);
    }
    http_reply_buf(req, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static void on_collected(http_req_t *req, void *data)
{
    (void)data;
    db_req_query(req, SQL_METRICS_OUTBOX, 0, NULL, on_outbox);
}

static void get_metrics(http_req_t *req)
{
    /* METRICS_PORT's listener: the operator chose who reaches it (METRICS_HOST, firewall). */
    if (!http_req_side_listener(req)) {
        const char *token = getenv("METRICS_TOKEN");
        const char *side = getenv("METRICS_PORT");
        if (!token || !*token || (side && *side)) {
            http_reply_error(req, 404, "NOT_FOUND", "Not found");
            return;
        }
        const char *auth = http_req_header(req, "Authorization");
        size_t tl = strlen(token);
        if (!auth || strncmp(auth, "Bearer ", 7) != 0 || strlen(auth + 7) != tl ||
            !crypto_ct_equal(auth + 7, token, tl)) {
            http_reply_error(req, 401, "UNAUTHENTICATED",
                             "Metrics need Authorization: Bearer <METRICS_TOKEN>");
            return;
        }
    }
    publish(); /* this worker's figures as of now; the others' are at most a second old */
    metrics_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    arena_on_free(&req->arena, state_free, st);
    req->data = st;
    offload_run(req, collect_work, on_collected, st);
}

static const route_t metrics_routes[] = {
    {HTTP_M_GET, "/metrics", get_metrics, AUTH_PUBLIC, ROLE_NONE, 0, 0},
};

void routes_metrics_register(uv_loop_t *loop)
{
    router_add(metrics_routes, sizeof(metrics_routes) / sizeof(metrics_routes[0]));
    /* Publishes even when nobody scrapes this worker, so the one that is scraped has its
     * figures; unref'd, it never keeps the loop alive on shutdown. */
    uv_timer_init(loop, &publish_timer);
    uv_timer_start(&publish_timer, on_publish_timer, 0, METRICS_PUBLISH_MS);
    uv_unref((uv_handle_t *)&publish_timer);
}
