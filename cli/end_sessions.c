/*
 * `coachd end-sessions --all | --email E`: the operator's way to end every session of every
 * user (after a suspected leak of session tokens, say), or every session of one account, without
 * touching the accounts: their next request is 401 and they sign in again. One user's sessions
 * can also be ended over HTTP (POST /api/users/:id/revoke-sessions, routes/users.c); this command
 * is the "all users" half and needs no administrator account.
 *
 * What the server does when sessions end, done from here after the DELETE has committed:
 *  - every open event stream of an affected user closes: {"type":"sessions-ended"} on the user's
 *    control channel (rt/events.h, EVENTS_CONTROL_CHANNEL_FMT), as revoke-sessions publishes;
 *  - no worker serves a cached caller context of them any more: the invalidation message of
 *    routes/ctx_cache.h on CTX_CHANNEL (ctx_invalidation_message), kind 'u' for one user and the
 *    flush of everything for --all. A worker reads what is waiting on its subscriber connection
 *    before it trusts a cached entry, so the next request after the command returns is refused.
 *
 * Redis is reached before anything is deleted (connect, AUTH, SELECT, PING), so a Redis that is
 * down changes nothing; it is used synchronously through hiredis: this process has no server loop
 * to keep responsive. The database work is the server's: migrations first, then the async pool
 * of db/db.h on a loop of its own, one transaction (db/queries/user_sessions.sql).
 *
 * Exit status: 0 done (prints how many sessions of how many users ended); 1 database or Redis
 * failure (the message says which, and whether the sessions were ended), or no account with the
 * email; 2 malformed command line.
 */
#include "cli/end_sessions.h"

#include <getopt.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <uv.h>

#include "core/config.h"
#include "core/log.h"
#include "core/url.h"
#include "db/db.h"
#include "db/q_user_sessions.h"
#include "domain/validate.h"
#include "routes/ctx_cache.h"
#include "rt/events.h"

#define USAGE                                                                                      \
    "usage: coachd end-sessions --all\n"                                                           \
    "       coachd end-sessions --email EMAIL\n"

#define NAME "coachd end-sessions"

typedef struct end_sessions {
    char email[VALIDATE_EMAIL_MAX + 1]; /* "" with --all */
    char **users;                       /* the users told: whose sessions ended (--email: the
                                           account, also when it had none) */
    int nusers;
    int ended_users; /* users who had a session */
    long long sessions;
    bool found;     /* --email: the account exists */
    bool failed;    /* a statement failed */
    bool conn_lost; /* ... because the database could not be reached */
    bool committed;
} end_sessions_t;

static int usage_error(const char *msg)
{
    fprintf(stderr, NAME ": %s\n%s", msg, USAGE);
    return 2;
}

/* ---- Redis, synchronously ---- */

static void redis_fail(redisContext *rc, const char *what)
{
    fprintf(stderr, NAME ": Redis failed (%s: %s)", what,
            rc && rc->err ? rc->errstr : "unexpected reply");
}

/* One command whose reply must not be an error; false (after saying so) otherwise. */
static bool redis_ok(redisContext *rc, const char *what, redisReply *r)
{
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (!ok) {
        if (r && r->type == REDIS_REPLY_ERROR)
            fprintf(stderr, NAME ": Redis failed (%s: %s)", what, r->str);
        else
            redis_fail(rc, what);
    }
    if (r) freeReplyObject(r);
    return ok;
}

/* REDIS_URL as rt/redis.c reads it: redis://[[user]:password@]host[:port][/db]. NULL after
 * saying why (without a newline: the caller ends the sentence). */
static redisContext *redis_open(const char *url)
{
    url_parts_t u;
    if (url_parse(url, "redis", &u) != 0) {
        fprintf(stderr, NAME ": REDIS_URL is malformed");
        return NULL;
    }
    long db = 0;
    if (*u.path == '/' && u.path[1]) {
        char *end;
        db = strtol(u.path + 1, &end, 10);
        if (*end != '\0' || db < 0 || db > 1000000) {
            url_parts_free(&u);
            fprintf(stderr, NAME ": REDIS_URL is malformed");
            return NULL;
        }
    }
    struct timeval tv = {5, 0};
    redisContext *rc =
        redisConnectWithTimeout(u.host[0] ? u.host : "localhost", u.port ? u.port : 6379, tv);
    bool ok = rc && !rc->err;
    if (!ok) {
        redis_fail(rc, "connect");
    } else {
        redisSetTimeout(rc, tv);
        if (u.pass)
            ok = redis_ok(rc, "AUTH",
                          u.user ? redisCommand(rc, "AUTH %s %s", u.user, u.pass)
                                 : redisCommand(rc, "AUTH %s", u.pass));
        if (ok && db) ok = redis_ok(rc, "SELECT", redisCommand(rc, "SELECT %ld", db));
        if (ok) ok = redis_ok(rc, "PING", redisCommand(rc, "PING"));
    }
    url_parts_free(&u);
    if (!ok && rc) redisFree(rc);
    return ok ? rc : NULL;
}

/* The control message to every affected user, then the cache invalidation, pipelined; false
 * after saying what failed. */
