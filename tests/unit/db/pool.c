/*
 * db/ against a live PostgreSQL (COACHD_TEST_DATABASE_URL; the run fails when it is missing).
 * Each test runs its own loop until the scenario calls db_shutdown, then checks that
 * uv_loop_close() returns 0 (no leaked handles). A watchdog timer fails a test that hangs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "db/db.h"

#define WATCHDOG_MS 30000

static const char *db_url;
static uv_loop_t loop;
static uv_timer_t watchdog;
static bool loop_open;
static int in_call; /* > 0 while a db_* call that queues work is on the stack */
static char key_prefix[64];

/* Wraps calls that queue work: a callback that fires while in_call > 0 ran synchronously. */
#define CALL(x)                                                                                    \
    do {                                                                                           \
        in_call++;                                                                                 \
        x;                                                                                         \
        in_call--;                                                                                 \
    } while (0)
#define ASSERT_DEFERRED() assert_int_equal(in_call, 0)

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    fail_msg("test timed out");
}

static void loop_start(const char *url, int pool_size)
{
    assert_int_equal(uv_loop_init(&loop), 0);
    loop_open = true;
    uv_timer_init(&loop, &watchdog);
    uv_timer_start(&watchdog, on_watchdog, WATCHDOG_MS, 0);
    assert_int_equal(db_init(&loop, url, pool_size), 0);
}

/* Ends the scenario from a callback. */
static void loop_finish(void)
{
    db_shutdown();
    uv_timer_stop(&watchdog);
    uv_close((uv_handle_t *)&watchdog, NULL);
}

