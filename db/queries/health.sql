-- GET /api/health and /api/health/ready (routes/health.c).

-- name: health_ready
-- columns: migrated
-- One round trip answers both questions of readiness: the database serves, and every migration
-- this binary embeds ($1, a text[] of their names) is recorded. A binary older than the schema
-- (a rolling deploy whose newer half migrated already) stays ready.
SELECT NOT EXISTS (SELECT unnest($1::text[])
                   EXCEPT
                   SELECT version FROM schema_migrations) AS migrated;

-- name: health_ping
-- columns: up
-- GET /api/health: the database answers through the pool.
SELECT 1 AS up;
