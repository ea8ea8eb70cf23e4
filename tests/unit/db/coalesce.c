/*
 * db/coalesce against a live PostgreSQL (COACHD_TEST_DATABASE_URL; the run fails when it is
 * missing): each caller gets its own row, a failed statement fails its callers (or each is
 * retried alone), keys that share a slot never wait on each other, a loop turn's callers go in
 * one statement (in both modes), and no more statements per key are in flight than allowed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/coalesce.h"
#include "db/db.h"

#define WATCHDOG_MS 30000
#define MAXC 16

static const char *db_url;
static uv_loop_t loop;
static uv_timer_t watchdog, finisher;
static bool loop_open;
static db_coalesce_t *co;

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    fail_msg("test timed out");
}

static void loop_start_pool(int conns)
{
    assert_int_equal(uv_loop_init(&loop), 0);
    loop_open = true;
    uv_timer_init(&loop, &watchdog);
    uv_timer_start(&watchdog, on_watchdog, WATCHDOG_MS, 0);
    uv_timer_init(&loop, &finisher);
    assert_int_equal(db_init(&loop, db_url, conns), 0);
}

static void loop_start(void)
{
    loop_start_pool(4);
}

static void on_finish(uv_timer_t *t)
{
    (void)t;
    db_coalesce_free(co);
    co = NULL;
    db_shutdown();
    uv_timer_stop(&watchdog);
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_close((uv_handle_t *)&finisher, NULL);
}

/* Ends the scenario after the current callback (the coalescer is freed outside its own). */
static void finish_soon(void)
{
    uv_timer_start(&finisher, on_finish, 0, 0);
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

static int teardown(void **state)
{
    (void)state;
    if (!loop_open) return 0;
    db_shutdown();
    uv_walk(&loop, close_any, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    loop_open = false;
    co = NULL;
    return 0;
}

/* Each caller's value back with the size of its statement's group (n) and the number of
 * distinct keys in it; 'skip' gets no row. Rows come back in reverse order, so only ord can
 * match them. */
static const char SQL_ECHO[] =
    "SELECT s.v, (SELECT count(*) FROM unnest($2::text[])) AS n, "
    "       (SELECT count(DISTINCT k) FROM unnest($1::text[]) k) AS keys, s.ord "
    "FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS s(k, v, ord) "
    "WHERE s.v IS DISTINCT FROM 'skip' ORDER BY s.ord DESC";
enum { ECHO_V, ECHO_N, ECHO_KEYS, ECHO_ORD };
/* 10 / v: a group with a 0 fails as a whole. */
static const char SQL_DIV[] = "SELECT 10 / s.v::int AS q, s.ord "
                              "FROM unnest($1::text[]) WITH ORDINALITY AS s(v, ord)";

typedef struct got {
    int calls;
    bool ok, norow, unsent;
    char v[64];
    long long n, keys;
    int seq; /* order of the callback among all */
} got_t;

static got_t got[MAXC];
static int seq, expected;
static const char *vals[MAXC];
static const char *keys[MAXC];

static void reset(void)
{
    memset(got, 0, sizeof(got));
    seq = 0;
}

static void on_row(db_result_t *r, int row, void *data)
{
    got_t *g = data;
    g->calls++;
    g->seq = seq++;
    if (!r) {
        g->unsent = true;
    } else {
        g->ok = r->ok;
        g->norow = row < 0;
        if (r->ok && row >= 0) {
            const char *v = db_get(r, row, 0);
            snprintf(g->v, sizeof(g->v), "%s", v ? v : "");
            g->n = db_getll(r, row, ECHO_N, -1);
            g->keys = db_getll(r, row, ECHO_KEYS, -1);
        }
    }
    if (seq == expected) finish_soon();
}

static void add_echo(int i, const char *key, const char *v)
{
    keys[i] = key;
    vals[i] = v;
    const char *params[] = {key, v};
    db_coalesce_add(co, key, params, on_row, &got[i]);
}

static db_coalesce_t *echo_new(db_coalesce_mode_t mode, int inflight, int batch, int slots)
{
    return db_coalesce_new(&(db_coalesce_opts_t){.sql = SQL_ECHO,
                                                 .nparams = 2,
                                                 .ord_col = ECHO_ORD,
                                                 .mode = mode,
                                                 .inflight_max = inflight,
                                                 .batch_max = batch,
                                                 .slots = slots});
}

/* ---- each caller its own row, in order ---- */

static void test_ordering(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_TURN, 1, 16, 0);
    const char *v[] = {"a", "b\"q", NULL, "skip", "e\\s", "f,g"};
    expected = 6;
    for (int i = 0; i < 6; i++)
        add_echo(i, "", v[i]);
    /* Nothing runs inside the calls: the group waits for the end of the turn. */
    assert_int_equal(db_coalesce_waiting(co), 6);
    assert_int_equal(db_coalesce_inflight(co), 0);
    loop_run();
    for (int i = 0; i < 6; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_true(got[i].ok);
        assert_int_equal(got[i].seq, i); /* callbacks in the callers' order */
    }
    assert_string_equal(got[0].v, "a");
    assert_string_equal(got[1].v, "b\"q");
    assert_true(!got[2].norow && got[2].v[0] == '\0'); /* NULL came back as NULL */
    assert_true(got[3].norow);                         /* no row for it */
    assert_string_equal(got[4].v, "e\\s");
    assert_string_equal(got[5].v, "f,g");
    assert_int_equal(got[0].n, 6); /* one statement for all */
}

/* ---- a failed statement ---- */

static void add_div(int i, const char *v)
{
    const char *params[] = {v};
    db_coalesce_add(co, "", params, on_row, &got[i]);
}

static void run_div(bool retry)
{
    reset();
    loop_start();
    co = db_coalesce_new(&(db_coalesce_opts_t){.sql = SQL_DIV,
                                               .nparams = 1,
                                               .ord_col = 1,
                                               .mode = DB_COALESCE_TURN,
                                               .batch_max = 8,
                                               .retry_alone = retry});
    expected = 3;
    add_div(0, "1");
    add_div(1, "0");
    add_div(2, "2");
    loop_run();
    for (int i = 0; i < 3; i++)
        assert_int_equal(got[i].calls, 1);
}

static void test_batch_failure(void **state)
{
    (void)state;
    run_div(false);
    for (int i = 0; i < 3; i++) /* every caller gets the failure */
        assert_false(got[i].ok);
}

static void test_batch_failure_retry_alone(void **state)
{
    (void)state;
    run_div(true);
    /* Each sent again alone: only the bad one fails. */
    assert_true(got[0].ok);
    assert_string_equal(got[0].v, "10");
    assert_false(got[1].ok);
    assert_true(got[2].ok);
    assert_string_equal(got[2].v, "5");
}

/* Retries of a statement sent ahead of the queue (opts.first) keep the group's order: sent all
 * at once, those that found every connection busy queued at the head, each ahead of the one
 * before it, and ran in reverse. Eight callers on a pool of four. */
static void test_retry_alone_keeps_order_ahead_of_the_queue(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = db_coalesce_new(&(db_coalesce_opts_t){.sql = SQL_DIV,
                                               .nparams = 1,
                                               .ord_col = 1,
                                               .mode = DB_COALESCE_TURN,
                                               .batch_max = 16,
                                               .first = true,
                                               .retry_alone = true});
    expected = 8;
    const char *v[] = {"1", "2", "0", "5", "10", "1", "2", "5"};
    for (int i = 0; i < 8; i++)
        add_div(i, v[i]);
    loop_run();
    for (int i = 0; i < 8; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_int_equal(got[i].seq, i);
        assert_true(got[i].ok == (i != 2));
    }
}

/* ---- keys that share a slot ---- */

static void test_shared_slot_turn(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_TURN, 1, 16, 1); /* one slot: every key shares it */
    expected = 5;
    add_echo(0, "k1", "a");
    add_echo(1, "k2", "b");
    add_echo(2, "k1", "c");
    add_echo(3, "k3", "d");
    add_echo(4, "k2", "e");
    loop_run();
    const char *want[] = {"a", "b", "c", "d", "e"};
    long long n[] = {2, 2, 2, 1, 2};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_string_equal(got[i].v, want[i]);
        assert_int_equal(got[i].keys, 1); /* a statement holds one key's callers */
        assert_int_equal(got[i].n, n[i]);
    }
}

