-- Shared pieces of the named statements of db/queries/ (they were C macros pasted into SQL).
--
-- epoch_ms: a timestamp as epoch milliseconds, floored so that it matches iso(), which
-- truncates to milliseconds. The hot lists select plain columns and write JSON in C
-- (timefmt_format), which costs a fraction of json_build_object and iso() per row. A plain SQL
-- function, so the planner inlines it.
CREATE FUNCTION epoch_ms(ts timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT floor(extract(epoch FROM ts) * 1000)::bigint $$;

-- One row of the mentorship list: the mentorship (m_*), its coach (c_*) and teacher (t_*),
-- in the column order of routes/mentoring.h (MENTORING_M_*, MENTORING_U_*). Notes are
-- included; the route shows them or not. Views are inlined by the planner: a page joins its
-- ids to this and costs the same as writing the joins out.
CREATE VIEW mentorship_list_rows AS
SELECT m.id AS m_id, m.organization_id AS m_organization_id, m.coach_id AS m_coach_id,
       m.teacher_id AS m_teacher_id, m.status AS m_status, m.title AS m_title,
       m.description AS m_description, m.notes AS m_notes,
       epoch_ms(m.created_at) AS m_created_ms, epoch_ms(m.updated_at) AS m_updated_ms,
       c.id AS c_id, c.email AS c_email, c.first_name AS c_first_name,
       c.last_name AS c_last_name, c.avatar_url AS c_avatar_url,
       t.id AS t_id, t.email AS t_email, t.first_name AS t_first_name,
       t.last_name AS t_last_name, t.avatar_url AS t_avatar_url
FROM mentorships m
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id;

-- One row of the session list: the session, then the columns of mentorship_list_rows.
CREATE VIEW session_list_rows AS
SELECT s.id, s.mentorship_id, epoch_ms(s.scheduled_at) AS scheduled_ms, s.duration_minutes,
       s.timezone, s.notes, s.status, s.video_channel, epoch_ms(s.cancelled_at) AS cancelled_ms,
       s.cancelled_by, epoch_ms(s.completed_at) AS completed_ms,
       epoch_ms(s.created_at) AS created_ms, epoch_ms(s.updated_at) AS updated_ms,
       ml.*
FROM mentorship_sessions s
JOIN mentorship_list_rows ml ON ml.m_id = s.mentorship_id;

-- The Organization resource of docs/api.md.
CREATE FUNCTION organization_json(o organizations) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('id', o.id, 'name', o.name, 'description', o.description,
        'logoUrl', o.logo_url, 'status', o.status, 'settings', o.settings,
        'defaultTimezone', o.default_timezone, 'createdAt', iso(o.created_at),
        'updatedAt', iso(o.updated_at));

-- The membership answer of POST / PATCH / DELETE /api/organizations/:id/users: the time member
-- is named ts_key ('joinedAt' or 'updatedAt').
CREATE FUNCTION membership_json(m organization_memberships, ts_key text, ts timestamptz)
    RETURNS json LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('organizationId', m.organization_id, 'userId', m.user_id,
        'roleInOrganization', m.role_in_organization, 'isPrimary', m.is_primary,
        'membershipStatus', m.membership_status, ts_key, iso(ts));

-- The caller's standing in an organization: one row when it exists, with the caller's active
-- role there (NULL when not an active member). Inlined by the planner.
CREATE FUNCTION organization_access(org uuid, caller text)
    RETURNS TABLE (org_id uuid, my_role text) LANGUAGE sql STABLE AS $$
    SELECT o.id, (SELECT m.role_in_organization FROM organization_memberships m
                  WHERE m.organization_id = o.id AND m.user_id = caller
                    AND m.membership_status = 'active')
    FROM organizations o WHERE o.id = org
$$;

-- Which memberships a member-list reader sees, by visibility class ('all' for admins, else the
-- reader's role): a Manager sees everyone but OrganizationAdmins, a Coach the active Teachers.
CREATE FUNCTION member_visible(v text, role text, status text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT v = 'all' OR (v = 'Manager' AND role <> 'OrganizationAdmin')
        OR (v = 'Coach' AND role = 'Teacher' AND status = 'active')
$$;

-- `role` of a user as others see it: the global role, else the role in the reader's active
-- organization, else the role in the user's own current organization.
CREATE FUNCTION user_role_seen(u users, org uuid) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN COALESCE(u.global_role,
        (SELECT x.role_in_organization FROM organization_memberships x
         WHERE x.user_id = u.id AND x.organization_id = org),
        (SELECT x.role_in_organization FROM organization_memberships x
         WHERE x.user_id = u.id AND x.organization_id = u.current_organization_id
           AND x.membership_status = 'active'));

-- A mail outbox payload in the recipient's language: the Spanish texts when lang is 'es',
-- else the English ones.
CREATE FUNCTION mail_in_language(recipient text, lang text, en_subject text, en_text text,
                                 en_html text, es_subject text, es_text text, es_html text)
    RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN lang = 'es'
                THEN jsonb_build_object('to', recipient, 'subject', es_subject,
                                        'text', es_text, 'html', es_html)
                ELSE jsonb_build_object('to', recipient, 'subject', en_subject,
                                        'text', en_text, 'html', en_html) END;

-- The answer of sign-up and sign-in: the user and the new session.
CREATE FUNCTION auth_session_json(u users, s sessions) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object(
        'user', json_build_object('id', u.id, 'email', u.email,
                                  'name', concat_ws(' ', u.first_name, u.last_name),
                                  'emailVerified', u.email_verified,
                                  'createdAt', iso(u.created_at)),
        'session', json_build_object('id', s.id, 'userId', s.user_id,
                                     'expiresAt', iso(s.expires_at)));
