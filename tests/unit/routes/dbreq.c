/*
 * routes/dbreq.c: request-scoped queries and the error mapping (the table of database errors
 * as API answers). core/http is replaced by stubs that
 * record references and replies; queries run against the live PostgreSQL of
 * COACHD_TEST_DATABASE_URL (the run fails when it is missing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/db.h"
#include "routes/dbreq.h"

static const char *db_url;
static int replied_status;
static const char *replied_code;

/* ---- core/http stubs ---- */

void http_req_ref(http_req_t *req)
{
    req->refs++;
}

void http_req_unref(http_req_t *req)
{
    assert_true(req->refs > 0);
    req->refs--;
}

void http_reply_error(http_req_t *req, int status, const char *code, const char *message)
{
    (void)message;
    req->replied = true;
    replied_status = status;
    replied_code = code;
}

/* ---- request-scoped queries ---- */

static const char SQL_ECHO[] = "SELECT $1::text";
static uv_loop_t loop;
static http_req_t present, gone;
static int calls, pending;

static void on_echo(http_req_t *req, db_result_t *r)
{
    assert_ptr_equal(req, &present);
    assert_true(r->ok);
    assert_string_equal(db_get(r, 0, 0), "hi");
    /* The reference is held while the callback runs. */
    assert_int_equal(req->refs, 1);
    calls++;
}

static void on_done(db_result_t *r, void *data)
{
    (void)r;
    (void)data;
    /* Queued after the request-scoped queries on a one-connection pool: runs after them. */
    if (--pending == 0) db_shutdown();
}

static void test_req_query(void **state)
{
    (void)state;
    memset(&present, 0, sizeof present);
    memset(&gone, 0, sizeof gone);
    present.conn = (http_conn_t *)&present; /* any non-NULL: the client is there */
    gone.conn = NULL;
    calls = 0;
    pending = 1;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(db_init(&loop, db_url, 1), 0);
    const char *v[1] = {"hi"};
    db_req_query(&present, SQL_ECHO, 1, v, on_echo);
    db_req_query(&gone, SQL_ECHO, 1, v, on_echo); /* dropped: on_echo would fail the test */
    assert_int_equal(present.refs, 1);
    assert_int_equal(gone.refs, 1);
    db_query(SQL_ECHO, 1, v, on_done, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(calls, 1);
    assert_int_equal(present.refs, 0);
    assert_int_equal(gone.refs, 0);
}

/* ---- error mapping ---- */

static void test_failed_or_reply(void **state)
{
    (void)state;
    http_req_t req;
    memset(&req, 0, sizeof req);
    strcpy(req.id, "00000000000000ab");

    db_result_t ok = {.ok = true};
    replied_status = 0;
    assert_true(db_ok_or_reply(&req, &ok));
    assert_int_equal(replied_status, 0);

    db_result_t lost = {.conn_lost = true, .error = "connection lost"};
    assert_false(db_ok_or_reply(&req, &lost));
    assert_int_equal(replied_status, 503);
    assert_string_equal(replied_code, "UNAVAILABLE");

    db_result_t bad = {.sqlstate = "42601", .error = "syntax error at or near \"SELEC\""};
    assert_false(db_ok_or_reply(&req, &bad));
    assert_int_equal(replied_status, 500);
    assert_string_equal(replied_code, "INTERNAL");

    /* Rows of the table: by sqlstate and constraint name. */
    db_result_t spacing = {.sqlstate = "23P01",
                           .constraint = "mentorship_sessions_spacing",
                           .error = "conflicting key value violates exclusion constraint"};
    assert_false(db_ok_or_reply(&req, &spacing));
    assert_int_equal(replied_status, 409);
    assert_string_equal(replied_code, "SESSION_CONFLICT");

    db_result_t email = {.sqlstate = "23505", .constraint = "users_email_key", .error = "dup"};
    assert_false(db_ok_or_reply(&req, &email));
    assert_int_equal(replied_status, 409);
    assert_string_equal(replied_code, "EMAIL_TAKEN");

    /* A unique violation the table does not name stays an internal error. */
    db_result_t other = {.sqlstate = "23505", .constraint = "users_pkey", .error = "dup"};
    assert_false(db_ok_or_reply(&req, &other));
    assert_int_equal(replied_status, 500);

    /* The message of a 503 / 500 answer may be the route's. */
    db_result_t lost2 = {.conn_lost = true, .error = "connection lost"};
    assert_false(db_ok_or_reply_as(&req, &lost2, "Could not do it"));
    assert_int_equal(replied_status, 503);
}

int main(void)
{
    db_url = getenv("COACHD_TEST_DATABASE_URL");
    if (!db_url || !*db_url) {
        fprintf(stderr, "COACHD_TEST_DATABASE_URL is not set: these tests need PostgreSQL\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_req_query),
        cmocka_unit_test(test_failed_or_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