static void test_shared_slot_inflight(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_INFLIGHT, 1, 1, 1); /* groups of one: each goes when it can */
    expected = 4;
    add_echo(0, "k1", "a"); /* k1's statement in flight */
    add_echo(1, "k2", "b"); /* k2 shares the slot, yet goes at once */
    assert_int_equal(db_coalesce_inflight(co), 2);
    add_echo(2, "k1", "c"); /* waits for k1's statement */
    add_echo(3, "k2", "d");
    assert_int_equal(db_coalesce_inflight(co), 2);
    assert_int_equal(db_coalesce_waiting(co), 2);
    loop_run();
    for (int i = 0; i < 4; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_int_equal(got[i].keys, 1);
    }
    assert_string_equal(got[2].v, "c");
    assert_string_equal(got[3].v, "d");
}

/* ---- the loop turn ---- */

static int turn_step;

static void on_turn_row(db_result_t *r, int row, void *data)
{
    on_row(r, row, data);
    got_t *g = data;
    if (g == &got[2] && turn_step == 0) {
        /* A later turn: a new group. */
        turn_step = 1;
        expected = 5;
        for (int i = 3; i < 5; i++) {
            const char *params[] = {"", i == 3 ? "x" : "y"};
            db_coalesce_add(co, "", params, on_turn_row, &got[i]);
        }
        assert_int_equal(db_coalesce_inflight(co), 0);
    }
}

