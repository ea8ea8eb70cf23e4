-- POST /api/setup/first-run (routes/setup.c).

-- name: setup_initialized
-- columns: initialized
-- Whether an Owner or PlatformAdmin exists.
SELECT EXISTS (SELECT 1 FROM users
               WHERE global_role IN ('Owner', 'PlatformAdmin')) AS initialized;

-- name: setup_lock
-- columns: pg_advisory_xact_lock
-- Serializes first-run calls until the end of the transaction (a single statement would take
-- its snapshot before waiting for the lock).
SELECT pg_advisory_xact_lock(727274001);

-- name: setup_create_admin
-- columns: json
-- $1 id, $2 email, $3 first name, $4 last name, $5 language, $6 password hash. No row when an
-- administrator exists already. users_email_key may refuse the email (23505).
WITH chk AS (
    SELECT NOT EXISTS (SELECT 1 FROM users
                       WHERE global_role IN ('Owner', 'PlatformAdmin')) AS free),
u AS (
    INSERT INTO users (id, email, first_name, last_name, global_role, preferred_language)
    SELECT $1, $2, $3, $4, 'PlatformAdmin', $5 FROM chk WHERE free
    RETURNING id, email, first_name, last_name, global_role, preferred_language, created_at),
a AS (
    INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u)
SELECT json_build_object('data', json_build_object(
           'id', u.id, 'email', u.email,
           'name', concat_ws(' ', u.first_name, u.last_name),
           'firstName', u.first_name, 'lastName', u.last_name,
           'globalRole', u.global_role, 'preferredLanguage', u.preferred_language,
           'createdAt', iso(u.created_at))) AS json
FROM u;
