/* Unit tests for domain/urlcheck: open-redirect and origin checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/urlcheck.h"

static const char *const trusted[] = {"https://app.example.com", "http://localhost:3000",
                                      "https://admin.example.com:8443/"};
#define NT (sizeof trusted / sizeof trusted[0])

static void test_relative(void **state)
{
    (void)state;
    assert_true(urlcheck_is_relative("/"));
    assert_true(urlcheck_is_relative("/dashboard"));
    assert_true(urlcheck_is_relative("/reset?lang=es#top"));
    assert_true(urlcheck_is_relative("/a/%2F%2Fevil.com"));
    assert_false(urlcheck_is_relative(NULL));
    assert_false(urlcheck_is_relative(""));
    assert_false(urlcheck_is_relative("dashboard"));
    assert_false(urlcheck_is_relative("//evil.com"));
    assert_false(urlcheck_is_relative("//evil.com/x"));
    assert_false(urlcheck_is_relative("/\\evil.com"));
    assert_false(urlcheck_is_relative("/x\\y"));
    assert_false(urlcheck_is_relative("/x y"));
    assert_false(urlcheck_is_relative("/x\ty"));
    assert_false(urlcheck_is_relative("/\t/evil.com"));
    assert_false(urlcheck_is_relative("/x\ny"));
    assert_false(urlcheck_is_relative("/caf\xC3\xA9"));
    assert_false(urlcheck_is_relative("javascript:alert(1)"));
}

static void test_origin(void **state)
{
    char out[URLCHECK_ORIGIN_MAX];
    (void)state;

    assert_int_equal(urlcheck_origin("https://App.Example.com/x?y#z", out, sizeof out), 0);
    assert_string_equal(out, "https://app.example.com");
    assert_int_equal(urlcheck_origin("HTTPS://app.example.com:443", out, sizeof out), 0);
    assert_string_equal(out, "https://app.example.com");
    assert_int_equal(urlcheck_origin("http://localhost:80/", out, sizeof out), 0);
    assert_string_equal(out, "http://localhost");
    assert_int_equal(urlcheck_origin("http://localhost:3000?a", out, sizeof out), 0);
    assert_string_equal(out, "http://localhost:3000");
    assert_int_equal(urlcheck_origin("https://app.example.com:80", out, sizeof out), 0);
    assert_string_equal(out, "https://app.example.com:80");
    assert_int_equal(urlcheck_origin("http://[::1]:8080/x", out, sizeof out), 0);
    assert_string_equal(out, "http://[::1]:8080");
    assert_int_equal(urlcheck_origin("http://127.0.0.1:8080", out, sizeof out), 0);
    assert_string_equal(out, "http://127.0.0.1:8080");

    static const char *const bad[] = {
        "ftp://app.example.com",
        "javascript://app.example.com/%0aalert(1)",
        "https://",
        "https:///path",
        "https://user@app.example.com",
        "https://app.example.com@evil.com",
        "https://app.example.com:pass@evil.com",
        "https://app.example.com\\@evil.com",
        "https://app.example.com:0",
        "https://app.example.com:65536",
        "https://app.example.com:123456",
        "https://app.example.com:",
        "https://app.example.com:80a",
        "https://app exa.com",
        "https://app.example.com/\tx",
        "https://.example.com",
        "https://example.com.",
        "https://-example.com",
        "https://[::1",
        "https://[]",
        "https://exa_mple.com",
        "https://ex%61mple.com",
        "//app.example.com",
        "app.example.com",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (urlcheck_origin(bad[i], out, sizeof out) != DOMAIN_EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
    assert_int_equal(urlcheck_origin(NULL, out, sizeof out), DOMAIN_EINVAL);
    assert_int_equal(urlcheck_origin("https://app.example.com", out, 10), DOMAIN_ENOSPC);
}

static void test_allowed(void **state)
{
    (void)state;
    assert_true(urlcheck_is_allowed("/dashboard", trusted, NT));
    assert_true(urlcheck_is_allowed("https://app.example.com/reset?lang=es", trusted, NT));
    assert_true(urlcheck_is_allowed("https://APP.example.com", trusted, NT));
    assert_true(urlcheck_is_allowed("https://app.example.com:443/x", trusted, NT));
    assert_true(urlcheck_is_allowed("http://localhost:3000/email-verification", trusted, NT));
    assert_true(urlcheck_is_allowed("https://admin.example.com:8443/x", trusted, NT));

    assert_false(urlcheck_is_allowed("http://app.example.com/x", trusted, NT)); /* scheme */
    assert_false(urlcheck_is_allowed("http://localhost:3001/x", trusted, NT));  /* port */
    assert_false(urlcheck_is_allowed("http://localhost/x", trusted, NT));
    assert_false(urlcheck_is_allowed("https://admin.example.com/x", trusted, NT));
    assert_false(urlcheck_is_allowed("https://evil.com/x", trusted, NT));
    assert_false(urlcheck_is_allowed("https://app.example.com.evil.com/", trusted, NT));
    assert_false(urlcheck_is_allowed("https://evilapp.example.com/", trusted, NT));
    assert_false(urlcheck_is_allowed("https://app.example.com@evil.com/", trusted, NT));
    assert_false(urlcheck_is_allowed("//evil.com", trusted, NT));
    assert_false(urlcheck_is_allowed("/\\evil.com", trusted, NT));
    assert_false(urlcheck_is_allowed("javascript:alert(1)", trusted, NT));
    assert_false(urlcheck_is_allowed("data:text/html,hi", trusted, NT));
    assert_false(urlcheck_is_allowed("evil.com", trusted, NT));
    assert_false(urlcheck_is_allowed("", trusted, NT));
    assert_false(urlcheck_is_allowed(NULL, trusted, NT));
    /* No trusted origins: only relative paths. */
    assert_true(urlcheck_is_allowed("/x", NULL, 0));
    assert_false(urlcheck_is_allowed("https://app.example.com/", NULL, 0));
}

