-- Invites to an organization (routes/invites.c).

-- name: invite_list
-- columns: json, org_exists, my_role
-- Pending, unexpired invites of an organization, with what the caller's access depends on:
-- whether the organization exists and the caller's active role in it. $1 organization,
-- $2 caller, $3 caller may see every role (global caller or OrganizationAdmin); else only
-- Coach and Teacher invites.
WITH m AS (
    SELECT role_in_organization AS r FROM organization_memberships
    WHERE organization_id = $1 AND user_id = $2 AND membership_status = 'active'),
l AS (
    SELECT i.* FROM invites i
    WHERE i.organization_id = $1 AND i.status = 'pending' AND i.expires_at > now()
      AND ($3::boolean OR (SELECT r FROM m) = 'OrganizationAdmin'
           OR i.role_in_organization IN ('Coach', 'Teacher')))
SELECT json_build_object(
           'data', COALESCE(json_agg(json_build_object(
                        'id', l.id, 'email', l.email, 'organizationId', l.organization_id,
                        'roleInOrganization', l.role_in_organization, 'status', l.status,
                        'expiresAt', iso(l.expires_at), 'createdAt', iso(l.created_at))
                        ORDER BY l.created_at DESC, l.id), '[]'::json),
           'meta', json_build_object('total_count', count(*))) AS json,
       EXISTS (SELECT 1 FROM organizations WHERE id = $1) AS org_exists,
       (SELECT r FROM m) AS my_role
FROM l;

-- name: invite_create_context
-- columns: org_name, caller_role, invitee_language, pending_role, already_member
-- What creating an invite needs to know first: the organization (name for the mail), the
-- caller's active role there, the invitee's preferred language (when they have an account),
-- the role of a live pending invite for that address, and whether that address already holds
-- a membership (active or disabled) there. $1 organization, $2 caller, $3 email.
SELECT (SELECT name FROM organizations WHERE id = $1) AS org_name,
       (SELECT role_in_organization FROM organization_memberships
        WHERE organization_id = $1 AND user_id = $2
          AND membership_status = 'active') AS caller_role,
       (SELECT preferred_language FROM users WHERE email = $3) AS invitee_language,
       (SELECT role_in_organization FROM invites
        WHERE organization_id = $1 AND email = $3 AND status = 'pending'
          AND expires_at > now()) AS pending_role,
       EXISTS (SELECT 1 FROM organization_memberships m JOIN users u ON u.id = m.user_id
               WHERE m.organization_id = $1 AND u.email = $3) AS already_member;

-- name: invite_create
-- columns: created, json
-- Creates the invite, or refreshes the live pending one (new token, role, expiry, inviter),
-- and queues its mail. A pending invite already past its expiry is marked `expired` first (the
-- scalar subquery over `gone` makes that update run before the insert, so the partial unique
-- index sees the old row as no longer pending) and a new invite is created. $1 organization,
-- $2 email, $3 role, $4 days, $5 token hash, $6 inviter, $7 new id, $8..$10 mail subject, text,
-- html, $11 the token to show (development only), else NULL.
WITH gone AS (
    UPDATE invites SET status = 'expired', updated_at = now()
    WHERE organization_id = $1 AND email = $2 AND status = 'pending' AND expires_at <= now()
    RETURNING id),
prev AS (
    SELECT id FROM invites
    WHERE organization_id = $1 AND email = $2 AND status = 'pending' AND expires_at > now()
    FOR UPDATE),
upd AS (
    UPDATE invites SET token_hash = $5, role_in_organization = $3,
                       expires_at = now() + make_interval(days => $4::int), invited_by = $6,
                       updated_at = now()
    WHERE id IN (SELECT id FROM prev)
    RETURNING id, organization_id, email, role_in_organization, status, expires_at,
              created_at, false AS created),
ins AS (
    INSERT INTO invites (id, organization_id, email, role_in_organization, token_hash,
                         invited_by, expires_at)
    SELECT $7, $1, $2, $3, $5, $6, now() + make_interval(days => $4::int)
    WHERE NOT EXISTS (SELECT 1 FROM prev) AND (SELECT count(*) FROM gone) >= 0
    RETURNING id, organization_id, email, role_in_organization, status, expires_at,
              created_at, true AS created),
i AS (SELECT * FROM upd UNION ALL SELECT * FROM ins),
o AS (
    INSERT INTO outbox (kind, payload)
    SELECT 'mail', jsonb_build_object('to', email, 'subject', $8::text, 'text', $9::text,
                                      'html', $10::text)
    FROM i)
SELECT created,
       jsonb_build_object('data', jsonb_build_object(
           'id', id, 'organizationId', organization_id, 'email', email,
           'roleInOrganization', role_in_organization, 'status', status,
           'expiresAt', iso(expires_at), 'createdAt', iso(created_at))
           || CASE WHEN $11::text IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('inviteToken', $11::text) END) AS json
FROM i;

-- name: invite_resolve
-- columns: json
-- The invite behind a token hash $1, as the accept page shows it.
SELECT json_build_object('data', json_build_object(
           'email', i.email, 'roleInOrganization', i.role_in_organization,
           'organizationName', o.name,
           'status', CASE WHEN i.status = 'pending' AND i.expires_at <= now() THEN 'expired'
                          ELSE i.status END,
           'expiresAt', iso(i.expires_at),
           'isAvailable', i.status = 'pending' AND i.expires_at > now(),
           'hasAccount', EXISTS (SELECT 1 FROM users u WHERE u.email = i.email))) AS json
FROM invites i JOIN organizations o ON o.id = i.organization_id
WHERE i.token_hash = $1;

-- name: invite_accept_check
-- columns: email, status, live, has_account
SELECT i.email, i.status, i.expires_at > now() AS live,
       EXISTS (SELECT 1 FROM users u WHERE u.email = i.email) AS has_account
