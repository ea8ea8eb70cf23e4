/*
 * Configuration from the environment, one parser per kind of value. Every value is checked once,
 * here, by the supervisor before any worker forks: a malformed number, a number out of range, a
 * URL without its scheme or host, an unknown word, a short secret or a missing FRONTEND_URL in
 * production is logged by its variable's name and makes config_load fail, so start-up stops with
 * exit status 1 instead of running on a default the operator did not choose (or a worker failing
 * on it forever). The one exception is RESEND_ACTIVATION_COOLDOWN_SECONDS, which the interface
 * specifies as "60 seconds if unset or invalid".
 */
#include "core/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/netaddr.h"
#include "core/url.h"

config_t cfg;

/* Variables found invalid since the last config_load began. */
static int config_errors;

/* value NULL: not shown (a URL may carry a password). */
static void config_bad(const char *name, const char *value, const char *why)
{
    if (value)
        log_error("config: %s=%s is invalid: %s", name, value, why);
    else
        log_error("config: %s is invalid: %s", name, why);
    config_errors++;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

static char *env_dup(const char *name, const char *def)
{
    const char *v = env(name);
    if (!v) v = def;
    return v ? xstrdup(v) : NULL;
}

static bool env_bool(const char *name, bool def)
{
    const char *v = env(name);
    if (!v) return def;
    if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
        strcasecmp(v, "on") == 0)
        return true;
    if (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
        strcasecmp(v, "off") == 0)
        return false;
    config_bad(name, v, "expected true or false (1/0, yes/no, on/off)");
    return def;
}

static bool int_parse(const char *v, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < min || n > max) return false;
    *out = (int)n;
    return true;
}

int config_int(const char *name, int def, int min, int max)
{
    const char *v = env(name);
    if (!v) return def;
    int n;
    if (!int_parse(v, min, max, &n)) {
        char why[96];
        snprintf(why, sizeof(why), "expected an integer in [%d, %d]", min, max);
        config_bad(name, v, why);
        return def;
    }
    return n;
}

/* A decimal number of days in [min_seconds, max_days], e.g. 30 or 0.0001; as seconds. */
static double config_days(const char *name, double def_days, double min_seconds, double max_days)
{
    const char *v = env(name);
    if (!v) return def_days * 86400.0;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || end == v || !(d * 86400.0 >= min_seconds) || !(d <= max_days)) {
        char why[128];
        snprintf(why, sizeof(why),
                 "expected a number of days (decimals allowed) from %g (%g s) to %g",
                 min_seconds / 86400.0, min_seconds, max_days);
        config_bad(name, v, why);
        return def_days * 86400.0;
    }
    return d * 86400.0;
}

/* The interface's rule for values that fall back rather than stop start-up. */
static int config_int_or_default(const char *name, int def, int min, int max)
{
    const char *v = env(name);
    int n;
    if (!v) return def;
    if (int_parse(v, min, max, &n)) return n;
    log_warn("config: %s=%s is not an integer in [%d, %d]; using %d", name, v, min, max, def);
    return def;
}

static bool has_space_or_control(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v <= 0x20 || *v == 0x7f) return true;
    return false;
}

/* scheme://[userinfo@]host[:port][/path] with one of `schemes` (NULL-terminated), a host, no
 * spaces or control characters; with `origin`, nothing after the port (an optional trailing
 * slash aside), as an Origin header carries. The URL parser is core/url.c's. */
static bool url_valid(const char *v, const char *const *schemes, bool origin)
{
    if (has_space_or_control(v)) return false;
    for (const char *const *s = schemes; *s; s++) {
        url_parts_t u;
        if (url_parse(v, *s, &u) != 0) continue;
        bool ok = u.host[0] != '\0' && (!origin || (!u.user && !u.pass)) &&
                  (!origin || u.path[0] == '\0' || strcmp(u.path, "/") == 0);
        url_parts_free(&u);
        return ok;
    }
    return false;
}

static const char *const http_schemes[] = {"https", "http", NULL};

/* A public address is shown in the refusal; a service URL (it may carry credentials) is not. */
enum { HIDE, SHOW };

static void check_url(const char *name, const char *v, const char *const *schemes, bool origin,
                      int show, const char *expect)
{
    if (v && !url_valid(v, schemes, origin)) config_bad(name, show == SHOW ? v : NULL, expect);
}

static void strip_slash(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/')
        s[--n] = '\0';
}

