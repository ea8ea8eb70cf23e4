/*
 * The cached list-page flow shared by the rendered lists (GET /api/mentorships,
 * GET /api/sessions, the organization-scoped GET /api/users): when a page of this key is
 * cached, a one-row query reads the current version and the cached page is served if it was
 * read at that version; otherwise the list statement runs, the route renders its rows, and the
 * page is stored at the version its statement returned (page_cache.h says why a reuse never
 * shows anything a fresh read would not).
 */
#pragma once
#include <stdbool.h>

#include "core/buf.h"
#include "core/http.h"
#include "db/db.h"
#include "routes/page_cache.h"

#define PAGE_LIST_MAX_PARAMS 12
/* The version statement's one column. */
#define PAGE_LIST_VERSION_COL 0

typedef struct page_list page_list_t;
/* Appends the page's JSON for the rows of r to b; returns the version column's value
 * (page_row_version). */
typedef long long (*page_list_render)(http_req_t *req, page_list_t *pl, const db_result_t *r,
                                      buf_t *b);

struct page_list {
    page_cache_t *cache;
    const char *key;         /* page_cache_key of the visibility class and normalized query */
    const char *version_sql; /* $1 version_param: one row, the current version in column 0 */
    const char *version_param;
    const char *sql; /* the list statement */
    int nparams;
    const char *params[PAGE_LIST_MAX_PARAMS];
    page_list_render render;
    size_t reserve; /* bytes to reserve per row */
    void *ctx;      /* the route's own state */
};

/* Fills pl: the cache, the list statement and its parameters (copied; at most
 * PAGE_LIST_MAX_PARAMS), the version statement and its one parameter, the renderer and the
 * bytes to reserve per row. The key is set by the caller. */
void page_list_init(page_list_t *pl, page_cache_t *cache, const char *sql, int nparams,
                    const char *const *params, const char *version_sql, const char *version_param,
                    page_list_render render, size_t reserve);

/* Answers the list request (200 with the page, or the database error). pl lives in the
 * request arena; params are copied into it. */
void page_list_reply(http_req_t *req, page_list_t *pl);
