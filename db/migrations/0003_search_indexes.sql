-- Member and user search: case-insensitive partial matches on email and display name
-- (LIKE '%term%' on lower(...)), served by trigram indexes; and the member list's stable order.

-- The display name (docs/api.md "Names"): first and last name joined by a space. IMMUTABLE and a plain
-- SQL body, so the planner inlines it and the expression index below matches queries that
-- search on lower(user_display_name(first_name, last_name)).
CREATE FUNCTION user_display_name(first_name text, last_name text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN btrim(coalesce(first_name, '') || ' ' || coalesce(last_name, ''));

CREATE INDEX users_email_trgm_idx ON users USING gin (lower(email) gin_trgm_ops);
CREATE INDEX users_display_name_trgm_idx ON users
    USING gin (lower(user_display_name(first_name, last_name)) gin_trgm_ops);

-- GET /api/organizations/:id/users pages through one organization in (joined_at, user_id)
-- order; this index gives the first page without sorting every member.
CREATE INDEX memberships_org_joined_idx
    ON organization_memberships (organization_id, joined_at, user_id);

-- GET /api/organizations pages in (created_at, id) order.
CREATE INDEX organizations_created_idx ON organizations (created_at, id);

-- Member counts per organization, role and membership status, kept by statement-level
-- triggers. A member list's total_count is a sum over at most eight of these rows whenever no
-- user-side filter (search, user status) applies, instead of a count over every membership of
-- the organization on each request. A snapshot sees a membership change and its count change
-- together (same transaction). Each trigger applies its net deltas in one upsert, in key
-- order, so concurrent changes lock count rows in the same order and cannot deadlock. No
-- foreign key: an organization's cascaded delete may remove memberships after their counts.
CREATE TABLE organization_member_counts (
    organization_id      uuid NOT NULL,
    role_in_organization text NOT NULL,
    membership_status    text NOT NULL,
    n                    bigint NOT NULL,
    PRIMARY KEY (organization_id, role_in_organization, membership_status)
);

INSERT INTO organization_member_counts
SELECT organization_id, role_in_organization, membership_status, count(*)
FROM organization_memberships GROUP BY 1, 2, 3;

-- Member-list versions: a number per organization that changes in the same transaction as
-- anything a member list shows (a membership of the organization, or the email, name, status or
-- avatar of one of its members). coachd keeps rendered member lists in memory and reuses one
-- while the version it was read with is still current, so a reuse never shows stale data.
CREATE SEQUENCE organization_list_version_seq;
CREATE TABLE organization_list_versions (
    organization_id uuid PRIMARY KEY,
    version         bigint NOT NULL
);
INSERT INTO organization_list_versions
SELECT organization_id, nextval('organization_list_version_seq')
FROM (SELECT DISTINCT organization_id FROM organization_memberships) d;

CREATE FUNCTION organization_list_versions_bump(orgs uuid[]) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO organization_list_versions AS v
    SELECT o, nextval('organization_list_version_seq')
    FROM (SELECT DISTINCT unnest(orgs) AS o ORDER BY 1) d
    ON CONFLICT (organization_id) DO UPDATE SET version = EXCLUDED.version
$$;

CREATE FUNCTION organization_member_counts_apply() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM organization_list_versions_bump(ARRAY(SELECT organization_id FROM new_rows));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM organization_list_versions_bump(ARRAY(SELECT organization_id FROM old_rows));
    ELSE
        PERFORM organization_list_versions_bump(ARRAY(SELECT organization_id FROM new_rows
            UNION SELECT organization_id FROM old_rows));
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO organization_member_counts AS c
        SELECT organization_id, role_in_organization, membership_status, count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (organization_id, role_in_organization, membership_status)
        DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO organization_member_counts AS c
        SELECT organization_id, role_in_organization, membership_status, -count(*)
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (organization_id, role_in_organization, membership_status)
        DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSE
        INSERT INTO organization_member_counts AS c
        SELECT organization_id, role_in_organization, membership_status, sum(k)
        FROM (SELECT organization_id, role_in_organization, membership_status, 1 AS k FROM new_rows
              UNION ALL
              SELECT organization_id, role_in_organization, membership_status, -1 FROM old_rows) d
        GROUP BY 1, 2, 3 HAVING sum(k) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (organization_id, role_in_organization, membership_status)
        DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER organization_member_counts_ins AFTER INSERT ON organization_memberships
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION organization_member_counts_apply();
CREATE TRIGGER organization_member_counts_upd AFTER UPDATE ON organization_memberships
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION organization_member_counts_apply();
CREATE TRIGGER organization_member_counts_del AFTER DELETE ON organization_memberships
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION organization_member_counts_apply();

-- A member's profile change shows in every member list of their organizations.
CREATE FUNCTION organization_list_versions_user() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM organization_list_versions_bump(ARRAY(
        SELECT organization_id FROM organization_memberships WHERE user_id = NEW.id));
    RETURN NULL;
END
$$;

CREATE TRIGGER organization_list_versions_user AFTER UPDATE ON users
    FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email OR OLD.status IS DISTINCT FROM NEW.status
          OR OLD.first_name IS DISTINCT FROM NEW.first_name
          OR OLD.last_name IS DISTINCT FROM NEW.last_name
          OR OLD.avatar_url IS DISTINCT FROM NEW.avatar_url)
    EXECUTE FUNCTION organization_list_versions_user();