static void test_turn_flush(void **state)
{
    (void)state;
    reset();
    turn_step = 0;
    loop_start();
    co = echo_new(DB_COALESCE_TURN, 1, 4, 0);
    expected = 99;
    for (int i = 0; i < 3; i++) {
        const char *params[] = {"", "t"};
        db_coalesce_add(co, "", params, on_turn_row, &got[i]);
    }
    assert_int_equal(db_coalesce_inflight(co), 0);
    loop_run();
    for (int i = 0; i < 5; i++)
        assert_int_equal(got[i].calls, 1);
    assert_int_equal(got[0].n, 3);
    assert_int_equal(got[3].n, 2);
    assert_string_equal(got[4].v, "y");
}

static void test_turn_full_group(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_TURN, 1, 2, 0);
    expected = 3;
    add_echo(0, "", "a");
    assert_int_equal(db_coalesce_inflight(co), 0);
    add_echo(1, "", "b"); /* the group is full: sent at once */
    assert_int_equal(db_coalesce_inflight(co), 1);
    add_echo(2, "", "c");
    loop_run();
    assert_int_equal(got[0].n, 2);
    assert_int_equal(got[1].n, 2);
    assert_int_equal(got[2].n, 1);
}

/* A caller added outside the I/O phase (here a timer, with the pool's connections up and
 * idle) goes at the end of that turn: without the idle handle the loop waited in poll first,
 * until the next event (the pool's janitor, every 500 ms). */
static uv_timer_t later;
static uint64_t added_at, answered_at;

static void on_timed_row(db_result_t *r, int row, void *data)
{
    answered_at = uv_hrtime();
    uv_close((uv_handle_t *)&later, NULL); /* not before: a closing handle ends the wait too */
    on_row(r, row, data);
}

static void on_later(uv_timer_t *t)
{
    (void)t;
    added_at = uv_hrtime();
    const char *params[] = {"", "a"};
    db_coalesce_add(co, "", params, on_timed_row, &got[0]);
}