static void loop_run(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    loop_open = false;
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* After a failed assertion left the loop mid-scenario: stop the pool, close what is left, so
 * the next test starts clean. */
static int teardown(void **state)
{
    (void)state;
    if (!loop_open) return 0;
    db_shutdown();
    uv_walk(&loop, close_any, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    loop_open = false;
    return 0;
}

/* Synchronous side connection, test-only (kills backends, checks state). */
static PGconn *side_connect(void)
{
    PGconn *pg = PQconnectdb(db_url);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    return pg;
}

static void side_exec(const char *sql)
{
    PGconn *pg = side_connect();
    PGresult *res = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(res);
    assert_true(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
    PQclear(res);
    PQfinish(pg);
}

/* ---- basic queries ---- */

static const char SQL_ADD[] = "SELECT $1::int + $2::int AS sum, $3::text AS t";
static const char SQL_DIV[] = "SELECT 10 / $1::int";
static const char SQL_SYNTAX[] = "SELEC 1";
static const char SQL_TIMEOUT[] = "SELECT current_setting('statement_timeout')";

static struct {
    int step;
} basic;

static void basic_next(void);

static void basic_on_result(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    int s = basic.step++;
    if (s < 5) {
        assert_true(r->ok);
        assert_false(r->conn_lost);
        assert_int_equal(db_nrows(r), 1);
        assert_int_equal(db_getll(r, 0, 0, -1), 2 + s);
        assert_string_equal(db_get(r, 0, 1), "hello");
        assert_int_equal(db_getlen(r, 0, 1), 5);
        assert_null(db_get(r, 1, 0));
        assert_null(db_get(r, 0, 2));
        assert_int_equal(db_getll(r, 0, 1, 42), 42);
    } else if (s == 5) {
        /* Execute fails, the prepared statement stays valid. */
        assert_false(r->ok);
        assert_false(r->conn_lost);
        assert_non_null(r->sqlstate);
        assert_string_equal(r->sqlstate, "22012");
        assert_non_null(r->error);
    } else if (s == 6) {
        assert_true(r->ok);
        assert_int_equal(db_getll(r, 0, 0, -1), 5);
    } else if (s == 7 || s == 8) {
        /* Parse fails: reported, and prepared again (and failing again) the next time. */
        assert_false(r->ok);
        assert_false(r->conn_lost);
        assert_string_equal(r->sqlstate, "42601");
        assert_int_equal(db_nrows(r), 0);
    } else if (s == 9) {
        assert_true(r->ok);
        assert_string_equal(db_get(r, 0, 0), "15s");
    }
    basic_next();
}

static void basic_next(void)
{
    int s = basic.step;
    char a[16];
    snprintf(a, sizeof a, "%d", s);
    const char *v[3] = {a, "2", "hello"};
    if (s < 5) {
        CALL(db_query(SQL_ADD, 3, v, basic_on_result, NULL));
    } else if (s == 5 || s == 6) {
        const char *d[1] = {s == 5 ? "0" : "2"};
        CALL(db_query(SQL_DIV, 1, d, basic_on_result, NULL));
    } else if (s == 7 || s == 8) {
        CALL(db_query(SQL_SYNTAX, 0, NULL, basic_on_result, NULL));
    } else if (s == 9) {
        CALL(db_query(SQL_TIMEOUT, 0, NULL, basic_on_result, NULL));
    } else {
        loop_finish();
    }
}

static void test_basic(void **state)
{
    (void)state;
    memset(&basic, 0, sizeof basic);
    loop_start(db_url, 2);
    basic_next();
    loop_run();
    assert_int_equal(basic.step, 10);
}

/* ---- NULL parameters ---- */

static const char SQL_NULLS[] = "SELECT $1::text IS NULL, $1::text, $2::text";
static int nulls_done;

static void nulls_on_result(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_true(r->ok);
    assert_string_equal(db_get(r, 0, 0), "t");
    assert_true(db_isnull(r, 0, 1));
    assert_null(db_get(r, 0, 1));
    assert_false(db_isnull(r, 0, 2));
    assert_string_equal(db_get(r, 0, 2), "x");
    nulls_done = 1;
    loop_finish();
}

static void test_null_params(void **state)
{
    (void)state;
    nulls_done = 0;
    loop_start(db_url, 1);
    char x[2] = "x";
    const char *v[2] = {NULL, x};
    CALL(db_query(SQL_NULLS, 2, v, nulls_on_result, NULL));
    x[0] = 'y'; /* values are copied at the call */
    loop_run();
    assert_int_equal(nulls_done, 1);
}

/* ---- concurrency ---- */

#define CONC_N 100
static const char SQL_CONC[] = "SELECT $1::int, pg_backend_pid(), pg_sleep(0.005)";
static struct {
    int done;
    long long pids[CONC_N];
} conc;

static void conc_on_result(db_result_t *r, void *data)
{
    ASSERT_DEFERRED();
    intptr_t i = (intptr_t)data;
    assert_true(r->ok);
    assert_int_equal(db_getll(r, 0, 0, -1), i);
    conc.pids[conc.done++] = db_getll(r, 0, 1, -1);
    if (conc.done == CONC_N) loop_finish();
}

static void test_concurrent(void **state)
{
    (void)state;
    memset(&conc, 0, sizeof conc);
    loop_start(db_url, 4);
    for (intptr_t i = 0; i < CONC_N; i++) {
        char a[16];
        snprintf(a, sizeof a, "%d", (int)i);
        const char *v[1] = {a};
        CALL(db_query(SQL_CONC, 1, v, conc_on_result, (void *)i));
    }
    loop_run();
    assert_int_equal(conc.done, CONC_N);
    int distinct = 0;
    for (int i = 0; i < CONC_N; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= conc.pids[j] == conc.pids[i];
        distinct += !seen;
    }
    assert_true(distinct >= 2 && distinct <= 4);
}

/* ---- transactions ---- */

static const char SQL_TABLE[] =
    "CREATE TABLE IF NOT EXISTS db_unit_items (k text PRIMARY KEY, v int)";
static const char SQL_INSERT[] = "INSERT INTO db_unit_items (k, v) VALUES ($1, $2) RETURNING v";
static const char SQL_COUNT[] = "SELECT count(*) FROM db_unit_items WHERE k = $1";
static const char SQL_ONE[] = "SELECT 1";

static struct {
    int step;
    db_tx_t *tx;
    char k1[96], k2[96];
} txs;

static void txs_next(db_result_t *r);

static void txs_on_query(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    txs_next(r);
}

static void txs_on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_true(r->ok);
    assert_non_null(tx);
    txs.tx = tx;
    txs_next(r);
}

static void txs_next(db_result_t *r)
{
    const char *k1[1] = {txs.k1};
    const char *k2[1] = {txs.k2};
    const char *ins1[2] = {txs.k1, "7"};
    const char *ins2[2] = {txs.k2, "8"};
    switch (txs.step++) {
    case 0:
        CALL(db_query(SQL_TABLE, 0, NULL, txs_on_query, NULL));
        break;
    case 1:
        assert_true(r->ok);
        CALL(db_tx_begin(txs_on_begin, NULL));
        break;
    case 2:
        CALL(db_tx_query(txs.tx, SQL_INSERT, 2, ins1, txs_on_query, NULL));
        break;
    case 3:
        assert_true(r->ok);
        assert_string_equal(db_get(r, 0, 0), "7");
        /* Not visible outside the transaction yet. */
        CALL(db_query(SQL_COUNT, 1, k1, txs_on_query, NULL));
        break;
    case 4:
        assert_true(r->ok);
        assert_string_equal(db_get(r, 0, 0), "0");
        CALL(db_tx_commit(txs.tx, txs_on_query, NULL));
        txs.tx = NULL;
        break;
    case 5:
        assert_true(r->ok);
        CALL(db_query(SQL_COUNT, 1, k1, txs_on_query, NULL));
        break;
    case 6:
        assert_true(r->ok);
        assert_string_equal(db_get(r, 0, 0), "1");
        CALL(db_tx_begin(txs_on_begin, NULL));
        break;
    case 7:
        CALL(db_tx_query(txs.tx, SQL_INSERT, 2, ins2, txs_on_query, NULL));
        break;
    case 8:
        assert_true(r->ok);
        CALL(db_tx_rollback(txs.tx));
        txs.tx = NULL;
        /* The pool has two connections; the next query may run while ROLLBACK is on the
         * wire, which is fine: the row is invisible either way. */
        CALL(db_query(SQL_COUNT, 1, k2, txs_on_query, NULL));
        break;
    case 9:
        assert_true(r->ok);
        assert_string_equal(db_get(r, 0, 0), "0");
        /* Both connections are usable afterwards. */
        CALL(db_query(SQL_ONE, 0, NULL, txs_on_query, NULL));
        CALL(db_query(SQL_ONE, 0, NULL, txs_on_query, NULL));
        break;
    case 10:
        assert_true(r->ok);
        break;
    case 11:
        assert_true(r->ok);
        loop_finish();
        break;
    default:
        fail();
    }
}

static void test_tx_commit_rollback(void **state)
{
    (void)state;
    memset(&txs, 0, sizeof txs);
    snprintf(txs.k1, sizeof txs.k1, "%s-commit", key_prefix);
    snprintf(txs.k2, sizeof txs.k2, "%s-rollback", key_prefix);
    loop_start(db_url, 2);
    txs_next(NULL);
    loop_run();
    assert_int_equal(txs.step, 12);
}

/* ---- a failing statement inside a transaction ---- */

static const char SQL_BEGIN_RAW[] = "BEGIN";
/* Two statements outside a transaction block get different transaction ids. */
static const char SQL_TXID[] = "SELECT txid_current()";

static struct {
    int step;
    db_tx_t *tx;
    long long txid;
    char k3[96];
} txf;

static void txf_next(db_result_t *r);

static void txf_on_query(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    txf_next(r);
}

static void txf_on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_true(r->ok);
    txf.tx = tx;
    txf_next(r);
}

static void txf_next(db_result_t *r)
{
    const char *k3[1] = {txf.k3};
    const char *ins[2] = {txf.k3, "9"};
    switch (txf.step++) {
    case 0:
        CALL(db_query(SQL_TABLE, 0, NULL, txf_on_query, NULL));
        break;
    case 1:
        assert_true(r->ok);
        CALL(db_tx_begin(txf_on_begin, NULL));
        break;
    case 2:
        /* Queue three statements at once: they run in order on the tx connection. */
        CALL(db_tx_query(txf.tx, SQL_INSERT, 2, ins, txf_on_query, NULL));
        CALL(db_tx_query(txf.tx, SQL_INSERT, 2, ins, txf_on_query, NULL));
        CALL(db_tx_query(txf.tx, SQL_ONE, 0, NULL, txf_on_query, NULL));
        break;
    case 3:
        assert_true(r->ok);
        break;
    case 4:
        assert_false(r->ok);
        assert_false(r->conn_lost);
        assert_string_equal(r->sqlstate, "23505");
        break;
    case 5:
        /* The transaction is aborted: later statements fail too. */
        assert_false(r->ok);
        assert_false(r->conn_lost);
        assert_string_equal(r->sqlstate, "25P02");
        CALL(db_tx_commit(txf.tx, txf_on_query, NULL));
        txf.tx = NULL;
        break;
    case 6:
        /* Commit rolled back and says so. */
        assert_false(r->ok);
        assert_false(r->conn_lost);
        CALL(db_query(SQL_COUNT, 1, k3, txf_on_query, NULL));
        break;
    case 7:
        assert_true(r->ok);
        assert_string_equal(db_get(r, 0, 0), "0");
        /* A plain BEGIN leaves the (only) connection inside a transaction: the pool rolls
         * it back before the next query uses it. */
        CALL(db_query(SQL_BEGIN_RAW, 0, NULL, txf_on_query, NULL));
        break;
    case 8:
        assert_true(r->ok);
        CALL(db_query(SQL_TXID, 0, NULL, txf_on_query, NULL));
        break;
    case 9:
        assert_true(r->ok);
        txf.txid = db_getll(r, 0, 0, -1);
        CALL(db_query(SQL_TXID, 0, NULL, txf_on_query, NULL));
        break;
    case 10:
        assert_true(r->ok);
        assert_true(db_getll(r, 0, 0, -1) != txf.txid);
        /* A statement error inside a transaction, then an explicit rollback. */
        CALL(db_tx_begin(txf_on_begin, NULL));
        break;
    case 11:
        CALL(db_tx_query(txf.tx, SQL_SYNTAX, 0, NULL, txf_on_query, NULL));
        break;
    case 12:
        assert_false(r->ok);
        CALL(db_tx_rollback(txf.tx));
        txf.tx = NULL;
        CALL(db_query(SQL_TXID, 0, NULL, txf_on_query, NULL));
        break;
    case 13:
        assert_true(r->ok);
        txf.txid = db_getll(r, 0, 0, -1);
        CALL(db_query(SQL_TXID, 0, NULL, txf_on_query, NULL));
        break;
    case 14:
        assert_true(r->ok);
        assert_true(db_getll(r, 0, 0, -1) != txf.txid);
        loop_finish();
        break;
    default:
        fail();
    }
}

static void test_tx_failure(void **state)
{
    (void)state;
    memset(&txf, 0, sizeof txf);
    snprintf(txf.k3, sizeof txf.k3, "%s-fail", key_prefix);
    loop_start(db_url, 1);
    txf_next(NULL);
    loop_run();
    assert_int_equal(txf.step, 15);
}

/* ---- queue overflow ---- */

#define OVERFLOW_QUEUE 10000
#define OVERFLOW_EXTRA 50
static struct {
    int ok, lost, total;
    bool lost_after_ok;
} ovf;

static void ovf_on_result(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    if (r->ok) {
        ovf.ok++;
    } else {
        assert_true(r->conn_lost);
        assert_null(r->pg);
        if (ovf.ok) ovf.lost_after_ok = true;
        ovf.lost++;
    }
    if (++ovf.total == OVERFLOW_QUEUE + OVERFLOW_EXTRA) loop_finish();
}

static void test_queue_overflow(void **state)
{
    (void)state;
    memset(&ovf, 0, sizeof ovf);
    loop_start(db_url, 2);
    /* No connection is up yet, so every query waits in the queue until it is full. */
    for (int i = 0; i < OVERFLOW_QUEUE + OVERFLOW_EXTRA; i++)
        CALL(db_query(SQL_ONE, 0, NULL, ovf_on_result, NULL));
    loop_run();
    assert_int_equal(ovf.lost, OVERFLOW_EXTRA);
    assert_int_equal(ovf.ok, OVERFLOW_QUEUE);
    assert_false(ovf.lost_after_ok);
}

/* ---- a statement queued first ---- */

static struct {
    int n;
    intptr_t order[8];
} first;

static void first_on_result(db_result_t *r, void *data)
{
    ASSERT_DEFERRED();
    assert_true(r->ok);
    assert_int_equal(db_getll(r, 0, 0, -1), (intptr_t)data);
    first.order[first.n++] = (intptr_t)data;
    if (first.n == 7) loop_finish();
}

/* One connection, not up yet: every statement waits. db_query_first goes ahead of the ones
 * queued before it, and the others keep their order, also those queued after it. */
static void test_query_first(void **state)
{
    (void)state;
    memset(&first, 0, sizeof first);
    loop_start(db_url, 1);
    const char *v[1];
    char num[8][4];
    for (intptr_t i = 0; i < 7; i++) {
        snprintf(num[i], sizeof num[i], "%d", (int)i);
        v[0] = num[i];
        if (i == 4)
            CALL(db_query_first("SELECT $1::int", 1, v, first_on_result, (void *)i));
        else
            CALL(db_query("SELECT $1::int", 1, v, first_on_result, (void *)i));
    }
    loop_run();
    intptr_t want[7] = {4, 0, 1, 2, 3, 5, 6};
    assert_int_equal(first.n, 7);
    for (int i = 0; i < 7; i++)
        assert_int_equal(first.order[i], want[i]);
}

/* ---- backend killed by the server ---- */

static const char SQL_PID[] = "SELECT pg_backend_pid()";
static const char SQL_SLOW_PID[] = "SELECT pg_backend_pid(), pg_sleep(5)";

static struct {
    int step;
    long long pid1, pid2, pid3;
    int lost_before_ok;
    uv_timer_t timer;
    bool slow_lost;
} rc;

static void rc_next(db_result_t *r);

static void rc_on_query(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    rc_next(r);
}

static void terminate(long long pid)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%lld)", pid);
    side_exec(sql);
}

