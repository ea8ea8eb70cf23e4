-- Organizations and their members (routes/organizations.c).
--
-- The statements that act on one organization share its access check: $1 the organization,
-- $2 the caller, $3 the caller has a global role, $4 the organization roles admitted (text[]).
-- `acc` has one row when the organization exists, with the caller's active role there; `ok`
-- has that row only when the caller may act. Their columns org_exists and my_role (1 and 2)
-- are what org_access_or_reply reads.

-- name: org_list
-- columns: json, allowed
-- $1 global caller, $2 caller, $3 name pattern (LIKE), $4 status, $5 limit, $6 offset. Global
-- callers see every organization, others those they administer; allowed is false for a caller
-- who administers none.
WITH f AS (
    SELECT o.* FROM organizations o
    WHERE ($1::boolean OR EXISTS (
              SELECT 1 FROM organization_memberships m
              WHERE m.organization_id = o.id AND m.user_id = $2
                AND m.membership_status = 'active'
                AND m.role_in_organization = 'OrganizationAdmin'))
      AND ($3::text IS NULL OR lower(o.name) LIKE lower($3))
      AND ($4::text IS NULL OR o.status = $4))
SELECT json_build_object(
           'data', COALESCE((SELECT json_agg(organization_json(p::organizations)
                                             ORDER BY p.created_at, p.id)
                             FROM (SELECT * FROM f ORDER BY created_at, id
                                   LIMIT $5::int OFFSET $6::int) p), '[]'::json),
           'meta', json_build_object('total_count', (SELECT count(*) FROM f))) AS json,
       $1::boolean OR EXISTS (SELECT 1 FROM organization_memberships m
                              WHERE m.user_id = $2 AND m.membership_status = 'active'
                                AND m.role_in_organization = 'OrganizationAdmin') AS allowed;

-- name: org_create
-- columns: json
-- $1 id, $2 name, $3 description, $4 logo URL, $5 status, $6 settings (jsonb), $7 time zone.
WITH o AS (
    INSERT INTO organizations (id, name, description, logo_url, status, settings,
                               default_timezone)
    VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)
    RETURNING *)
SELECT json_build_object('data', organization_json(o::organizations)) AS json FROM o;

-- name: org_get
-- columns: json, org_exists, my_role
-- One organization ($1..$4: the access check); json is NULL when the caller may not read it.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[]))
SELECT (SELECT json_build_object('data', organization_json(o))
        FROM organizations o JOIN ok ON ok.org_id = o.id) AS json,
       EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role;

-- name: org_patch
-- columns: json, org_exists, my_role
-- $5 name, $6/$7 description (flag, value), $8/$9 logo URL (flag, value), $10 status,
-- $11 settings, $12 time zone, $13 requireTwoFactorForAdmins; NULL keeps a value.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
u AS (
    UPDATE organizations o SET
        name = COALESCE($5, o.name),
        description = CASE WHEN $6::boolean THEN $7 ELSE o.description END,
        logo_url = CASE WHEN $8::boolean THEN $9 ELSE o.logo_url END,
        status = COALESCE($10, o.status),
        settings = COALESCE($11::jsonb, o.settings),
        default_timezone = COALESCE($12, o.default_timezone),
        require_two_factor_for_admins = COALESCE($13::boolean, o.require_two_factor_for_admins),
        updated_at = now()
    FROM ok WHERE o.id = ok.org_id
    RETURNING o.*)
SELECT (SELECT json_build_object('data', organization_json(u::organizations)) FROM u) AS json,
       EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role;

-- name: org_archive
-- columns: json, org_exists, my_role
-- DELETE archives.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
u AS (
    UPDATE organizations o SET status = 'archived', updated_at = now()
    FROM ok WHERE o.id = ok.org_id
    RETURNING o.*)
SELECT (SELECT json_build_object('data', organization_json(u::organizations)) FROM u) AS json,
       EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role;

