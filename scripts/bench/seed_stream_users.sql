-- Creates :n users with one session each for the streams benchmark and prints "userId token"
-- lines. Tokens are fixed strings (43+ characters of [A-Za-z0-9_-]); only their SHA-256 is
-- stored, as for real sessions.
\set ON_ERROR_STOP on
DELETE FROM users WHERE email LIKE 'sse-bench-%@bench.test';
WITH u AS (
    INSERT INTO users (id, email, first_name, last_name)
    SELECT 'cssebench' || lpad(g::text, 16, '0'), 'sse-bench-' || g || '@bench.test', 'Bench', 'User ' || g
    FROM generate_series(1, :n) g
    RETURNING id),
s AS (
    INSERT INTO sessions (id, user_id, token_hash, expires_at)
    SELECT gen_random_uuid(), id,
           encode(sha256(convert_to('ssebenchtoken_' || id || '_padpadpadpad', 'UTF8')), 'hex'),
           now() + interval '7 days'
    FROM u
    RETURNING user_id)
SELECT user_id || ' ' || 'ssebenchtoken_' || user_id || '_padpadpadpad' FROM s ORDER BY user_id;
