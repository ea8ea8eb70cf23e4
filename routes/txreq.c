/* Request-bound transactions (see txreq.h). */
#include "routes/txreq.h"

#include <string.h>

static void on_read_begin(db_tx_t *tx, db_result_t *r, void *data);
static void on_result(db_result_t *r, void *data);

/* Keeps a result past its callback: the PGresult, and the strings that point elsewhere. */
static void result_keep(txreq_t *t, db_result_t *dst, db_result_t *r)
{
    *dst = *r;
    dst->pg = db_result_take(r);
    if (r->error) dst->error = arena_strdup(&t->req->arena, r->error);
    if (r->sqlstate) dst->sqlstate = arena_strdup(&t->req->arena, r->sqlstate);
}

/* Every result of the step is in: answer a failure, or hand over to the step's callback. The
 * results move out of t first, so the callback may start the next step. */
static void step_end(txreq_t *t)
{
    http_req_t *req = t->req;
    db_result_t res[TXREQ_MAX_STMTS], fail = t->fail;
    bool failed = t->failed;
    memcpy(res, t->res, sizeof(res));
    memset(t->res, 0, sizeof(t->res));
    memset(&t->fail, 0, sizeof(t->fail));
    t->failed = false;
    if (http_req_gone(req)) {
        txreq_rollback(t);
    } else if (failed) {
        txreq_rollback(t);
        db_ok_or_reply_as(req, &fail, t->fail_text);
    } else {
        t->cb(req, t, res);
    }
    for (int i = 0; i < TXREQ_MAX_STMTS; i++)
        if (res[i].pg) PQclear(res[i].pg);
    if (fail.pg) PQclear(fail.pg);
    http_req_unref(req);
}

/* Results of one transaction arrive in the order the statements were queued. */
static void on_result(db_result_t *r, void *data)
{
    txreq_t *t = data;
    int i = t->got++;
    bool is_commit = t->committing && t->got == t->n;
    if (!r->ok && !t->failed) {
        /* The first failure is the one to answer; later statements only report 25P02. */
        result_keep(t, &t->fail, r);
        t->failed = true;
    } else if (r->ok && !is_commit && i < TXREQ_MAX_STMTS) {
        result_keep(t, &t->res[i], r);
    }
    if (t->got == t->n) step_end(t);
}

static void on_read_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    txreq_t *t = data;
    if (!r->ok) {
        t->tx = NULL;
        result_keep(t, &t->fail, r);
        t->failed = true;
        step_end(t);
        return;
    }
    t->tx = tx;
    for (int i = 0; i < t->n; i++)
        db_tx_query(tx, t->reads[i].sql, t->reads[i].nparams, t->reads[i].params, on_result, t);
    t->reads = NULL;
}

void txreq_read(txreq_t *t, http_req_t *req, const txreq_stmt_t *reads, int n, txreq_cb decide)
{
    if (n < 1) n = 1;
    if (n > TXREQ_MAX_STMTS) n = TXREQ_MAX_STMTS;
    t->req = req;
    t->tx = NULL;
    t->cb = decide;
    t->n = n;
    t->got = 0;
    t->committing = false;
    /* The reads wait in the request arena until BEGIN is back (the caller's values may live
     * on its stack). */
    txreq_stmt_t *copy = arena_calloc(&req->arena, sizeof(*copy) * (size_t)n);
    for (int i = 0; i < n; i++) {
        copy[i] = reads[i];
        const char **p = arena_calloc(&req->arena, sizeof(char *) * (size_t)(reads[i].nparams + 1));
        for (int k = 0; k < reads[i].nparams; k++)
            p[k] = reads[i].params[k] ? arena_strdup(&req->arena, reads[i].params[k]) : NULL;
        copy[i].params = p;
    }
    t->reads = copy;
    http_req_ref(req);
    db_tx_begin(on_read_begin, t);
}

void txreq_write(txreq_t *t, const txreq_stmt_t *writes, int n, txreq_cb done)
{
    if (n < 0) n = 0;
    if (n > TXREQ_MAX_STMTS) n = TXREQ_MAX_STMTS;
    t->cb = done;
    t->n = n + 1;
    t->got = 0;
    t->committing = true;
    db_tx_t *tx = t->tx;
    t->tx = NULL;
    http_req_ref(t->req);
    for (int i = 0; i < n; i++)
        db_tx_query(tx, writes[i].sql, writes[i].nparams, writes[i].params, on_result, t);
    db_tx_commit(tx, on_result, t);
}

void txreq_rollback(txreq_t *t)
{
    if (t->tx) db_tx_rollback(t->tx);
    t->tx = NULL;
}

void txreq_error(txreq_t *t, int status, const char *code, const char *message)
{
    txreq_rollback(t);
    http_reply_error(t->req, status, code, message);
}