FROM invites i
WHERE i.token_hash = $1;

-- name: invite_accept
-- columns: acceptable, json
-- The legacy accept: account, credential, membership and invite status in one statement. The
-- new user starts with the organization as current organization; following the invite link
-- proves the mailbox, so the email counts as verified. acceptable: whether the invite was still
-- acceptable; json: the answer, NULL when the email got taken meanwhile. $1 token hash, $2 id,
-- $3 first name, $4 last name, $5 language, $6 password hash.
WITH i AS (
    SELECT id, organization_id, email, role_in_organization FROM invites
    WHERE token_hash = $1 AND status = 'pending' AND expires_at > now()
    FOR UPDATE),
u AS (
    INSERT INTO users (id, email, first_name, last_name, preferred_language, email_verified,
                       current_organization_id)
    SELECT $2, email, $3, $4, $5, true, organization_id FROM i
    ON CONFLICT (email) DO NOTHING
    RETURNING id, email),
a AS (INSERT INTO accounts (user_id, password_hash) SELECT id, $6 FROM u),
m AS (
    INSERT INTO organization_memberships (organization_id, user_id, role_in_organization)
    SELECT i.organization_id, u.id, i.role_in_organization FROM i, u),
x AS (
    UPDATE invites SET status = 'accepted', accepted_at = now(), updated_at = now()
    WHERE id IN (SELECT id FROM i) AND EXISTS (SELECT 1 FROM u))
SELECT EXISTS (SELECT 1 FROM i) AS acceptable,
       (SELECT json_build_object('data', json_build_object(
                   'userId', u.id, 'email', u.email, 'organizationId', i.organization_id,
                   'roleInOrganization', i.role_in_organization))
        FROM i, u) AS json;

-- name: invite_my_pending
-- columns: json
-- The caller's ($1 email) pending, unexpired invites.
SELECT json_build_object(
           'data', COALESCE(json_agg(json_build_object(
                        'id', i.id, 'email', i.email, 'organizationId', i.organization_id,
                        'organizationName', o.name, 'roleInOrganization', i.role_in_organization,
                        'status', i.status, 'expiresAt', iso(i.expires_at),
                        'createdAt', iso(i.created_at))
                        ORDER BY i.created_at, i.id), '[]'::json),
           'meta', json_build_object('total_count', count(*))) AS json
FROM invites i JOIN organizations o ON o.id = i.organization_id
WHERE i.email = $1 AND i.status = 'pending' AND i.expires_at > now();

-- name: invite_accept_id
-- columns: outcome, json, organization_id
-- Accept by id ($1 invite, $2 caller email, $3 caller id): the membership is created; an
-- existing membership (active or disabled) is left exactly as it is, since only an
-- OrganizationAdmin's PATCH of the membership may change its role or status (a Manager could
-- otherwise re-enable a member or change a role through an invite). The organization becomes
-- the current one when the caller has none. outcome names what happened; organization_id is
-- set when a membership was created.
WITH i AS (
    SELECT id, organization_id, email, role_in_organization, status, expires_at
    FROM invites WHERE id = $1
    FOR UPDATE),
ok AS (SELECT * FROM i WHERE email = $2 AND status = 'pending' AND expires_at > now()),
m AS (
    INSERT INTO organization_memberships (organization_id, user_id, role_in_organization)
    SELECT organization_id, $3, role_in_organization FROM ok
    ON CONFLICT (organization_id, user_id) DO NOTHING
    RETURNING organization_id),
cu AS (
    UPDATE users SET current_organization_id = (SELECT organization_id FROM m),
                     updated_at = now()
    WHERE id = $3 AND current_organization_id IS NULL AND EXISTS (SELECT 1 FROM m)),
x AS (
    UPDATE invites SET status = 'accepted', accepted_at = now(), updated_at = now()
    WHERE id IN (SELECT id FROM ok)
    RETURNING id, organization_id, role_in_organization, status)
SELECT CASE WHEN i.id IS NULL THEN 'not_found'
            WHEN i.email <> $2 THEN 'forbidden'
            WHEN i.status <> 'pending' THEN 'not_pending'
            WHEN i.expires_at <= now() THEN 'expired'
            ELSE 'ok' END AS outcome,
       (SELECT json_build_object('data', json_build_object(
                   'id', x.id, 'organizationId', x.organization_id,
                   'roleInOrganization', x.role_in_organization, 'status', x.status))
        FROM x) AS json,
       (SELECT organization_id FROM m) AS organization_id
FROM (SELECT 1) AS one
LEFT JOIN i ON true;

-- name: invite_decline_id
-- columns: outcome, json
-- Decline by id ($1 invite, $2 caller email): outcome and json as invite_accept_id.
WITH i AS (
    SELECT id, organization_id, email, role_in_organization, status, expires_at
    FROM invites WHERE id = $1
    FOR UPDATE),
x AS (
    UPDATE invites SET status = 'revoked', updated_at = now()
    WHERE id IN (SELECT id FROM i
                 WHERE email = $2 AND status = 'pending' AND expires_at > now())
    RETURNING id, organization_id, role_in_organization, status)
SELECT CASE WHEN i.id IS NULL THEN 'not_found'
            WHEN i.email <> $2 THEN 'forbidden'
            WHEN i.status <> 'pending' THEN 'not_pending'
            WHEN i.expires_at <= now() THEN 'expired'
            ELSE 'ok' END AS outcome,
       (SELECT json_build_object('data', json_build_object(
                   'id', x.id, 'organizationId', x.organization_id,
                   'roleInOrganization', x.role_in_organization, 'status', x.status))
        FROM x) AS json
FROM (SELECT 1) AS one
LEFT JOIN i ON true;
