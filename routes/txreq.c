/* Request-bound transactions (see txreq.h). */
#include "routes/txreq.h"

static void on_begin(db_tx_t *tx, db_result_t *r, void *data);
static void on_step(db_result_t *r, void *data);
static void on_commit(db_result_t *r, void *data);

static void on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    txreq_t *t = data;
    http_req_t *req = t->req;
    t->tx = r->ok ? tx : NULL;
    if (http_req_gone(req))
        txreq_rollback(t);
    else
        t->cb(req, r);
    http_req_unref(req);
}

static void on_step(db_result_t *r, void *data)
{
    txreq_t *t = data;
    http_req_t *req = t->req;
    if (http_req_gone(req))
        txreq_rollback(t);
    else
        t->cb(req, r);
    http_req_unref(req);
}

static void on_commit(db_result_t *r, void *data)
{
    txreq_t *t = data;
    http_req_t *req = t->req;
    if (!http_req_gone(req)) t->cb(req, r);
    http_req_unref(req);
}

void txreq_begin(txreq_t *t, http_req_t *req, db_req_cb cb)
{
    t->req = req;
    t->tx = NULL;
    t->cb = cb;
    http_req_ref(req);
    db_tx_begin(on_begin, t);
}

void txreq_query(txreq_t *t, const char *sql, int nparams, const char *const *values, db_req_cb cb)
{
    t->cb = cb;
    http_req_ref(t->req);
    db_tx_query(t->tx, sql, nparams, values, on_step, t);
}

void txreq_commit(txreq_t *t, db_req_cb cb)
{
    db_tx_t *tx = t->tx;
    t->tx = NULL;
    t->cb = cb;
    http_req_ref(t->req);
    db_tx_commit(tx, on_commit, t);
}

void txreq_rollback(txreq_t *t)
{
    if (t->tx) db_tx_rollback(t->tx);
    t->tx = NULL;
}

bool txreq_failed_or_reply(txreq_t *t, const db_result_t *r)
{
    if (r->ok) return false;
    txreq_rollback(t);
    return db_failed_or_reply(t->req, r);
}

void txreq_error(txreq_t *t, int status, const char *code, const char *message)
{
    txreq_rollback(t);
    http_reply_error(t->req, status, code, message);
}