static void test_add_from_a_timer_does_not_wait_for_an_event(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_TURN, 1, 16, 0);
    expected = 1;
    uv_timer_init(&loop, &later);
    uv_timer_start(&later, on_later, 700, 0); /* the connections are up by then */
    loop_run();
    assert_int_equal(got[0].calls, 1);
    assert_true(got[0].ok);
    assert_true(answered_at - added_at < 150 * 1000000ULL);
}

/* ---- in flight per key ---- */

static void test_inflight_limit(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_INFLIGHT, 1, 3, 0);
    expected = 5;
    const char *v[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++) {
        add_echo(i, "k", v[i]);
        /* The turn's callers wait for its end, a full group excepted; never more than one. */
        assert_int_equal(db_coalesce_inflight(co), i < 2 ? 0 : 1);
    }
    assert_int_equal(db_coalesce_waiting(co), 2);
    loop_run();
    /* The full group of three at once, then the two that waited for it. */
    long long n[] = {3, 3, 3, 2, 2};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_string_equal(got[i].v, v[i]);
        assert_int_equal(got[i].n, n[i]);
        assert_int_equal(got[i].seq, i);
    }
}

/* Two statements of a key sent in one turn ahead of the queue (opts.first, as chat inserts):
 * the full group at once, the rest at the end of the turn. On a pool of one connection, not up
 * yet, both wait for it; the second, queued ahead of the first, ran first and its callers were
 * answered (and, for chat posts, committed) before the callers who came before them. */
static void test_first_statements_keep_the_callers_order(void **state)
{
    (void)state;
    reset();
    loop_start_pool(1);
    co = db_coalesce_new(&(db_coalesce_opts_t){.sql = SQL_ECHO,
                                               .nparams = 2,
                                               .ord_col = ECHO_ORD,
                                               .mode = DB_COALESCE_INFLIGHT,
                                               .inflight_max = 2,
                                               .batch_max = 3,
                                               .first = true});
    expected = 5;
    const char *v[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        add_echo(i, "k", v[i]);
    loop_run();
    long long n[] = {3, 3, 3, 2, 2};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_int_equal(got[i].n, n[i]);
        assert_int_equal(got[i].seq, i);
    }
}

/* The callers of one turn go in one statement even with slots free: sending the first at once
 * left it alone in a statement and the next ones to the next, so that under load most
 * statements carried one caller. The same holds for the callers added while a statement's
 * callbacks run (what the callers of a coalesced read do next). */
static void on_inflight_row(db_result_t *r, int row, void *data)
{
    on_row(r, row, data);
    if ((got_t *)data == &got[0]) {
        add_echo(3, "k", "d");
        add_echo(4, "k", "e");
        assert_int_equal(db_coalesce_inflight(co), 0); /* not d alone */
    }
}

static void test_inflight_turn_group(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_INFLIGHT, 2, 16, 0);
    expected = 5;
    for (int i = 0; i < 3; i++) {
        const char *params[] = {"k", i == 0 ? "a" : i == 1 ? "b" : "c"};
        db_coalesce_add(co, "k", params, on_inflight_row, &got[i]);
    }
    assert_int_equal(db_coalesce_inflight(co), 0); /* not a alone */
    loop_run();
    long long n[] = {3, 3, 3, 2, 2};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_int_equal(got[i].n, n[i]);
    }
    assert_string_equal(got[4].v, "e");
}

/* ---- shutdown ---- */

/* db_shutdown answers every caller before it returns: it fails the statement in flight, and
 * the caller that waited for it must go then (and fail at once), not at the end of a loop turn
 * that never comes: main.c closes every handle right after db_shutdown, the coalescer's check
 * among them. */
static void test_shutdown_with_callers_waiting(void **state)
{
    (void)state;
    reset();
    loop_start();
    co = echo_new(DB_COALESCE_INFLIGHT, 1, 1, 0);
    expected = 99;
    add_echo(0, "k", "a"); /* a full group of one: in flight at once */
    add_echo(1, "k", "b"); /* waits for it */
    assert_int_equal(db_coalesce_inflight(co), 1);
    assert_int_equal(db_coalesce_waiting(co), 1);
    db_shutdown();
    for (int i = 0; i < 2; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_false(got[i].ok);
    }
    assert_int_equal(db_coalesce_waiting(co), 0);
    assert_int_equal(db_coalesce_inflight(co), 0);
    on_finish(&finisher);
    loop_run();
}

