-- The janitor (rt/janitor.c). Batches bound the locks one run holds; a backlog drains over a few
-- runs. Every worker runs them: DELETE is idempotent.

-- name: janitor_clean
-- columns: outbox, sessions, verifications
-- Outbox rows sent more than $1 seconds ago and dead ones after 30 days, sessions past their
-- expiry, verification tokens used or expired more than a day ago; the number deleted of each.
WITH o AS (DELETE FROM outbox WHERE id IN (
               SELECT id FROM outbox
               WHERE (sent_at IS NOT NULL AND sent_at < now() - make_interval(secs => $1::int))
                  OR (sent_at IS NULL AND attempts >= 10 AND created_at < now() - interval '30 days')
               LIMIT 5000)
           RETURNING 1),
     s AS (DELETE FROM sessions WHERE id IN (
               SELECT id FROM sessions WHERE expires_at < now() LIMIT 5000)
           RETURNING 1),
     v AS (DELETE FROM verifications WHERE id IN (
               SELECT id FROM verifications
               WHERE (used_at IS NOT NULL AND used_at < now() - interval '1 day')
                  OR expires_at < now() - interval '1 day'
               LIMIT 5000)
           RETURNING 1)
SELECT (SELECT count(*) FROM o) AS outbox,
       (SELECT count(*) FROM s) AS sessions,
       (SELECT count(*) FROM v) AS verifications;

-- name: janitor_uploads
-- columns: queued
-- Keys presigned more than 24 hours ago: the file_uploads row goes, and unless a file record
-- took the key, the object is deleted through the outbox (after this statement commits,
-- retried until it succeeds); the number of deletions queued.
WITH d AS (DELETE FROM file_uploads WHERE created_at < now() - interval '24 hours'
           RETURNING storage_key),
     q AS (INSERT INTO outbox (kind, payload)
           SELECT 'storage_delete', jsonb_build_object('key', d.storage_key) FROM d
           WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.storage_key = d.storage_key)
           RETURNING 1)
SELECT count(*) AS queued FROM q;
