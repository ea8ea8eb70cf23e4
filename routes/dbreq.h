/*
 * Database work bound to an HTTP request (kept out of db/, which knows nothing of requests).
 *
 * db_req_query: a query started for a request holds a reference on it, and its callback runs
 * only while the client is still connected (when it has gone, the result is dropped and the
 * reference released).
 *
 * How a failed statement is answered: one table of {sqlstate, constraint, status, code,
 * message} for the integrity errors that mean something to a client (a unique or exclusion
 * constraint refusing a write), and 503 UNAVAILABLE (connection lost) or 500 INTERNAL (logged
 * with the request id, never shown) for everything else. Every route maps database errors
 * through here, so one constraint gives one answer wherever it fires.
 */
#pragma once
#include <stdbool.h>

#include "core/http.h"
#include "db/db.h"

typedef void (*db_req_cb)(http_req_t *req, db_result_t *r);
void db_req_query(http_req_t *req, const char *sql, int nparams, const char *const *values,
                  db_req_cb cb);

typedef struct dberr_row {
    const char *sqlstate;   /* e.g. "23P01" */
    const char *constraint; /* NULL: any constraint of that sqlstate */
    int status;
    const char *code;
    const char *message;
} dberr_row_t;

/* The row of the table that a failed result matches, or NULL. */
const dberr_row_t *dberr_find(const db_result_t *r);

/* true when r is ok. Otherwise replies (the table's row, else 503 / 500) and returns false. */
bool db_ok_or_reply(http_req_t *req, const db_result_t *r);
/* The same, with `what_failed` as the message of the 503 / 500 answers (NULL: the usual). */
bool db_ok_or_reply_as(http_req_t *req, const db_result_t *r, const char *what_failed);
