-- The outbox drainer (rt/outbox.c). A mail body may carry a live reset, verification or invite
-- link: once a row is sent or given up, only the envelope stays (its payload loses text and
-- html; the tokens themselves are stored hashed elsewhere). outbox_sent, outbox_retry and
-- outbox_dead each say so in their own CASE.

-- name: outbox_claim
-- columns: id, kind, payload, attempts
-- Lease-claims at most $1 due rows: the claim counts an attempt and moves next_attempt_at two
-- minutes ahead, so a row whose worker died mid-send becomes due again for any worker. SKIP
-- LOCKED keeps two workers from claiming one row.
UPDATE outbox
SET attempts = attempts + 1, next_attempt_at = now() + interval '2 minutes'
WHERE id IN (SELECT id FROM outbox
             WHERE sent_at IS NULL AND next_attempt_at <= now() AND attempts < 10
             ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING id, kind, payload, attempts;

-- name: outbox_sent
-- Row $1 was sent.
UPDATE outbox
SET sent_at = now(), last_error = NULL,
    payload = CASE WHEN kind = 'mail' THEN payload - 'text' - 'html' - 'ics' ELSE payload END
WHERE id = $1;

-- name: outbox_retry
-- Row $1 failed with error $2: due again in $3 seconds. The last allowed attempt failing gives
-- the row up (the claim never takes it again), so its mail body goes.
UPDATE outbox
SET next_attempt_at = now() + $3::int * interval '1 second', last_error = $2,
    payload = CASE WHEN kind = 'mail' AND attempts >= 10 THEN payload - 'text' - 'html' - 'ics'
                   ELSE payload END
WHERE id = $1;

-- name: outbox_retry_tokens
-- A push row $1 whose batches failed only in part: due again in $3 seconds with error $2, and
-- only the tokens of the failed batches ($4, a JSON array) left in its payload.
UPDATE outbox
SET next_attempt_at = now() + $3::int * interval '1 second', last_error = $2,
    payload = jsonb_set(payload, '{to}', $4::jsonb)
WHERE id = $1;

-- name: outbox_dead
-- Row $1 cannot be sent at all (error $2): given up at once.
UPDATE outbox
SET attempts = GREATEST(attempts, 10), last_error = $2,
    payload = CASE WHEN kind = 'mail' THEN payload - 'text' - 'html' - 'ics' ELSE payload END
WHERE id = $1;

-- name: outbox_forget_token
-- The push service reported token $1 DeviceNotRegistered.
DELETE FROM push_tokens WHERE token = $1;
