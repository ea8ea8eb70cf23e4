-- The version bumps that statement triggers call on every write (member lists, mentoring lists,
-- chat history) were SQL functions with a string body: PostgreSQL parses, analyzes and plans
-- such a body each time it runs one (it is not inlined: it is called with PERFORM from a trigger,
-- and an INSERT is never inlined). In PL/pgSQL the statement is prepared once per connection and
-- its plan kept. Same statements, same locking order (DISTINCT ... ORDER BY).

CREATE OR REPLACE FUNCTION organization_list_versions_bump(orgs uuid[]) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO organization_list_versions AS v
    SELECT o, nextval('organization_list_version_seq')
    FROM (SELECT DISTINCT unnest(orgs) AS o ORDER BY 1) d
    ON CONFLICT (organization_id) DO UPDATE SET version = EXCLUDED.version;
END
$$;

CREATE OR REPLACE FUNCTION mentoring_list_versions_bump(orgs uuid[]) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mentoring_list_versions AS v (organization_id, slot, version)
    SELECT o, pg_backend_pid() % 64, 1
    FROM (SELECT DISTINCT unnest(orgs) AS o ORDER BY 1) d
    WHERE o IS NOT NULL
    ON CONFLICT (organization_id, slot) DO UPDATE SET version = v.version + 1;
END
$$;

CREATE OR REPLACE FUNCTION chat_history_versions_bump(ms uuid[]) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chat_history_versions AS v
    SELECT m, nextval('chat_history_version_seq')
    FROM (SELECT DISTINCT unnest(ms) AS m ORDER BY 1) d
    WHERE m IS NOT NULL
    ON CONFLICT (mentorship_id) DO UPDATE SET version = EXCLUDED.version;
END
$$;
