/* The cached list-page flow (see page_list.h). */
#include "routes/page_list.h"

#include "routes/dbreq.h"

static void on_rows(http_req_t *req, db_result_t *r)
{
    page_list_t *pl = req->data;
    if (!db_ok_or_reply(req, r)) return;
    int n = db_nrows(r);
    buf_t b = BUF_INIT;
    buf_reserve(&b, 64 + (size_t)n * pl->reserve);
    long long version = pl->render(req, pl, r, &b);
    /* No row at all: the statement could not say which version it read. */
    if (n > 0) page_cache_put(pl->cache, pl->key, version, b.data, b.len);
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

/* A cached page was found: reuse it when the version is still current, else read afresh. */
static void on_version(http_req_t *req, db_result_t *r)
{
    page_list_t *pl = req->data;
    if (!db_ok_or_reply(req, r)) return;
    if (page_cache_reply(pl->cache, pl->key, page_row_version(r, PAGE_LIST_VERSION_COL), req))
        return;
    db_req_query(req, pl->sql, pl->nparams, pl->params, on_rows);
}

void page_list_reply(http_req_t *req, page_list_t *pl)
{
    req->data = pl;
    if (page_cache_has(pl->cache, pl->key)) {
        const char *params[] = {pl->version_param};
        db_req_query(req, pl->version_sql, 1, params, on_version);
        return;
    }
    db_req_query(req, pl->sql, pl->nparams, pl->params, on_rows);
}
