-- Shared by mentorships and sessions (routes/mentoring.c).

-- name: mentoring_version
-- columns: version
-- $1 organization: its current mentoring-list version (NULL before its first write).
SELECT (SELECT sum(version)::bigint FROM mentoring_list_versions WHERE organization_id = $1::uuid) AS version;

-- name: mentoring_queue_notices
-- columns: mails, pushes
-- $1: the array of mentoring_notices_render(). One mail outbox row per element, and one push
-- row per element whose user has push tokens (all of that user's tokens). Runs in the
-- transaction of the change.
WITH e AS (SELECT value AS n FROM jsonb_array_elements($1::jsonb)),
mm AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', n->'mail' FROM e
    WHERE jsonb_typeof(n->'mail') = 'object'
    RETURNING 1),
pp AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'push', jsonb_build_object('to', jsonb_agg(pt.token ORDER BY pt.token),
                                      'title', e.n->'push'->'title',
                                      'body', e.n->'push'->'body',
                                      'data', e.n->'push'->'data')
    FROM e
    JOIN push_tokens pt ON pt.user_id = e.n->>'userId'
    WHERE jsonb_typeof(e.n->'push') = 'object'
    GROUP BY e.n
    RETURNING 1)
SELECT (SELECT count(*) FROM mm) AS mails, (SELECT count(*) FROM pp) AS pushes;
