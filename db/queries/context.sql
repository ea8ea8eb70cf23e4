-- The guard that runs before every handler (routes/context.c).

-- name: context_caller
-- columns: session_id, session_expires_at, refresh_due,
-- columns: user_id, email, first_name, last_name, email_verified, status, created_at,
-- columns: global_role, preferred_language, current_organization_id, phone, birth_date,
-- columns: country_code, timezone, avatar_url,
-- columns: org_id, member_role, pending_invites, session_expires_ms, session_cap_ms,
-- columns: two_factor_enabled, org_requires_two_factor
-- Session cookie -> user -> organization -> role in one query. $1 the session token's hash,
-- $2 the X-Organization-Id header (else the user's current organization), $3 whether only
-- invites to a verified email count, $4 SESSION_ABSOLUTE_DAYS in seconds. The organization
-- columns are NULL when there is no such organization; member_role is NULL when the user is not
-- an active member of it. The session's expiry is its sliding one capped at its creation plus $4
-- (session_cap_ms), so a lowered cap applies to sessions that already exist.
SELECT s.id AS session_id, iso(s.at) AS session_expires_at,
       s.at < now() + interval '6 days' AS refresh_due,
       u.id AS user_id, u.email, u.first_name, u.last_name, u.email_verified, u.status,
       iso(u.created_at) AS created_at, u.global_role, u.preferred_language,
       u.current_organization_id, u.phone, to_char(u.birth_date, 'YYYY-MM-DD') AS birth_date,
       u.country_code, u.timezone, u.avatar_url,
       o.id AS org_id, m.role_in_organization AS member_role,
       (SELECT count(*) FROM invites i
        WHERE i.email = u.email AND i.status = 'pending' AND i.expires_at > now()
          AND (u.email_verified OR NOT $3::boolean)) AS pending_invites,
       epoch_ms(s.at) AS session_expires_ms, epoch_ms(s.cap) AS session_cap_ms,
       u.two_factor_enabled, o.require_two_factor_for_admins AS org_requires_two_factor
FROM (SELECT s.id, s.user_id, LEAST(s.expires_at, s.created_at + a.secs) AS at,
             s.created_at + a.secs AS cap
      FROM sessions s, (SELECT make_interval(secs => $4::float8) AS secs) a
      WHERE s.token_hash = $1) s
JOIN users u ON u.id = s.user_id
LEFT JOIN organizations o ON o.id = COALESCE($2::uuid, u.current_organization_id)
LEFT JOIN organization_memberships m
       ON m.organization_id = o.id AND m.user_id = u.id AND m.membership_status = 'active'
WHERE s.at > now();

-- name: context_refresh
-- Extends the session $1 to seven days from now, never past its creation plus $2 seconds
-- (SESSION_ABSOLUTE_DAYS).
UPDATE sessions
SET expires_at = LEAST(now() + interval '7 days', created_at + make_interval(secs => $2::float8)),
    updated_at = now()
WHERE id = $1;

-- name: context_org_policy
-- columns: required
-- Whether organization $1 requires two-factor of user $2 (an active OrganizationAdmin or
-- Manager there while requireTwoFactorForAdmins is on); no row: not a member.
SELECT o.require_two_factor_for_admins
       AND m.role_in_organization IN ('OrganizationAdmin', 'Manager') AS required
FROM organizations o
JOIN organization_memberships m
  ON m.organization_id = o.id AND m.user_id = $2 AND m.membership_status = 'active'
WHERE o.id = $1::uuid;