-- The member list answers plain rows, rendered to JSON in C: building 100 JSON objects and
-- ISO timestamps in PostgreSQL costs several times the query itself, and this is the hot read
-- of the area. Row 0 carries total, org_exists, my_role and the member-list version (migration
-- 0003) read in the same snapshot; a page without members is one row whose member columns are
-- NULL. Members are those of $1 visible to the caller (member_visible, the class v computed
-- from `ok`), filtered by $5 role and $7 membership status (conditions on the membership key
-- alone, so they apply to organization_member_counts as well), $6 user status and $8 search
-- pattern (LIKE, escaped and wrapped in %); $9 limit, $10 offset. Each user is a key probe
-- (LIMIT 1 keeps the lateral subquery from turning into a hash over every user). Each case has
-- its own statement, so that no cached plan has to serve another case (the pool keeps
-- statements prepared, and PostgreSQL's generic plans assume an average organization).

-- name: member_list
-- columns: total, org_exists, my_role, user_id, email, status, first_name, last_name,
-- columns: avatar_url, role_in_organization, is_primary, membership_status, joined_ms, version
-- No user-side filter: total_count from the trigger-kept counts.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
v AS (SELECT CASE WHEN $3::boolean OR my_role = 'OrganizationAdmin' THEN 'all'
                  ELSE my_role END AS v
      FROM ok)
SELECT h.total, h.org_exists, h.my_role, p.user_id, p.email, p.status, p.first_name,
       p.last_name, p.avatar_url, p.role_in_organization, p.is_primary, p.membership_status,
       p.joined_ms, h.version
FROM (SELECT (SELECT COALESCE(sum(m.n), 0)::bigint
              FROM organization_member_counts m, v
              WHERE m.organization_id = $1::uuid
                AND member_visible(v.v, m.role_in_organization, m.membership_status)
                AND ($5::text IS NULL OR m.role_in_organization = $5)
                AND ($7::text IS NULL OR m.membership_status = $7)) AS total,
             EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role,
             (SELECT version FROM organization_list_versions
              WHERE organization_id = $1::uuid) AS version) h
LEFT JOIN LATERAL (
    SELECT m.user_id, u.email, u.status, u.first_name, u.last_name, u.avatar_url,
           m.role_in_organization, m.is_primary, m.membership_status, m.joined_at,
           epoch_ms(m.joined_at) AS joined_ms
    FROM (SELECT m.* FROM organization_memberships m, v
          WHERE m.organization_id = $1::uuid
            AND member_visible(v.v, m.role_in_organization, m.membership_status)
            AND ($5::text IS NULL OR m.role_in_organization = $5)
            AND ($7::text IS NULL OR m.membership_status = $7)
            AND $6::text IS NULL AND $8::text IS NULL
          ORDER BY m.joined_at, m.user_id LIMIT $9::int OFFSET $10::int) m
    CROSS JOIN LATERAL (SELECT * FROM users u WHERE u.id = m.user_id LIMIT 1) u) p ON true
ORDER BY p.joined_at, p.user_id;

-- name: member_list_status
-- columns: =member_list
-- User status only: a key probe into users per membership.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
v AS (SELECT CASE WHEN $3::boolean OR my_role = 'OrganizationAdmin' THEN 'all'
                  ELSE my_role END AS v
      FROM ok)
SELECT h.total, h.org_exists, h.my_role, p.user_id, p.email, p.status, p.first_name,
       p.last_name, p.avatar_url, p.role_in_organization, p.is_primary, p.membership_status,
       p.joined_ms, h.version
FROM (SELECT (SELECT count(*)
              FROM organization_memberships m, v
              WHERE m.organization_id = $1::uuid
                AND member_visible(v.v, m.role_in_organization, m.membership_status)
                AND ($5::text IS NULL OR m.role_in_organization = $5)
                AND ($7::text IS NULL OR m.membership_status = $7)
                AND $8::text IS NULL
                AND EXISTS (SELECT 1 FROM users fu
                            WHERE fu.id = m.user_id AND fu.status = $6)) AS total,
             EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role,
             (SELECT version FROM organization_list_versions
              WHERE organization_id = $1::uuid) AS version) h
LEFT JOIN LATERAL (
    SELECT m.user_id, u.email, u.status, u.first_name, u.last_name, u.avatar_url,
           m.role_in_organization, m.is_primary, m.membership_status, m.joined_at,
           epoch_ms(m.joined_at) AS joined_ms
    FROM (SELECT m.* FROM organization_memberships m, v
          WHERE m.organization_id = $1::uuid
            AND member_visible(v.v, m.role_in_organization, m.membership_status)
            AND ($5::text IS NULL OR m.role_in_organization = $5)
            AND ($7::text IS NULL OR m.membership_status = $7)
            AND $8::text IS NULL
            AND EXISTS (SELECT 1 FROM users fu WHERE fu.id = m.user_id AND fu.status = $6)
          ORDER BY m.joined_at, m.user_id LIMIT $9::int OFFSET $10::int) m
    CROSS JOIN LATERAL (SELECT * FROM users u WHERE u.id = m.user_id LIMIT 1) u) p ON true
ORDER BY p.joined_at, p.user_id;

-- name: member_search_short
-- columns: =member_list
-- A search shorter than 3 characters (no trigram to look up): members first, a probe and a
-- match per membership.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
v AS (SELECT CASE WHEN $3::boolean OR my_role = 'OrganizationAdmin' THEN 'all'
                  ELSE my_role END AS v
      FROM ok)
SELECT h.total, h.org_exists, h.my_role, p.user_id, p.email, p.status, p.first_name,
       p.last_name, p.avatar_url, p.role_in_organization, p.is_primary, p.membership_status,
       p.joined_ms, h.version
FROM (SELECT (SELECT count(*)
              FROM organization_memberships m, v
              WHERE m.organization_id = $1::uuid
                AND member_visible(v.v, m.role_in_organization, m.membership_status)
                AND ($5::text IS NULL OR m.role_in_organization = $5)
                AND ($7::text IS NULL OR m.membership_status = $7)
                AND EXISTS (SELECT 1 FROM users fu
                            WHERE fu.id = m.user_id
                              AND (lower(fu.email) LIKE lower($8)
                                   OR lower(user_display_name(fu.first_name, fu.last_name))
                                      LIKE lower($8))
                              AND ($6::text IS NULL OR fu.status = $6))) AS total,
             EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role,
             (SELECT version FROM organization_list_versions
              WHERE organization_id = $1::uuid) AS version) h
LEFT JOIN LATERAL (
    SELECT m.user_id, u.email, u.status, u.first_name, u.last_name, u.avatar_url,
           m.role_in_organization, m.is_primary, m.membership_status, m.joined_at,
           epoch_ms(m.joined_at) AS joined_ms
    FROM (SELECT m.* FROM organization_memberships m, v
          WHERE m.organization_id = $1::uuid
            AND member_visible(v.v, m.role_in_organization, m.membership_status)
            AND ($5::text IS NULL OR m.role_in_organization = $5)
            AND ($7::text IS NULL OR m.membership_status = $7)
            AND EXISTS (SELECT 1 FROM users fu
                        WHERE fu.id = m.user_id
                          AND (lower(fu.email) LIKE lower($8)
                               OR lower(user_display_name(fu.first_name, fu.last_name))
                                  LIKE lower($8))
                          AND ($6::text IS NULL OR fu.status = $6))
          ORDER BY m.joined_at, m.user_id LIMIT $9::int OFFSET $10::int) m
    CROSS JOIN LATERAL (SELECT * FROM users u WHERE u.id = m.user_id LIMIT 1) u) p ON true
ORDER BY p.joined_at, p.user_id;

-- name: member_search
-- columns: =member_list
-- A search of 3 or more characters: users first (the trigram indexes of migration 0003 find
-- the matching users), then each is probed in the organization's memberships. The
-- MATERIALIZED CTEs fix that order (LIMIT 1, the key being unique, keeps the lateral subquery
-- a key probe per matching user).
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
v AS (SELECT CASE WHEN $3::boolean OR my_role = 'OrganizationAdmin' THEN 'all'
                  ELSE my_role END AS v
      FROM ok),
su AS MATERIALIZED (
    SELECT su.id FROM users su
    WHERE (lower(su.email) LIKE lower($8)
           OR lower(user_display_name(su.first_name, su.last_name)) LIKE lower($8))
      AND ($6::text IS NULL OR su.status = $6)),
f AS MATERIALIZED (
    SELECT m.*
    FROM su
    CROSS JOIN LATERAL (SELECT * FROM organization_memberships om
                        WHERE om.organization_id = $1::uuid AND om.user_id = su.id
                        LIMIT 1) m,
         v
    WHERE m.organization_id = $1::uuid
      AND member_visible(v.v, m.role_in_organization, m.membership_status)
      AND ($5::text IS NULL OR m.role_in_organization = $5)
      AND ($7::text IS NULL OR m.membership_status = $7))
SELECT h.total, h.org_exists, h.my_role, p.user_id, p.email, p.status, p.first_name,
       p.last_name, p.avatar_url, p.role_in_organization, p.is_primary, p.membership_status,
       p.joined_ms, h.version
FROM (SELECT (SELECT count(*) FROM f) AS total,
             EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role,
             (SELECT version FROM organization_list_versions
              WHERE organization_id = $1::uuid) AS version) h
LEFT JOIN LATERAL (
    SELECT m.user_id, u.email, u.status, u.first_name, u.last_name, u.avatar_url,
           m.role_in_organization, m.is_primary, m.membership_status, m.joined_at,
           epoch_ms(m.joined_at) AS joined_ms
    FROM (SELECT * FROM f ORDER BY joined_at, user_id LIMIT $9::int OFFSET $10::int) m
    CROSS JOIN LATERAL (SELECT * FROM users u WHERE u.id = m.user_id LIMIT 1) u) p ON true
ORDER BY p.joined_at, p.user_id;

-- name: member_check
-- columns: version, org_exists, my_role
-- Revalidates a cached member list: the current member-list version and the access check.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[]))
SELECT (SELECT version FROM organization_list_versions
        WHERE organization_id = $1::uuid) AS version,
       EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role;

