-- Sign-up, sign-in, sign-out (routes/auth.c).

-- name: auth_sign_up
-- columns: json
-- Account, credential, session, verification and its mail in one statement; no row when the
-- email is taken. $1 id, $2 email, $3 first name, $4 last name, $5 language, $6 password hash,
-- $7 session id, $8 session token hash, $9 IP, $10 user agent, $11 verification id, $12 its
-- token hash, $13..$15 the mail.
WITH u AS (
    INSERT INTO users (id, email, first_name, last_name, preferred_language)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (email) DO NOTHING
    RETURNING *),
a AS (INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u),
s AS (
    INSERT INTO sessions (id, user_id, token_hash, expires_at, ip, user_agent)
    SELECT $7, id, $8, now() + interval '7 days', $9, $10 FROM u
    RETURNING *),
v AS (
    INSERT INTO verifications (id, kind, user_id, token_hash, expires_at)
    SELECT $11, 'email_verify', id, $12, now() + interval '24 hours' FROM u),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', email, 'subject', $13::text, 'text', $14::text,
                                      'html', $15::text)
    FROM u)
SELECT auth_session_json(u::users, s::sessions) AS json
FROM u, s;

-- name: auth_sign_in_lookup
-- columns: id, status, password_hash, two_factor_enabled
SELECT u.id, u.status, a.password_hash, u.two_factor_enabled
FROM users u
LEFT JOIN accounts a ON a.user_id = u.id
WHERE u.email = $1;

-- name: auth_sign_in_session
-- columns: json
-- $1 session id, $2 user, $3 token hash, $4 IP, $5 user agent.
WITH s AS (
    INSERT INTO sessions (id, user_id, token_hash, expires_at, ip, user_agent)
    VALUES ($1, $2, $3, now() + interval '7 days', $4, $5)
    RETURNING *)
SELECT auth_session_json(u, s::sessions) AS json
FROM s JOIN users u ON u.id = s.user_id;

-- name: auth_sign_out
DELETE FROM sessions WHERE id = $1;