/* ---- callers that no longer want an answer ---- */

static bool gone_flag[MAXC];

static bool is_gone(void *data)
{
    return gone_flag[(got_t *)data - got];
}

static void test_gone(void **state)
{
    (void)state;
    reset();
    memset(gone_flag, 0, sizeof(gone_flag));
    loop_start();
    co = db_coalesce_new(&(db_coalesce_opts_t){.sql = SQL_ECHO,
                                               .nparams = 2,
                                               .ord_col = ECHO_ORD,
                                               .mode = DB_COALESCE_TURN,
                                               .batch_max = 8,
                                               .gone = is_gone});
    expected = 3;
    add_echo(0, "", "a");
    add_echo(1, "", "b");
    add_echo(2, "", "c");
    gone_flag[1] = true;
    loop_run();
    assert_true(got[1].unsent);
    assert_int_equal(got[0].n, 2); /* left out of the statement */
    assert_string_equal(got[2].v, "c");
}

/* A caller that leaves while its group's retries run is skipped when its turn comes. */
static void on_retry_row(db_result_t *r, int row, void *data)
{
    on_row(r, row, data);
    if ((got_t *)data == &got[0]) gone_flag[2] = true; /* the third leaves meanwhile */
}

static void test_retry_alone_skips_the_gone(void **state)
{
    (void)state;
    reset();
    memset(gone_flag, 0, sizeof(gone_flag));
    loop_start();
    co = db_coalesce_new(&(db_coalesce_opts_t){.sql = SQL_DIV,
                                               .nparams = 1,
                                               .ord_col = 1,
                                               .mode = DB_COALESCE_TURN,
                                               .batch_max = 8,
                                               .retry_alone = true,
                                               .gone = is_gone});
    expected = 4;
    const char *v[] = {"1", "0", "2", "5"};
    for (int i = 0; i < 4; i++) {
        const char *params[] = {v[i]};
        db_coalesce_add(co, "", params, on_retry_row, &got[i]);
    }
    loop_run();
    for (int i = 0; i < 4; i++) {
        assert_int_equal(got[i].calls, 1);
        assert_int_equal(got[i].seq, i);
    }
    assert_true(got[0].ok);
    assert_false(got[1].ok);
    assert_true(got[2].unsent); /* not sent again */
    assert_true(got[3].ok);
    assert_string_equal(got[3].v, "2");
}

int main(void)
{
    db_url = getenv("COACHD_TEST_DATABASE_URL");
    if (!db_url || !*db_url) {
        fprintf(stderr, "COACHD_TEST_DATABASE_URL is not set: the db suite needs a live server\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_ordering, teardown),
        cmocka_unit_test_teardown(test_batch_failure, teardown),
        cmocka_unit_test_teardown(test_batch_failure_retry_alone, teardown),
        cmocka_unit_test_teardown(test_retry_alone_keeps_order_ahead_of_the_queue, teardown),
        cmocka_unit_test_teardown(test_shared_slot_turn, teardown),
        cmocka_unit_test_teardown(test_shared_slot_inflight, teardown),
        cmocka_unit_test_teardown(test_turn_flush, teardown),
        cmocka_unit_test_teardown(test_turn_full_group, teardown),
        cmocka_unit_test_teardown(test_add_from_a_timer_does_not_wait_for_an_event, teardown),
        cmocka_unit_test_teardown(test_inflight_limit, teardown),
        cmocka_unit_test_teardown(test_inflight_turn_group, teardown),
        cmocka_unit_test_teardown(test_first_statements_keep_the_callers_order, teardown),
        cmocka_unit_test_teardown(test_gone, teardown),
        cmocka_unit_test_teardown(test_retry_alone_skips_the_gone, teardown),
        cmocka_unit_test_teardown(test_shutdown_with_callers_waiting, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