-- name: member_add
-- columns: json, org_exists, my_role, user_exists
-- $5 user, $6 role, $7 isPrimary. At most one primary membership per user: setting one clears
-- the user's others. The user's current organization is set when they have none.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
tu AS (SELECT id FROM users WHERE id = $5),
ins AS (
    INSERT INTO organization_memberships (organization_id, user_id, role_in_organization,
                                          is_primary)
    SELECT ok.org_id, tu.id, $6, $7::boolean FROM ok, tu
    ON CONFLICT (organization_id, user_id) DO NOTHING
    RETURNING *),
prim AS (
    UPDATE organization_memberships pm SET is_primary = false, updated_at = now()
    FROM ins
    WHERE ins.is_primary AND pm.user_id = ins.user_id
      AND pm.organization_id <> ins.organization_id AND pm.is_primary),
cur AS (
    UPDATE users cu SET current_organization_id = ins.organization_id
    FROM ins
    WHERE cu.id = ins.user_id AND cu.current_organization_id IS NULL)
SELECT (SELECT json_build_object('data', membership_json(ins::organization_memberships,
                                                         'joinedAt', ins.joined_at))
        FROM ins) AS json,
       EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role,
       EXISTS (SELECT 1 FROM tu) AS user_exists;

-- name: member_update
-- columns: json, org_exists, my_role, status_before, status_after
-- $5 user, $6 role, $7 isPrimary, $8 membershipStatus (NULL: unchanged). Re-enabling gives the
-- user a current organization when they have none; disabling moves a current organization
-- pointing here to their primary (else oldest) other active membership, or to none.
WITH acc AS (SELECT * FROM organization_access($1::uuid, $2)),
ok AS (SELECT org_id, my_role FROM acc WHERE $3::boolean OR my_role = ANY($4::text[])),
old AS (
    SELECT m.membership_status FROM organization_memberships m, ok
    WHERE m.organization_id = ok.org_id AND m.user_id = $5),
