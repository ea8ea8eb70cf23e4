-- Password change of the signed-in user (routes/account.c).

-- name: account_password_get
-- columns: password_hash
SELECT password_hash FROM accounts WHERE user_id = $1;

-- name: account_password_set
-- columns: count
-- Stores the new hash $2 of user $1, ends their other sessions (all but $3), forgets their
-- trusted devices and pending two-factor sign-in challenges (a trusted device skips the second
-- step no more) and queues the "password changed" notice in the user's language ($4..$6
-- English, $7..$9 Spanish).
WITH a AS (
    UPDATE accounts SET password_hash = $2, updated_at = now()
    WHERE user_id = $1
    RETURNING user_id),
d AS (DELETE FROM sessions WHERE user_id = $1 AND id <> $3::uuid),
td AS (DELETE FROM trusted_devices WHERE user_id IN (SELECT user_id FROM a)),
tc AS (DELETE FROM two_factor_challenges WHERE user_id IN (SELECT user_id FROM a)),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', mail_in_language(u.email, COALESCE(u.preferred_language, 'en'),
                                    $4, $5, $6, $7, $8, $9)
    FROM users u JOIN a ON a.user_id = u.id)
SELECT count(*) AS count FROM a;
