/*
 * Schema migrations (API in db/db.h): the one synchronous database path, run by `coachd
 * migrate` and before the listener opens. Applies the embedded db/migrations files that
 * schema_migrations does not list yet, each in its own transaction, while holding a
 * session-level advisory lock so that concurrent workers and processes never race.
 */
#include "db/db.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "db/migrations_embed.h"

/* Arbitrary constant shared by every coachd process ("coachd" in ASCII, as a number). */
#define DB_MIGRATE_LOCK "109330026424420"

static const char sql_lock[] = "SELECT pg_advisory_lock(" DB_MIGRATE_LOCK ")";
static const char sql_unlock[] = "SELECT pg_advisory_unlock(" DB_MIGRATE_LOCK ")";
static const char sql_table[] = "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                " version text PRIMARY KEY,"
                                " applied_at timestamptz NOT NULL DEFAULT now())";
static const char sql_applied[] = "SELECT 1 FROM schema_migrations WHERE version = $1";
static const char sql_record[] = "INSERT INTO schema_migrations (version) VALUES ($1)";

static int exec_ok(PGconn *pg, PGresult *res, const char *what);
static int exec_simple(PGconn *pg, const char *sql, const char *what);
static int apply_one(PGconn *pg, const db_migration_t *m);
static void on_notice(void *arg, const char *msg);
static const char *one_line(char *buf, size_t size, const char *msg);

/* libpq messages span lines; logs are one line per record. */
static const char *one_line(char *buf, size_t size, const char *msg)
{
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < size; p++) {
        char ch = (*p == '\n' || *p == '\t' || *p == '\r') ? ' ' : *p;
        if (ch == ' ' && (n == 0 || buf[n - 1] == ' ')) continue;
        buf[n++] = ch;
    }
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = '\0';
    return buf;
}

/* Consumes res; 0 when it succeeded, else logs and returns -1. */
static int exec_ok(PGconn *pg, PGresult *res, const char *what)
{
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    int rc = 0;
    char buf[1024];
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        log_error("migrate: %s failed: %s", what,
                  one_line(buf, sizeof buf, res ? PQresultErrorMessage(res) : PQerrorMessage(pg)));
        rc = -1;
    }
    PQclear(res);
    return rc;
}

static int exec_simple(PGconn *pg, const char *sql, const char *what)
{
    return exec_ok(pg, PQexec(pg, sql), what);
}

/* Applies one migration unless already recorded: 1 applied, 0 skipped, -1 failed. */
static int apply_one(PGconn *pg, const db_migration_t *m)
{
    const char *params[1] = {m->name};
    PGresult *res = PQexecParams(pg, sql_applied, 1, NULL, params, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
        return exec_ok(pg, res, "reading schema_migrations");
    int seen = PQntuples(res) > 0;
    PQclear(res);
    if (seen) return 0;

    if (exec_simple(pg, "BEGIN", "BEGIN") < 0) return -1;
    /* Simple protocol: a migration file may hold many statements. */
    if (exec_simple(pg, m->sql, m->name) < 0 ||
        exec_ok(pg, PQexecParams(pg, sql_record, 1, NULL, params, NULL, NULL, 0),
                "recording migration") < 0 ||
        exec_simple(pg, "COMMIT", "COMMIT") < 0) {
        PQclear(PQexec(pg, "ROLLBACK"));
        return -1;
    }
    log_info("migrate: applied %s", m->name);
    return 1;
}

static void on_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* "relation already exists, skipping" and the like */
}

int db_migrate(const char *conninfo)
{
    int rc = -1;
    int applied = 0;
    bool locked = false;
    PGconn *pg = PQconnectdb(conninfo ? conninfo : "");
    char buf[1024];
    if (!pg || PQstatus(pg) != CONNECTION_OK) {
        log_error("migrate: cannot connect: %s",
                  pg ? one_line(buf, sizeof buf, PQerrorMessage(pg)) : "out of memory");
        goto done;
    }
    PQsetNoticeProcessor(pg, on_notice, NULL);
    if (exec_simple(pg, sql_lock, "advisory lock") < 0) goto done;
    locked = true;
    if (exec_simple(pg, sql_table, "creating schema_migrations") < 0) goto done;
    for (size_t i = 0; i < db_migrations_count; i++) {
        int r = apply_one(pg, &db_migrations[i]);
        if (r < 0) goto done;
        applied += r;
    }
    log_info("migrate: %d applied, %zu known", applied, db_migrations_count);
    rc = 0;
done:
    if (locked) exec_simple(pg, sql_unlock, "advisory unlock");
    if (pg) PQfinish(pg);
    return rc;
}

/* Built once: readiness sends it with every poll. Migration names are file names of
 * [0-9A-Za-z_], so no element needs quoting. */
const char *db_migrations_array(void)
{
    static char *literal;
    if (literal) return literal;
    size_t n = 3;
    for (size_t i = 0; i < db_migrations_count; i++)
        n += strlen(db_migrations[i].name) + 1;
    char *s = xmalloc(n);
    size_t at = 0;
    s[at++] = '{';
    for (size_t i = 0; i < db_migrations_count; i++) {
        if (i) s[at++] = ',';
        size_t len = strlen(db_migrations[i].name);
        memcpy(s + at, db_migrations[i].name, len);
        at += len;
    }
    s[at++] = '}';
    s[at] = '\0';
    literal = s;
    return literal;
}
