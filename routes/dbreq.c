/* Request-scoped queries and database errors as API answers (see dbreq.h). */
#include "routes/dbreq.h"

#include <stdlib.h>
#include <string.h>

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

/* Constraint names are those of db/migrations/. */
static const dberr_row_t rows[] = {
    /* Session spacing (docs/api.md): the exclusion constraint decides, so concurrent creates
     * cannot both win. */
    {"23P01", "mentorship_sessions_spacing", 409, "SESSION_CONFLICT",
     "Another session of this mentorship is within 15 minutes"},
    {"23505", "mentorships_pair_uniq", 409, "CONFLICT",
     "A mentorship for this coach and teacher exists in the organization"},
    {"23505", "users_email_key", 409, "EMAIL_TAKEN", "An account with this email already exists"},
};

const dberr_row_t *dberr_find(const db_result_t *r)
{
    if (r->ok || !r->sqlstate) return NULL;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (strcmp(rows[i].sqlstate, r->sqlstate) != 0) continue;
        if (rows[i].constraint &&
            (!r->constraint || strcmp(rows[i].constraint, r->constraint) != 0))
            continue;
        return &rows[i];
    }
    return NULL;
}

bool db_ok_or_reply_as(http_req_t *req, const db_result_t *r, const char *what_failed)
{
    if (r->ok) return true;
    const dberr_row_t *row = dberr_find(r);
    if (row) {
        http_reply_error(req, row->status, row->code, row->message);
    } else if (r->conn_lost) {
        log_warn("req %s: database unavailable: %s", req->id, r->error ? r->error : "");
        http_reply_error(req, 503, "UNAVAILABLE",
                         what_failed ? what_failed : "database unavailable");
    } else {
        /* The SQL error goes to the log only; clients never see it. */
        log_error("req %s: database error %s: %s", req->id, r->sqlstate ? r->sqlstate : "-",
                  r->error ? r->error : "");
        http_reply_error(req, 500, "INTERNAL", what_failed ? what_failed : "internal error");
    }
    return false;
}

bool db_ok_or_reply(http_req_t *req, const db_result_t *r)
{
    return db_ok_or_reply_as(req, r, NULL);
}
