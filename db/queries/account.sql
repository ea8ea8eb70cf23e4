-- Password change of the signed-in user (routes/account.c).

-- name: account_password_get
-- columns: password_hash
SELECT password_hash FROM accounts WHERE user_id = $1;

-- name: account_password_set
-- columns: count
-- Stores the new hash $2 of user $1 and ends their other sessions (all but $3).
WITH a AS (
    UPDATE accounts SET password_hash = $2, updated_at = now()
    WHERE user_id = $1
    RETURNING user_id),
d AS (DELETE FROM sessions WHERE user_id = $1 AND id <> $3::uuid)
SELECT count(*) AS count FROM a;
