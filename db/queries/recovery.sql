-- Password reset and email verification (routes/recovery.c).

-- name: recovery_forget
-- columns: count
-- Queues a password-reset token and its mail for an active account; count 0 when there is
-- none (the answer is the same). $1 email, $2 id, $3 token hash, $4 the redirect's language
-- (else the account's), $5..$7 the English mail, $8..$10 the Spanish one.
WITH u AS (
    SELECT id, email, preferred_language FROM users
    WHERE email = $1 AND status = 'active'),
v AS (
    INSERT INTO verifications (id, kind, user_id, token_hash, expires_at)
    SELECT $2, 'password_reset', id, $3, now() + interval '1 hour' FROM u),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', mail_in_language(u.email, COALESCE($4, u.preferred_language, 'en'),
                                    $5, $6, $7, $8, $9, $10)
    FROM u)
SELECT count(*) AS count FROM u;

-- name: recovery_resend
-- columns: count
-- The same for a new verification mail of an active, unverified account.
WITH u AS (
    SELECT id, email, preferred_language FROM users
    WHERE email = $1 AND status = 'active' AND NOT email_verified),
v AS (
    INSERT INTO verifications (id, kind, user_id, token_hash, expires_at)
    SELECT $2, 'email_verify', id, $3, now() + interval '24 hours' FROM u),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', mail_in_language(u.email, COALESCE($4, u.preferred_language, 'en'),
                                    $5, $6, $7, $8, $9, $10)
    FROM u)
SELECT count(*) AS count FROM u;

-- name: recovery_reset_check
-- columns: user_id, email, first_name, last_name
-- The account a live reset token $1 belongs to, with what the password rules compare against.
SELECT v.user_id, u.email, u.first_name, u.last_name
FROM verifications v JOIN users u ON u.id = v.user_id
WHERE v.token_hash = $1 AND v.kind = 'password_reset' AND v.used_at IS NULL
  AND v.expires_at > now();

-- name: recovery_reset_apply
-- columns: user_id
-- Consumes the token $1, stores the new hash $2, ends every other session of the user
-- (all but $3, the caller's own when signed in), forgets their trusted devices and pending
-- two-factor sign-in challenges and queues the "password reset" notice in the user's language
-- ($4..$6 English, $7..$9 Spanish).
WITH t AS (
    UPDATE verifications SET used_at = now()
    WHERE token_hash = $1 AND kind = 'password_reset' AND used_at IS NULL
      AND expires_at > now()
    RETURNING user_id),
a AS (
    INSERT INTO accounts (user_id, password_hash) SELECT user_id, $2 FROM t
    ON CONFLICT (user_id) DO UPDATE SET password_hash = EXCLUDED.password_hash,
                                        updated_at = now()),
d AS (
    DELETE FROM sessions
    WHERE user_id IN (SELECT user_id FROM t) AND id IS DISTINCT FROM $3::uuid
    RETURNING user_id),
td AS (DELETE FROM trusted_devices WHERE user_id IN (SELECT user_id FROM t)),
tc AS (DELETE FROM two_factor_challenges WHERE user_id IN (SELECT user_id FROM t)),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', mail_in_language(u.email, COALESCE(u.preferred_language, 'en'),
                                    $4, $5, $6, $7, $8, $9)
    FROM users u JOIN t ON t.user_id = u.id)
SELECT user_id FROM t;

-- name: recovery_verify
-- columns: outcome, preferred_language, verified_user_id
-- Consumes the email-verification token $1.
WITH t AS (
    SELECT id, user_id, expires_at, used_at FROM verifications
    WHERE token_hash = $1 AND kind = 'email_verify'),
c AS (
    UPDATE verifications SET used_at = now()
    WHERE id IN (SELECT id FROM t WHERE used_at IS NULL AND expires_at > now())
    RETURNING user_id),
u AS (
    UPDATE users SET email_verified = true, updated_at = now()
    WHERE id IN (SELECT user_id FROM c)
    RETURNING id)
SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM t WHERE used_at IS NULL) THEN 'invalid_token'
            WHEN NOT EXISTS (SELECT 1 FROM c) THEN 'token_expired'
            ELSE 'ok' END AS outcome,
       (SELECT preferred_language FROM users
        WHERE id IN (SELECT user_id FROM t)) AS preferred_language,
       (SELECT id FROM u) AS verified_user_id;