static void test_origin_trusted(void **state)
{
    (void)state;
    assert_true(urlcheck_origin_trusted("https://app.example.com", trusted, NT));
    assert_true(urlcheck_origin_trusted("http://localhost:3000", trusted, NT));
    assert_true(urlcheck_origin_trusted("https://app.example.com/page", trusted, NT)); /* Referer */
    assert_false(urlcheck_origin_trusted("null", trusted, NT));
    assert_false(urlcheck_origin_trusted("https://evil.com", trusted, NT));
    assert_false(urlcheck_origin_trusted(NULL, trusted, NT));
}

static void test_lang(void **state)
{
    (void)state;
    assert_string_equal(urlcheck_lang("https://app.example.com/x?lang=es"), "es");
    assert_string_equal(urlcheck_lang("/x?a=1&lang=en&b=2"), "en");
    assert_string_equal(urlcheck_lang("/x?lang=ES"), "es");
    assert_string_equal(urlcheck_lang("/x?lang=fr&lang=es"), "es");
    assert_null(urlcheck_lang("/x?lang=fr"));
    assert_null(urlcheck_lang("/x?lang=esp"));
    assert_null(urlcheck_lang("/x?lang="));
    assert_null(urlcheck_lang("/x?xlang=es"));
    assert_null(urlcheck_lang("/x#?lang=es"));
    assert_null(urlcheck_lang("/x?a=1#lang=es"));
    assert_null(urlcheck_lang("/x"));
    assert_null(urlcheck_lang(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative), cmocka_unit_test(test_origin),
        cmocka_unit_test(test_allowed),  cmocka_unit_test(test_origin_trusted),
        cmocka_unit_test(test_lang),
    };
    return cmocka_run_group_tests_name("domain/urlcheck", tests, NULL, NULL);
}
