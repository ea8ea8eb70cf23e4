/*
 * Async PostgreSQL pool on the libuv loop (API in db/db.h).
 *
 * Each connection is driven by one uv_poll_t on its libpq socket and sits in exactly one list,
 * chosen by its state (CONNECTING, IDLE, BUSY, BROKEN); conn_set_state() is the only thing that
 * moves it. Connections run in libpq pipeline mode, one job (one Sync) at a time: a statement
 * seen for the first time on a connection is sent as Parse + Bind/Execute + Sync, so preparing
 * costs no extra round trip, and later runs only Bind/Execute.
 *
 * Jobs wait in a bounded FIFO when every connection is busy; the janitor fails those that
 * waited too long. Finished jobs go to a "done" list drained from a uv_idle handle, so user
 * callbacks never run inside the call that queued the query, and never from the middle of the
 * connection state machine.
 *
 * Ownership: the pool owns jobs until their callback returns (the PGresult is cleared right
 * after), connections until db_shutdown, and a transaction until the callback of its
 * commit/rollback (or of a failed BEGIN) has run. libuv handles are freed only in their close
 * callbacks: poll handles are heap objects of their own (re-created when the socket changes),
 * and a connection is freed in the close callback of its embedded timer.
 */
#include "db/db.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"

#define DB_QUEUE_MAX 10000
#define DB_QUEUE_WAIT_MS 10000
#define DB_CONNECT_TIMEOUT_MS 10000
#define DB_BACKOFF_MIN_MS 100
#define DB_BACKOFF_MAX_MS 5000
#define DB_JANITOR_MS 500
#define DB_MAX_PARAMS 65535
#define DB_SESSION_OPTIONS "-c statement_timeout=15s"

enum db_conn_state {
    DB_CONN_STATE_CONNECTING, /* pool.lists[CONNECTING]: PQconnectPoll in progress */
    DB_CONN_STATE_IDLE,       /* pool.lists[IDLE]: connected, no job, no transaction */
    DB_CONN_STATE_BUSY,       /* pool.lists[BUSY]: running a job or held by a transaction */
    DB_CONN_STATE_BROKEN,     /* pool.lists[BROKEN]: no PGconn, reconnect timer armed */
    DB_CONN_STATE_COUNT,
    DB_CONN_STATE_NONE = -1, /* in no list: being created or closed */
};

enum job_kind {
    JOB_QUERY,    /* user statement (autocommit or inside a transaction) */
    JOB_BEGIN,    /* db_tx_begin */
    JOB_COMMIT,   /* db_tx_commit: COMMIT, or ROLLBACK when the tx already failed */
    JOB_ROLLBACK, /* db_tx_rollback (no callback) */
    JOB_RESET,    /* internal ROLLBACK of a connection returned inside a transaction */
};

enum pool_state { POOL_OFF, POOL_RUNNING, POOL_STOPPING };

typedef struct db_conn db_conn_t;
typedef struct db_job db_job_t;

struct db_job {
    db_job_t *next; /* FIFO link: pool queue, tx pending list or done list */
    int kind;
    const char *sql;
    int nparams;
    const char **values; /* copies, stored right after the struct */
    db_cb cb;
    db_tx_cb tx_cb;
    void *data;
    db_tx_t *tx;
    uint64_t queued_at;
    bool awaiting_prepare; /* the next result answers this job's Parse */
    bool rolled_back;      /* a COMMIT sent as ROLLBACK because the tx had failed */
    bool first;            /* queued by db_query_first */
    /* outcome */
    PGresult *res;
    bool conn_lost;
    bool failed;          /* failed without (or despite) a result; see error/sqlstate */
    const char *sqlstate; /* static override */
    char *error;          /* owned message override */
};

struct db_tx {
    db_conn_t *conn;                 /* held connection; NULL before BEGIN runs or once lost */
    db_job_t *pending, *pending_end; /* statements waiting for the connection, in order */
    bool failed;                     /* a statement failed: the server side is aborted */
    bool lost;                       /* the connection went away: everything fails conn_lost */
};

typedef struct stmt {
    const char *sql; /* key: the caller's static string, compared by address */
    int id;          /* statement "s<id>" on this connection; 0 when not prepared */
} stmt_t;

struct db_conn {
    db_conn_t *prev, *next; /* state list links */
    int state;
    PGconn *pg;
    uv_poll_t *poll; /* NULL when not watching */
    int poll_fd;
    int poll_events;
    uv_timer_t timer; /* reconnect backoff, connect timeout */
    int backoff_ms;
    int failures;  /* connect failures in a row, to keep logs quiet */
    db_job_t *job; /* the job on the wire */
    db_tx_t *tx;   /* transaction holding this connection */
    stmt_t *stmts; /* open addressing table, cap_stmts is a power of two */
    int nstmts, cap_stmts, next_stmt;
};

typedef struct conn_list {
    db_conn_t *head, *tail;
    int n;
} conn_list_t;

