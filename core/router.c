/*
 * Router: routes are compiled into segment lists on registration. A request path is split once
 * and compared with every route; among matches, a literal segment beats a :param at the same
 * depth ("/api/users/me" wins over "/api/users/:id"). About a hundred routes make a linear scan
 * cheaper than any tree in practice; a path that equals a pattern without :params (most requests)
 * is found in a small table first.
 */
#include "core/router.h"

#include <stdbool.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/url.h"

#define MAX_SEGS 12

typedef struct compiled {
    const route_t *route;
    int nsegs;
    const char *segs[MAX_SEGS]; /* NULL entry = :param */
    size_t lens[MAX_SEGS];
} compiled_t;

static compiled_t *routes;
static size_t nroutes, caproutes;
static router_guard_fn guard;

/* Routes without a :param, by method and exact path: a request path equal to such a pattern
 * (the common case) is answered without the scan, and is what the scan would pick (every
 * segment literal: no other route scores higher, and the first registered wins a tie). */
#define LITERAL_SLOTS 1024
static struct {
    const route_t *route;
    size_t len;
} literal[LITERAL_SLOTS];

static size_t literal_slot(int method, const char *path, size_t len)
{
    size_t h = (size_t)method * 131 + len;
    for (size_t i = 0; i < len; i++)
        h = h * 31 + (unsigned char)path[i];
    return h % LITERAL_SLOTS;
}

static const route_t *literal_find(int method, const char *path, size_t len)
{
    for (size_t i = literal_slot(method, path, len), n = 0; n < LITERAL_SLOTS;
         n++, i = (i + 1) % LITERAL_SLOTS) {
        const route_t *r = literal[i].route;
        if (!r) return NULL;
        if (r->method == method && literal[i].len == len && memcmp(r->pattern, path, len) == 0)
            return r;
    }
    return NULL;
}

/* "/a/b": one leading slash, no empty segment, no trailing slash, no :param. */
static bool pattern_literal(const char *p)
{
    if (p[0] != '/' || p[1] == '\0') return false;
    for (const char *q = p + 1;; q++) {
        if (*q == ':' && q[-1] == '/') return false;
        if (*q == '/' && (q[-1] == '/' || q[1] == '\0')) return false;
        if (*q == '\0') return true;
    }
}

static void literal_add(const route_t *r)
{
    size_t len = strlen(r->pattern);
    if (!pattern_literal(r->pattern) || literal_find(r->method, r->pattern, len)) return;
    static size_t used;
    if (used + 1 >= LITERAL_SLOTS / 2) return; /* the scan still finds it */
    size_t i = literal_slot(r->method, r->pattern, len);
    while (literal[i].route)
        i = (i + 1) % LITERAL_SLOTS;
    literal[i].route = r;
    literal[i].len = len;
    used++;
}

static const char *method_name(int m)
{
    switch (m) {
    case HTTP_M_GET:
        return "GET";
    case HTTP_M_POST:
        return "POST";
    case HTTP_M_PUT:
        return "PUT";
    case HTTP_M_PATCH:
        return "PATCH";
    case HTTP_M_DELETE:
        return "DELETE";
    case HTTP_M_HEAD:
        return "HEAD";
    case HTTP_M_OPTIONS:
        return "OPTIONS";
    default:
        return "?";
    }
}

void router_add(const route_t *table, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (nroutes == caproutes) {
            caproutes = caproutes ? caproutes * 2 : 64;
            routes = xrealloc(routes, caproutes * sizeof(*routes));
        }
        compiled_t *c = &routes[nroutes++];
        memset(c, 0, sizeof(*c));
        c->route = &table[i];
        literal_add(&table[i]);
        const char *p = table[i].pattern;
        while (*p == '/')
            p++;
        while (*p) {
            const char *slash = strchr(p, '/');
            size_t len = slash ? (size_t)(slash - p) : strlen(p);
            if (c->nsegs == MAX_SEGS) {
                log_error("router: pattern %s has too many segments", table[i].pattern);
                break;
            }
            c->segs[c->nsegs] = p[0] == ':' ? NULL : p;
            c->lens[c->nsegs] = len;
            c->nsegs++;
            p += len;
            while (*p == '/')
                p++;
        }
    }
}

