/*
 * GET /api/health: six checks run concurrently, then one answer.
 *
 *   database  SELECT 1 through the pool
 *   cache     Redis PING
 *   storage   local: a probe file is written and removed; s3: the bucket answers a signed HEAD
 *   mail      SMTP_URL: the SMTP server accepts a connection; none (development): .eml files
 *   video     VIDEO_APP_ID and VIDEO_APP_CERTIFICATE are present
 *   env       required variables present (only enforced when APP_ENV=production)
 *
 * status is "degraded" (503) when the database or cache fails, or in production when any check
 * fails. Storage and mail probes are cached for 30 s so a load balancer polling the endpoint does
 * not open an SMTP connection per poll.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/router.h"
#include "db/db.h"
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
} health_state_t;

static struct {
    time_t at;
    bool ok;
} mail_cache, storage_cache;

static void health_reply(health_state_t *st);

static void check_done(health_state_t *st, int which, bool ok)
{
    st->ok[which] = ok;
    if (--st->pending == 0) {
        if (!http_req_gone(st->req)) health_reply(st);
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

static void on_storage(bool ok, void *data)
{
    storage_cache.at = time(NULL);
    storage_cache.ok = ok;
    check_done(data, CHK_STORAGE, ok);
}

static void on_mail(bool ok, void *data)
{
    mail_cache.at = time(NULL);
    mail_cache.ok = ok;
    check_done(data, CHK_MAIL, ok);
}

static void probe_mail(health_state_t *st)
{
    if (time(NULL) - mail_cache.at < probe_cache_seconds()) {
        check_done(st, CHK_MAIL, mail_cache.ok);
        return;
    }
    mail_verify(on_mail, st);
}

static void probe_storage(health_state_t *st)
{
    if (time(NULL) - storage_cache.at < probe_cache_seconds()) {
        check_done(st, CHK_STORAGE, storage_cache.ok);
        return;
    }
    storage_probe(on_storage, st);
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

    bool degraded = !st->ok[CHK_DB] || !st->ok[CHK_CACHE];
    if (cfg.production)
        degraded = degraded || !st->ok[CHK_STORAGE] || !st->ok[CHK_MAIL] || !video_ok || !env_ok;

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
    http_req_ref(req);
    db_query("SELECT 1", 0, NULL, on_db, st);
    redis_ping(on_redis, st);
    probe_storage(st);
    probe_mail(st);
}

static const route_t health_routes[] = {
    {HTTP_M_GET, "/api/health", health, AUTH_PUBLIC, ROLE_NONE, 0, 0},
};

void routes_health_register(void)
{
    router_add(health_routes, sizeof(health_routes) / sizeof(health_routes[0]));
}
