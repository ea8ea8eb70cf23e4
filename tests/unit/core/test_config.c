#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "tests.h"

static void load(void **s)
{
    (void)s;
    setenv("PORT", "9090", 1);
    setenv("WORKERS", "3", 1);
    setenv("APP_ENV", "production", 1);
    setenv("FRONTEND_URL", "https://app.example.com/", 1);
    setenv("TRUSTED_ORIGINS", " https://app.example.com , https://admin.example.com/ ", 1);
    setenv("RESEND_ACTIVATION_COOLDOWN_SECONDS", "abc", 1);
    unsetenv("PUBLIC_URL");
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.port, 9090);
    assert_int_equal(cfg.workers, 3);
    assert_true(cfg.production);
    assert_string_equal(cfg.public_url, "http://localhost:9090");
    assert_string_equal(cfg.frontend_url, "https://app.example.com");
    assert_int_equal(cfg.n_trusted_origins, 2);
    assert_true(config_origin_trusted("https://admin.example.com", 25));
    assert_true(config_origin_trusted("https://app.example.com/", 24));
    assert_false(config_origin_trusted("https://evil.example.com", 24));
    assert_false(config_origin_trusted("https://app.example.com.evil.net", 31));
    /* "60 seconds if unset or invalid" */
    assert_int_equal(cfg.resend_activation_cooldown, 60);
    setenv("APP_ENV", "staging", 1);
    assert_int_equal(config_load(), -1);
    unsetenv("APP_ENV");
}

/* Each value is refused on its own (config_load -1), and the load after it, with the variable
 * unset again, passes: no refusal outlives its load. */
static void refusals(void **s)
{
    (void)s;
    static const char *const bad[][2] = {
        {"PORT", "20o80"},
        {"PORT", "0"},
        {"WORKERS", "1.5"},
        {"MAX_CONNECTIONS", ""},
        {"MAX_CONNECTIONS", "0"},
        {"REQUEST_TIMEOUT_SECONDS", "99999999999"},
        {"SHUTDOWN_GRACE_SECONDS", "-5"},
        {"REDIS_URL", "localhost:6379"},
        {"REDIS_URL", "rediss://localhost:6379"},
        {"REDIS_URL", "redis://localhost:6379/x"},
        {"REDIS_URL", "redis://localhost:99999"},
        {"DATABASE_URL", "db.internal:5432/coachd"},
        {"DATABASE_URL", "mysql://u@db.internal/coachd"},
        {"SMTP_URL", "smtp://"},
        {"PUBLIC_URL", "https://"},
        {"PUBLIC_URL", "http://api.example.com/a b"},
        {"TRUSTED_ORIGINS", "https://a.example/path"},
        {"TRUSTED_ORIGINS", "https://user@a.example"},
        {"PUSH_URL", "exp.host"},
        {"LOG_FORMAT", "pretty"},
        {"INVITE_REQUIRE_VERIFIED_EMAIL", "sure"},
    };
    unsetenv("RESEND_ACTIVATION_COOLDOWN_SECONDS");
    unsetenv("APP_ENV");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv(bad[i][0], bad[i][1], 1);
        if (!*bad[i][1]) {
            /* empty counts as unset: the default */
            assert_int_equal(config_load(), 0);
        } else if (config_load() != -1) {
            fail_msg("%s=%s was accepted", bad[i][0], bad[i][1]);
        }
        unsetenv(bad[i][0]);
        assert_int_equal(config_load(), 0);
    }
    /* The well-formed spellings pass. */
    setenv("REDIS_URL", "redis://:p%40ss@[::1]:6380/2", 1);
    setenv("DATABASE_URL", "postgres://u@db.internal/coachd?sslmode=require", 1);
    assert_int_equal(config_load(), 0);
    setenv("DATABASE_URL", "host=/run/postgresql dbname=coachd", 1); /* libpq's other form */
    setenv("SMTP_URL", "smtps://user:pw@mail.example.com:465", 1);
    setenv("TRUSTED_ORIGINS", "https://a.example/, http://127.0.0.1:3000", 1);
    setenv("SHUTDOWN_GRACE_SECONDS", "0", 1);
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.shutdown_grace_seconds, 0);
    assert_int_equal(cfg.n_trusted_origins, 2);
    /* A short STORAGE_SECRET: refused in production only. */
    setenv("STORAGE_SECRET", "short", 1);
    assert_int_equal(config_load(), 0);
    setenv("APP_ENV", "production", 1);
    assert_int_equal(config_load(), -1);
    setenv("STORAGE_SECRET", "0123456789abcdef0123456789abcdef", 1);
    assert_int_equal(config_load(), 0);
    const char *vars[] = {
        "REDIS_URL", "DATABASE_URL",          "SMTP_URL", "TRUSTED_ORIGINS", "STORAGE_SECRET",
        "APP_ENV",   "SHUTDOWN_GRACE_SECONDS"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.shutdown_grace_seconds, 30);
}

