/*
 * A database transaction bound to an HTTP request, for the writes that must read, decide in C
 * (state machines, permissions, mail rendering) and then write atomically. A write route is
 * two steps, so two callbacks:
 *
 *   txreq_read(t, req, reads, n, decide)   BEGIN and the locking reads (SELECT ... FOR UPDATE /
 *                                          FOR SHARE) queued together; decide() runs once all
 *                                          of them succeeded, with their results.
 *   txreq_write(t, writes, n, done)        from decide(): the writes and COMMIT queued
 *                                          together; done() runs after a successful commit,
 *                                          with the writes' results.
 *
 * decide() ends with txreq_write, or with txreq_error (rolls back and replies). Any failure on
 * the way (BEGIN, a read, a write, COMMIT) is rolled back and answered through the one table of
 * routes/dbreq.h (e.g. 23P01 -> 409 SESSION_CONFLICT), else 503 / 500 — the callbacks only see
 * success. Each step holds a reference on the request; when the client has gone the
 * transaction is rolled back and the callback skipped. Results are freed when the callback
 * returns: copy what must outlive it into the request arena.
 */
#pragma once
#include <stdbool.h>

#include "core/http.h"
#include "db/db.h"
#include "routes/dbreq.h"

#define TXREQ_MAX_STMTS 4

typedef struct txreq txreq_t;
/* res[i]: the result of the step's statement i, valid until the callback returns. */
typedef void (*txreq_cb)(http_req_t *req, txreq_t *t, db_result_t *res);

/* One statement of a step; parameters are copied when the step is queued. */
typedef struct txreq_stmt {
    const char *sql;
    int nparams;
    const char *const *params;
} txreq_stmt_t;

struct txreq {
    http_req_t *req;
    db_tx_t *tx; /* NULL before BEGIN succeeded and after commit / rollback */
    /* A step's statements and results (read step: the reads; write step: the writes). */
    const txreq_stmt_t *reads; /* waiting for BEGIN (request arena copies) */
    db_result_t res[TXREQ_MAX_STMTS];
    int n, got;            /* statements of the step, results received (COMMIT included) */
    bool committing;       /* the write step: the last result is COMMIT's */
    db_result_t fail;      /* the first failure of the step (fail.ok false when set) */
    bool failed;           /* fail is set */
    txreq_cb cb;           /* decide() or done() */
    const char *fail_text; /* optional message of the 503 / 500 answers */
};

/* Step 1: BEGIN and the reads (1..TXREQ_MAX_STMTS), then decide(). */
void txreq_read(txreq_t *t, http_req_t *req, const txreq_stmt_t *reads, int n, txreq_cb decide);
/* Step 2, from decide(): the writes (0..TXREQ_MAX_STMTS) and COMMIT, then done(). */
void txreq_write(txreq_t *t, const txreq_stmt_t *writes, int n, txreq_cb done);

/* Rolls back and replies with the error shape of docs/api.md. */
void txreq_error(txreq_t *t, int status, const char *code, const char *message);
/* Rolls back (no callback). Safe when there is no open transaction. */
void txreq_rollback(txreq_t *t);