static struct {
    int state;
    uv_loop_t *loop;
    const char **keys, **vals; /* connection parameters, NULL-terminated */
    PQconninfoOption *parsed;
    char *options;
    conn_list_t lists[DB_CONN_STATE_COUNT];
    db_job_t *queue, *queue_end;
    int queued;
    db_job_t *done, *done_end;
    uv_idle_t idle;
    uv_timer_t janitor;
} pool;

typedef struct late_job {
    uv_timer_t timer;
    db_job_t *job;
} late_job_t;

static void list_push(conn_list_t *l, db_conn_t *c);
static void list_remove(conn_list_t *l, db_conn_t *c);
static void conn_set_state(db_conn_t *c, int state);
static void conn_start(db_conn_t *c);
static void conn_connect_step(db_conn_t *c);
static void conn_ready(db_conn_t *c);
static int conn_watch(db_conn_t *c, int events, bool fresh);
static void conn_unwatch(db_conn_t *c);
static int conn_flush(db_conn_t *c);
static void conn_drain(db_conn_t *c);
static void conn_run(db_conn_t *c, db_job_t *job);
static void conn_send(db_conn_t *c, db_job_t *job);
static void conn_job_done(db_conn_t *c);
static void conn_release(db_conn_t *c);
static void conn_drop(db_conn_t *c, const char *why);
static void conn_broken(db_conn_t *c, const char *why);
static void conn_close(db_conn_t *c);
static void stmts_reset(db_conn_t *c);
static stmt_t *stmt_slot(db_conn_t *c, const char *sql);
static void tx_run_next(db_tx_t *tx);
static void tx_lose(db_tx_t *tx);
static db_job_t *job_new(int kind, const char *sql, int nparams, const char *const *values);
static void job_fail(db_job_t *job, bool conn_lost, const char *sqlstate, const char *msg);
static void job_complete(db_job_t *job);
static void job_deliver(db_job_t *job);
static void job_free(db_job_t *job);
static void job_keep_result(db_job_t *job, PGresult *res);
static void queue_push(db_job_t *job);
static void dispatch(void);
static void drain_done(bool all);
static char *dup_trim(const char *s);
static void on_poll(uv_poll_t *h, int status, int events);
static void on_poll_close(uv_handle_t *h);
static void on_conn_timer(uv_timer_t *t);
static void on_conn_close(uv_handle_t *h);
static void on_idle(uv_idle_t *h);
static void on_janitor(uv_timer_t *t);
static void on_late(uv_timer_t *t);
static void on_late_close(uv_handle_t *h);
static void on_notice(void *arg, const char *msg);

/* ---- lists and state ---- */

static void list_push(conn_list_t *l, db_conn_t *c)
{
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    l->n++;
}

static void list_remove(conn_list_t *l, db_conn_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->prev = c->next = NULL;
    l->n--;
}

/* The one place a connection changes state, so list membership always matches it. */
static void conn_set_state(db_conn_t *c, int state)
{
    if (c->state == state) return;
    if (c->state != DB_CONN_STATE_NONE) list_remove(&pool.lists[c->state], c);
    c->state = state;
    if (state != DB_CONN_STATE_NONE) list_push(&pool.lists[state], c);
}

/* ---- connecting ---- */

static void conn_start(db_conn_t *c)
{
    stmts_reset(c);
    c->pg = PQconnectStartParams(pool.keys, pool.vals, 0);
    if (!c->pg || PQstatus(c->pg) == CONNECTION_BAD) {
        conn_broken(c, NULL);
        return;
    }
    conn_set_state(c, DB_CONN_STATE_CONNECTING);
    /* PQconnectPoll has no timeout of its own when driven asynchronously. */
    uv_timer_start(&c->timer, on_conn_timer, DB_CONNECT_TIMEOUT_MS, 0);
    /* Before the first PQconnectPoll, libpq wants us to wait for writability. */
    conn_watch(c, UV_WRITABLE, true);
}

static void conn_connect_step(db_conn_t *c)
{
    /* A fresh poll handle on every step: libpq may close the socket and open another one with
     * the same number (next address, SSL retry), which the old epoll registration misses. */
    switch (PQconnectPoll(c->pg)) {
    case PGRES_POLLING_READING:
        conn_watch(c, UV_READABLE, true);
        break;
    case PGRES_POLLING_WRITING:
        conn_watch(c, UV_WRITABLE, true);
        break;
    case PGRES_POLLING_OK:
        conn_ready(c);
        break;
    default:
        conn_broken(c, NULL);
        break;
    }
}

static void conn_ready(db_conn_t *c)
{
    if (PQsetnonblocking(c->pg, 1) != 0 || PQenterPipelineMode(c->pg) != 1) {
        conn_broken(c, NULL);
        return;
    }
    PQsetNoticeProcessor(c->pg, on_notice, NULL);
    uv_timer_stop(&c->timer);
    if (c->failures > 0) log_info("db: connection re-established");
    c->failures = 0;
    c->backoff_ms = DB_BACKOFF_MIN_MS;
    if (conn_watch(c, UV_READABLE, false) < 0) return;
    conn_release(c);
}

/* ---- socket watching ---- */

