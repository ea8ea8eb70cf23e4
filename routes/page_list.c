/* The cached list-page flow (see page_list.h). */
#include "routes/page_list.h"

#include <stdlib.h>

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

void page_list_init(page_list_t *pl, page_cache_t *cache, const char *sql, int nparams,
                    const char *const *params, const char *version_sql, const char *version_param,
                    page_list_render render, size_t reserve)
{
    if (nparams > PAGE_LIST_MAX_PARAMS) abort(); /* a route's constant, never client input */
    pl->cache = cache;
    pl->sql = sql;
    pl->nparams = nparams;
    for (int i = 0; i < nparams; i++)
        pl->params[i] = params[i];
    pl->version_sql = version_sql;
    pl->version_param = version_param;
    pl->render = render;
    pl->reserve = reserve;
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
