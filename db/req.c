/*
 * Request-scoped queries (API in db/db.h): a query started for an HTTP request holds a
 * reference on it, and its callback runs only while the client is still connected.
 * Kept apart from pool.c so the pool links without core/http.c (unit tests, migrations).
 */
#include "db/db.h"

#include <stdlib.h>

#include "core/log.h"
#include "core/mem.h"

typedef struct req_query {
    http_req_t *req;
    db_req_cb cb;
} req_query_t;

static void on_req_query(db_result_t *r, void *data);

static void on_req_query(db_result_t *r, void *data)
{
    req_query_t *q = data;
    http_req_t *req = q->req;
    db_req_cb cb = q->cb;
    free(q);
    /* A client that went away gets nothing; the result is dropped with the reference. */
    if (!http_req_gone(req)) cb(req, r);
    http_req_unref(req);
}

void db_req_query(http_req_t *req, const char *sql, int nparams, const char *const *values,
                  db_req_cb cb)
{
    req_query_t *q = xmalloc(sizeof *q);
    q->req = req;
    q->cb = cb;
    http_req_ref(req);
    db_query(sql, nparams, values, on_req_query, q);
}

bool db_failed_or_reply(http_req_t *req, const db_result_t *r)
{
    if (r->ok) return false;
    if (r->conn_lost) {
        log_warn("req %s: database unavailable: %s", req->id, r->error ? r->error : "");
        http_reply_error(req, 503, "UNAVAILABLE", "database unavailable");
    } else {
        /* The SQL error goes to the log only; clients never see it. */
        log_error("req %s: database error %s: %s", req->id, r->sqlstate ? r->sqlstate : "-",
                  r->error ? r->error : "");
        http_reply_error(req, 500, "INTERNAL", "internal error");
    }
    return true;
}