/* Watches the current libpq socket for events. Returns -1 when the connection broke. */
static int conn_watch(db_conn_t *c, int events, bool fresh)
{
    int fd = PQsocket(c->pg);
    if (fd < 0) {
        conn_broken(c, "connection has no socket");
        return -1;
    }
    if (c->poll && (fresh || fd != c->poll_fd)) conn_unwatch(c);
    if (!c->poll) {
        c->poll = xmalloc(sizeof *c->poll);
        if (uv_poll_init(pool.loop, c->poll, fd) != 0) {
            free(c->poll);
            c->poll = NULL;
            conn_broken(c, "cannot watch socket");
            return -1;
        }
        c->poll->data = c;
        c->poll_fd = fd;
        c->poll_events = 0;
    }
    if (events != c->poll_events) {
        uv_poll_start(c->poll, events, on_poll);
        c->poll_events = events;
    }
    return 0;
}

/* Stops and closes the poll handle; must run before PQfinish closes the socket. */
static void conn_unwatch(db_conn_t *c)
{
    if (!c->poll) return;
    uv_poll_stop(c->poll);
    c->poll->data = NULL;
    uv_close((uv_handle_t *)c->poll, on_poll_close);
    c->poll = NULL;
    c->poll_events = 0;
}

static void on_poll_close(uv_handle_t *h)
{
    free(h);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    db_conn_t *c = h->data;
    if (!c) return;
    if (status < 0) {
        /* A socket error (POLLERR): let libpq read it, so the log says what happened. */
        if (c->state == DB_CONN_STATE_CONNECTING)
            PQconnectPoll(c->pg);
        else
            PQconsumeInput(c->pg);
        conn_broken(c, PQstatus(c->pg) == CONNECTION_BAD ? NULL : "socket error");
        return;
    }
    if (c->state == DB_CONN_STATE_CONNECTING) {
        conn_connect_step(c);
        return;
    }
    if (events & UV_READABLE) {
        if (!PQconsumeInput(c->pg)) {
            conn_broken(c, NULL);
            return;
        }
        conn_drain(c);
    }
    /* Pending output is retried on any wake-up, as libpq asks for in non-blocking mode. */
    if (c->pg && c->state != DB_CONN_STATE_CONNECTING) conn_flush(c);
}

/* Sends what libpq has buffered; watches writability while some is left. */
static int conn_flush(db_conn_t *c)
{
    int r = PQflush(c->pg);
    if (r < 0) {
        conn_broken(c, NULL);
        return -1;
    }
    return conn_watch(c, r ? UV_READABLE | UV_WRITABLE : UV_READABLE, false);
}

/* ---- results ---- */

/* Keeps the result to report: the first error, else the last result (the Execute's). */
static void job_keep_result(db_job_t *job, PGresult *res)
{
    if (job->res) {
        ExecStatusType kept = PQresultStatus(job->res);
        if (kept != PGRES_COMMAND_OK && kept != PGRES_TUPLES_OK) {
            PQclear(res);
            return;
        }
        PQclear(job->res);
    }
    job->res = res;
}

/* Reads every result libpq has complete: results until NULL per command, then the Sync. */
static void conn_drain(db_conn_t *c)
{
    PGnotify *n;
    int nulls = 0;
    while ((n = PQnotifies(c->pg)))
        PQfreemem(n);
    while (c->pg && c->state != DB_CONN_STATE_CONNECTING && !PQisBusy(c->pg)) {
        PGresult *res = PQgetResult(c->pg);
        if (!res) {
            /* One NULL ends a command's results; a second means nothing more is ready. */
            if (++nulls >= 2) break;
            continue;
        }
        nulls = 0;
        db_job_t *job = c->job;
        ExecStatusType st = PQresultStatus(res);
        if (!job) {
            PQclear(res);
            continue;
        }
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            conn_job_done(c);
            continue;
        }
        if (job->awaiting_prepare) {
            job->awaiting_prepare = false;
            if (st == PGRES_COMMAND_OK) {
                PQclear(res);
                continue;
            }
            /* Parse failed: the name was never created, prepare again next time. */
            stmt_slot(c, job->sql)->id = 0;
        }
        if (st == PGRES_PIPELINE_ABORTED) {
            PQclear(res);
            continue;
        }
        job_keep_result(job, res);
    }
    if (c->pg && c->state != DB_CONN_STATE_CONNECTING && PQstatus(c->pg) == CONNECTION_BAD)
        conn_broken(c, NULL);
}

