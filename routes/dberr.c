/* Database errors as API answers (see dberr.h). */
#include "routes/dberr.h"

#include <string.h>

#include "core/log.h"

/* Constraint names are those of db/migrations/. */
static const dberr_row_t rows[] = {
    /* Session spacing (DECISIONS.md): the exclusion constraint decides, so concurrent creates
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

bool dberr_ok_or_reply(http_req_t *req, const db_result_t *r, const char *what_failed)
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
