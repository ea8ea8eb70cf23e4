/*
 * rt/outbox end to end against a live PostgreSQL (COACHD_TEST_DATABASE_URL; the run fails when
 * it is missing). The test works in a schema of its own (search_path through the connection
 * options), so it never drains rows of anyone else. Mail goes to .eml files, push to
 * tests/unit/rt/push_sink.py. The test includes rt/outbox.c to reach its statics. Checks between
 * loop slices use a separate blocking connection (test code only).
 */
#include "rt/outbox.c"

#include <libpq-fe.h>

#include "core/buf.h"
#include "core/config.h"
#include "db/db.h"
#include "rt/curlm.h"
#include "rt/mail.h"
#include "tests/unit/rt/helpers.h"

static const char *db_url;
static char schema[64];
static PGconn *pg;

static void exec_ok(const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(pg));
    PQclear(r);
}

/* First column of the first row, as a heap string ("" for NULL, "<none>" without rows). */
static char *scalar(const char *fmt, ...)
{
    static char sql[16384];
    va_list ap;
    PGresult *r;
    char *v;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(pg));
    v = strdup(PQntuples(r) ? PQgetvalue(r, 0, 0) : "<none>");
    PQclear(r);
    return v;
}

static long long scalar_ll(const char *fmt, const char *arg)
{
    char *v = scalar(fmt, arg);
    long long n = atoll(v);

    free(v);
    return n;
}

static char *pool_conninfo(void)
{
    size_t n = strlen(db_url) + 128;
    char *s = malloc(n);

    if (strncmp(db_url, "postgres://", 11) == 0 || strncmp(db_url, "postgresql://", 13) == 0)
        snprintf(s, n, "%s%soptions=-csearch_path%%3D%s", db_url, strchr(db_url, '?') ? "&" : "?",
                 schema);
    else
        snprintf(s, n, "%s options='-csearch_path=%s'", db_url, schema);
    return s;
}

static void make_schema(void)
{
    char sql[2048];

    snprintf(sql, sizeof(sql),
             "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s; SET search_path = %s;"
             "CREATE TABLE outbox ("
             " id bigserial PRIMARY KEY,"
             " kind text NOT NULL CHECK (kind IN ('mail', 'push')),"
             " payload jsonb NOT NULL,"
             " attempts integer NOT NULL DEFAULT 0,"
             " next_attempt_at timestamptz NOT NULL DEFAULT now(),"
             " sent_at timestamptz, last_error text,"
             " created_at timestamptz NOT NULL DEFAULT now());"
             "CREATE TABLE push_tokens (token text PRIMARY KEY);"
             "INSERT INTO push_tokens VALUES ('ExponentPushToken[Unregistered1]'),"
             " ('ExponentPushToken[aaa]');",
             schema, schema, schema);
    exec_ok(sql);
}