static bool job_result_ok(const db_job_t *job)
{
    if (job->conn_lost || job->failed || !job->res) return false;
    ExecStatusType st = PQresultStatus(job->res);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* The Sync of the job on the wire arrived: all its results are in. */
static void conn_job_done(db_conn_t *c)
{
    db_job_t *job = c->job;
    db_tx_t *tx = job->tx;
    c->job = NULL;

    if (job->kind == JOB_RESET) {
        bool ok = job_result_ok(job);
        job_free(job);
        if (!ok) {
            conn_broken(c, "rollback before reuse failed");
            return;
        }
        conn_release(c);
        return;
    }
    if (job->kind == JOB_COMMIT && job_result_ok(job)) {
        /* COMMIT of an aborted transaction succeeds with the tag ROLLBACK. */
        if (job->rolled_back || strcmp(PQcmdStatus(job->res), "ROLLBACK") == 0)
            job_fail(job, false, "25P02", "transaction rolled back after an earlier error");
    }
    bool ok = job_result_ok(job);
    if (!tx) {
        job_complete(job);
        conn_release(c);
        return;
    }
    if (!ok && job->kind == JOB_QUERY) tx->failed = true;
    if (job->kind == JOB_COMMIT || job->kind == JOB_ROLLBACK || (job->kind == JOB_BEGIN && !ok)) {
        tx->conn = NULL;
        c->tx = NULL;
        job_complete(job);
        conn_release(c);
        return;
    }
    job_complete(job);
    tx_run_next(tx);
}

/* A connection finished its work: roll back a leftover transaction, else make it idle. */
static void conn_release(db_conn_t *c)
{
    switch (PQtransactionStatus(c->pg)) {
    case PQTRANS_IDLE:
        conn_set_state(c, DB_CONN_STATE_IDLE);
        dispatch();
        break;
    case PQTRANS_INTRANS:
    case PQTRANS_INERROR:
        conn_set_state(c, DB_CONN_STATE_BUSY);
        conn_send(c, job_new(JOB_RESET, NULL, 0, NULL));
        break;
    default:
        conn_broken(c, "connection in an unknown transaction state");
        break;
    }
}

/* ---- sending ---- */

static void conn_run(db_conn_t *c, db_job_t *job)
{
    conn_set_state(c, DB_CONN_STATE_BUSY);
    if (job->kind == JOB_BEGIN) {
        c->tx = job->tx;
        job->tx->conn = c;
    }
    conn_send(c, job);
}

static int send_plain(PGconn *pg, const char *sql)
{
    return PQsendQueryParams(pg, sql, 0, NULL, NULL, NULL, NULL, 0);
}

static void conn_send(db_conn_t *c, db_job_t *job)
{
    PGconn *pg = c->pg;
    char name[16];
    int ok = 0;

    c->job = job;
    switch (job->kind) {
    case JOB_QUERY: {
        stmt_t *s = stmt_slot(c, job->sql);
        ok = 1;
        if (s->id == 0) {
            s->id = ++c->next_stmt;
            snprintf(name, sizeof name, "s%d", s->id);
            ok = PQsendPrepare(pg, name, job->sql, job->nparams, NULL);
            job->awaiting_prepare = true;
        } else {
            snprintf(name, sizeof name, "s%d", s->id);
        }
        ok = ok && PQsendQueryPrepared(pg, name, job->nparams, job->values, NULL, NULL, 0);
        break;
    }
    case JOB_BEGIN:
        ok = send_plain(pg, "BEGIN");
        break;
    case JOB_COMMIT:
        ok = send_plain(pg, job->rolled_back ? "ROLLBACK" : "COMMIT");
        break;
    case JOB_ROLLBACK:
    case JOB_RESET:
        ok = send_plain(pg, "ROLLBACK");
        break;
    default:
        abort();
    }
    /* Any failure leaves the pipeline in an unknown state: start over on a new connection. */
    if (!ok || !PQpipelineSync(pg)) {
        conn_broken(c, NULL);
        return;
    }
    conn_flush(c);
}

/* Hands queued jobs to idle connections. Never runs callbacks. */
static void dispatch(void)
{
    while (pool.queue && pool.lists[DB_CONN_STATE_IDLE].head) {
        db_job_t *job = pool.queue;
        pool.queue = job->next;
        if (!pool.queue) pool.queue_end = NULL;
        pool.queued--;
        job->next = NULL;
        conn_run(pool.lists[DB_CONN_STATE_IDLE].head, job);
    }
}

/* Queues a job for the next free connection: at the end of the wait queue, or at its head
 * (first) for a statement that holds a row lock other requests wait on, so that it does not
 * wait behind everything queued meanwhile. */
static void queue_push_at(db_job_t *job, bool first)
{
    if (pool.state != POOL_RUNNING) {
        job_fail(job, true, NULL, "database pool is not running");
        job_complete(job);
        return;
    }
    if (pool.queued >= DB_QUEUE_MAX) {
        job_fail(job, true, NULL, "database queue is full");
        job_complete(job);
        return;
    }
    job->queued_at = uv_now(pool.loop);
    job->next = NULL;
    job->first = first;
    if (first && pool.queue) {
        /* Ahead of the others, behind those queued first before it: two statements of one
         * coalesced key sent together would otherwise run in reverse (db/coalesce.h). */
        db_job_t **link = &pool.queue;
        while (*link && (*link)->first)
            link = &(*link)->next;
        job->next = *link;
        *link = job;
        if (!job->next) pool.queue_end = job;
    } else if (pool.queue_end) {
        pool.queue_end->next = job;
        pool.queue_end = job;
    } else {
        pool.queue = pool.queue_end = job;
    }
    pool.queued++;
    dispatch();
}

static void queue_push(db_job_t *job)
{
    queue_push_at(job, false);
}

/* ---- transactions ---- */

/* Runs the transaction's next statements while its connection has nothing on the wire. */
static void tx_run_next(db_tx_t *tx)
{
    while (tx->pending && tx->conn && !tx->conn->job) {
        db_job_t *job = tx->pending;
        tx->pending = job->next;
        if (!tx->pending) tx->pending_end = NULL;
        job->next = NULL;
        if (tx->failed && job->kind == JOB_QUERY) {
            job_fail(job, false, "25P02", "transaction is aborted, statement not run");
            job_complete(job);
            continue;
        }
        if (tx->failed && job->kind == JOB_COMMIT) job->rolled_back = true;
        conn_send(tx->conn, job);
    }
}

/* The transaction's connection is gone: fail what waits for it. */
static void tx_lose(db_tx_t *tx)
{
    tx->lost = true;
    tx->conn = NULL;
    while (tx->pending) {
        db_job_t *job = tx->pending;
        tx->pending = job->next;
        job->next = NULL;
        job_fail(job, true, NULL, "database connection lost");
        job_complete(job);
    }
    tx->pending_end = NULL;
}

static void tx_push(db_tx_t *tx, db_job_t *job)
{
    job->tx = tx;
    if (tx->lost || pool.state != POOL_RUNNING) {
        job_fail(job, true, NULL, "database connection lost");
        job_complete(job);
        return;
    }
    job->next = NULL;
    if (tx->pending_end)
        tx->pending_end->next = job;
    else
        tx->pending = job;
    tx->pending_end = job;
    tx_run_next(tx);
}

/* ---- breaking and closing ---- */

/* Fails everything that depends on the connection and finishes the PGconn. */
static void conn_drop(db_conn_t *c, const char *why)
{
    char *msg = dup_trim(why ? why : c->pg ? PQerrorMessage(c->pg) : "connection lost");
    if (!*msg) {
        free(msg);
        msg = xstrdup("connection lost");
    }
    /* Log the first failure of a series; retries every few seconds would flood the log. */
    if (pool.state != POOL_RUNNING) {
        /* shutting down: nothing to report */
    } else if (c->state == DB_CONN_STATE_IDLE || c->state == DB_CONN_STATE_BUSY) {
        log_warn("db: connection lost: %s", msg);
        c->failures = 1;
    } else if (c->failures++ == 0) {
        log_warn("db: cannot connect: %s", msg);
    } else {
        log_debug("db: reconnect failed: %s", msg);
    }
    conn_unwatch(c);
    if (c->job) {
        db_job_t *job = c->job;
        c->job = NULL;
        if (job->kind == JOB_RESET) {
            job_free(job);
        } else {
            job_fail(job, true, NULL, msg);
            job_complete(job);
        }
    }
    if (c->tx) {
        db_tx_t *tx = c->tx;
        c->tx = NULL;
        tx_lose(tx);
    }
    if (c->pg) PQfinish(c->pg);
    c->pg = NULL;
    stmts_reset(c);
    free(msg);
}

/* The connection failed: drop it and reconnect with backoff. */
static uint64_t reconnects; /* connections lost and re-dialled, for /metrics */

static void conn_broken(db_conn_t *c, const char *why)
{
    reconnects++;
    conn_drop(c, why);
    conn_set_state(c, DB_CONN_STATE_BROKEN);
    uv_timer_start(&c->timer, on_conn_timer, (uint64_t)c->backoff_ms, 0);
    c->backoff_ms *= 2;
    if (c->backoff_ms > DB_BACKOFF_MAX_MS) c->backoff_ms = DB_BACKOFF_MAX_MS;
}

static void on_conn_timer(uv_timer_t *t)
{
    db_conn_t *c = container_of(t, db_conn_t, timer);
    if (c->state == DB_CONN_STATE_CONNECTING)
        conn_broken(c, "connect timeout");
    else if (c->state == DB_CONN_STATE_BROKEN)
        conn_start(c);
}

static void conn_close(db_conn_t *c)
{
    conn_drop(c, "database pool shutting down");
    conn_set_state(c, DB_CONN_STATE_NONE);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_conn_close);
}