static void rc_on_retry(uv_timer_t *t)
{
    (void)t;
    CALL(db_query(SQL_PID, 0, NULL, rc_on_query, NULL));
}

static void rc_on_kill(uv_timer_t *t)
{
    (void)t;
    terminate(rc.pid2);
}

static void rc_next(db_result_t *r)
{
    switch (rc.step) {
    case 0:
        rc.step++;
        CALL(db_query(SQL_PID, 0, NULL, rc_on_query, NULL));
        break;
    case 1:
        assert_true(r->ok);
        rc.pid1 = db_getll(r, 0, 0, -1);
        assert_true(rc.pid1 > 0);
        terminate(rc.pid1);
        rc.step++;
        CALL(db_query(SQL_PID, 0, NULL, rc_on_query, NULL));
        break;
    case 2:
        /* The first query after the kill may hit the dead socket; then we retry. */
        if (!r->ok) {
            assert_true(r->conn_lost);
            assert_true(++rc.lost_before_ok < 100);
            uv_timer_start(&rc.timer, rc_on_retry, 50, 0);
            break;
        }
        rc.pid2 = db_getll(r, 0, 0, -1);
        assert_true(rc.pid2 > 0 && rc.pid2 != rc.pid1);
        assert_true(db_available());
        rc.step++;
        /* Kill the backend while a query runs on it. */
        CALL(db_query(SQL_SLOW_PID, 0, NULL, rc_on_query, NULL));
        uv_timer_start(&rc.timer, rc_on_kill, 300, 0);
        break;
    case 3:
        assert_false(r->ok);
        assert_true(r->conn_lost);
        rc.slow_lost = true;
        rc.lost_before_ok = 0;
        rc.step++;
        CALL(db_query(SQL_PID, 0, NULL, rc_on_query, NULL));
        break;
    case 4:
        /* Queued until the connection is back (100 ms backoff), or retried. */
        if (!r->ok) {
            assert_true(r->conn_lost);
            assert_true(++rc.lost_before_ok < 100);
            uv_timer_start(&rc.timer, rc_on_retry, 50, 0);
            break;
        }
        rc.pid3 = db_getll(r, 0, 0, -1);
        assert_true(rc.pid3 > 0 && rc.pid3 != rc.pid2);
        rc.step++;
        uv_close((uv_handle_t *)&rc.timer, NULL);
        loop_finish();
        break;
    default:
        fail();
    }
}

