-- Users (routes/users.c).

-- name: user_target
-- columns: status, global_role, country_code, member_role, member_status, other_active
-- What access to user $1 depends on: their status, global role and country, their role and
-- membership status in the caller's active organization $2 (NULL without one), and whether
-- they hold an active membership in any other organization.
SELECT u.status, u.global_role, u.country_code,
       m.role_in_organization AS member_role, m.membership_status AS member_status,
       EXISTS (SELECT 1 FROM organization_memberships om
               WHERE om.user_id = u.id AND om.organization_id IS DISTINCT FROM $2::uuid
                 AND om.membership_status = 'active') AS other_active
FROM users u
LEFT JOIN organization_memberships m ON m.user_id = u.id AND m.organization_id = $2::uuid
WHERE u.id = $1;

-- name: user_get
-- columns: status, global_role, country_code, member_role, member_status, other_active, json
-- user_target's columns, then the user as {"data": ...}. $3: own record (adds phone and
-- birthDate); $4: every organization in orgRoles (else only the caller's active one).
SELECT u.status, u.global_role, u.country_code,
       m.role_in_organization AS member_role, m.membership_status AS member_status,
       EXISTS (SELECT 1 FROM organization_memberships om
               WHERE om.user_id = u.id AND om.organization_id IS DISTINCT FROM $2::uuid
                 AND om.membership_status = 'active') AS other_active,
       jsonb_build_object('data', jsonb_build_object(
           'id', u.id, 'email', u.email, 'status', u.status, 'globalRole', u.global_role,
           'firstName', u.first_name, 'lastName', u.last_name, 'avatarUrl', u.avatar_url,
           'role', user_role_seen(u, $2::uuid),
           'orgRoles', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                                            'orgId', o.id, 'orgName', o.name,
                                            'role', om.role_in_organization)
                                        ORDER BY om.joined_at, o.id)
                                 FROM organization_memberships om
                                 JOIN organizations o ON o.id = om.organization_id
                                 WHERE om.user_id = u.id AND om.membership_status = 'active'
                                   AND ($4::boolean OR om.organization_id = $2::uuid)),
                                '[]'::jsonb))
           || CASE WHEN $3::boolean
                   THEN jsonb_build_object('phone', u.phone,
                                           'birthDate', to_char(u.birth_date, 'YYYY-MM-DD'))
                   ELSE '{}'::jsonb END) AS json
FROM users u
LEFT JOIN organization_memberships m ON m.user_id = u.id AND m.organization_id = $2::uuid
WHERE u.id = $1;

-- name: user_list_all
-- columns: json
-- Every user (global callers); orgRoles lists every membership. $1 search (LIKE-escaped),
-- $2 status, $3 role, $4 limit, $5 offset, $6 the caller's active organization. The search
-- runs first, on its own, through the trigram indexes of migration 0003 (the same
-- expressions: lower(email), lower(user_display_name(...))); materializing it keeps
-- PostgreSQL's generic plan for this prepared statement from scanning every user instead. A
-- NULL $1 skips it.
WITH su AS MATERIALIZED (
    SELECT id FROM users
    WHERE $1::text IS NOT NULL
      AND (lower(email) LIKE '%' || lower($1) || '%'
           OR lower(user_display_name(first_name, last_name)) LIKE '%' || lower($1) || '%')),
f AS (
    SELECT u.* FROM users u
    WHERE ($1::text IS NULL OR u.id IN (SELECT id FROM su))
      AND ($2::text IS NULL OR u.status = $2)
      AND ($3::text IS NULL OR u.global_role = $3
           OR EXISTS (SELECT 1 FROM organization_memberships r
                      WHERE r.user_id = u.id AND r.role_in_organization = $3
                        AND r.membership_status = 'active'))),
