-- The caller's organizations (routes/me.c).

-- name: me_organizations
-- columns: json
-- $1 caller: their active memberships and current organization.
SELECT json_build_object('data', json_build_object(
           'organizations', COALESCE((
               SELECT json_agg(json_build_object(
                          'id', o.id, 'name', o.name, 'description', o.description,
                          'logoUrl', o.logo_url, 'status', o.status,
                          'userRole', m.role_in_organization, 'isPrimary', m.is_primary,
                          'joinedAt', iso(m.joined_at), 'createdAt', iso(o.created_at),
                          'updatedAt', iso(o.updated_at))
                          ORDER BY m.is_primary DESC, m.joined_at, o.id)
               FROM organization_memberships m JOIN organizations o ON o.id = m.organization_id
               WHERE m.user_id = $1 AND m.membership_status = 'active'), '[]'::json),
           'currentOrganizationId', (SELECT current_organization_id FROM users
                                     WHERE id = $1))) AS json;

-- name: me_switch
-- columns: org_exists, member_role, current_organization_id
-- $1 caller, $2 organization, $3 caller has a global role. current_organization_id is NULL
-- when the switch was not allowed.
WITH o AS (SELECT id FROM organizations WHERE id = $2::uuid),
m AS (
    SELECT role_in_organization FROM organization_memberships
    WHERE organization_id = $2::uuid AND user_id = $1 AND membership_status = 'active'),
u AS (
    UPDATE users SET current_organization_id = o.id FROM o
    WHERE users.id = $1 AND ($3::boolean OR EXISTS (SELECT 1 FROM m))
    RETURNING current_organization_id)
SELECT EXISTS (SELECT 1 FROM o) AS org_exists,
       (SELECT role_in_organization FROM m) AS member_role,
       (SELECT current_organization_id FROM u) AS current_organization_id;

-- name: me_current_org
-- columns: json
-- The organization $1 with the caller's role $2 in it.
SELECT json_build_object('data', json_build_object(
           'id', o.id, 'name', o.name, 'description', o.description, 'logoUrl', o.logo_url,
           'status', o.status, 'settings', o.settings, 'defaultTimezone', o.default_timezone,
           'createdAt', iso(o.created_at), 'updatedAt', iso(o.updated_at),
           'userRole', $2::text)) AS json
FROM organizations o
WHERE o.id = $1::uuid;
