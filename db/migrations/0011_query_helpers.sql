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
