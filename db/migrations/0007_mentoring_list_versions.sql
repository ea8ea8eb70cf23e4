-- Mentoring-list versions: a number per organization that changes in the same transaction as
-- anything a mentorship or session list page shows (a mentorship or session of the
-- organization, or the email, name or avatar of a user who coaches or is taught in one of its
-- mentorships). coachd keeps rendered GET /api/mentorships and GET /api/sessions pages in memory
-- and reuses one only while the version it was read with is still current, so a reuse never
-- shows stale data (the same scheme as organization_list_versions of migration 0003).
--
-- Every write statement bumps the versions of the organizations it touched once, in key order
-- (statement-level triggers with transition tables), so concurrent writers lock version rows in
-- the same order. A bump holds the organization's row lock until commit: writes to one
-- organization's mentorships and sessions serialize on it for the rest of their transaction.
-- No foreign key: an organization's cascaded delete may remove its mentorships after the row.
CREATE TABLE mentoring_list_versions (
    organization_id uuid PRIMARY KEY,
    version         bigint NOT NULL
);
INSERT INTO mentoring_list_versions
SELECT organization_id, nextval('organization_list_version_seq')
FROM (SELECT DISTINCT organization_id FROM mentorships) d;

CREATE FUNCTION mentoring_list_versions_bump(orgs uuid[]) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO mentoring_list_versions AS v
    SELECT o, nextval('organization_list_version_seq')
    FROM (SELECT DISTINCT unnest(orgs) AS o ORDER BY 1) d
    WHERE o IS NOT NULL
    ON CONFLICT (organization_id) DO UPDATE SET version = EXCLUDED.version
$$;

-- One function for mentorships and mentorship_sessions: both carry organization_id.
CREATE FUNCTION mentoring_list_versions_apply() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM mentoring_list_versions_bump(ARRAY(SELECT organization_id FROM new_rows));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM mentoring_list_versions_bump(ARRAY(SELECT organization_id FROM old_rows));
    ELSE
        PERFORM mentoring_list_versions_bump(ARRAY(SELECT organization_id FROM new_rows
            UNION SELECT organization_id FROM old_rows));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER mentoring_list_versions_m_ins AFTER INSERT ON mentorships
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mentoring_list_versions_apply();
CREATE TRIGGER mentoring_list_versions_m_upd AFTER UPDATE ON mentorships
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mentoring_list_versions_apply();
CREATE TRIGGER mentoring_list_versions_m_del AFTER DELETE ON mentorships
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mentoring_list_versions_apply();

-- Includes the missed-session sweeper's UPDATE (rt/sweeper.c).
CREATE TRIGGER mentoring_list_versions_s_ins AFTER INSERT ON mentorship_sessions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mentoring_list_versions_apply();
CREATE TRIGGER mentoring_list_versions_s_upd AFTER UPDATE ON mentorship_sessions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mentoring_list_versions_apply();
CREATE TRIGGER mentoring_list_versions_s_del AFTER DELETE ON mentorship_sessions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mentoring_list_versions_apply();

-- A user's brief (email, names, avatar) shows as coach or teacher in the lists of every
-- organization where they are a member, and of every organization with a mentorship of theirs
-- (a mentorship outlives a disabled membership).
CREATE FUNCTION mentoring_list_versions_user() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mentoring_list_versions_bump(ARRAY(
        SELECT organization_id FROM organization_memberships WHERE user_id = NEW.id
        UNION SELECT organization_id FROM mentorships WHERE coach_id = NEW.id
        UNION SELECT organization_id FROM mentorships WHERE teacher_id = NEW.id));
    RETURN NULL;
END
$$;

CREATE TRIGGER mentoring_list_versions_user AFTER UPDATE ON users
    FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email
          OR OLD.first_name IS DISTINCT FROM NEW.first_name
          OR OLD.last_name IS DISTINCT FROM NEW.last_name
          OR OLD.avatar_url IS DISTINCT FROM NEW.avatar_url)
    EXECUTE FUNCTION mentoring_list_versions_user();