static bool redis_announce(redisContext *rc, const end_sessions_t *es)
{
    char chan[128], wire[512];
    int n;
    for (int i = 0; i < es->nusers; i++) {
        snprintf(chan, sizeof chan, EVENTS_CONTROL_CHANNEL_FMT, es->users[i]);
        redisAppendCommand(rc, "PUBLISH %s %s", chan, EVENTS_SESSIONS_ENDED_ALL);
    }
    /* One user: their contexts; --all: every context. */
    n = ctx_invalidation_message(wire, sizeof wire, 'u',
                                 es->email[0] && es->nusers == 1 ? es->users[0] : NULL);
    if (n < 0) n = ctx_invalidation_message(wire, sizeof wire, 'u', NULL);
    redisAppendCommand(rc, "PUBLISH %s %b", CTX_CHANNEL, wire, (size_t)n);
    bool ok = true;
    for (int i = 0; i <= es->nusers; i++) {
        redisReply *r = NULL;
        if (redisGetReply(rc, (void **)&r) != REDIS_OK) {
            redis_fail(rc, "PUBLISH");
            return false;
        }
        if (ok && !redis_ok(rc, "PUBLISH", r))
            ok = false;
        else if (!ok && r)
            freeReplyObject(r);
    }
    return ok;
}

/* ---- the database ---- */

static void note_failure(end_sessions_t *es, db_result_t *r)
{
    if (r->ok || es->failed) return;
    es->failed = true;
    es->conn_lost = r->conn_lost;
    log_error("end-sessions: %s", r->error ? r->error : "database error");
}

static void on_deleted(db_result_t *r, void *data)
{
    end_sessions_t *es = data;
    note_failure(es, r);
    if (!r->ok) return;
    int n = db_nrows(r);
    es->users = calloc((size_t)n + 1, sizeof(*es->users));
    if (!es->users) {
        es->failed = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        long long c = db_getll(r, i, USER_SESSIONS_END_EVERY_COUNT, 0);
        es->sessions += c;
        es->found = true;
        if (c > 0) es->ended_users++;
        es->users[es->nusers] = strdup(db_get(r, i, USER_SESSIONS_END_EVERY_USER_ID));
        if (!es->users[es->nusers]) {
            es->failed = true;
            return;
        }
        es->nusers++;
    }
}

static void on_commit(db_result_t *r, void *data)
{
    end_sessions_t *es = data;
    note_failure(es, r);
    es->committed = !es->failed;
    db_shutdown();
}

static void on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    end_sessions_t *es = data;
    if (!tx) {
        note_failure(es, r);
        db_shutdown();
        return;
    }
    if (es->email[0]) {
        const char *params[] = {es->email};
        db_tx_query(tx, SQL_USER_SESSIONS_END_EMAIL, 1, params, on_deleted, es);
    } else {
        db_tx_query(tx, SQL_USER_SESSIONS_END_EVERY, 0, NULL, on_deleted, es);
    }
    db_tx_commit(tx, on_commit, es);
}

static void close_all(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static int run(end_sessions_t *es)
{
    if (config_load() != 0) return 1;
    if (!cfg.database_url) {
        fprintf(stderr, NAME ": DATABASE_URL is not set\n");
        return 1;
    }
    if (!cfg.redis_url) {
        fprintf(stderr, NAME ": REDIS_URL is not set\n");
        return 1;
    }
    redisContext *rc = redis_open(cfg.redis_url);
    if (!rc) {
        fprintf(stderr, "; no session was ended\n");
        return 1;
    }
    if (db_migrate(cfg.database_url) != 0) {
        fprintf(stderr, NAME ": database failure (migrations); no session was ended\n");
        redisFree(rc);
        return 1;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    if (db_init(&loop, cfg.database_url, 1) != 0) {
        fprintf(stderr, NAME ": database failure (DATABASE_URL); no session was ended\n");
        redisFree(rc);
        return 1;
    }
    db_tx_begin(on_begin, es);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_walk(&loop, close_all, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);

    int status = 1;
    if (!es->committed) {
        fprintf(stderr, NAME ": database failure%s; no session was ended\n",
                es->conn_lost ? " (database unreachable)" : "");
    } else if (es->email[0] && !es->found) {
        fprintf(stderr, NAME ": no account has the email %s; nothing was changed\n", es->email);
    } else if (!redis_announce(rc, es)) {
        fprintf(stderr,
                "; %lld session%s of %d user%s ended in the database, but open event "
                "streams may stay open and workers may serve cached contexts for up to "
                "CONTEXT_CACHE_TTL_MS: run the command again once Redis is back\n",
                es->sessions, es->sessions == 1 ? "" : "s", es->ended_users,
                es->ended_users == 1 ? "" : "s");
    } else {
        printf("Ended %lld session%s of %d user%s.\n", es->sessions, es->sessions == 1 ? "" : "s",
               es->ended_users, es->ended_users == 1 ? "" : "s");
        status = 0;
    }
    redisFree(rc);
    fflush(stdout);
    return status;
}

int cli_end_sessions(int argc, char **argv)
{
    static const struct option opts[] = {{"all", no_argument, NULL, 'a'},
                                         {"email", required_argument, NULL, 'e'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *email = NULL;
    bool all = false;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            all = true;
            break;
        case 'e':
            if (email) return usage_error("--email given twice");
            email = optarg;
            break;
        case 'h':
            fputs(USAGE, stdout);
            return 0;
        default:
            return usage_error("unknown option or missing value");
        }
    }
    if (optind < argc) return usage_error("unexpected argument");
    if (all == (email != NULL)) return usage_error("give either --all or --email");

    static end_sessions_t es;
    if (email && validate_email_lower(email, es.email, sizeof(es.email)) != 0)
        return usage_error("--email must be a valid email address");
    int status = run(&es);
    for (int i = 0; i < es.nusers; i++)
        free(es.users[i]);
    free(es.users);
    return status;
}
