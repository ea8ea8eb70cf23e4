/*
 * Process configuration, read once from the environment at start (ARCHITECTURE.md lists the
 * variables). After config_load() the global `cfg` is read-only.
 */
#pragma once
#include <stdbool.h>

typedef struct config {
    int port;
    char *host;
    int workers;
    bool production;    /* APP_ENV=production */
    char *database_url; /* NULL: not configured */
    int db_pool_size;
    char *redis_url;  /* NULL: not configured */
    char *client_key; /* X-Client-Key for /api/health */
    bool disable_client_auth;
    char *public_url;       /* no trailing slash */
    char *frontend_url;     /* no trailing slash; required in production */
    bool dev_pages;         /* development without FRONTEND_URL: coachd serves the pages the
                             * email links lead to (routes/dev_pages.c) */
    char **trusted_origins; /* NULL-terminated, no trailing slashes */
    int n_trusted_origins;
    char *smtp_url; /* NULL: write .eml files under mail_dir (development) */
    char *mail_from;
    char *mail_dir;       /* .local/mail */
    char *storage_driver; /* "local" or "s3" */
    char *storage_dir;
    char *s3_endpoint, *s3_region, *s3_bucket, *s3_access_key_id, *s3_secret_access_key;
    bool s3_force_path_style;
    char *video_app_id, *video_app_certificate;
    char *push_url; /* NULL: write batches as .json files under push_dir (development) */
    char *push_dir; /* .local/push */
    char *push_access_token;
    bool rate_limiter_enabled;
    int rate_limiter_points, rate_limiter_duration;
    int auth_rate_limit_points, auth_rate_limit_duration;
    int resend_activation_cooldown;
    bool invite_require_verified_email; /* INVITE_REQUIRE_VERIFIED_EMAIL (default: production) */
    int log_level;
    int context_cache_ttl_ms;  /* CONTEXT_CACHE_TTL_MS: caller-context cache lifetime, 0 = off */
    int event_history_max;     /* EVENT_HISTORY_MAX: events kept per stream channel (at most) */
    int event_history_seconds; /* EVENT_HISTORY_SECONDS: and only those of this many seconds
                                * before the channel's newest event */
    int stream_fanout_slice;   /* STREAM_FANOUT_SLICE: streams one event is written to per loop
                                * turn; the rest of a large channel waits for the next turn */
    int stream_ping_seconds;   /* STREAM_PING_SECONDS: a stream's ping interval (2-30: presence
                                * lasts 60 s after the last one) */
    int replay_memory_max;     /* REPLAY_MEMORY_MAX: bytes of history being replayed (read and
                                * not yet sent) one worker holds, over all its streams */
    int metrics_port;          /* METRICS_PORT: /metrics on a listener of its own; 0: none */
    char *metrics_host;        /* METRICS_HOST (127.0.0.1) */
    /* Read by a worker's modules (core/http.c, rt/) at their start, parsed with the rest. */
    int max_connections, max_connections_per_ip; /* MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP */
    int request_timeout_seconds, stream_write_timeout_seconds;
    int sweeper_interval_seconds, janitor_interval_seconds, janitor_outbox_keep_seconds;
    int storage_janitor_interval_seconds;
    int shutdown_grace_seconds; /* SHUTDOWN_GRACE_SECONDS: the drain on SIGTERM (main.c) */
    /* SESSION_ABSOLUTE_DAYS (30, decimals allowed): no session lives past its creation plus this
     * (routes/context.c); in seconds, and as the text passed to the session statements. */
    double session_absolute_seconds;
    char session_absolute_text[32];
    /* CALENDAR_FEED_DAYS_BEFORE (30), CALENDAR_FEED_DAYS_AFTER (365): the window of sessions a
     * calendar feed serves around now; CALENDAR_FEED_REFRESH_MINUTES (60): the refresh hint in it
     * (routes/calendar.c); CALENDAR_FEED_MEMORY_MAX (64 MiB): bytes of feeds (their rows and
     * rendered bodies) one worker holds while rendering and sending them. */
    int calendar_feed_days_before, calendar_feed_days_after, calendar_feed_refresh_minutes;
    int calendar_feed_memory_max;
    /* TWO_FACTOR_ENCRYPTION_KEY: 64 hex digits, the AES-256-GCM key of TOTP secrets at rest
     * (routes/two_factor.c). Unset: development derives a fixed key, production offers no
     * two-factor setup (503) until it is set. */
    bool two_factor_key_set;
    unsigned char two_factor_key[32];
} config_t;

/* STORAGE_SECRET's length (rt/storage.c); production refuses any other. */
#define CONFIG_STORAGE_SECRET_MIN 32
#define CONFIG_STORAGE_SECRET_MAX 127
/* SETUP_TOKEN's least length in production (as `openssl rand -hex 16` makes). */
#define CONFIG_SETUP_TOKEN_MIN 32

extern config_t cfg;

/* Parses the environment into cfg. Returns 0, or -1 after logging each invalid variable by name
 * (malformed or out-of-range numbers, URLs without their scheme or host, unknown words, a short
 * STORAGE_SECRET or SETUP_TOKEN in production, FRONTEND_URL missing in production). LOG_FORMAT is
 * applied first, so every line is in it. */
int config_load(void);
/* Parses an integer variable: the default when unset; invalid is logged as an error and makes
 * the config_load under way fail (the default is returned). */
int config_int(const char *name, int def, int min, int max);
/* True when `origin` (scheme://host[:port]) is in TRUSTED_ORIGINS. */
bool config_origin_trusted(const char *origin, unsigned long len);