static void test_drain(void **state)
{
    char *dir = make_tmpdir(), *out = path_join(dir, "sink"), *mdir = path_join(dir, "mail");
    char url[128], *conninfo = pool_conninfo(), *v;
    int port, i;
    pid_t pid = sink_start("push_sink.py", out, &port);
    long long mail_ok, mail_bad, push_ok, push_split, push_empty, later, n;
    buf_t big = BUF_INIT;

    (void)state;
    make_schema();
    /* 150 tokens: the first batch of 100 goes through, the second fails with 503 */
    buf_puts(&big, "{\"title\":\"T\",\"body\":\"B\",\"to\":[");
    for (i = 0; i < 150; i++)
        buf_printf(&big, "%s\"ExponentPushToken[%s%d]\"", i ? "," : "",
                   i == 120 ? "Status503-" : "t", i);
    buf_puts(&big, "]}");
    mail_ok =
        scalar_ll("INSERT INTO outbox (kind, payload) VALUES ('mail', '{\"to\":\"ana@example.com\","
                  "\"subject\":\"Hola ✓\",\"text\":\"Tu sesión\",\"html\":\"<p>x</p>\"}') "
                  "RETURNING id%s",
                  "");
    mail_bad =
        scalar_ll("INSERT INTO outbox (kind, payload) VALUES ('mail', '{\"subject\":\"x\"}') "
                  "RETURNING id%s",
                  "");
    push_ok =
        scalar_ll("INSERT INTO outbox (kind, payload) VALUES ('push', '{\"to\":["
                  "\"ExponentPushToken[aaa]\",\"ExponentPushToken[Unregistered1]\"],"
                  "\"title\":\"Ana\",\"body\":\"¡Hola!\",\"data\":{\"k\":1}}') RETURNING id%s",
                  "");
    {
        char sql[8192];

        snprintf(sql, sizeof(sql),
                 "INSERT INTO outbox (kind, payload) VALUES ('push', '%s') RETURNING id", big.data);
        v = scalar("%s", sql);
        push_split = atoll(v);
        free(v);
    }
    push_empty = scalar_ll("INSERT INTO outbox (kind, payload) VALUES ('push', '{\"to\":[]}') "
                           "RETURNING id%s",
                           "");
    later = scalar_ll(
        "INSERT INTO outbox (kind, payload, next_attempt_at) VALUES ('mail', "
        "'{\"to\":\"a@b.c\",\"subject\":\"s\",\"text\":\"t\"}', now() + interval '1 hour') "
        "RETURNING id%s",
        "");
    buf_free(&big);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/--/api/v2/push/send", port);
    cfg.push_url = url;
    cfg.smtp_url = NULL;
    cfg.mail_dir = mdir;
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(db_init(&loop, conninfo, 2), 0);
    assert_int_equal(curlm_init(&loop), 0);
    assert_int_equal(mail_init(&loop), 0);
    assert_int_equal(outbox_init(&loop), 0);
    outbox_kick();
    for (i = 0; i < 100; i++) {
        run_for(100);
        n = scalar_ll("SELECT count(*) FROM outbox WHERE attempts > 0 AND (sent_at IS NOT NULL OR "
                      "last_error IS NOT NULL)%s",
                      "");
        if (n == 5) break;
    }
    assert_int_equal(n, 5);
    run_for(300); /* token deletes */

    /* mail: sent, one .eml file */
#define ROW(id)                                                                                    \
    scalar("SELECT (sent_at IS NOT NULL)::text || '|' || attempts || '|' || "                      \
           "coalesce(last_error, '-') FROM outbox WHERE id = %s",                                  \
           id)
    {
        char ids[6][24];

        snprintf(ids[0], 24, "%lld", mail_ok);
        snprintf(ids[1], 24, "%lld", mail_bad);
        snprintf(ids[2], 24, "%lld", push_ok);
        snprintf(ids[3], 24, "%lld", push_split);
        snprintf(ids[4], 24, "%lld", push_empty);
        snprintf(ids[5], 24, "%lld", later);
        v = ROW(ids[0]);
        assert_string_equal(v, "true|1|-");
        free(v);
        assert_int_equal(count_files(mdir, ".eml"), 1);
        /* malformed mail: dead at once */
        v = ROW(ids[1]);
        assert_string_equal(v, "false|10|mail payload needs to, subject and text");
        free(v);
        /* push with an unregistered token: sent, the token deleted, the other kept */
        v = ROW(ids[2]);
        assert_string_equal(v, "true|1|-");
        free(v);
        assert_int_equal(scalar_ll("SELECT count(*) FROM push_tokens WHERE token = "
                                   "'ExponentPushToken[Unregistered1]'%s",
                                   ""),
                         0);
        assert_int_equal(scalar_ll("SELECT count(*) FROM push_tokens%s", ""), 1);
        /* split push: retried later with only the 50 tokens of the failed batch */
        v = ROW(ids[3]);
        assert_string_equal(v, "false|1|push: HTTP 503");
        free(v);
        assert_int_equal(
            scalar_ll("SELECT jsonb_array_length(payload->'to') FROM outbox WHERE id = %s", ids[3]),
            50);
        assert_int_equal(
            scalar_ll("SELECT (next_attempt_at > now() + interval '5 seconds' AND "
                      "next_attempt_at < now() + interval '11 seconds')::int FROM outbox "
                      "WHERE id = %s",
                      ids[3]),
            1);
        v = scalar("SELECT payload->'to'->>0 FROM outbox WHERE id = %s", ids[3]);
        assert_string_equal(v, "ExponentPushToken[t100]");
        free(v);
        v = ROW(ids[4]);
        assert_string_equal(v, "true|1|-");
        free(v);
        /* not due: untouched */
        v = ROW(ids[5]);
        assert_string_equal(v, "false|0|-");
        free(v);
    }
    /* two push requests for the split row, one for the small row */
    assert_int_equal(count_files(out, ".json"), 3);

    outbox_shutdown();
    mail_shutdown();
    curlm_shutdown();
    db_shutdown();
    loop_finish();
    sink_stop(pid);
    cfg.push_url = NULL;
    cfg.mail_dir = NULL;
    free(conninfo);
    rm_rf(dir);
    free(dir);
    free(out);
    free(mdir);
}

static void test_backoff(void **state)
{
    (void)state;
    assert_int_equal(backoff_seconds(1), 10);
    assert_int_equal(backoff_seconds(2), 20);
    assert_int_equal(backoff_seconds(9), 2560);
    assert_int_equal(backoff_seconds(10), 3600);
    assert_int_equal(backoff_seconds(40), 3600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_drain),
    };
    char sql[256];
    int rc;

    db_url = getenv("COACHD_TEST_DATABASE_URL");
    if (!db_url || !*db_url) {
        fprintf(stderr, "COACHD_TEST_DATABASE_URL is not set\n");
        return 1;
    }
    pg = PQconnectdb(db_url);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "cannot connect to COACHD_TEST_DATABASE_URL: %s", PQerrorMessage(pg));
        return 1;
    }
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    snprintf(schema, sizeof(schema), "rt_outbox_test_%d", (int)getpid());
    rc = cmocka_run_group_tests_name("rt_outbox", tests, NULL, NULL);
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", schema);
    PQclear(PQexec(pg, sql));
    PQfinish(pg);
    return rc;
}