static void on_conn_close(uv_handle_t *h)
{
    db_conn_t *c = container_of((uv_timer_t *)h, db_conn_t, timer);
    free(c->stmts);
    free(c);
}

/* ---- prepared statement table ---- */

static void stmts_reset(db_conn_t *c)
{
    if (c->stmts) memset(c->stmts, 0, sizeof(stmt_t) * (size_t)c->cap_stmts);
    c->nstmts = 0;
    c->next_stmt = 0;
}

static size_t stmt_hash(const char *sql, int cap)
{
    uint64_t h = (uint64_t)(uintptr_t)sql * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (size_t)(cap - 1);
}

/* Finds or adds the slot for sql (id 0 when added). */
static stmt_t *stmt_slot(db_conn_t *c, const char *sql)
{
    if ((c->nstmts + 1) * 2 > c->cap_stmts) {
        int old_cap = c->cap_stmts;
        stmt_t *old = c->stmts;
        c->cap_stmts = old_cap ? old_cap * 2 : 64;
        c->stmts = xcalloc((size_t)c->cap_stmts, sizeof(stmt_t));
        for (int i = 0; i < old_cap; i++) {
            if (!old[i].sql) continue;
            size_t j = stmt_hash(old[i].sql, c->cap_stmts);
            while (c->stmts[j].sql)
                j = (j + 1) & (size_t)(c->cap_stmts - 1);
            c->stmts[j] = old[i];
        }
        free(old);
    }
    size_t i = stmt_hash(sql, c->cap_stmts);
    while (c->stmts[i].sql && c->stmts[i].sql != sql)
        i = (i + 1) & (size_t)(c->cap_stmts - 1);
    if (!c->stmts[i].sql) {
        c->stmts[i].sql = sql;
        c->stmts[i].id = 0;
        c->nstmts++;
    }
    return &c->stmts[i];
}

