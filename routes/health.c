/*
 * Health, for people and for machines.
 *
 * GET /api/health (X-Client-Key): six checks run concurrently, then one answer.
 *
 *   database  SELECT 1 through the pool
 *   cache     Redis PING
 *   storage   local: a probe file is written and removed; s3: the bucket answers a signed HEAD
 *   mail      SMTP_URL: the SMTP server accepts a connection; none (development): .eml files
 *   video     VIDEO_APP_ID and VIDEO_APP_CERTIFICATE are present
 *   env       required variables present (only enforced when APP_ENV=production: in
 *             development it stays "ok", and env.missingRequired still lists what is unset)
 *
 * One rule in every environment: status "ok" and 200 exactly when every check in `checks` is
 * "ok"; otherwise "degraded" and 503 (a development server without video credentials included).
 * That makes it the wrong probe for a load balancer: an SMTP outage would take every host out
 * while the API serves fine.
 *
 * GET /api/health/live and GET /api/health/ready are for balancers and orchestrators: no client
 * key, no details, {"status":"ok"} or {"status":"unavailable"}. live answers while the worker
 * serves; ready answers 200 when a request could be served: the database answers and has every
 * migration this binary knows, and Redis answers PING. Mail, video and storage never fail it.
 * A poll costs one indexed statement and one PING; no SMTP, no file; the global per-IP limiter
 * does not count them (ROUTE_NO_RATE_LIMIT).
 *
 * Storage and mail probes are cached for HEALTH_PROBE_CACHE_SECONDS (30) and run at most once at
 * a time: concurrent callers wait for the probe in flight. /metrics shows the cached results
 * (coachd_health_check_ok) and starts a probe when they are stale, so a scrape never waits for
 * SMTP and never opens more connections than the cache allows.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_health.h"
#include "domain/crypto.h"
#include "domain/roles.h"
#include "routes/common.h"
#include "routes/routes.h"
#include "rt/mail.h"
#include "rt/redis.h"
#include "rt/storage_probe.h"

/* How long the mail and storage probe results are reused: a health check every few seconds
 * should not open an SMTP connection or write a file each time. HEALTH_PROBE_CACHE_SECONDS. */
static int probe_cache_seconds(void)
{
    static int secs = -1;
    if (secs < 0) secs = config_int("HEALTH_PROBE_CACHE_SECONDS", 30, 0, 3600);
    return secs;
}

enum { CHK_DB, CHK_CACHE, CHK_STORAGE, CHK_MAIL, CHK_N };

typedef struct health_state {
    http_req_t *req;
    int pending;
    bool ok[CHK_N];
    void (*reply)(struct health_state *st);
    void (*settle)(struct health_state *st); /* optional: runs when the checks are done, even
                                              * when the client has gone */
} health_state_t;

/* A request waiting for a probe in flight (request arena; the request holds a reference). */
typedef struct probe_wait {
    struct probe_wait *next;
    health_state_t *st;
    int which;
} probe_wait_t;

typedef struct probe {
    void (*run)(void (*cb)(bool ok, void *data), void *data);
    time_t at;
    bool known, ok, running;
    probe_wait_t *waiters;
} probe_t;

static probe_t mail_check = {.run = mail_verify};
static probe_t storage_check = {.run = storage_probe};

static void check_done(health_state_t *st, int which, bool ok)
{
    st->ok[which] = ok;
    if (--st->pending == 0) {
        if (st->settle) st->settle(st);
        if (!http_req_gone(st->req)) st->reply(st);
        http_req_unref(st->req);
    }
}

static void on_db(db_result_t *r, void *data)
{
    check_done(data, CHK_DB, r->ok);
}

static void on_redis(bool ok, void *data)
{
    check_done(data, CHK_CACHE, ok);
}

static void on_probe(bool ok, void *data)
{
    probe_t *p = data;
    p->at = time(NULL);
    p->known = true;
    p->ok = ok;
    p->running = false;
    probe_wait_t *w = p->waiters;
    p->waiters = NULL;
    while (w) {
        probe_wait_t *next = w->next; /* check_done may free w's request */
        check_done(w->st, w->which, ok);
        w = next;
    }
}

static bool probe_fresh(const probe_t *p)
{
    return p->known && time(NULL) - p->at < probe_cache_seconds();
}

static void probe_start(probe_t *p)
{
    if (p->running) return;
    p->running = true;
    p->run(on_probe, p);
}

/* The cached result when fresh, else the result of the probe in flight (started if none). */
static void probe_get(probe_t *p, health_state_t *st, int which)
{
    if (probe_fresh(p)) {
        check_done(st, which, p->ok);
        return;
    }
    probe_wait_t *w = arena_calloc(&st->req->arena, sizeof(*w));
    w->st = st;
    w->which = which;
    w->next = p->waiters;
    p->waiters = w;
    probe_start(p);
}

static bool s3_complete(void)
{
    return cfg.s3_endpoint && cfg.s3_region && cfg.s3_bucket && cfg.s3_access_key_id &&
           cfg.s3_secret_access_key;
}