static void parse_origins(const char *list)
{
    int cap = 4;
    cfg.trusted_origins = xcalloc((size_t)cap + 1, sizeof(char *));
    cfg.n_trusted_origins = 0;
    const char *p = list;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t'))
            p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n) {
            if (cfg.n_trusted_origins == cap) {
                cap *= 2;
                cfg.trusted_origins =
                    xrealloc(cfg.trusted_origins, ((size_t)cap + 1) * sizeof(char *));
            }
            char *o = xstrndup(p, n);
            strip_slash(o);
            cfg.trusted_origins[cfg.n_trusted_origins++] = o;
            cfg.trusted_origins[cfg.n_trusted_origins] = NULL;
        }
        p = comma ? comma + 1 : NULL;
    }
}

/* Releases the strings of a previous load, so tests may load again without leaking. */
static void config_free(void)
{
    char **strs[] = {&cfg.host,
                     &cfg.database_url,
                     &cfg.redis_url,
                     &cfg.client_key,
                     &cfg.public_url,
                     &cfg.frontend_url,
                     &cfg.smtp_url,
                     &cfg.mail_from,
                     &cfg.mail_dir,
                     &cfg.storage_driver,
                     &cfg.storage_dir,
                     &cfg.s3_endpoint,
                     &cfg.s3_region,
                     &cfg.s3_bucket,
                     &cfg.s3_access_key_id,
                     &cfg.s3_secret_access_key,
                     &cfg.video_app_id,
                     &cfg.video_app_certificate,
                     &cfg.push_url,
                     &cfg.push_dir,
                     &cfg.push_access_token,
                     &cfg.metrics_host};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    for (int i = 0; i < cfg.n_trusted_origins; i++)
        free(cfg.trusted_origins[i]);
    free(cfg.trusted_origins);
    cfg.trusted_origins = NULL;
    cfg.n_trusted_origins = 0;
}

/* REDIS_URL as rt/redis.c reads it: redis://[[user]:password@]host[:port][/db]. TLS (rediss://)
 * is refused by name: the Redis client speaks plain TCP only. */
static void check_redis_url(const char *v)
{
    if (!v) return;
    if (strncmp(v, "rediss://", 9) == 0) {
        config_bad("REDIS_URL", NULL, "rediss:// (TLS) is not supported; use redis://");
        return;
    }
    url_parts_t u;
    bool ok = !has_space_or_control(v) && url_parse(v, "redis", &u) == 0;
    if (ok) {
        int db;
        ok =
            u.path[0] == '\0' || strcmp(u.path, "/") == 0 || int_parse(u.path + 1, 0, 1000000, &db);
        url_parts_free(&u);
    }
    if (!ok) config_bad("REDIS_URL", NULL, "expected redis://[[user]:password@]host[:port][/db]");
}

static void check_host(const char *v)
{
    unsigned char addr[16];
    if (inet_pton(AF_INET, v, addr) != 1 && inet_pton(AF_INET6, v, addr) != 1)
        config_bad("HOST", v, "expected an IPv4 or IPv6 address to listen on");
}