/* ---- jobs ---- */

static db_job_t *job_new(int kind, const char *sql, int nparams, const char *const *values)
{
    size_t size = sizeof(db_job_t) + sizeof(char *) * (size_t)nparams;
    for (int i = 0; i < nparams; i++)
        if (values[i]) size += strlen(values[i]) + 1;
    db_job_t *job = xcalloc(1, size);
    job->kind = kind;
    job->sql = sql;
    job->nparams = nparams;
    job->values = (const char **)(job + 1);
    char *p = (char *)(job->values + nparams);
    for (int i = 0; i < nparams; i++) {
        if (!values[i]) continue;
        size_t len = strlen(values[i]) + 1;
        memcpy(p, values[i], len);
        job->values[i] = p;
        p += len;
    }
    return job;
}

static void job_fail(db_job_t *job, bool conn_lost, const char *sqlstate, const char *msg)
{
    job->failed = true;
    job->conn_lost = job->conn_lost || conn_lost;
    if (sqlstate) job->sqlstate = sqlstate;
    if (msg) {
        free(job->error);
        job->error = dup_trim(msg);
    }
}

static void job_free(db_job_t *job)
{
    if (job->res) PQclear(job->res);
    free(job->error);
    free(job);
}

/* Queues the job's callback; it runs from the loop, never from the caller's stack. */
static void job_complete(db_job_t *job)
{
    job->next = NULL;
    if (pool.state == POOL_OFF) {
        /* After shutdown: one-shot timer, so the callback still fires exactly once. */
        if (!pool.loop) {
            /* No loop to defer on: drop it, freeing a transaction it would have ended. */
            log_error("db: query dropped, database pool never started");
            if (job->tx && job->kind != JOB_QUERY) free(job->tx);
            job_free(job);
            return;
        }
        late_job_t *l = xcalloc(1, sizeof *l);
        l->job = job;
        uv_timer_init(pool.loop, &l->timer);
        uv_timer_start(&l->timer, on_late, 0, 0);
        return;
    }
    if (pool.done_end)
        pool.done_end->next = job;
    else
        pool.done = job;
    pool.done_end = job;
    if (pool.state == POOL_RUNNING && !uv_is_active((uv_handle_t *)&pool.idle))
        uv_idle_start(&pool.idle, on_idle);
}

static void job_deliver(db_job_t *job)
{
    db_result_t r = {0};
    r.pg = job->res;
    r.conn_lost = job->conn_lost;
    r.ok = job_result_ok(job);
    r.sqlstate = job->sqlstate;
    if (!r.sqlstate && job->res) r.sqlstate = PQresultErrorField(job->res, PG_DIAG_SQLSTATE);
    if (job->res && !r.ok) r.constraint = PQresultErrorField(job->res, PG_DIAG_CONSTRAINT_NAME);
    r.error = job->error;
    if (!r.error && job->res && !r.ok) {
        r.error = PQresultErrorField(job->res, PG_DIAG_MESSAGE_PRIMARY);
        if (!r.error || !*r.error) r.error = PQresultErrorMessage(job->res);
    }
    if (!r.ok && (!r.error || !*r.error)) r.error = "query failed";

    db_tx_t *tx = job->tx;
    bool ends_tx = tx && (job->kind == JOB_COMMIT || job->kind == JOB_ROLLBACK ||
                          (job->kind == JOB_BEGIN && !r.ok));
    switch (job->kind) {
    case JOB_QUERY:
    case JOB_COMMIT:
        if (job->cb) job->cb(&r, job->data);
        if (!r.pg) job->res = NULL; /* taken by the callback (db_result_take) */
        break;
    case JOB_BEGIN:
        if (job->tx_cb) job->tx_cb(r.ok ? tx : NULL, &r, job->data);
        break;
    default:
        break;
    }
    if (ends_tx) free(tx);
    job_free(job);
}

/* Runs queued callbacks: a snapshot while running (callbacks that queue more wait for the next
 * turn), everything while stopping. */