static void add_missing(buf_t *b, const char *name, bool *first)
{
    if (!*first) buf_putc(b, ',');
    *first = false;
    buf_json_str(b, name);
}

static void health_reply(health_state_t *st)
{
    bool video_ok = cfg.video_app_id && cfg.video_app_certificate;
    buf_t req_missing = BUF_INIT, groups = BUF_INIT;
    bool f1 = true, f2 = true;
    if (!cfg.database_url) add_missing(&req_missing, "DATABASE_URL", &f1);
    if (!cfg.redis_url) add_missing(&req_missing, "REDIS_URL", &f1);
    if (!getenv("PUBLIC_URL")) add_missing(&req_missing, "PUBLIC_URL", &f1);
    if (!getenv("FRONTEND_URL")) add_missing(&req_missing, "FRONTEND_URL", &f1);
    if (!getenv("TRUSTED_ORIGINS")) add_missing(&req_missing, "TRUSTED_ORIGINS", &f1);
    if (!cfg.client_key && !cfg.disable_client_auth) add_missing(&req_missing, "CLIENT_KEY", &f1);
    if (!cfg.smtp_url) add_missing(&req_missing, "SMTP_URL", &f1);
    if (!getenv("MAIL_FROM")) add_missing(&req_missing, "MAIL_FROM", &f1);
    if (!cfg.smtp_url || !getenv("MAIL_FROM")) add_missing(&groups, "mail", &f2);
    bool storage_cfg =
        strcmp(cfg.storage_driver, "s3") == 0 ? s3_complete() : getenv("STORAGE_DIR") != NULL;
    if (strcmp(cfg.storage_driver, "s3") == 0) {
        if (!cfg.s3_endpoint) add_missing(&req_missing, "S3_ENDPOINT", &f1);
        if (!cfg.s3_region) add_missing(&req_missing, "S3_REGION", &f1);
        if (!cfg.s3_bucket) add_missing(&req_missing, "S3_BUCKET", &f1);
        if (!cfg.s3_access_key_id) add_missing(&req_missing, "S3_ACCESS_KEY_ID", &f1);
        if (!cfg.s3_secret_access_key) add_missing(&req_missing, "S3_SECRET_ACCESS_KEY", &f1);
    } else if (!getenv("STORAGE_DIR")) {
        add_missing(&req_missing, "STORAGE_DIR", &f1);
    }
    if (!storage_cfg) add_missing(&groups, "storage", &f2);
    if (!cfg.video_app_id) add_missing(&req_missing, "VIDEO_APP_ID", &f1);
    if (!cfg.video_app_certificate) add_missing(&req_missing, "VIDEO_APP_CERTIFICATE", &f1);
    if (!video_ok) add_missing(&groups, "video", &f2);
    bool env_ok = !cfg.production || (f1 && f2);

    /* One rule in every environment: 200 "ok" exactly when every check is "ok". */
    bool degraded = !st->ok[CHK_DB] || !st->ok[CHK_CACHE] || !st->ok[CHK_STORAGE] ||
                    !st->ok[CHK_MAIL] || !video_ok || !env_ok;

    buf_t b = BUF_INIT;
#define OKS(x) ((x) ? "\"ok\"" : "\"error\"")
    buf_printf(
        &b,
        "{\"status\":\"%s\",\"version\":\"%s\",\"checks\":{\"database\":%s,\"cache\":%s,"
        "\"storage\":%s,\"mail\":%s,\"video\":%s,\"env\":%s},\"env\":{\"environment\":\"%s\","
        "\"missingRequired\":[",
        degraded ? "degraded" : "ok", COACHD_VERSION, OKS(st->ok[CHK_DB]), OKS(st->ok[CHK_CACHE]),
        OKS(st->ok[CHK_STORAGE]), OKS(st->ok[CHK_MAIL]), OKS(video_ok), OKS(env_ok),
        cfg.production ? "deployed" : "development");
#undef OKS
    if (req_missing.len) buf_append(&b, req_missing.data, req_missing.len);
    buf_puts(&b, "],\"missingGroups\":[");
    if (groups.len) buf_append(&b, groups.data, groups.len);
    buf_puts(&b, "]}}");
    buf_free(&req_missing);
    buf_free(&groups);
    http_reply_buf(st->req, degraded ? 503 : 200, "application/json; charset=utf-8", &b);
}

static void health(http_req_t *req)
{
    if (!cfg.disable_client_auth) {
        const char *key = http_req_header(req, "X-Client-Key");
        /* Without a configured key, development lets health through; production cannot. */
        bool ok = cfg.client_key ? (key && crypto_ct_streq(key, cfg.client_key)) : !cfg.production;
        if (!ok) {
            http_reply_error(req, 401, "UNAUTHENTICATED", "Missing or invalid X-Client-Key");
            return;
        }
    }
    health_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->req = req;
    st->pending = CHK_N;
    st->reply = health_reply;
    http_req_ref(req);
    db_query(SQL_HEALTH_PING, 0, NULL, on_db, st);
    redis_ping(on_redis, st);
    probe_get(&storage_check, st, CHK_STORAGE);
    probe_get(&mail_check, st, CHK_MAIL);
}

