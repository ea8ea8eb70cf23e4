-- Push tokens of the signed-in user (routes/push_tokens.c).

-- name: push_token_register
-- columns: json, fresh
-- Registers token $1 of user $2 on platform $3 (a token changing hands keeps nothing of its
-- previous owner) and keeps the user's $4 newest other tokens (PUSH_TOKENS_PER_USER - 1).
WITH p AS (
    INSERT INTO push_tokens AS p (token, user_id, platform) VALUES ($1, $2, $3)
    ON CONFLICT (token) DO UPDATE SET
        user_id = EXCLUDED.user_id, platform = EXCLUDED.platform, updated_at = now(),
        created_at = CASE WHEN p.user_id = EXCLUDED.user_id THEN p.created_at ELSE now() END
    RETURNING token, platform, created_at, (xmax = 0) AS fresh),
old AS (
    DELETE FROM push_tokens
    WHERE user_id = $2 AND token <> $1
      AND token NOT IN (SELECT token FROM push_tokens
                        WHERE user_id = $2 AND token <> $1
                        ORDER BY created_at DESC, token DESC
                        LIMIT $4::int))
SELECT json_build_object('data', json_build_object('token', token, 'platform', platform,
                                                   'createdAt', iso(created_at))) AS json,
       fresh
FROM p;

-- name: push_token_delete
DELETE FROM push_tokens WHERE token = $1 AND user_id = $2;
