-- Two-factor sign-in (routes/two_factor.c).

-- name: two_factor_state
-- columns: password_hash, email, two_factor_enabled, secret_sealed, verified, last_step
-- The signed-in user $1's password hash, email and two-factor row (NULLs without one).
SELECT a.password_hash, u.email, u.two_factor_enabled, t.secret_sealed, t.verified, t.last_step
FROM users u
LEFT JOIN accounts a ON a.user_id = u.id
LEFT JOIN two_factors t ON t.user_id = u.id
WHERE u.id = $1;

-- name: two_factor_setup
-- columns: count
-- Starts (or restarts) an unverified setup of user $1 with the sealed secret $2 and the backup
-- code hashes $3 (text[]); nothing when two-factor is already verified.
WITH t AS (
    INSERT INTO two_factors AS t (user_id, secret_sealed, verified, last_step)
    VALUES ($1, $2, false, -1)
    ON CONFLICT (user_id) DO UPDATE
        SET secret_sealed = EXCLUDED.secret_sealed, last_step = -1, updated_at = now()
        WHERE NOT t.verified
    RETURNING user_id),
d AS (DELETE FROM two_factor_backup_codes WHERE user_id IN (SELECT user_id FROM t)),
b AS (INSERT INTO two_factor_backup_codes (user_id, code_hash)
      SELECT t.user_id, h FROM t, unnest($3::text[]) AS h)
SELECT count(*) AS count FROM t;

-- name: two_factor_use_step
-- columns: verified, enabled_now
-- Records step $2 as used by user $1 (only when newer than the last one) and marks the setup
-- verified and two-factor enabled; $3..$5 the mail sent when this enables it. No row when the
-- step was used meanwhile.
WITH t AS (
    UPDATE two_factors SET last_step = $2::bigint, verified = true, updated_at = now()
    WHERE user_id = $1 AND last_step < $2::bigint
    RETURNING user_id),
u AS (
    UPDATE users SET two_factor_enabled = true, updated_at = now()
    WHERE id = $1 AND NOT two_factor_enabled AND EXISTS (SELECT 1 FROM t)
    RETURNING email),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', email, 'subject', $3::text, 'text', $4::text,
                                      'html', $5::text)
    FROM u)
SELECT true AS verified, EXISTS (SELECT 1 FROM u) AS enabled_now FROM t;

-- name: two_factor_disable
-- columns: email
-- Turns two-factor off for user $1: the secret, backup codes, challenges and trusted devices
-- go; $2..$4 the mail.
WITH t AS (DELETE FROM two_factors WHERE user_id = $1),
b AS (DELETE FROM two_factor_backup_codes WHERE user_id = $1),
c AS (DELETE FROM two_factor_challenges WHERE user_id = $1),
d AS (DELETE FROM trusted_devices WHERE user_id = $1),
u AS (
    UPDATE users SET two_factor_enabled = false, updated_at = now()
    WHERE id = $1
    RETURNING email),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', email, 'subject', $2::text, 'text', $3::text,
                                      'html', $4::text)
    FROM u)
SELECT email FROM u;

-- name: two_factor_backup_replace
-- columns: count
-- Replaces the backup codes of user $1 (two-factor enabled) with the hashes $2 (text[]).
WITH t AS (SELECT user_id FROM two_factors WHERE user_id = $1 AND verified),
d AS (DELETE FROM two_factor_backup_codes WHERE user_id IN (SELECT user_id FROM t)),
b AS (INSERT INTO two_factor_backup_codes (user_id, code_hash)
      SELECT t.user_id, h FROM t, unnest($2::text[]) AS h)
SELECT count(*) AS count FROM t;

-- name: two_factor_backup_use
-- columns: remaining
-- Spends the backup code hash $2 of user $1 (once: the row goes); $3..$5 the mail that tells
-- the owner. No row when there is no such code.
WITH d AS (
    DELETE FROM two_factor_backup_codes
    WHERE user_id = $1 AND code_hash = $2
    RETURNING user_id),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', u.email, 'subject', $3::text, 'text', $4::text,
                                      'html', $5::text)
    FROM d JOIN users u ON u.id = d.user_id)
SELECT (SELECT count(*) FROM two_factor_backup_codes WHERE user_id = $1) - 1 AS remaining
FROM d;

-- name: two_factor_challenge_new
-- columns: ended_id, ended_user_id
-- Stores the sign-in challenge $1 (token hash) of user $2 for ten minutes. As at every sign-in,
-- the session whose cookie the request carried ($3 its hash, NULL: none) ends, whoever's it is:
-- ended_id, ended_user_id (NULL when there was none).
WITH c AS (
    INSERT INTO two_factor_challenges (token_hash, user_id, expires_at)
    VALUES ($1, $2, now() + interval '10 minutes')),