/* Ids in paths are compared in canonical form (docs/api.md): a parameter
 * shaped like a UUID (8-4-4-4-12 hex digits) is lower-cased here, once for every route, so an
 * upper-case UUID names the same row and the same stream channel as the lower-case one. */
static bool is_uuid(const char *s)
{
    for (int i = 0; i < 36; i++) {
        char ch = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (ch != '-') return false;
        } else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                     (ch >= 'A' && ch <= 'F'))) {
            return false;
        }
    }
    return s[36] == '\0';
}

static void canonical_id(char *s)
{
    if (strlen(s) != 36 || !is_uuid(s)) return;
    for (char *p = s; *p; p++)
        if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
}

void router_set_guard(router_guard_fn g)
{
    guard = g;
}

const route_t *router_match(http_req_t *req, int *status, const char **allow)
{
    int method = req->method == HTTP_M_HEAD ? HTTP_M_GET : req->method;
    const route_t *lit = literal_find(method, req->path, strlen(req->path));
    if (lit) {
        req->nparams = 0;
        req->route = lit;
        return lit;
    }
    const char *segs[MAX_SEGS + 1];
    size_t lens[MAX_SEGS + 1];
    int nsegs = 0;
    const char *p = req->path;
    while (*p == '/')
        p++;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (nsegs == MAX_SEGS + 1) break;
        segs[nsegs] = p;
        lens[nsegs] = len;
        nsegs++;
        p += len;
        if (*p == '/') p++;
        /* A trailing slash makes an empty last segment, which matches nothing but a :param
         * that then fails validation; treat "/a/b/" as "/a/b". */
    }
    const compiled_t *best = NULL;
    unsigned best_score = 0;
    unsigned allow_mask = 0; /* bit per method index in method_list */
    static const int method_list[] = {HTTP_M_GET, HTTP_M_POST, HTTP_M_PUT, HTTP_M_PATCH,
                                      HTTP_M_DELETE};
    for (size_t i = 0; i < nroutes; i++) {
        const compiled_t *c = &routes[i];
        if (c->nsegs != nsegs) continue;
        unsigned score = 0;
        int j;
        for (j = 0; j < nsegs; j++) {
            if (c->segs[j]) {
                if (c->lens[j] != lens[j] || memcmp(c->segs[j], segs[j], lens[j]) != 0) break;
                score |= 1u << (MAX_SEGS - j);
            } else if (lens[j] == 0) {
                break;
            }
        }
        if (j != nsegs) continue;
        for (size_t k = 0; k < sizeof(method_list) / sizeof(method_list[0]); k++)
            if (method_list[k] == c->route->method) allow_mask |= 1u << k;
        if (c->route->method != method) continue;
        if (!best || score > best_score) {
            best = c;
            best_score = score;
        }
    }
    if (best) {
        req->nparams = 0;
        for (int j = 0; j < nsegs && req->nparams < HTTP_MAX_PARAMS; j++) {
            if (best->segs[j]) continue;
            char *v = url_decode(&req->arena, segs[j], lens[j], false);
            if (v) canonical_id(v);
            req->params[req->nparams++] = v ? v : "";
        }
        req->route = best->route;
        return best->route;
    }
    if (allow_mask) {
        char list[64] = "";
        for (size_t k = 0; k < sizeof(method_list) / sizeof(method_list[0]); k++) {
            if (!(allow_mask & (1u << k))) continue;
            if (list[0]) strcat(list, ", ");
            strcat(list, method_name(method_list[k]));
            if (method_list[k] == HTTP_M_GET) strcat(list, ", HEAD");
        }
        strcat(list, ", OPTIONS");
        *allow = arena_strdup(&req->arena, list);
        *status = 405;
    } else {
        *status = 404;
    }
    return NULL;
}

void router_dispatch(http_req_t *req)
{
    if (guard)
        guard(req, req->route->handler);
    else
        req->route->handler(req);
}