static void test_reconnect(void **state)
{
    (void)state;
    memset(&rc, 0, sizeof rc);
    loop_start(db_url, 1);
    uv_timer_init(&loop, &rc.timer);
    rc_next(NULL);
    loop_run();
    assert_int_equal(rc.step, 5);
    assert_true(rc.slow_lost);
}

/* ---- database unreachable ---- */

static struct {
    int done;
    bool begin_failed;
} down;

static void down_on_result(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_false(r->ok);
    assert_true(r->conn_lost);
    assert_false(db_available());
    if (++down.done == 2) loop_finish();
}

static void down_on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_null(tx);
    assert_false(r->ok);
    assert_true(r->conn_lost);
    down.begin_failed = true;
    if (++down.done == 2) loop_finish();
}

static void test_unreachable(void **state)
{
    (void)state;
    memset(&down, 0, sizeof down);
    /* Nothing listens on port 1: waiters fail with conn_lost after the queue wait (10 s). */
    loop_start("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2", 1);
    CALL(db_query(SQL_ONE, 0, NULL, down_on_result, NULL));
    CALL(db_tx_begin(down_on_begin, NULL));
    loop_run();
    assert_int_equal(down.done, 2);
    assert_true(down.begin_failed);
}

/* ---- shutdown with work pending, and calls after it ---- */