/* ---- for machines ---- */

static void machine_reply(http_req_t *req, bool ok)
{
    if (ok)
        http_reply_json(req, 200, "{\"status\":\"ok\"}");
    else
        http_reply_json(req, 503, "{\"status\":\"unavailable\"}");
}

static void live(http_req_t *req)
{
    machine_reply(req, true);
}

static void on_ready_db(db_result_t *r, void *data)
{
    static bool lacking; /* logged once per change, not once per poll */
    const char *migrated = r->ok ? db_get(r, 0, HEALTH_READY_MIGRATED) : NULL;
    bool ok = migrated && migrated[0] == 't';
    if (r->ok && ok == lacking) {
        lacking = !ok;
        if (lacking)
            log_warn("health: not ready: the database lacks migrations this binary has "
                     "(run coachd migrate)");
        else
            log_info("health: the database has every migration again");
    }
    check_done(data, CHK_DB, ok);
}

/* The last readiness check of this worker, reused for READY_REUSE_MS and while the next one
 * runs: polls (public, not rate-limited, and put ahead of queued statements) cost at most one
 * statement and one PING per worker per interval, however many arrive. */
#define READY_REUSE_MS 1000
static struct {
    uint64_t at_ms;
    bool known, ok, running;
} last_ready;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void ready_settle(health_state_t *st)
{
    last_ready.ok = st->ok[CHK_DB] && st->ok[CHK_CACHE];
    last_ready.known = true;
    last_ready.running = false;
    last_ready.at_ms = mono_ms();
}

static void ready_reply(health_state_t *st)
{
    machine_reply(st->req, st->ok[CHK_DB] && st->ok[CHK_CACHE]);
}

static void ready(http_req_t *req)
{
    /* Known down already: answer now rather than queue behind the pool's 10 s wait. */
    if (!db_available() || !redis_connected()) {
        machine_reply(req, false);
        return;
    }
    if (last_ready.known && (last_ready.running || mono_ms() - last_ready.at_ms < READY_REUSE_MS)) {
        machine_reply(req, last_ready.ok);
        return;
    }
    health_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->req = req;
    st->pending = 2;
    st->reply = ready_reply;
    st->settle = ready_settle;
    last_ready.running = true;
    http_req_ref(req);
    const char *params[] = {db_migrations_array()};
    /* Ahead of queued statements: a busy worker that can serve is still ready, and a balancer
     * that times the poll out under load would take every busy host out at once. */
    db_query_first(SQL_HEALTH_READY, 1, params, on_ready_db, st);
    redis_ping(on_redis, st);
}

/* coachd_health_check_ok for /metrics: the pool and Redis connections as they stand, storage and
 * mail as last probed (a stale result starts a probe in the background; until the first result
 * the sample is left out rather than reported as a failure), video from the configuration. */
void health_render_metrics(buf_t *b)
{
    if (!probe_fresh(&storage_check)) probe_start(&storage_check);
    if (!probe_fresh(&mail_check)) probe_start(&mail_check);
    buf_puts(b, "# HELP coachd_health_check_ok 1 when the check of /api/health passes on this "
                "worker (storage and mail: the last probe, cached HEALTH_PROBE_CACHE_SECONDS).\n"
                "# TYPE coachd_health_check_ok gauge\n");
    buf_printf(b, "coachd_health_check_ok{check=\"database\"} %d\n", db_available() ? 1 : 0);
    buf_printf(b, "coachd_health_check_ok{check=\"cache\"} %d\n", redis_connected() ? 1 : 0);
    if (storage_check.known)
        buf_printf(b, "coachd_health_check_ok{check=\"storage\"} %d\n", storage_check.ok ? 1 : 0);
    if (mail_check.known)
        buf_printf(b, "coachd_health_check_ok{check=\"mail\"} %d\n", mail_check.ok ? 1 : 0);
    buf_printf(b, "coachd_health_check_ok{check=\"video\"} %d\n",
               cfg.video_app_id && cfg.video_app_certificate ? 1 : 0);
}

static const route_t health_routes[] = {
    {HTTP_M_GET, "/api/health", health, AUTH_PUBLIC, ROLE_NONE, 0, 0},
    {HTTP_M_GET, "/api/health/live", live, AUTH_PUBLIC, ROLE_NONE, ROUTE_NO_RATE_LIMIT, 0},
    {HTTP_M_GET, "/api/health/ready", ready, AUTH_PUBLIC, ROLE_NONE, ROUTE_NO_RATE_LIMIT, 0},
};

void routes_health_register(void)
{
    router_add(health_routes, sizeof(health_routes) / sizeof(health_routes[0]));
}
