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

int run_config_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(load)};
    return cmocka_run_group_tests_name("core/config", tests, NULL, NULL);
}