p AS (SELECT * FROM f ORDER BY created_at DESC, id DESC LIMIT $4::int OFFSET $5::int)
SELECT json_build_object(
           'data', COALESCE((SELECT json_agg(json_build_object(
                                 'id', u.id, 'email', u.email, 'status', u.status,
                                 'globalRole', u.global_role, 'firstName', u.first_name,
                                 'lastName', u.last_name, 'avatarUrl', u.avatar_url,
                                 'role', user_role_seen(u::users, $6::uuid),
                                 'orgRoles', COALESCE((SELECT json_agg(json_build_object(
                                                          'orgId', o.id, 'orgName', o.name,
                                                          'role', om.role_in_organization,
                                                          'membershipStatus',
                                                          om.membership_status)
                                                          ORDER BY om.joined_at, o.id)
                                                       FROM organization_memberships om
                                                       JOIN organizations o
                                                         ON o.id = om.organization_id
                                                       WHERE om.user_id = u.id), '[]'::json))
                                 ORDER BY u.created_at DESC, u.id DESC)
                             FROM p u), '[]'::json),
           'meta', json_build_object('total_count', (SELECT count(*) FROM f))) AS json;

-- name: user_list_org
-- columns: total, version, id, email, status, global_role, first_name, last_name,
-- columns: avatar_url, role_in_organization, membership_status
-- Members of organization $6 (any membership status), rendered to JSON in C; $7 hides
-- OrganizationAdmins and users with a global role (Manager callers). Row 0 carries the total
-- and the organization's list version (migration 0003, same snapshot, for the page cache); a
-- page without users is one row whose user columns are NULL. Without a search the
-- organization's memberships are walked. $1 is only matched in the search variant; the
-- always-true test keeps it typed here.
WITH f AS (
    SELECT u.id, u.email, u.status, u.global_role, u.first_name, u.last_name, u.avatar_url,
           u.created_at, m.role_in_organization, m.membership_status
    FROM organization_memberships m JOIN users u ON u.id = m.user_id
    WHERE m.organization_id = $6::uuid
      AND (NOT $7::boolean OR (m.role_in_organization <> 'OrganizationAdmin'
                               AND u.global_role IS NULL))
      AND ($1::text IS NULL OR $1 IS NOT NULL)
      AND ($2::text IS NULL OR u.status = $2)
      AND ($3::text IS NULL OR m.role_in_organization = $3)),
p AS (SELECT * FROM f ORDER BY created_at DESC, id DESC LIMIT $4::int OFFSET $5::int)
SELECT h.total, h.version, p.id, p.email, p.status, p.global_role, p.first_name, p.last_name,
       p.avatar_url, p.role_in_organization, p.membership_status
FROM (SELECT (SELECT count(*) FROM f) AS total,
             (SELECT version FROM organization_list_versions
              WHERE organization_id = $6::uuid) AS version) h
LEFT JOIN p ON true
ORDER BY p.created_at DESC, p.id DESC;

-- name: user_list_org_search
-- columns: =user_list_org
-- With a search the matching users come first (a few hundred at most, through the trigram
-- indexes) and their memberships and rows are probed by key (the OFFSET 0 fences keep the
-- planner from turning the probes into scans of the whole organization).
WITH su AS MATERIALIZED (
    SELECT id FROM users
    WHERE $1::text IS NOT NULL
      AND (lower(email) LIKE '%' || lower($1) || '%'
           OR lower(user_display_name(first_name, last_name)) LIKE '%' || lower($1) || '%')),
f AS (
    SELECT u.id, u.email, u.status, u.global_role, u.first_name, u.last_name, u.avatar_url,
           u.created_at, m.role_in_organization, m.membership_status
    FROM su
    CROSS JOIN LATERAL (SELECT * FROM organization_memberships m1
                        WHERE m1.organization_id = $6::uuid AND m1.user_id = su.id
                        OFFSET 0) m
    CROSS JOIN LATERAL (SELECT * FROM users u1 WHERE u1.id = su.id OFFSET 0) u
    WHERE m.organization_id = $6::uuid
      AND (NOT $7::boolean OR (m.role_in_organization <> 'OrganizationAdmin'
                               AND u.global_role IS NULL))
      AND ($1::text IS NULL OR $1 IS NOT NULL)
      AND ($2::text IS NULL OR u.status = $2)
      AND ($3::text IS NULL OR m.role_in_organization = $3)),
