/*
 * Development pages: where the email links lead while coachd runs in development without
 * FRONTEND_URL (cfg.dev_pages), so a developer can follow every link of a mail without a web
 * app. The links then point at PUBLIC_URL, this server:
 *
 *   GET /email-verification  the outcome of GET /api/auth/verify-email (?lang=, ?error=)
 *   GET /reset-password      a form that posts POST /api/auth/reset-password (?token=)
 *   GET /invite              the invite of ?token=: sign in or sign up through it, accept, decline
 *   GET /dev-pages/dev.js, /dev-pages/dev.css  their script and stylesheet
 *
 * With FRONTEND_URL set, or in production (where FRONTEND_URL is required), the table is not
 * registered: these paths answer 404 like any unknown path. They are pages of a browser, not of
 * the API, so docs/openapi.json does not describe them (scripts/gen_openapi.py, NOT_API).
 *
 * One HTML shell serves the three paths; dev_pages.js renders the page of location.pathname in
 * the language of ?lang= (en or es) and calls the API like any web client (same origin: the
 * session cookie and the Origin check work as for a web app at PUBLIC_URL). The three files are
 * embedded at build time by routes/embed_file.py. No inline script or style, so the policy is
 * 'self' alone; every answer keeps core/http's X-Content-Type-Options: nosniff and
 * Cache-Control: no-store (the assets have fixed names: a rebuilt binary's are never stale).
 */
#include <stddef.h>

#include "core/config.h"
#include "core/router.h"
#include "domain/roles.h"
#include "routes/routes.h"

extern const char dev_pages_html[], dev_pages_js[], dev_pages_css[];
extern const size_t dev_pages_html_len, dev_pages_js_len, dev_pages_css_len;

/* img-src data: for the empty icon (so a browser asks for no /favicon.ico). */
static const char page_csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

static void get_page(http_req_t *req)
{
    http_res_header(req, "Content-Security-Policy", page_csp);
    http_res_header(req, "Referrer-Policy", "no-referrer");
    http_res_header(req, "X-Frame-Options", "DENY");
    http_reply(req, 200, "text/html; charset=utf-8", dev_pages_html, dev_pages_html_len);
}

static void get_js(http_req_t *req)
{
    http_reply(req, 200, "application/javascript; charset=utf-8", dev_pages_js, dev_pages_js_len);
}

static void get_css(http_req_t *req)
{
    http_reply(req, 200, "text/css; charset=utf-8", dev_pages_css, dev_pages_css_len);
}

static const route_t dev_pages_routes[] = {
    {HTTP_M_GET, "/email-verification", get_page, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/reset-password", get_page, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/invite", get_page, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/dev-pages/dev.js", get_js, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_GET, "/dev-pages/dev.css", get_css, AUTH_PUBLIC, ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
};

void routes_dev_pages_register(void)
{
    if (!cfg.dev_pages) return;
    router_add(dev_pages_routes, sizeof(dev_pages_routes) / sizeof(dev_pages_routes[0]));
}
