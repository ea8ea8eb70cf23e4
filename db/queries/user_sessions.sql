-- The signed-in user's own sessions: list and revoke (routes/user_sessions.c). $2 of the list is
-- SESSION_ABSOLUTE_DAYS in seconds: a session's expiry is never later than its creation plus
-- that (context_caller applies the same cap).

-- name: user_sessions_list
-- columns: json
-- The live sessions of user $1, newest first, as better-auth's list-sessions answers them; `token`
-- is the session id (the raw token is never stored), `current` marks session $3.
SELECT coalesce(json_agg(json_build_object(
           'id', s.id, 'token', s.id, 'userId', s.user_id,
           'createdAt', iso(s.created_at), 'updatedAt', iso(s.updated_at),
           'expiresAt', iso(e.at), 'ipAddress', s.ip, 'userAgent', s.user_agent,
           'current', s.id = $3::uuid)
         ORDER BY s.created_at DESC, s.id), '[]'::json) AS json
FROM sessions s
CROSS JOIN LATERAL (SELECT LEAST(s.expires_at,
                                 s.created_at + make_interval(secs => $2::float8)) AS at) e
WHERE s.user_id = $1 AND e.at > now();

-- name: user_sessions_revoke_one
-- columns: id
-- Ends user $1's session named by its id $2 or by the hash $3 of its token (either may be NULL);
-- no row when the user has no such session.
DELETE FROM sessions
WHERE user_id = $1 AND (id = $2::uuid OR token_hash = $3)
RETURNING id;

-- name: user_sessions_revoke_others
-- columns: count
-- Ends every session of user $1 but $2.
WITH d AS (DELETE FROM sessions WHERE user_id = $1 AND id <> $2::uuid RETURNING 1)
SELECT count(*) AS count FROM d;

-- name: user_sessions_revoke_all
-- columns: count
-- Ends every session of user $1 (the caller's own, or, from PATCH-status staff, another user's)
-- and forgets their trusted devices and pending two-factor sign-in challenges: whoever ends every
-- session may think the account was taken, and a device trusted before must not skip the second
-- step after.
WITH d AS (DELETE FROM sessions WHERE user_id = $1 RETURNING 1),
td AS (DELETE FROM trusted_devices WHERE user_id = $1),
tc AS (DELETE FROM two_factor_challenges WHERE user_id = $1)
SELECT count(*) AS count FROM d;

-- name: user_sessions_end_every
-- columns: user_id, count
-- `coachd end-sessions --all` (cli/end_sessions.c): ends every session of every user and forgets
-- every trusted device and pending two-factor sign-in challenge; one row per user who had a
-- session, with how many.
WITH d AS (DELETE FROM sessions RETURNING user_id),
td AS (DELETE FROM trusted_devices),
tc AS (DELETE FROM two_factor_challenges)
SELECT user_id, count(*) AS count FROM d GROUP BY user_id ORDER BY user_id;

-- name: user_sessions_end_email
-- columns: =user_sessions_end_every
-- `coachd end-sessions --email`: ends every session of the user whose (lower-cased) email is $1
-- and forgets their trusted devices and pending two-factor sign-in challenges; one row with how
-- many sessions, none when no user has that email.
WITH u AS (SELECT id FROM users WHERE email = $1),
d AS (DELETE FROM sessions WHERE user_id IN (SELECT id FROM u) RETURNING 1),
td AS (DELETE FROM trusted_devices WHERE user_id IN (SELECT id FROM u)),
tc AS (DELETE FROM two_factor_challenges WHERE user_id IN (SELECT id FROM u))
SELECT u.id AS user_id, (SELECT count(*) FROM d) AS count FROM u;
