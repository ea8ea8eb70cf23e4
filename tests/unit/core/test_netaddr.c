#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/netaddr.h"
#include "tests.h"

static bool parses(const char *s)
{
    netaddr_t a;
    return netaddr_parse(s, strlen(s), &a);
}

static const char *canon(const char *s)
{
    static char out[NETADDR_TEXT_MAX];
    netaddr_t a;
    if (!netaddr_parse(s, strlen(s), &a)) return "(junk)";
    netaddr_format(&a, out, sizeof(out));
    return out;
}

static void parse_addresses(void **st)
{
    (void)st;
    assert_string_equal(canon("203.0.113.7"), "203.0.113.7");
    assert_string_equal(canon("2001:DB8:0:0::1"), "2001:db8::1");
    assert_string_equal(canon("::ffff:198.51.100.9"), "198.51.100.9"); /* mapped reads as IPv4 */
    assert_string_equal(canon("::1"), "::1");
    const char *junk[] = {"",
                          " 1.2.3.4",
                          "1.2.3.4 ",
                          "1.2.3",
                          "1.2.3.4.5",
                          "256.1.1.1",
                          "010.0.0.1", /* octal-looking: never guessed at */
                          "0x7f.0.0.1",
                          "1.2.3.4:80",
                          "[::1]",
                          "fe80::1%eth0",
                          "unknown",
                          "1.2.3.4/32",
                          "2001:db8:::1",
                          "::ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255:1"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        assert_false(parses(junk[i]));
    netaddr_t a;
    assert_false(netaddr_parse("1.2.3.4\0", 8, &a)); /* an embedded NUL */
}

static bool in(const netaddr_list_t *l, const char *ip)
{
    netaddr_t a;
    assert_true(netaddr_parse(ip, strlen(ip), &a));
    return netaddr_list_match(l, &a);
}

static void parse_lists(void **st)
{
    (void)st;
    netaddr_list_t l;
    char err[256];
    assert_int_equal(
        netaddr_list_parse(&l, " 10.0.0.0/8 , 192.168.1.5,,2001:db8::/32, ::1,", err, sizeof(err)),
        0);
    assert_int_equal(l.n, 4);
    assert_true(in(&l, "10.255.0.1"));
    assert_false(in(&l, "11.0.0.1"));
    assert_true(in(&l, "192.168.1.5"));
    assert_false(in(&l, "192.168.1.6"));
    assert_true(in(&l, "2001:db8:ffff::7"));
    assert_false(in(&l, "2001:db9::7"));
    assert_true(in(&l, "::1"));
    assert_false(in(&l, "::2"));
    /* A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d: IPv4 entries match them. */
    assert_true(in(&l, "::ffff:10.1.2.3"));
    assert_true(in(&l, "::ffff:192.168.1.5"));
    /* An IPv4 /n never reaches beyond the IPv4 space. */
    netaddr_list_free(&l);
    assert_int_equal(netaddr_list_parse(&l, "0.0.0.0/0", err, sizeof(err)), 0);
    assert_true(in(&l, "198.51.100.9"));
    assert_false(in(&l, "2001:db8::1"));
    assert_false(in(&l, "::"));
    netaddr_list_free(&l);
    assert_int_equal(netaddr_list_parse(&l, "::/0", err, sizeof(err)), 0);
    assert_true(in(&l, "2001:db8::1"));
    assert_true(in(&l, "1.2.3.4"));
    netaddr_list_free(&l);
    /* Prefix lengths that do not fall on a byte. */
    assert_int_equal(netaddr_list_parse(&l, "172.16.0.0/12, fc00::/7", err, sizeof(err)), 0);
    assert_true(in(&l, "172.31.255.255"));
    assert_false(in(&l, "172.32.0.0"));
    assert_false(in(&l, "172.15.255.255"));
    assert_true(in(&l, "fdff::1"));
    assert_true(in(&l, "fc00::1"));
    assert_false(in(&l, "fe00::1"));
    netaddr_list_free(&l);
    /* Nothing configured: nothing trusted. */
    assert_int_equal(netaddr_list_parse(&l, NULL, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
    assert_false(in(&l, "127.0.0.1"));
    assert_int_equal(netaddr_list_parse(&l, " , ", err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);

    const char *bad[] = {"10.0.0.0/33",  "10.0.0.0/",      "10.0.0.0/-1", "10.0.0.0/+8",
                         "10.0.0.0/8/8", "10.0.0.0/0x8",   "::/129",      "::/1280",
                         "10.0.0.1/8",   "2001:db8::1/32", "example.com", "10.0.0.0 /8",
                         "10.0.0.0/8 x", "10.0.0.*",       "/8",          "fe80::1%lo/64"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char list[64];
        snprintf(list, sizeof(list), "127.0.0.1, %s", bad[i]);
        err[0] = '\0';
        assert_int_equal(netaddr_list_parse(&l, list, err, sizeof(err)), -1);
        assert_int_equal(l.n, 0);
        assert_null(l.v);
        assert_true(strlen(err) > 0);
    }
    assert_int_equal(netaddr_list_parse(&l, "10.0.0.1/8", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "10.0.0.0/8")); /* says which network was meant */
}

static const char *pick(const netaddr_list_t *l, const char *xff)
{
    static char out[NETADDR_TEXT_MAX];
    if (!netaddr_pick_client(l, xff, strlen(xff), out, sizeof(out))) return "(peer)";
    return out;
}

static void pick_client(void **st)
{
    (void)st;
    netaddr_list_t l;
    char err[256];
    assert_int_equal(
        netaddr_list_parse(&l, "127.0.0.1, 10.0.0.0/8, 2001:db8::/64", err, sizeof(err)), 0);
    assert_string_equal(pick(&l, "203.0.113.7"), "203.0.113.7");
    /* The right-most untrusted entry: what the client wrote itself (left) is not believed. */
    assert_string_equal(pick(&l, "1.2.3.4, 203.0.113.7"), "203.0.113.7");
    assert_string_equal(pick(&l, "1.2.3.4,203.0.113.7, 10.0.0.2,127.0.0.1"), "203.0.113.7");
    /* Junk left of the client is the client's own claim: never read. */
    assert_string_equal(pick(&l, "garbage, <script>, 203.0.113.7"), "203.0.113.7");
    assert_string_equal(pick(&l, "unknown, 2001:db8:1::5, 10.0.0.9"), "2001:db8:1::5");
    /* Every entry trusted: the left-most. */
    assert_string_equal(pick(&l, "10.0.0.3, 10.0.0.2"), "10.0.0.3");
    assert_string_equal(pick(&l, "2001:db8::9"), "2001:db8::9");
    /* Canonical text: one client cannot become many rate-limit keys by spelling. */
    assert_string_equal(pick(&l, "2001:DB8:1:0:0:0:0:5"), "2001:db8:1::5");
    assert_string_equal(pick(&l, "::ffff:198.51.100.9"), "198.51.100.9");
    assert_string_equal(pick(&l, "\t198.51.100.9 "), "198.51.100.9");
    /* Junk where a proxy's entry or the client should be: the peer. */
    const char *junk[] = {"",
                          " ",
                          ",",
                          "203.0.113.7,",
                          "203.0.113.7, ",
                          "1.2.3.4, garbage",
                          "1.2.3.4, 10.0.0.2, unknown",
                          "203.0.113.7:4431",
                          "[2001:db8:1::5]",
                          "203.0.113.7;",
                          "203.0.113.7 10.0.0.2",
                          "1.2.3.4, junk, 10.0.0.2"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        assert_string_equal(pick(&l, junk[i]), "(peer)");
    /* A header with a NUL inside (len counts past it). */
    char out[NETADDR_TEXT_MAX];
    assert_false(netaddr_pick_client(&l, "1.2.3.4\0", 8, out, sizeof(out)));
    netaddr_list_free(&l);
    /* Nothing trusted: the right-most entry (the caller only asks for a trusted peer). */
    assert_int_equal(netaddr_list_parse(&l, "", err, sizeof(err)), 0);
    assert_string_equal(pick(&l, "1.2.3.4, 5.6.7.8"), "5.6.7.8");
}

static void trusted_from_config(void **st)
{
    (void)st;
    setenv("TRUSTED_PROXIES", "127.0.0.1/32, ::1", 1);
    assert_int_equal(config_load(), 0);
    assert_true(netaddr_trusted_peer("127.0.0.1"));
    assert_true(netaddr_trusted_peer("::ffff:127.0.0.1"));
    assert_true(netaddr_trusted_peer("::1"));
    assert_false(netaddr_trusted_peer("127.0.0.2"));
    assert_false(netaddr_trusted_peer(""));
    assert_false(netaddr_trusted_peer(NULL));
    setenv("TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/33", 1);
    assert_int_equal(config_load(), -1);
    assert_false(netaddr_trusted_peer("127.0.0.1")); /* a refused list trusts nothing */
    unsetenv("TRUSTED_PROXIES");
    assert_int_equal(config_load(), 0);
    assert_false(netaddr_trusted_peer("127.0.0.1"));
}

int run_netaddr_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_addresses),
        cmocka_unit_test(parse_lists),
        cmocka_unit_test(pick_client),
        cmocka_unit_test(trusted_from_config),
    };
    return cmocka_run_group_tests_name("core/netaddr", tests, NULL, NULL);
}