/* FRONTEND_URL: required in production; unset in development, coachd serves the pages of the
 * email links itself (cfg.dev_pages); set, it does not. */
static void frontend_url(void **s)
{
    (void)s;
    unsetenv("APP_ENV");
    unsetenv("FRONTEND_URL");
    unsetenv("PUBLIC_URL");
    assert_int_equal(config_load(), 0);
    assert_true(cfg.dev_pages);
    assert_string_equal(cfg.frontend_url, cfg.public_url);
    setenv("FRONTEND_URL", "https://app.example.com", 1);
    assert_int_equal(config_load(), 0);
    assert_false(cfg.dev_pages);
    setenv("APP_ENV", "production", 1);
    assert_int_equal(config_load(), 0);
    assert_false(cfg.dev_pages);
    unsetenv("FRONTEND_URL");
    assert_int_equal(config_load(), -1);
    setenv("FRONTEND_URL", "", 1); /* empty counts as unset */
    assert_int_equal(config_load(), -1);
    setenv("FRONTEND_URL", "https://app.example.com", 1);
    unsetenv("APP_ENV");
    assert_int_equal(config_load(), 0);
}

/* Defaults that differ by APP_ENV: the auth limiter's points (production 10, development 100;
 * the window 60 s in both) and PUSH_URL (production Expo's endpoint, development unset, so
 * batches are written under PUSH_DIR). A value that is set wins in both. */
static void env_defaults(void **s)
{
    (void)s;
    unsetenv("AUTH_RATE_LIMIT_POINTS");
    unsetenv("AUTH_RATE_LIMIT_DURATION");
    unsetenv("PUSH_URL");
    unsetenv("PUSH_DIR");
    setenv("FRONTEND_URL", "https://app.example.com", 1); /* production needs it */
    setenv("APP_ENV", "production", 1);
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.auth_rate_limit_points, 10);
    assert_int_equal(cfg.auth_rate_limit_duration, 60);
    assert_string_equal(cfg.push_url, "https://exp.host/--/api/v2/push/send");
    setenv("APP_ENV", "development", 1);
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.auth_rate_limit_points, 100);
    assert_int_equal(cfg.auth_rate_limit_duration, 60);
    assert_null(cfg.push_url);
    assert_string_equal(cfg.push_dir, ".local/push");
    unsetenv("APP_ENV"); /* development too */
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.auth_rate_limit_points, 100);
    assert_null(cfg.push_url);
    setenv("AUTH_RATE_LIMIT_POINTS", "7", 1);
    setenv("PUSH_URL", "http://127.0.0.1:9/push", 1);
    setenv("PUSH_DIR", "/tmp/p", 1);
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.auth_rate_limit_points, 7);
    assert_string_equal(cfg.push_url, "http://127.0.0.1:9/push");
    assert_string_equal(cfg.push_dir, "/tmp/p");
    setenv("APP_ENV", "production", 1);
    assert_int_equal(config_load(), 0);
    assert_int_equal(cfg.auth_rate_limit_points, 7);
    unsetenv("APP_ENV");
    unsetenv("AUTH_RATE_LIMIT_POINTS");
    unsetenv("PUSH_URL");
    unsetenv("PUSH_DIR");
    assert_int_equal(config_load(), 0);
}

int run_config_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(load), cmocka_unit_test(refusals),
                                       cmocka_unit_test(frontend_url),
                                       cmocka_unit_test(env_defaults)};
    return cmocka_run_group_tests_name("core/config", tests, NULL, NULL);
}
