/*
 * GET /api/docs: the API reference, a static page that Redoc (docs/reference/package.json,
 * pinned with its lock) renders in the browser from GET /api/openapi.json.
 * GET /api/docs/:bundle: Redoc's standalone bundle, embedded at build time by
 * routes/embed_bundle.py, under a name that carries its content hash (redoc.<16 hex>.js).
 *
 * Why this shape:
 * - No inline script: the page holds the <redoc spec-url=...> element, which the bundle finds
 *   and renders by itself, and a <script src> to the bundle; so script-src is 'self' alone.
 * - The bundle's URL changes with its bytes, so it is cached for a year as immutable; its hash
 *   is also the ETag ("<hash>", "<hash>-gzip" for the gzipped copy; a revalidation gets 304).
 * Gzipped at build time, it is sent gzipped to every client that accepts it (about a third of its
 * size).
 * - A binary built where the bundle was not installed (no npm on the build machine) serves a
 *   short page that says so and links to the document itself; the bundle route answers 404.
 * - The page's Content-Security-Policy allows only this origin: Redoc loads no font or script
 *   from elsewhere (its theme names fonts, it fetches none), and its search index runs in a
 *   Worker made from a blob: URL (worker-src blob:). style-src needs 'unsafe-inline' because
 *   Redoc styles its components with styled-components, which writes <style> elements at run
 *   time; no script can be injected through it (script-src stays 'self').
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/router.h"
#include "domain/roles.h"
#include "routes/common.h"
#include "routes/routes.h"

extern const char docs_bundle[], docs_bundle_gz[], docs_bundle_hash[];
extern const size_t docs_bundle_len, docs_bundle_gz_len;

static const char page_csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src blob:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/* The page without the renderer has neither script nor style (its icon is an empty data: URL,
 * so a browser asks for no /favicon.ico). */
static const char fallback_csp[] = "default-src 'none'; img-src data:; base-uri 'none'; "
                                   "form-action 'none'; frame-ancestors 'none'";

static const char fallback_page[] =
    "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>coachd API reference</title>\n<link rel=\"icon\" href=\"data:,\">\n</head>\n<body>\n"
    "<h1>coachd API reference</h1>\n"
    "<p>This build of coachd has no reference renderer built in (its bundle was not installed "
    "when it was built: run <code>npm ci</code> in docs/reference, then build again).</p>\n"
    "<p>The API is described by its OpenAPI document: "
    "<a href=\"/api/openapi.json\">/api/openapi.json</a>.</p>\n</body>\n</html>\n";

/* Built once, at registration, from the bundle's hash. */
static char page[1024];
static size_t page_len;
static char bundle_name[48];    /* redoc.<hash>.js */
static char bundle_etag[40];    /* "<hash>": the bytes as built */
static char bundle_gz_etag[48]; /* "<hash>-gzip": the gzipped copy, another representation */

static bool have_bundle(void)
{
    return docs_bundle_len > 0 && docs_bundle_hash[0];
}

static void common_headers(http_req_t *req, const char *csp)
{
    http_res_header(req, "Content-Security-Policy", csp);
    http_res_header(req, "Referrer-Policy", "no-referrer");
}

static void get_docs(http_req_t *req)
{
    if (!have_bundle()) {
        common_headers(req, fallback_csp);
        http_reply(req, 200, "text/html; charset=utf-8", fallback_page, sizeof(fallback_page) - 1);
        return;
    }
    common_headers(req, page_csp);
    http_reply(req, 200, "text/html; charset=utf-8", page, page_len);
}

static void get_bundle(http_req_t *req)
{
    const char *name = http_req_param(req, 0);
    if (!have_bundle() || !name || strcmp(name, bundle_name) != 0) {
        http_reply_error(req, 404, "NOT_FOUND", "Not found");
        return;
    }
    /* Its name changes with its bytes: a client never needs to ask again. The gzipped and the
     * plain copy are two representations, so each has its own strong tag (RFC 9110 8.8.3): a
     * cache revalidating one never gets a 304 that stands for the other. */
    const char *ae = http_req_header(req, "Accept-Encoding");
    bool gz = ae && header_lists(ae, "gzip", false);
    const char *etag = gz ? bundle_gz_etag : bundle_etag;
    http_res_header(req, "Cache-Control", "public, max-age=31536000, immutable");
    http_res_header(req, "ETag", etag);
    http_res_header(req, "Vary", "Accept-Encoding");
    const char *inm = http_req_header(req, "If-None-Match");
    if (inm && header_lists(inm, etag, true)) {
        http_reply(req, 304, NULL, "", 0);
        return;
    }
    if (gz) {
        http_res_header(req, "Content-Encoding", "gzip");
        http_reply(req, 200, "application/javascript; charset=utf-8", docs_bundle_gz,
                   docs_bundle_gz_len);
        return;
    }
    http_reply(req, 200, "application/javascript; charset=utf-8", docs_bundle, docs_bundle_len);
}

static const route_t docs_routes[] = {
    {HTTP_M_GET, "/api/docs", get_docs, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/api/docs/:bundle", get_bundle, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
};

void routes_docs_register(void)
{
    if (have_bundle()) {
        snprintf(bundle_name, sizeof(bundle_name), "redoc.%s.js", docs_bundle_hash);
        snprintf(bundle_etag, sizeof(bundle_etag), "\"%s\"", docs_bundle_hash);
        snprintf(bundle_gz_etag, sizeof(bundle_gz_etag), "\"%s-gzip\"", docs_bundle_hash);
        /* Redoc reads its options from the attributes of <redoc> itself (no inline script). */
        int n =
            snprintf(page, sizeof(page),
                     "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<title>coachd API reference</title>\n"
                     "<link rel=\"icon\" href=\"data:,\">\n</head>\n<body>\n"
                     "<noscript>The reference needs JavaScript; the document itself is "
                     "<a href=\"/api/openapi.json\">/api/openapi.json</a>.</noscript>\n"
                     "<redoc spec-url=\"/api/openapi.json\"></redoc>\n"
                     "<script src=\"/api/docs/%s\"></script>\n</body>\n</html>\n",
                     bundle_name);
        page_len = n > 0 && (size_t)n < sizeof(page) ? (size_t)n : 0;
    }
    router_add(docs_routes, sizeof(docs_routes) / sizeof(docs_routes[0]));
}
