/*
 * A database transaction bound to an HTTP request, for the writes that must read, decide in C
 * (state machines, permissions, mail rendering) and then write atomically: BEGIN, a locking
 * read (SELECT ... FOR UPDATE / FOR SHARE), the writes, COMMIT.
 *
 * The handler embeds a txreq_t in its request state. Every step takes a reference on the
 * request; its callback runs only while the client is still connected. When the client has
 * gone, the transaction is rolled back and the callback is skipped. Inside each callback the
 * handler must continue with txreq_query / txreq_commit, or end with txreq_error /
 * txreq_failed_or_reply / txreq_rollback (which roll back), so the connection always returns
 * to the pool.
 */
#pragma once
#include <stdbool.h>

#include "core/http.h"
#include "db/db.h"

typedef struct txreq {
    http_req_t *req;
    db_tx_t *tx; /* NULL before BEGIN succeeded and after commit / rollback */
    db_req_cb cb;
} txreq_t;

/* Starts the transaction; cb gets the BEGIN result (on failure, reply with
 * txreq_failed_or_reply, which has nothing to roll back). */
void txreq_begin(txreq_t *t, http_req_t *req, db_req_cb cb);
/* Runs one statement in the transaction. */
void txreq_query(txreq_t *t, const char *sql, int nparams, const char *const *values, db_req_cb cb);
/* Commits; cb gets the COMMIT result (a failed commit has already rolled back). */
void txreq_commit(txreq_t *t, db_req_cb cb);
/* Rolls back (no callback). Safe when there is no open transaction. */
void txreq_rollback(txreq_t *t);
/* Like db_failed_or_reply(), and rolls back when it replies. */
bool txreq_failed_or_reply(txreq_t *t, const db_result_t *r);
/* Rolls back and replies with the error shape of DECISIONS.md. */
void txreq_error(txreq_t *t, int status, const char *code, const char *message);
