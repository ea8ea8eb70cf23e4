/*
 * GET /api/openapi.json: the OpenAPI 3.1 document of this API (docs/openapi.json, embedded at
 * build time by routes/embed_file.py, so the binary serves the document it was built with).
 */
#include <string.h>

#include "core/router.h"
#include "domain/roles.h"
#include "routes/routes.h"

extern const char openapi_json[];
extern const size_t openapi_json_len;

static void get_openapi(http_req_t *req)
{
    http_reply(req, 200, "application/json; charset=utf-8", openapi_json, openapi_json_len);
}

static const route_t openapi_routes[] = {
    {HTTP_M_GET, "/api/openapi.json", get_openapi, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
};

void routes_openapi_register(void)
{
    router_add(openapi_routes, sizeof(openapi_routes) / sizeof(openapi_routes[0]));
}
