/*
 * The named SQL statements of db/queries/<area>.sql, compiled into the binary by
 * db/gen_queries.py. Routes include the generated header of their area, "db/q_<area>.h":
 * `SQL_<NAME>` is the statement text (a static string, as db_query wants) and
 * `<NAME>_<COLUMN>` the index of each result column, so no caller reads a column by number.
 *
 * db_query_defs lists every statement with its declared columns; tests/unit/db/queries.c
 * prepares each one against the migrated schema and checks the column names and count.
 */
#pragma once
#include <stddef.h>

typedef struct db_query_def {
    const char *area; /* the file, without .sql */
    const char *name;
    const char *sql;
    int ncols;               /* 0 for a statement that returns no rows */
    const char *const *cols; /* the declared column names, in order */
} db_query_def_t;

extern const db_query_def_t db_query_defs[];
extern const size_t db_query_defs_count;

/* Compile-time check that statement STMT has column COL at the same number as statement REF,
 * for a helper that reads several statements' rows with REF's enum (e.g. an access-check
 * prefix every statement of an area starts with). */
#define DB_SAME_COLUMN(STMT, REF, COL)                                                             \
    _Static_assert((int)STMT##_##COL == (int)REF##_##COL,                                          \
                   #STMT "_" #COL " is at the column number of " #REF "_" #COL)