upd AS (
    UPDATE organization_memberships m SET
        role_in_organization = COALESCE($6, m.role_in_organization),
        is_primary = COALESCE($7::boolean, m.is_primary),
        membership_status = COALESCE($8, m.membership_status),
        updated_at = now()
    FROM ok WHERE m.organization_id = ok.org_id AND m.user_id = $5
    RETURNING m.*),
prim AS (
    UPDATE organization_memberships pm SET is_primary = false, updated_at = now()
    FROM upd
    WHERE upd.is_primary AND pm.user_id = upd.user_id
      AND pm.organization_id <> upd.organization_id AND pm.is_primary),
cur AS (
    UPDATE users cu SET current_organization_id = CASE
        WHEN upd.membership_status = 'active' THEN upd.organization_id
        ELSE (SELECT om.organization_id FROM organization_memberships om
              WHERE om.user_id = upd.user_id AND om.organization_id <> upd.organization_id
                AND om.membership_status = 'active'
              ORDER BY om.is_primary DESC, om.joined_at LIMIT 1) END
    FROM upd
    WHERE cu.id = upd.user_id
      AND ((upd.membership_status = 'active' AND cu.current_organization_id IS NULL)
           OR (upd.membership_status = 'disabled'
               AND cu.current_organization_id = upd.organization_id)))
SELECT (SELECT json_build_object('data', membership_json(upd::organization_memberships,
                                                         'updatedAt', upd.updated_at))
        FROM upd) AS json,
       EXISTS (SELECT 1 FROM acc) AS org_exists, (SELECT my_role FROM acc) AS my_role,
       (SELECT membership_status FROM old) AS status_before,
       (SELECT membership_status FROM upd) AS status_after;