static void drain_done(bool all)
{
    do {
        db_job_t *job = pool.done;
        pool.done = pool.done_end = NULL;
        while (job) {
            db_job_t *next = job->next;
            job_deliver(job);
            job = next;
        }
    } while (all && pool.done);
}

static void on_idle(uv_idle_t *h)
{
    drain_done(false);
    if (!pool.done) uv_idle_stop(h);
}

static void on_late(uv_timer_t *t)
{
    late_job_t *l = container_of(t, late_job_t, timer);
    db_job_t *job = l->job;
    l->job = NULL;
    uv_close((uv_handle_t *)t, on_late_close);
    job_deliver(job);
}

static void on_late_close(uv_handle_t *h)
{
    free(container_of((uv_timer_t *)h, late_job_t, timer));
}

/* Fails queued jobs that waited too long for a connection (the route answers 503). The whole
 * queue is looked at: a job queued first (db_query_first) sits before older ones. */
static void on_janitor(uv_timer_t *t)
{
    uint64_t now = uv_now(t->loop);
    db_job_t **link = &pool.queue, *last = NULL;
    while (*link) {
        db_job_t *job = *link;
        if (now - job->queued_at < DB_QUEUE_WAIT_MS) {
            last = job;
            link = &job->next;
            continue;
        }
        *link = job->next;
        pool.queued--;
        job->next = NULL;
        job_fail(job, true, NULL, "no database connection available in time");
        job_complete(job);
    }
    pool.queue_end = last;
}

static void on_notice(void *arg, const char *msg)
{
    (void)arg;
    char *m = dup_trim(msg);
    log_debug("db: %s", m);
    free(m);
}

/* Copies a libpq message as one log-friendly line: inner newlines and tabs become spaces. */
static char *dup_trim(const char *s)
{
    char *d = xstrdup(s);
    size_t n = 0;
    for (const char *p = d; *p; p++) {
        char ch = (*p == '\n' || *p == '\t' || *p == '\r') ? ' ' : *p;
        if (ch == ' ' && (n == 0 || d[n - 1] == ' ')) continue;
        d[n++] = ch;
    }
    while (n > 0 && d[n - 1] == ' ')
        n--;
    d[n] = '\0';
    return d;
}

/* ---- public API ---- */

int db_init(uv_loop_t *loop, const char *conninfo, int pool_size)
{
    char *err = NULL;
    int rc = -1;
    if (pool.state != POOL_OFF) {
        log_error("db: pool already running");
        goto done;
    }
    pool.parsed = PQconninfoParse(conninfo ? conninfo : "", &err);
    if (!pool.parsed) {
        log_error("db: invalid DATABASE_URL: %s", err ? err : "out of memory");
        goto done;
    }
    /* Keep the caller's parameters, adding ours to "options". */
    size_t n = 0;
    const char *user_options = NULL;
    for (PQconninfoOption *o = pool.parsed; o->keyword; o++) {
        if (!o->val) continue;
        if (strcmp(o->keyword, "options") == 0)
            user_options = o->val;
        else
            n++;
    }
    pool.keys = xcalloc(n + 2, sizeof(char *));
    pool.vals = xcalloc(n + 2, sizeof(char *));
    size_t i = 0;
    for (PQconninfoOption *o = pool.parsed; o->keyword; o++) {
        if (!o->val || strcmp(o->keyword, "options") == 0) continue;
        pool.keys[i] = o->keyword;
        pool.vals[i++] = o->val;
    }
    size_t olen = (user_options ? strlen(user_options) + 1 : 0) + sizeof DB_SESSION_OPTIONS;
    pool.options = xmalloc(olen);
    snprintf(pool.options, olen, "%s%s%s", user_options ? user_options : "",
             user_options ? " " : "", DB_SESSION_OPTIONS);
    pool.keys[i] = "options";
    pool.vals[i++] = pool.options;

    pool.loop = loop;
    pool.state = POOL_RUNNING;
    uv_idle_init(loop, &pool.idle);
    uv_timer_init(loop, &pool.janitor);
    uv_timer_start(&pool.janitor, on_janitor, DB_JANITOR_MS, DB_JANITOR_MS);
    uv_unref((uv_handle_t *)&pool.janitor);
    if (pool_size < 1) pool_size = 1;
    for (int k = 0; k < pool_size; k++) {
        db_conn_t *c = xcalloc(1, sizeof *c);
        c->state = DB_CONN_STATE_NONE;
        c->backoff_ms = DB_BACKOFF_MIN_MS;
        uv_timer_init(loop, &c->timer);
        conn_start(c);
    }
    rc = 0;
done:
    if (err) PQfreemem(err);
    return rc;
}

uv_loop_t *db_loop(void)
{
    return pool.loop;
}

