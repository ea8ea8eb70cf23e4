/*
 * POST /api/setup/first-run: creates the first PlatformAdmin, once. The check and the insert
 * run in one transaction after a transaction-scoped advisory lock, so two concurrent calls
 * cannot both see "no admin yet" (a single statement would take its snapshot before waiting
 * for the lock).
 *
 * Before any hashing: the per-IP/per-email auth limiter, then a plain read of "already
 * initialized" (409 at once), so a flood after set-up costs no argon2 time; hashing runs in the
 * offload queue's first-run lane, so it cannot crowd out sign-ins either.
 */
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "db/db.h"
#include "domain/password.h"
#include "domain/text.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/routes.h"

static const char SQL_INITIALIZED[] =
    "SELECT EXISTS (SELECT 1 FROM users WHERE global_role IN ('Owner', 'PlatformAdmin'))";
static const char SQL_LOCK[] = "SELECT pg_advisory_xact_lock(727274001)";
static const char SQL_CREATE_ADMIN[] =
    "WITH chk AS (SELECT NOT EXISTS (SELECT 1 FROM users"
    "   WHERE global_role IN ('Owner', 'PlatformAdmin')) AS free),"
    " u AS (INSERT INTO users (id, email, first_name, last_name, global_role, preferred_language)"
    "   SELECT $1, $2, $3, $4, 'PlatformAdmin', $5 FROM chk WHERE free"
    "   RETURNING id, email, first_name, last_name, global_role, preferred_language, created_at),"
    " a AS (INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u)"
    " SELECT json_build_object('data', json_build_object('id', u.id, 'email', u.email,"
    "   'name', concat_ws(' ', u.first_name, u.last_name), 'firstName', u.first_name,"
    "   'lastName', u.last_name, 'globalRole', u.global_role,"
    "   'preferredLanguage', u.preferred_language, 'createdAt', iso(u.created_at)))"
    " FROM u";

typedef struct setup_state {
    http_req_t *req;
    db_tx_t *tx;
    const char *email, *password, *first, *last, *lang;
    char hash[PASSWORD_ENCODED_MAX];
    int rc;
    char *json; /* response, kept until commit */
} setup_state_t;

static void setup_end(setup_state_t *st, int status, const char *code, const char *msg)
{
    if (st->tx) db_tx_rollback(st->tx);
    st->tx = NULL;
    if (!http_req_gone(st->req)) http_reply_error(st->req, status, code, msg);
    http_req_unref(st->req);
}

static void on_commit(db_result_t *r, void *data)
{
    setup_state_t *st = data;
    st->tx = NULL;
    http_req_t *req = st->req;
    if (!http_req_gone(req)) {
        if (!r->ok)
            http_reply_error(req, r->conn_lost ? 503 : 500,
                             r->conn_lost ? "UNAVAILABLE" : "INTERNAL",
                             "Could not create the first administrator");
        else
            http_reply_json(req, 201, st->json);
    }
    http_req_unref(req);
}

static void on_insert(db_result_t *r, void *data)
{
    setup_state_t *st = data;
    if (!r->ok) {
        if (r->sqlstate && strcmp(r->sqlstate, "23505") == 0)
            setup_end(st, 409, "EMAIL_TAKEN", "An account with this email already exists");
        else if (r->conn_lost)
            setup_end(st, 503, "UNAVAILABLE", "Database unavailable");
        else {
            log_error("first-run insert failed: %s", r->error ? r->error : "?");
            setup_end(st, 500, "INTERNAL", "Could not create the first administrator");
        }
        return;
    }
    if (db_nrows(r) == 0) {
        setup_end(st, 409, "CONFLICT", "The platform is already initialized");
        return;
    }
    st->json = arena_strdup(&st->req->arena, db_get(r, 0, 0));
    db_tx_t *tx = st->tx;
    st->tx = NULL;
    db_tx_commit(tx, on_commit, st);
}

static void on_lock(db_result_t *r, void *data)
{
    setup_state_t *st = data;
    if (!r->ok || http_req_gone(st->req)) {
        setup_end(st, r->conn_lost ? 503 : 500, r->conn_lost ? "UNAVAILABLE" : "INTERNAL",
                  "Could not create the first administrator");
        return;
    }
    char id[IDS_CUID_LEN + 1];
    new_cuid(id);
    const char *params[] = {id, st->email, st->first, st->last, st->lang, st->hash};
    db_tx_query(st->tx, SQL_CREATE_ADMIN, 6, params, on_insert, st);
}

static void on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    setup_state_t *st = data;
    st->tx = tx;
    if (!r->ok || !tx) {
        st->tx = NULL;
        setup_end(st, r->conn_lost ? 503 : 500, r->conn_lost ? "UNAVAILABLE" : "INTERNAL",
                  "Could not create the first administrator");
        return;
    }
    db_tx_query(tx, SQL_LOCK, 0, NULL, on_lock, st);
}

static void hash_work(void *data)
{
    setup_state_t *st = data;
    uint8_t salt[PASSWORD_SALT_LEN];
    random_bytes(salt, sizeof(salt));
    st->rc = password_hash(st->password, salt, st->hash, sizeof(st->hash));
}

static void on_hashed(http_req_t *req, void *data)
{
    setup_state_t *st = data;
    if (st->rc != 0) {
        http_reply_error(req, 500, "INTERNAL", "Could not create the first administrator");
        return;
    }
    http_req_ref(req);
    db_tx_begin(on_begin, st);
}

static void on_initialized(http_req_t *req, db_result_t *r)
{
    if (db_failed_or_reply(req, r)) return;
    const char *done = db_get(r, 0, 0);
    if (done && done[0] == 't') {
        http_reply_error(req, 409, "CONFLICT", "The platform is already initialized");
        return;
    }
    offload_run_kind(req, OFFLOAD_FIRST_RUN, hash_work, on_hashed, req->data);
}

static void first_run_limited(http_req_t *req)
{
    db_req_query(req, SQL_INITIALIZED, 0, NULL, on_initialized);
}

static void first_run(http_req_t *req)
{
    json_t *body = json_body_or_reply(req);
    if (!body) return;
    verr_t v = {0};
    setup_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->req = req;
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
