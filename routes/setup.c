/*
 * POST /api/setup/first-run: creates the first PlatformAdmin, once. The check and the insert
 * run in one transaction after a transaction-scoped advisory lock (the two steps of
 * routes/txreq.h), so two concurrent calls cannot both see "no admin yet" (a single statement
 * would take its snapshot before waiting for the lock). SQL: db/queries/setup.sql.
 *
 * Before any hashing: the per-IP/per-email auth limiter, then a plain read of "already
 * initialized" (409 at once), so a flood after set-up costs no argon2 time; hashing runs in the
 * offload queue's first-run lane, so it cannot crowd out sign-ins either.
 *
 * In production the route is the operator's alone: the header X-Setup-Token must equal
 * SETUP_TOKEN, else 403 before anything else (the body is not even parsed), also while
 * SETUP_TOKEN is unset; `coachd first-run` (cli/first_run.c) is the other way in. Development
 * keeps the interface's public route.
 */
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "db/q_setup.h"
#include "domain/crypto.h"
#include "domain/password.h"
#include "domain/text.h"
#include "routes/common.h"
#include "routes/dbreq.h"
#include "routes/context.h"
#include "routes/routes.h"
#include "routes/txreq.h"

typedef struct setup_state {
    txreq_t tx;
    const char *email, *password, *first, *last, *lang;
    char id[IDS_CUID_LEN + 1];
    char hash[PASSWORD_ENCODED_MAX];
    int rc;
} setup_state_t;

/* Step 2: committed; no row means an administrator was created meanwhile (nothing written). */
static void on_created(http_req_t *req, txreq_t *t, db_result_t *res)
{
    (void)t;
    if (db_nrows(res) == 0) {
        http_reply_error(req, 409, "CONFLICT", "The platform is already initialized");
        return;
    }
    http_reply_jsonn(req, 201, db_get(res, 0, SETUP_CREATE_ADMIN_JSON),
                     db_getlen(res, 0, SETUP_CREATE_ADMIN_JSON));
}

/* Step 1: the advisory lock is held; the insert checks again under it. */
static void on_locked(http_req_t *req, txreq_t *t, db_result_t *res)
{
    setup_state_t *st = req->data;
    (void)res;
    const char *params[] = {st->id, st->email, st->first, st->last, st->lang, st->hash};
    txreq_stmt_t create = {SQL_SETUP_CREATE_ADMIN, 6, params};
    txreq_write(t, &create, 1, on_created);
}

static void hash_work(void *data)
{
    setup_state_t *st = data;
    st->rc = password_hash_fresh(st->password, st->hash);
}

static void on_hashed(http_req_t *req, void *data)
{
    setup_state_t *st = data;
    if (st->rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not create the first administrator");
        return;
    }
    new_cuid(st->id);
    st->tx.fail_text = "Could not create the first administrator";
    txreq_stmt_t lock = {SQL_SETUP_LOCK, 0, NULL};
    txreq_read(&st->tx, req, &lock, 1, on_locked);
}

static void on_initialized(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    const char *done = db_get(r, 0, SETUP_INITIALIZED_INITIALIZED);
    if (done && done[0] == 't') {
        http_reply_error(req, 409, "CONFLICT", "The platform is already initialized");
        return;
    }
    offload_run_kind(req, OFFLOAD_FIRST_RUN, hash_work, on_hashed, req->data);
}

static void first_run_limited(http_req_t *req)
{
    db_req_query(req, SQL_SETUP_INITIALIZED, 0, NULL, on_initialized);
}

/* Production: X-Setup-Token equals SETUP_TOKEN (compared in constant time). NULL when it
 * does, else the message of the 403, naming what to set. */
static const char *setup_token_refusal(http_req_t *req)
{
    if (!cfg.production) return NULL;
    const char *want = getenv("SETUP_TOKEN");
    if (!want || !*want) {
        static bool told;
        if (!told) log_warn("first-run refused: SETUP_TOKEN is not set (coachd first-run works)");
        told = true;
        return "The first run is closed: set SETUP_TOKEN on the server and send it as "
               "X-Setup-Token, or run coachd first-run";
    }
    const char *got = http_req_header(req, "X-Setup-Token");
    if (got && crypto_ct_streq(got, want)) return NULL;
    return "The first run needs X-Setup-Token equal to SETUP_TOKEN in production";
}

static void first_run(http_req_t *req)
{
    const char *refusal = setup_token_refusal(req);
    if (refusal) {
        http_reply_error(req, 403, "FORBIDDEN", refusal);
        return;
    }
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    setup_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->email = field_email(req, body, "email", &v, true);
    st->password = field_password(req, body, "password", &v, true);
    const char *name = field_str(req, body, "name", &v, true, 1, 201, true);
    const char *lang = field_lang(req, body, "preferredLanguage", &v);
    if (name) {
        split_name(req, name, &st->first, &st->last);
        if (text_cp_count(st->first, strlen(st->first)) > 100 ||
            (st->last && text_cp_count(st->last, strlen(st->last)) > 100))
            verr_add(&v, "name", "first and last name must be at most 100 characters each");
    }
    password_rules_add(&v, "password", st->password, st->email, st->first, st->last);
    if (verr_reply(req, &v)) return;
    st->lang = resolve_lang(req, lang);
    req->data = st;
    auth_limit_then(req, "first-run", st->email, first_run_limited);
}

static const route_t setup_routes[] = {
    {HTTP_M_POST, "/api/setup/first-run", first_run, AUTH_PUBLIC, ROLE_NONE, 0, 0},
};

void routes_setup_register(void)
{
    router_add(setup_routes, sizeof(setup_routes) / sizeof(setup_routes[0]));
}
