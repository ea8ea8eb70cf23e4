#include <string.h>

#include "core/router.h"
#include "tests.h"

static void h_list(http_req_t *r)
{
    (void)r;
}
static void h_get(http_req_t *r)
{
    (void)r;
}
static void h_me(http_req_t *r)
{
    (void)r;
}
static void h_users(http_req_t *r)
{
    (void)r;
}
static void h_patch(http_req_t *r)
{
    (void)r;
}

static const route_t table[] = {
    {HTTP_M_GET, "/api/organizations", h_list, 0, 0, 0, 0},
    {HTTP_M_GET, "/api/organizations/:id", h_get, 0, 0, 0, 0},
    {HTTP_M_PATCH, "/api/organizations/:id", h_patch, 0, 0, 0, 0},
    {HTTP_M_GET, "/api/organizations/:id/users", h_users, 0, 0, 0, 0},
    {HTTP_M_GET, "/api/users/:id", h_get, 0, 0, 0, 0},
    {HTTP_M_GET, "/api/users/me", h_me, 0, 0, 0, 0},
};

static const route_t *match(http_req_t *req, int method, const char *path, int *status,
                            const char **allow)
{
    memset(req, 0, sizeof(*req));
    arena_init(&req->arena);
    req->method = method;
    req->path = path;
    *status = 0;
    *allow = NULL;
    return router_match(req, status, allow);
}

static void matching(void **s)
{
    (void)s;
    static int registered;
    if (!registered++) router_add(table, sizeof(table) / sizeof(table[0]));
    http_req_t req;
    int status;
    const char *allow;
    const route_t *r = match(&req, HTTP_M_GET, "/api/organizations", &status, &allow);
    assert_non_null(r);
    assert_ptr_equal(r->handler, h_list);
    arena_free(&req.arena);

    r = match(&req, HTTP_M_GET, "/api/organizations/abc%20d/users", &status, &allow);
    assert_ptr_equal(r->handler, h_users);
    assert_int_equal(req.nparams, 1);
    assert_string_equal(req.params[0], "abc d");
    arena_free(&req.arena);

    /* A literal segment beats a :param, whatever the registration order. */
    r = match(&req, HTTP_M_GET, "/api/users/me", &status, &allow);
    assert_ptr_equal(r->handler, h_me);
    arena_free(&req.arena);
    r = match(&req, HTTP_M_GET, "/api/users/u1", &status, &allow);
    assert_ptr_equal(r->handler, h_get);
    assert_string_equal(req.params[0], "u1");
    arena_free(&req.arena);

    /* Trailing slash is the same path; HEAD uses GET routes. */
    r = match(&req, HTTP_M_HEAD, "/api/organizations/", &status, &allow);
    assert_ptr_equal(r->handler, h_list);
    arena_free(&req.arena);
}

static void not_found_and_method(void **s)
{
    (void)s;
    http_req_t req;
    int status;
    const char *allow;
    assert_null(match(&req, HTTP_M_GET, "/api/nothing", &status, &allow));
    assert_int_equal(status, 404);
    arena_free(&req.arena);
    assert_null(match(&req, HTTP_M_GET, "/api/organizations/x/y/z", &status, &allow));
    assert_int_equal(status, 404);
    arena_free(&req.arena);
    assert_null(match(&req, HTTP_M_DELETE, "/api/organizations/x", &status, &allow));
    assert_int_equal(status, 405);
    assert_non_null(strstr(allow, "GET"));
    assert_non_null(strstr(allow, "PATCH"));
    assert_null(strstr(allow, "DELETE"));
    arena_free(&req.arena);
    /* An empty segment never matches a :param. */
    assert_null(match(&req, HTTP_M_GET, "/api/organizations//users", &status, &allow));
    arena_free(&req.arena);
}

/* Ids in paths are canonical: a UUID-shaped parameter is lower-cased (also when percent-encoded),
 * anything else is left as sent. */
static void uuid_params_lower_cased(void **s)
{
    (void)s;
    http_req_t req;
    int status;
    const char *allow;
    const route_t *r =
        match(&req, HTTP_M_GET, "/api/organizations/2A8DF2AE-E8D7-4B64-B4B2-F4B106957397", &status,
              &allow);
    assert_non_null(r);
    assert_string_equal(req.params[0], "2a8df2ae-e8d7-4b64-b4b2-f4b106957397");
    arena_free(&req.arena);
    r = match(&req, HTTP_M_GET, "/api/organizations/%32A8DF2AE-E8D7-4B64-B4B2-F4B106957397/users",
              &status, &allow);
    assert_string_equal(req.params[0], "2a8df2ae-e8d7-4b64-b4b2-f4b106957397");
    arena_free(&req.arena);
    /* Not a UUID (a cuid, a name, a near miss): untouched. */
    r = match(&req, HTTP_M_GET, "/api/users/CkAbC123", &status, &allow);
    assert_string_equal(req.params[0], "CkAbC123");
    arena_free(&req.arena);
    r = match(&req, HTTP_M_GET, "/api/users/2A8DF2AE-E8D7-4B64-B4B2-F4B10695739G", &status, &allow);
    assert_string_equal(req.params[0], "2A8DF2AE-E8D7-4B64-B4B2-F4B10695739G");
    arena_free(&req.arena);
}

/* Paths without :params come from the table of literal patterns: it must answer as the scan
 * would (the method counts, HEAD is GET, the first of two equal routes wins, a path that is not
 * written exactly as a pattern still goes through the scan). */
static const route_t literal_table[] = {
    {HTTP_M_GET, "/lit/a", h_list, 0, 0, 0, 0},   {HTTP_M_GET, "/lit/a", h_get, 0, 0, 0, 0},
    {HTTP_M_POST, "/lit/a", h_patch, 0, 0, 0, 0}, {HTTP_M_GET, "/lit/:id", h_users, 0, 0, 0, 0},
    {HTTP_M_GET, "/lit/a/b", h_me, 0, 0, 0, 0},
};

static void literal_paths(void **s)
{
    (void)s;
    router_add(literal_table, sizeof(literal_table) / sizeof(literal_table[0]));
    http_req_t req;
    int status;
    const char *allow;
    static const struct {
        int method;
        const char *path;
        void (*handler)(http_req_t *);
        int nparams;
    } cases[] = {
        {HTTP_M_GET, "/lit/a", h_list, 0},   {HTTP_M_HEAD, "/lit/a", h_list, 0},
        {HTTP_M_POST, "/lit/a", h_patch, 0}, {HTTP_M_GET, "/lit/x", h_users, 1},
        {HTTP_M_GET, "/lit/a/b", h_me, 0},   {HTTP_M_GET, "/lit/a/", h_list, 0},
        {HTTP_M_GET, "//lit/a/b", h_me, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const route_t *r = match(&req, cases[i].method, cases[i].path, &status, &allow);
        assert_non_null(r);
        assert_ptr_equal(r->handler, cases[i].handler);
        assert_int_equal(req.nparams, cases[i].nparams);
        arena_free(&req.arena);
    }
    assert_null(match(&req, HTTP_M_PUT, "/lit/a", &status, &allow));
    assert_int_equal(status, 405);
    assert_non_null(strstr(allow, "GET"));
    assert_non_null(strstr(allow, "POST"));
    arena_free(&req.arena);
}

int run_router_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matching),
        cmocka_unit_test(not_found_and_method),
        cmocka_unit_test(uuid_params_lower_cased),
        cmocka_unit_test(literal_paths),
    };
    return cmocka_run_group_tests_name("core/router", tests, NULL, NULL);
}
