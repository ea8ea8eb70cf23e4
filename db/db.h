/*
 * Async PostgreSQL on the libuv loop: a pool of DATABASE_POOL_SIZE libpq connections per worker,
 * each driven by one uv_poll_t on its socket (PQconnectStart/PQconnectPoll, PQsendQueryParams or
 * prepared statements, PQconsumeInput/PQisBusy/PQgetResult). Never blocks the loop.
 *
 * Queries are queued FIFO when every connection is busy (bounded: a full queue fails at once
 * with conn_lost set). Connections that break are re-established with backoff; queries that were
 * in flight on them fail with conn_lost (the route answers 503), later ones succeed.
 *
 * SQL text passed here must be a string that outlives the query (use static const strings:
 * the pool prepares each distinct SQL pointer once per connection and reuses the statement).
 * Parameter values are copied when the call is made, so callers may free them right after.
 * All values are text format; NULL entries are SQL NULL.
 *
 * Callbacks always fire exactly once, from the loop, never from inside the call that queued the
 * query. The result is freed right after the callback returns, unless the callback took it
 * with db_result_take.
 */
#pragma once
#include <libpq-fe.h>
#include <stdbool.h>
#include <uv.h>

typedef struct db_result {
    PGresult *pg;           /* NULL when the query never ran (connection lost, queue full) */
    bool ok;                /* PGRES_COMMAND_OK or PGRES_TUPLES_OK */
    bool conn_lost;         /* connection failure or pool unavailable: answer 503 */
    const char *sqlstate;   /* e.g. "23505" (unique_violation); NULL when none */
    const char *constraint; /* the constraint an integrity error names; NULL when none */
    const char *error;      /* message for logs only, never for clients */
} db_result_t;

typedef void (*db_cb)(db_result_t *r, void *data);
typedef struct db_tx db_tx_t;
typedef void (*db_tx_cb)(db_tx_t *tx, db_result_t *r, void *data);

/* Starts connecting the pool; returns 0 (connections come up in the background). */
int db_init(uv_loop_t *loop, const char *conninfo, int pool_size);
/* Closes every connection; pending callbacks get conn_lost. */
void db_shutdown(void);
/* The loop db_init was given (NULL before): for db/'s own handles (coalesce.h). */
uv_loop_t *db_loop(void);
/* True when at least one connection is up. */
bool db_available(void);
/* True from db_init until db_shutdown begins: statements are taken (a statement given outside
 * fails, its callback deferred). */
bool db_running(void);
/* Pool figures for /metrics: connections by state, statements waiting for a connection, and
 * connections lost since start. */
typedef struct db_pool_stats {
    int busy, idle, broken, queued;
    uint64_t reconnects;
} db_pool_stats_t;
void db_pool_stats(db_pool_stats_t *out);

/* One statement in autocommit mode on any free connection. */
void db_query(const char *sql, int nparams, const char *const *values, db_cb cb, void *data);
/* The same, ahead of every statement waiting for a connection except those queued first before
 * it (they keep their order): for a statement that takes a row lock other requests queue on
 * (chat post batches), whose wait would hold them all up. */
void db_query_first(const char *sql, int nparams, const char *const *values, db_cb cb, void *data);

/* Transactions: db_tx_begin takes a connection for the caller alone and runs BEGIN; the callback
 * gets the tx (NULL when r->ok is false). Statements run in order on that connection with
 * db_tx_query. db_tx_commit / db_tx_rollback end it and return the connection to the pool
 * (the tx pointer is invalid afterwards). A failed statement leaves the tx aborted; commit then
 * rolls back and reports the failure. */
void db_tx_begin(db_tx_cb cb, void *data);
void db_tx_query(db_tx_t *tx, const char *sql, int nparams, const char *const *values, db_cb cb,
                 void *data);
void db_tx_commit(db_tx_t *tx, db_cb cb, void *data);
void db_tx_rollback(db_tx_t *tx);

/* Result accessors (row/col bounds are checked: out of range gives NULL / 0). */
int db_nrows(const db_result_t *r);
const char *db_get(const db_result_t *r, int row, int col); /* NULL for SQL NULL */
size_t db_getlen(const db_result_t *r, int row, int col);
bool db_isnull(const db_result_t *r, int row, int col);
long long db_getll(const db_result_t *r, int row, int col, long long def);
/* Inside a callback: takes the PGresult out of r (r->pg becomes NULL), so it outlives the
 * callback; the caller frees it with PQclear. */
PGresult *db_result_take(db_result_t *r);

/* Migrations: the one synchronous path, run before the listener opens. Applies the numbered
 * SQL files, embedded into the binary at build time from
 * db/migrations/NNNN_name.sql files not yet recorded in schema_migrations, each in its own
 * transaction, under pg_advisory_lock so concurrent workers/processes never race.
 * Returns 0 or -1 (logged). */
int db_migrate(const char *conninfo);
/* The names of the migrations this binary embeds as a PostgreSQL text[] literal ("{0001_x,...}"),
 * for the readiness query (db/queries/health.sql) that checks they are all recorded. */
const char *db_migrations_array(void);