static int shut_lost, shut_late;
static db_tx_t *shut_tx;

static void shut_on_result(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_true(r->conn_lost);
    shut_lost++;
}

static void shut_on_late(db_result_t *r, void *data)
{
    (void)data;
    ASSERT_DEFERRED();
    assert_true(r->conn_lost);
    shut_late++;
}

static void shut_on_begin(db_tx_t *tx, db_result_t *r, void *data);

static void shut_on_commit(db_result_t *r, void *data)
{
    (void)data;
    assert_true(r->conn_lost);
    shut_late++;
}

static void shut_on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    (void)data;
    assert_true(r->ok);
    shut_tx = tx;
    /* Shut down with a transaction open and statements queued. */
    CALL(db_query(SQL_SLOW_PID, 0, NULL, shut_on_result, NULL));
    CALL(db_query(SQL_ONE, 0, NULL, shut_on_result, NULL));
    CALL(db_tx_query(tx, SQL_SLOW_PID, 0, NULL, shut_on_result, NULL));
    db_shutdown();
    uv_timer_stop(&watchdog);
    uv_close((uv_handle_t *)&watchdog, NULL);
    assert_int_equal(shut_lost, 3);
    /* After shutdown: callbacks still fire once, later, with conn_lost. */
    CALL(db_query(SQL_ONE, 0, NULL, shut_on_late, NULL));
    CALL(db_tx_commit(shut_tx, shut_on_commit, NULL));
}