int config_load(void)
{
    int rc = 0; /* -1: a parser that reports by itself refused its variable */
    config_errors = 0;
    config_free();
    /* The log format first: every line from here on, the refusals included, is in it. */
    const char *fmt = env("LOG_FORMAT");
    log_set_json(fmt && strcmp(fmt, "json") == 0);
    if (fmt && strcmp(fmt, "json") != 0 && strcmp(fmt, "text") != 0)
        config_bad("LOG_FORMAT", fmt, "expected text or json");
    const char *lvl = env("LOG_LEVEL");
    cfg.log_level = LOG_INFO;
    if (lvl) {
        int l = log_level_parse(lvl);
        if (l < 0)
            config_bad("LOG_LEVEL", lvl, "expected error, warn, info or debug");
        else
            cfg.log_level = l;
    }
    log_set_level(cfg.log_level);

    cfg.port = config_int("PORT", 8080, 1, 65535);
    cfg.host = env_dup("HOST", "0.0.0.0");
    check_host(cfg.host);
    cfg.workers = config_int("WORKERS", 1, 1, 256);
    /* METRICS_PORT equal to PORT could never be bound next to the main port's sockets: refused
     * here with the variable's name rather than as a bind error. */
    cfg.metrics_port = config_int("METRICS_PORT", 0, 1, 65535);
    cfg.metrics_host = env_dup("METRICS_HOST", "127.0.0.1");
    if (env("METRICS_PORT") && (cfg.metrics_port == 0 || cfg.metrics_port == cfg.port)) {
        log_error("config: METRICS_PORT must be a port number (1-65535) other than PORT");
        rc = -1;
    }
    unsigned char addr[16];
    if (cfg.metrics_port && inet_pton(AF_INET, cfg.metrics_host, addr) != 1 &&
        inet_pton(AF_INET6, cfg.metrics_host, addr) != 1) {
        log_error("config: METRICS_HOST must be an IPv4 or IPv6 address, not %s", cfg.metrics_host);
        rc = -1;
    }
    const char *app_env = env("APP_ENV");
    if (app_env && strcmp(app_env, "production") != 0 && strcmp(app_env, "development") != 0)
        config_bad("APP_ENV", app_env, "expected development or production");
    cfg.production = app_env && strcmp(app_env, "production") == 0;
    cfg.database_url = env_dup("DATABASE_URL", NULL);
    /* libpq checks the rest (several hosts, a socket directory, parameters); the scheme, or
     * libpq's other spelling (`host=... dbname=...`, which has no scheme but always a `key=`),
     * tells a connection string from a value pasted into the wrong variable. */
    if (cfg.database_url && strncmp(cfg.database_url, "postgres://", 11) != 0 &&
        strncmp(cfg.database_url, "postgresql://", 13) != 0 &&
        (strstr(cfg.database_url, "://") || !strchr(cfg.database_url, '=')))
        config_bad("DATABASE_URL", NULL,
                   "expected postgres://, postgresql:// or libpq's key=value form");
    cfg.db_pool_size = config_int("DATABASE_POOL_SIZE", 8, 1, 512);
    cfg.redis_url = env_dup("REDIS_URL", NULL);
    check_redis_url(cfg.redis_url);
    cfg.client_key = env_dup("CLIENT_KEY", NULL);
    cfg.disable_client_auth = env_bool("DISABLE_CLIENT_AUTH", false);

    char def_public[64];
    snprintf(def_public, sizeof(def_public), "http://localhost:%d", cfg.port);
    cfg.public_url = env_dup("PUBLIC_URL", def_public);
    check_url("PUBLIC_URL", env("PUBLIC_URL"), http_schemes, false, SHOW,
              "expected http:// or https:// and a host");
    strip_slash(cfg.public_url);
    cfg.frontend_url = env_dup("FRONTEND_URL", cfg.public_url);
    check_url("FRONTEND_URL", env("FRONTEND_URL"), http_schemes, false, SHOW,
              "expected http:// or https:// and a host");
    strip_slash(cfg.frontend_url);
    /* Email links (verification, password reset, invites) lead to FRONTEND_URL. Production has
     * no default for it: links to PUBLIC_URL would lead to this API's 404. In development
     * without it, coachd serves those three pages itself. */
    if (cfg.production && !env("FRONTEND_URL")) {
        log_error("config: FRONTEND_URL is required in production: the web app's base URL, "
                  "where the email links lead");
        config_errors++;
    }
    cfg.dev_pages = !cfg.production && !env("FRONTEND_URL");
    parse_origins(env("TRUSTED_ORIGINS") ? env("TRUSTED_ORIGINS") : cfg.frontend_url);
    if (netaddr_trusted_load(env("TRUSTED_PROXIES")) != 0) rc = -1;
    if (env("TRUSTED_ORIGINS"))
        for (int i = 0; i < cfg.n_trusted_origins; i++)
            check_url("TRUSTED_ORIGINS", cfg.trusted_origins[i], http_schemes, true, SHOW,
                      "each origin must be http:// or https://, a host and an optional port");

    cfg.smtp_url = env_dup("SMTP_URL", NULL);
    static const char *const smtp_schemes[] = {"smtps", "smtp", NULL};
    check_url("SMTP_URL", cfg.smtp_url, smtp_schemes, false, HIDE,
              "expected smtp:// or smtps:// with a host");
    cfg.mail_from = env_dup("MAIL_FROM", "coachd <no-reply@localhost>");
    cfg.mail_dir = env_dup("MAIL_DIR", ".local/mail");
    if (!cfg.smtp_url && cfg.production)
        log_warn("config: SMTP_URL is not set in production; mail cannot be delivered");

    cfg.storage_driver = env_dup("STORAGE_DRIVER", "local");
    if (strcmp(cfg.storage_driver, "local") != 0 && strcmp(cfg.storage_driver, "s3") != 0)
        config_bad("STORAGE_DRIVER", cfg.storage_driver, "expected local or s3");
    cfg.storage_dir = env_dup("STORAGE_DIR", ".local/storage");
    cfg.s3_endpoint = env_dup("S3_ENDPOINT", NULL);
    check_url("S3_ENDPOINT", cfg.s3_endpoint, http_schemes, false, HIDE,
              "expected http:// or https:// and a host");
    cfg.s3_region = env_dup("S3_REGION", NULL);
    cfg.s3_bucket = env_dup("S3_BUCKET", NULL);
    cfg.s3_access_key_id = env_dup("S3_ACCESS_KEY_ID", NULL);
    cfg.s3_secret_access_key = env_dup("S3_SECRET_ACCESS_KEY", NULL);
    cfg.s3_force_path_style = env_bool("S3_FORCE_PATH_STYLE", false);
    cfg.video_app_id = env_dup("VIDEO_APP_ID", NULL);
    cfg.video_app_certificate = env_dup("VIDEO_APP_CERTIFICATE", NULL);
    /* Development without PUSH_URL writes each batch under PUSH_DIR (rt/push.c) rather than
     * sending real devices' tokens to the public endpoint. */
    cfg.push_url =
        env_dup("PUSH_URL", cfg.production ? "https://exp.host/--/api/v2/push/send" : NULL);
    cfg.push_dir = env_dup("PUSH_DIR", ".local/push");
    check_url("PUSH_URL", env("PUSH_URL"), http_schemes, false, HIDE,
              "expected http:// or https:// and a host");
    cfg.push_access_token = env_dup("PUSH_ACCESS_TOKEN", NULL);
    /* rt/storage.c reads the secret; production refuses one it would ignore (development warns
     * there and falls back to the database's secret). */
    const char *secret = env("STORAGE_SECRET");
    if (cfg.production && secret &&
        (strlen(secret) < CONFIG_STORAGE_SECRET_MIN ||
         strlen(secret) > CONFIG_STORAGE_SECRET_MAX)) {
        char why[96];
        snprintf(why, sizeof(why), "needs %d to %d characters in production",
                 CONFIG_STORAGE_SECRET_MIN, CONFIG_STORAGE_SECRET_MAX);
        log_error("config: STORAGE_SECRET is invalid: %s (it has %zu)", why, strlen(secret));
        config_errors++;
    }
    /* SETUP_TOKEN opens the HTTP first-run (routes/setup.c), and a wrong guess costs nothing
     * (403 before the limiter): production refuses one short enough to guess. Not shown. */
    /* METRICS_TOKEN alike: a wrong bearer token answers 401 with no limiter in front. */
    static const char *const guessable[] = {"SETUP_TOKEN", "METRICS_TOKEN"};
    for (size_t i = 0; i < sizeof(guessable) / sizeof(guessable[0]); i++) {
        const char *token = env(guessable[i]);
        if (cfg.production && token && strlen(token) < CONFIG_SETUP_TOKEN_MIN) {
            char why[96];
            snprintf(why, sizeof(why), "needs at least %d characters in production",
                     CONFIG_SETUP_TOKEN_MIN);
            config_bad(guessable[i], NULL, why);
        }
    }
    /* The key of two-factor secrets at rest: exactly 32 bytes as hex, never shown. */
    cfg.two_factor_key_set = false;
    const char *tfk = env("TWO_FACTOR_ENCRYPTION_KEY");
    if (tfk) {
        bool ok = strlen(tfk) == 64;
        for (int i = 0; ok && i < 32; i++) {
            unsigned v = 0;
            for (int j = 0; j < 2; j++) {
                char ch = tfk[2 * i + j];
                int d = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                        : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                 : -1;
                if (d < 0) ok = false;
                v = v * 16 + (unsigned)(d < 0 ? 0 : d);
            }
            cfg.two_factor_key[i] = (unsigned char)v;
        }
        if (ok)
            cfg.two_factor_key_set = true;
        else
            config_bad("TWO_FACTOR_ENCRYPTION_KEY", NULL,
                       "needs 64 hex digits (openssl rand -hex 32)");
    }
    /* METRICS_PORT answers without a token: on an address other hosts reach, to all of them. */
    if (cfg.metrics_port &&
        (strcmp(cfg.metrics_host, "0.0.0.0") == 0 || strcmp(cfg.metrics_host, "::") == 0))
        log_warn("config: METRICS_HOST=%s serves /metrics without a token on every interface; "
                 "prefer a private address or a firewall",
                 cfg.metrics_host);
    cfg.context_cache_ttl_ms = config_int("CONTEXT_CACHE_TTL_MS", 5000, 0, 60000);
    cfg.event_history_max = config_int("EVENT_HISTORY_MAX", 1000, 1, 1000000);
    cfg.event_history_seconds = config_int("EVENT_HISTORY_SECONDS", 600, 1, 86400);
    cfg.stream_fanout_slice = config_int("STREAM_FANOUT_SLICE", 100, 1, 1000000);
    cfg.stream_ping_seconds = config_int("STREAM_PING_SECONDS", 25, 2, 30);
    cfg.replay_memory_max =
        config_int("REPLAY_MEMORY_MAX", 64 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024);
    cfg.rate_limiter_enabled = env_bool("RATE_LIMITER_ENABLED", false);
    cfg.rate_limiter_points = config_int("RATE_LIMITER_POINTS", 50, 1, 1000000);
    cfg.rate_limiter_duration = config_int("RATE_LIMITER_DURATION", 60, 1, 86400);
    /* Development is looser: a client developer signs in and out many times an hour. */
    cfg.auth_rate_limit_points =
        config_int("AUTH_RATE_LIMIT_POINTS", cfg.production ? 10 : 100, 0, 1000000);
    cfg.auth_rate_limit_duration = config_int("AUTH_RATE_LIMIT_DURATION", 60, 1, 86400);
    cfg.resend_activation_cooldown =
        config_int_or_default("RESEND_ACTIVATION_COOLDOWN_SECONDS", 60, 1, 86400);
    /* Accepting an invite by id proves nothing about the mailbox unless the email is verified
     * (docs/security.md); off in development so local sign-ups can accept without mail. */
    cfg.invite_require_verified_email = env_bool("INVITE_REQUIRE_VERIFIED_EMAIL", cfg.production);
    /* Read by the worker's modules at their start: parsed here, so the supervisor refuses them
     * before forking rather than a worker falling back to a default. */
    cfg.max_connections = config_int("MAX_CONNECTIONS", 10000, 1, 1000000);
    cfg.max_connections_per_ip = config_int("MAX_CONNECTIONS_PER_IP", 256, 0, 1000000);
    cfg.request_timeout_seconds = config_int("REQUEST_TIMEOUT_SECONDS", 60, 1, 86400);
    cfg.stream_write_timeout_seconds = config_int("STREAM_WRITE_TIMEOUT_SECONDS", 60, 1, 86400);
    cfg.sweeper_interval_seconds = config_int("SWEEPER_INTERVAL_SECONDS", 60, 1, 86400);
    cfg.janitor_interval_seconds = config_int("JANITOR_INTERVAL_SECONDS", 300, 1, 86400);
    cfg.janitor_outbox_keep_seconds =
        config_int("JANITOR_OUTBOX_KEEP_SECONDS", 3600, 0, 30 * 86400);
    cfg.storage_janitor_interval_seconds =
        config_int("STORAGE_JANITOR_INTERVAL_SECONDS", 3600, 1, 86400);
    /* routes/health.c reads it when first asked; the same range, checked here at start. */
    (void)config_int("HEALTH_PROBE_CACHE_SECONDS", 30, 0, 3600);
    cfg.shutdown_grace_seconds = config_int("SHUTDOWN_GRACE_SECONDS", 30, 0, 3600);
    /* Absolute session lifetime (docs/security.md 7.3.2): at least one second, at most ten
     * years; decimals let a test use seconds. */
    cfg.session_absolute_seconds = config_days("SESSION_ABSOLUTE_DAYS", 30, 1, 3650);
    snprintf(cfg.session_absolute_text, sizeof(cfg.session_absolute_text), "%.3f",
             cfg.session_absolute_seconds);
    cfg.calendar_feed_days_before = config_int("CALENDAR_FEED_DAYS_BEFORE", 30, 0, 3650);
    cfg.calendar_feed_days_after = config_int("CALENDAR_FEED_DAYS_AFTER", 365, 1, 3650);
    cfg.calendar_feed_refresh_minutes = config_int("CALENDAR_FEED_REFRESH_MINUTES", 60, 5, 10080);
    cfg.calendar_feed_memory_max =
        config_int("CALENDAR_FEED_MEMORY_MAX", 64 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024);
    return rc != 0 || config_errors ? -1 : 0;
}

bool config_origin_trusted(const char *origin, unsigned long len)
{
    while (len > 0 && origin[len - 1] == '/')
        len--;
    for (int i = 0; i < cfg.n_trusted_origins; i++) {
        const char *o = cfg.trusted_origins[i];
        if (strlen(o) == len && strncasecmp(o, origin, len) == 0) return true;
    }
    return false;
}