e AS (DELETE FROM sessions WHERE token_hash = $3 RETURNING id, user_id)
SELECT (SELECT id FROM e) AS ended_id, (SELECT user_id FROM e) AS ended_user_id;

-- name: two_factor_challenge_get
-- columns: user_id, email, preferred_language, secret_sealed, verified, last_step
-- The user of a live challenge $1 (token hash) whose two-factor is on and active.
SELECT c.user_id, u.email, u.preferred_language, t.secret_sealed, t.verified, t.last_step
FROM two_factor_challenges c
JOIN users u ON u.id = c.user_id AND u.status = 'active' AND u.two_factor_enabled
LEFT JOIN two_factors t ON t.user_id = c.user_id
WHERE c.token_hash = $1 AND c.expires_at > now();

-- name: two_factor_complete
-- columns: json, live
-- Ends the sign-in challenge $1 (token hash) of user $3 with a new session, in one statement
-- with the use of its code: TOTP step $8 (only when newer than the last used one) or backup
-- code hash $9 (spent). $2 session id, $4 session token hash, $5 IP, $6 user agent, $7 a trusted
-- device's token hash or NULL, $10..$12 the mail of a spent backup code, $13
-- SESSION_ABSOLUTE_DAYS in seconds. json is NULL when the code was not taken; live tells whether
-- the challenge still waits (then the code was wrong). The session whose cookie the client held
-- ended with the first step (two_factor_challenge_new).
WITH ch AS (
    SELECT user_id FROM two_factor_challenges
    WHERE token_hash = $1 AND user_id = $3 AND expires_at > now()
    FOR UPDATE),
t AS (
    UPDATE two_factors SET last_step = $8::bigint, updated_at = now()
    WHERE user_id IN (SELECT user_id FROM ch) AND $8::bigint IS NOT NULL
      AND last_step < $8::bigint
    RETURNING user_id),
b AS (
    DELETE FROM two_factor_backup_codes
    WHERE user_id IN (SELECT user_id FROM ch) AND $9::text IS NOT NULL AND code_hash = $9
    RETURNING user_id),
ok AS (SELECT user_id FROM t UNION ALL SELECT user_id FROM b),
c AS (
    DELETE FROM two_factor_challenges
    WHERE token_hash = $1 AND EXISTS (SELECT 1 FROM ok)
    RETURNING user_id),
s AS (
    INSERT INTO sessions (id, user_id, token_hash, expires_at, ip, user_agent)
    SELECT $2, user_id, $4, now() + LEAST(interval '7 days', make_interval(secs => $13::float8)),
           $5, $6 FROM c
    RETURNING *),

d AS (
    INSERT INTO trusted_devices (token_hash, user_id, expires_at)
    SELECT $7, user_id, now() + interval '30 days' FROM c WHERE $7::text IS NOT NULL),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', u.email, 'subject', $10::text, 'text', $11::text,
                                      'html', $12::text)
    FROM b JOIN users u ON u.id = b.user_id)
SELECT (SELECT auth_session_json(u, s::sessions) FROM s JOIN users u ON u.id = s.user_id) AS json,
       EXISTS (SELECT 1 FROM ch) AS live;

-- name: two_factor_trusted
-- columns: trusted
-- Whether $1 (a trust_device token hash) is a live trusted device of user $2.
SELECT EXISTS (SELECT 1 FROM trusted_devices
               WHERE token_hash = $1 AND user_id = $2 AND expires_at > now()) AS trusted;

-- name: two_factor_reset
-- columns: was_enabled
-- An administrator's reset of user $1, who lost their authenticator and backup codes
-- (DELETE /api/users/:id/two-factor in routes/users.c): the secret, backup codes, challenges and
-- trusted devices go, two-factor turns off, every session of the user ends and, when two-factor
-- was on, the "two-factor turned off" notice is queued in the user's language ($2..$4 English,
-- $5..$7 Spanish).
WITH t AS (DELETE FROM two_factors WHERE user_id = $1),
b AS (DELETE FROM two_factor_backup_codes WHERE user_id = $1),
c AS (DELETE FROM two_factor_challenges WHERE user_id = $1),
d AS (DELETE FROM trusted_devices WHERE user_id = $1),
s AS (DELETE FROM sessions WHERE user_id = $1),
u AS (
    UPDATE users SET two_factor_enabled = false, updated_at = now()
    WHERE id = $1 AND two_factor_enabled
    RETURNING email, preferred_language),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', mail_in_language(email, COALESCE(preferred_language, 'en'),
                                    $2, $3, $4, $5, $6, $7)
    FROM u)
SELECT EXISTS (SELECT 1 FROM u) AS was_enabled;