static void test_shutdown(void **state)
{
    (void)state;
    shut_lost = shut_late = 0;
    loop_start(db_url, 2);
    CALL(db_tx_begin(shut_on_begin, NULL));
    loop_run();
    assert_int_equal(shut_lost, 3);
    assert_int_equal(shut_late, 2);
}

/* ---- migrations ---- */

static void test_migrate(void **state)
{
    (void)state;
    assert_int_equal(db_migrate(db_url), 0);
    assert_int_equal(db_migrate(db_url), 0); /* idempotent */
    PGconn *pg = side_connect();
    PGresult *res =
        PQexec(pg, "SELECT count(*) FROM schema_migrations WHERE version = '0001_accounts'");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "1");
    PQclear(res);
    res = PQexec(pg, "SELECT to_regclass('users') IS NOT NULL");
    assert_string_equal(PQgetvalue(res, 0, 0), "t");
    PQclear(res);
    PQfinish(pg);
    assert_int_equal(db_migrate("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2"),
                     -1);
}

int main(void)
{
    db_url = getenv("COACHD_TEST_DATABASE_URL");
    if (!db_url || !*db_url) {
        fprintf(stderr, "COACHD_TEST_DATABASE_URL is not set: these tests need PostgreSQL\n");
        return 1;
    }
    snprintf(key_prefix, sizeof key_prefix, "k%ld-%ld", (long)getpid(), (long)time(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_basic, teardown),
        cmocka_unit_test_teardown(test_null_params, teardown),
        cmocka_unit_test_teardown(test_concurrent, teardown),
        cmocka_unit_test_teardown(test_tx_commit_rollback, teardown),
        cmocka_unit_test_teardown(test_tx_failure, teardown),
        cmocka_unit_test_teardown(test_queue_overflow, teardown),
        cmocka_unit_test_teardown(test_query_first, teardown),
        cmocka_unit_test_teardown(test_reconnect, teardown),
        cmocka_unit_test_teardown(test_shutdown, teardown),
        cmocka_unit_test_teardown(test_unreachable, teardown),
        cmocka_unit_test_teardown(test_migrate, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    side_exec("DROP TABLE IF EXISTS db_unit_items");
    return failed;
}
