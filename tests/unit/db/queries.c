/*
 * Every named statement of db/queries/ against the migrated schema (COACHD_TEST_DATABASE_URL;
 * the run fails when it is missing): PostgreSQL must accept it (parse, names, types), and its
 * result columns must be the ones its `-- columns:` line declares, in that order, so that the
 * generated enums the routes read with are true. A typo, a dropped or renamed column, or a
 * column added without updating the list fails here rather than in a request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "db/db.h"
#include "db/queries.h"

static const char *db_url;

static void test_every_statement(void **state)
{
    (void)state;
    assert_int_equal(db_migrate(db_url), 0);
    PGconn *pg = PQconnectdb(db_url);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    assert_true(db_query_defs_count > 0);
    int failures = 0;
    for (size_t i = 0; i < db_query_defs_count; i++) {
        const db_query_def_t *q = &db_query_defs[i];
        PGresult *res = PQprepare(pg, "", q->sql, 0, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            fprintf(stderr, "%s.sql %s: %s", q->area, q->name, PQresultErrorMessage(res));
            failures++;
            PQclear(res);
            continue;
        }
        PQclear(res);
        res = PQdescribePrepared(pg, "");
        assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
        int n = PQnfields(res);
        if (n != q->ncols) {
            fprintf(stderr, "%s.sql %s: %d result columns, %d declared\n", q->area, q->name, n,
                    q->ncols);
            failures++;
        }
        for (int c = 0; c < n && c < q->ncols; c++) {
            if (strcmp(PQfname(res, c), q->cols[c]) != 0) {
                fprintf(stderr, "%s.sql %s: column %d is %s, declared %s\n", q->area, q->name,
                        c, PQfname(res, c), q->cols[c]);
                failures++;
            }
        }
        PQclear(res);
    }
    PQfinish(pg);
    assert_int_equal(failures, 0);
}

/* Names are unique over every file (the generator refuses duplicates; this guards the table). */
static void test_names_unique(void **state)
{
    (void)state;
    for (size_t i = 0; i < db_query_defs_count; i++)
        for (size_t j = i + 1; j < db_query_defs_count; j++)
            assert_string_not_equal(db_query_defs[i].name, db_query_defs[j].name);
}

int main(void)
{
    db_url = getenv("COACHD_TEST_DATABASE_URL");
    if (!db_url || !*db_url) {
        fprintf(stderr, "COACHD_TEST_DATABASE_URL is not set: these tests need PostgreSQL\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_statement),
        cmocka_unit_test(test_names_unique),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
