/*
 * Configuration from the environment, one parser per kind of value. Invalid values are reported
 * by name; numeric values fall back to their default with a warning (the resend cooldown, for
 * one, is specified as "60 seconds if unset or invalid").
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

config_t cfg;

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
    return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
           strcasecmp(v, "on") == 0;
}

int config_int(const char *name, int def, int min, int max)
{
    const char *v = env(name);
    if (!v) return def;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < min || n > max) {
        log_warn("config: %s=%s is not an integer in [%d, %d]; using %d", name, v, min, max, def);
        return def;
    }
    return (int)n;
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

int config_load(void)
{
    int rc = 0;
    config_free();
    const char *lvl = env("LOG_LEVEL");
    cfg.log_level = LOG_INFO;
    if (lvl) {
        int l = log_level_parse(lvl);
        if (l < 0)
            log_warn("config: LOG_LEVEL=%s unknown; using info", lvl);
        else
            cfg.log_level = l;
    }
    log_set_level(cfg.log_level);
    const char *fmt = env("LOG_FORMAT");
    log_set_json(fmt && strcmp(fmt, "json") == 0);
    if (fmt && strcmp(fmt, "json") != 0 && strcmp(fmt, "text") != 0)
        log_warn("config: LOG_FORMAT=%s unknown; using text", fmt);

    cfg.port = config_int("PORT", 8080, 1, 65535);
    cfg.host = env_dup("HOST", "0.0.0.0");
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
    if (app_env && strcmp(app_env, "production") != 0 && strcmp(app_env, "development") != 0) {
        log_error("config: APP_ENV must be development or production, not %s", app_env);
        rc = -1;
    }
    cfg.production = app_env && strcmp(app_env, "production") == 0;
    cfg.database_url = env_dup("DATABASE_URL", NULL);
    cfg.db_pool_size = config_int("DATABASE_POOL_SIZE", 8, 1, 512);
    cfg.redis_url = env_dup("REDIS_URL", NULL);
    cfg.client_key = env_dup("CLIENT_KEY", NULL);
    cfg.disable_client_auth = env_bool("DISABLE_CLIENT_AUTH", false);

    char def_public[64];
    snprintf(def_public, sizeof(def_public), "http://localhost:%d", cfg.port);
    cfg.public_url = env_dup("PUBLIC_URL", def_public);
    strip_slash(cfg.public_url);
    cfg.frontend_url = env_dup("FRONTEND_URL", cfg.public_url);
    strip_slash(cfg.frontend_url);
    parse_origins(env("TRUSTED_ORIGINS") ? env("TRUSTED_ORIGINS") : cfg.frontend_url);
    if (netaddr_trusted_load(env("TRUSTED_PROXIES")) != 0) rc = -1;

    cfg.smtp_url = env_dup("SMTP_URL", NULL);
    cfg.mail_from = env_dup("MAIL_FROM", "coachd <no-reply@localhost>");
    cfg.mail_dir = env_dup("MAIL_DIR", ".local/mail");
    if (!cfg.smtp_url && cfg.production)
        log_warn("config: SMTP_URL is not set in production; mail cannot be delivered");

    cfg.storage_driver = env_dup("STORAGE_DRIVER", "local");
    if (strcmp(cfg.storage_driver, "local") != 0 && strcmp(cfg.storage_driver, "s3") != 0) {
        log_error("config: STORAGE_DRIVER must be local or s3");
        rc = -1;
    }
    cfg.storage_dir = env_dup("STORAGE_DIR", ".local/storage");
    cfg.s3_endpoint = env_dup("S3_ENDPOINT", NULL);
    cfg.s3_region = env_dup("S3_REGION", NULL);
    cfg.s3_bucket = env_dup("S3_BUCKET", NULL);
    cfg.s3_access_key_id = env_dup("S3_ACCESS_KEY_ID", NULL);
    cfg.s3_secret_access_key = env_dup("S3_SECRET_ACCESS_KEY", NULL);
    cfg.s3_force_path_style = env_bool("S3_FORCE_PATH_STYLE", false);
    cfg.video_app_id = env_dup("VIDEO_APP_ID", NULL);
    cfg.video_app_certificate = env_dup("VIDEO_APP_CERTIFICATE", NULL);
    cfg.push_url = env_dup("PUSH_URL", "https://exp.host/--/api/v2/push/send");
    cfg.push_access_token = env_dup("PUSH_ACCESS_TOKEN", NULL);
    cfg.context_cache_ttl_ms = config_int("CONTEXT_CACHE_TTL_MS", 5000, 0, 60000);
    cfg.event_history_max = config_int("EVENT_HISTORY_MAX", 1000, 1, 1000000);
    cfg.event_history_seconds = config_int("EVENT_HISTORY_SECONDS", 600, 1, 86400);
    cfg.stream_fanout_slice = config_int("STREAM_FANOUT_SLICE", 100, 1, 1000000);
    cfg.replay_memory_max =
        config_int("REPLAY_MEMORY_MAX", 64 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024);
    cfg.rate_limiter_enabled = env_bool("RATE_LIMITER_ENABLED", false);
    cfg.rate_limiter_points = config_int("RATE_LIMITER_POINTS", 50, 1, 1000000);
    cfg.rate_limiter_duration = config_int("RATE_LIMITER_DURATION", 60, 1, 86400);
    cfg.auth_rate_limit_points = config_int("AUTH_RATE_LIMIT_POINTS", 10, 0, 1000000);
    cfg.auth_rate_limit_duration = config_int("AUTH_RATE_LIMIT_DURATION", 60, 1, 86400);
    cfg.resend_activation_cooldown = config_int("RESEND_ACTIVATION_COOLDOWN_SECONDS", 60, 1, 86400);
    /* Accepting an invite by id proves nothing about the mailbox unless the email is verified
     * (docs/security.md); off in development so local sign-ups can accept without mail. */
    cfg.invite_require_verified_email = env_bool("INVITE_REQUIRE_VERIFIED_EMAIL", cfg.production);
    return rc;
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