p AS (SELECT * FROM f ORDER BY created_at DESC, id DESC LIMIT $4::int OFFSET $5::int)
SELECT h.total, h.version, p.id, p.email, p.status, p.global_role, p.first_name, p.last_name,
       p.avatar_url, p.role_in_organization, p.membership_status
FROM (SELECT (SELECT count(*) FROM f) AS total,
             (SELECT version FROM organization_list_versions
              WHERE organization_id = $6::uuid) AS version) h
LEFT JOIN p ON true
ORDER BY p.created_at DESC, p.id DESC;

-- name: user_list_org_version
-- columns: version
-- $1 organization: its member-list version (NULL before its first membership).
SELECT (SELECT version FROM organization_list_versions
        WHERE organization_id = $1::uuid) AS version;

-- name: user_create
-- columns: json
-- The account starts unverified and gets the verification mail sign-up sends ($7 verification
-- id, $8 its token hash, $9..$11 the mail): whoever made it, only the mailbox owner can prove
-- the address, which invites rely on (INVITE_REQUIRE_VERIFIED_EMAIL). No row when the email
-- is taken. $1 id, $2 email, $3 first name, $4 last name, $5 language, $6 password hash.
WITH u AS (
    INSERT INTO users (id, email, first_name, last_name, preferred_language)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (email) DO NOTHING
    RETURNING id, email, first_name, last_name, preferred_language),
a AS (INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u),
v AS (
    INSERT INTO verifications (id, kind, user_id, token_hash, expires_at)
    SELECT $7, 'email_verify', id, $8, now() + interval '24 hours' FROM u),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', email, 'subject', $9::text, 'text', $10::text,
                                      'html', $11::text)
    FROM u)
SELECT json_build_object('data', json_build_object(
           'id', id, 'email', email, 'firstName', first_name, 'lastName', last_name,
           'preferredLanguage', preferred_language)) AS json
FROM u;

-- name: user_update
-- columns: json, status_before, status_after
-- Profile and status update: $1 user id, then one (set?, value) pair per field in the order of
-- routes/users.c's enum field; json is the PATCH /api/users/me answer.
WITH old AS (SELECT id, status FROM users WHERE id = $1 FOR UPDATE),
u AS (
    UPDATE users SET
        first_name = CASE WHEN $2::boolean THEN $3 ELSE first_name END,
        last_name = CASE WHEN $4::boolean THEN $5 ELSE last_name END,
        preferred_language = CASE WHEN $6::boolean THEN $7 ELSE preferred_language END,
        phone = CASE WHEN $8::boolean THEN $9 ELSE phone END,
        birth_date = CASE WHEN $10::boolean THEN $11::date ELSE birth_date END,
        country_code = CASE WHEN $12::boolean THEN $13 ELSE country_code END,
        timezone = CASE WHEN $14::boolean THEN $15 ELSE timezone END,
        status = CASE WHEN $16::boolean THEN $17 ELSE users.status END,
        updated_at = now()
    FROM old WHERE users.id = old.id
    RETURNING users.*)
SELECT json_build_object('data', json_build_object(
           'id', u.id, 'firstName', u.first_name, 'lastName', u.last_name, 'phone', u.phone,
           'birthDate', to_char(u.birth_date, 'YYYY-MM-DD'), 'countryCode', u.country_code,
           'avatarUrl', u.avatar_url, 'currentOrganizationId', u.current_organization_id,
           'createdAt', iso(u.created_at), 'updatedAt', iso(u.updated_at))) AS json,
       old.status AS status_before, u.status AS status_after
FROM u, old;
