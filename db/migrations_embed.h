/*
 * Migrations embedded at build time by db/embed_migrations.py from db/migrations/NNNN_name.sql,
 * sorted by file name. Internal to db/ (db_migrate is the public entry point).
 */
#pragma once
#include <stddef.h>

typedef struct db_migration {
    const char *name; /* file name without ".sql", recorded in schema_migrations.version */
    const char *sql;  /* the whole file */
} db_migration_t;

extern const db_migration_t db_migrations[];
extern const size_t db_migrations_count;
