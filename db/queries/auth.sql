-- Sign-up, sign-in, sign-out (routes/auth.c).

-- name: auth_sign_up
-- columns: json, ended_id, ended_user_id
-- Account, credential, session, verification and its mail in one statement; no row when the
-- email is taken. $1 id, $2 email, $3 first name, $4 last name, $5 language, $6 password hash,
-- $7 session id, $8 session token hash, $9 IP, $10 user agent, $11 verification id, $12 its
-- token hash, $13..$15 the mail, $16 SESSION_ABSOLUTE_DAYS in seconds, $17 the hash of the
-- session cookie the request carried (NULL: none): that session ends when the account is made
-- (ended_id, ended_user_id; NULL when there was none).
WITH u AS (
    INSERT INTO users (id, email, first_name, last_name, preferred_language)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (email) DO NOTHING
    RETURNING *),
a AS (INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u),
s AS (
    INSERT INTO sessions (id, user_id, token_hash, expires_at, ip, user_agent)
    SELECT $7, id, $8, now() + LEAST(interval '7 days', make_interval(secs => $16::float8)),
           $9, $10
    FROM u
    RETURNING *),
e AS (
    DELETE FROM sessions WHERE token_hash = $17 AND EXISTS (SELECT 1 FROM u)
    RETURNING id, user_id),
v AS (
    INSERT INTO verifications (id, kind, user_id, token_hash, expires_at)
    SELECT $11, 'email_verify', id, $12, now() + interval '24 hours' FROM u),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', email, 'subject', $13::text, 'text', $14::text,
                                      'html', $15::text)
    FROM u)
SELECT auth_session_json(u::users, s::sessions) AS json,
       (SELECT id FROM e) AS ended_id, (SELECT user_id FROM e) AS ended_user_id
FROM u, s;

-- name: auth_sign_in_lookup
-- columns: id, status, password_hash, two_factor_enabled
SELECT u.id, u.status, a.password_hash, u.two_factor_enabled
FROM users u
LEFT JOIN accounts a ON a.user_id = u.id
WHERE u.email = $1;

-- name: auth_sign_in_session
-- columns: json, ended_id, ended_user_id
-- $1 session id, $2 user, $3 token hash, $4 IP, $5 user agent, $6 SESSION_ABSOLUTE_DAYS in
-- seconds, $7 the hash of the session cookie the request carried (NULL: none), whoever's it is:
-- that session ends (ended_id, ended_user_id; NULL when there was none).
WITH s AS (
    INSERT INTO sessions (id, user_id, token_hash, expires_at, ip, user_agent)
    VALUES ($1, $2, $3, now() + LEAST(interval '7 days', make_interval(secs => $6::float8)),
            $4, $5)
    RETURNING *),
e AS (DELETE FROM sessions WHERE token_hash = $7 RETURNING id, user_id)
SELECT auth_session_json(u, s::sessions) AS json,
       (SELECT id FROM e) AS ended_id, (SELECT user_id FROM e) AS ended_user_id
FROM s JOIN users u ON u.id = s.user_id;

-- name: auth_sign_out
DELETE FROM sessions WHERE id = $1;