void db_shutdown(void)
{
    if (pool.state != POOL_RUNNING) return;
    pool.state = POOL_STOPPING;
    for (int s = 0; s < DB_CONN_STATE_COUNT; s++)
        while (pool.lists[s].head)
            conn_close(pool.lists[s].head);
    while (pool.queue) {
        db_job_t *job = pool.queue;
        pool.queue = job->next;
        job_fail(job, true, NULL, "database pool shutting down");
        job_complete(job);
    }
    pool.queue_end = NULL;
    pool.queued = 0;
    drain_done(true);
    uv_idle_stop(&pool.idle);
    uv_close((uv_handle_t *)&pool.idle, NULL);
    uv_timer_stop(&pool.janitor);
    uv_close((uv_handle_t *)&pool.janitor, NULL);
    free(pool.keys);
    free(pool.vals);
    free(pool.options);
    PQconninfoFree(pool.parsed);
    pool.keys = pool.vals = NULL;
    pool.options = NULL;
    pool.parsed = NULL;
    pool.state = POOL_OFF;
}

void db_pool_stats(db_pool_stats_t *out)
{
    out->busy = pool.lists[DB_CONN_STATE_BUSY].n;
    out->idle = pool.lists[DB_CONN_STATE_IDLE].n;
    out->broken = pool.lists[DB_CONN_STATE_BROKEN].n + pool.lists[DB_CONN_STATE_CONNECTING].n;
    out->queued = pool.queued;
    out->reconnects = reconnects;
}

bool db_running(void)
{
    return pool.state == POOL_RUNNING;
}

bool db_available(void)
{
    return pool.state == POOL_RUNNING &&
           pool.lists[DB_CONN_STATE_IDLE].n + pool.lists[DB_CONN_STATE_BUSY].n > 0;
}

static bool args_ok(const char *sql, int nparams, const char *const *values)
{
    return sql && nparams >= 0 && nparams <= DB_MAX_PARAMS && (nparams == 0 || values);
}

static void query_push(const char *sql, int nparams, const char *const *values, db_cb cb,
                       void *data, bool first)
{
    bool valid = args_ok(sql, nparams, values);
    db_job_t *job = job_new(JOB_QUERY, sql, valid ? nparams : 0, values);
    job->cb = cb;
    job->data = data;
    if (!valid) {
        job_fail(job, false, NULL, "invalid query arguments");
        job_complete(job);
        return;
    }
    queue_push_at(job, first);
}

void db_query(const char *sql, int nparams, const char *const *values, db_cb cb, void *data)
{
    query_push(sql, nparams, values, cb, data, false);
}

void db_query_first(const char *sql, int nparams, const char *const *values, db_cb cb, void *data)
{
    query_push(sql, nparams, values, cb, data, true);
}

void db_tx_begin(db_tx_cb cb, void *data)
{
    db_job_t *job = job_new(JOB_BEGIN, NULL, 0, NULL);
    job->tx_cb = cb;
    job->data = data;
    job->tx = xcalloc(1, sizeof(db_tx_t));
    queue_push(job);
}

void db_tx_query(db_tx_t *tx, const char *sql, int nparams, const char *const *values, db_cb cb,
                 void *data)
{
    bool valid = args_ok(sql, nparams, values);
    db_job_t *job = job_new(JOB_QUERY, sql, valid ? nparams : 0, values);
    job->cb = cb;
    job->data = data;
    if (!valid) {
        /* Rejected locally, so the server-side transaction is untouched; fail it anyway so
         * that commit reports the mistake. */
        tx->failed = true;
        job->tx = tx;
        job_fail(job, false, NULL, "invalid query arguments");
        job_complete(job);
        return;
    }
    tx_push(tx, job);
}

void db_tx_commit(db_tx_t *tx, db_cb cb, void *data)
{
    db_job_t *job = job_new(JOB_COMMIT, NULL, 0, NULL);
    job->cb = cb;
    job->data = data;
    tx_push(tx, job);
}

void db_tx_rollback(db_tx_t *tx)
{
    tx_push(tx, job_new(JOB_ROLLBACK, NULL, 0, NULL));
}

/* ---- result accessors ---- */

static bool cell_ok(const db_result_t *r, int row, int col)
{
    return r && r->pg && row >= 0 && col >= 0 && row < PQntuples(r->pg) && col < PQnfields(r->pg);
}

int db_nrows(const db_result_t *r)
{
    return r && r->pg ? PQntuples(r->pg) : 0;
}

const char *db_get(const db_result_t *r, int row, int col)
{
    if (!cell_ok(r, row, col) || PQgetisnull(r->pg, row, col)) return NULL;
    return PQgetvalue(r->pg, row, col);
}

size_t db_getlen(const db_result_t *r, int row, int col)
{
    if (!cell_ok(r, row, col)) return 0;
    return (size_t)PQgetlength(r->pg, row, col);
}

bool db_isnull(const db_result_t *r, int row, int col)
{
    return !cell_ok(r, row, col) || PQgetisnull(r->pg, row, col);
}

PGresult *db_result_take(db_result_t *r)
{
    PGresult *pg = r->pg;
    r->pg = NULL;
    return pg;
}

long long db_getll(const db_result_t *r, int row, int col, long long def)
{
    const char *s = db_get(r, row, col);
    char *end;
    if (!s || !*s) return def;
    long long v = strtoll(s, &end, 10);
    return *end ? def : v;
}
