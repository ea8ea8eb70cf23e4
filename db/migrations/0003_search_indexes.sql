-- Member and user search: case-insensitive partial matches on email and display name
-- (LIKE '%term%' on lower(...)), served by trigram indexes; and the member list's stable order.

-- The display name of DECISIONS.md: first and last name joined by a space. IMMUTABLE and a plain
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
