-- GET /metrics (routes/metrics.c).

-- name: metrics_outbox
-- columns: depth, oldest_age_seconds
-- Unsent outbox rows and the age of the oldest, in seconds.
SELECT count(*) AS depth,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_age_seconds
FROM outbox
WHERE sent_at IS NULL;
