-- Mentorships (routes/mentorships.c).

-- name: mentorship_list_org
-- columns: total, version,
-- columns: m_id, m_organization_id, m_coach_id, m_teacher_id, m_status, m_title,
-- columns: m_description, m_notes, m_created_ms, m_updated_ms,
-- columns: c_id, c_email, c_first_name, c_last_name, c_avatar_url,
-- columns: t_id, t_email, t_first_name, t_last_name, t_avatar_url, sort_at
-- A page of an organization's mentorships (Manager and above), newest first. $1 organization,
-- $2 status, $3 coach, $4 teacher (filters), $5 limit, $6 offset. Row 0 carries the total and
-- the organization's mentoring-list version (same snapshot, for the page cache); a page past
-- the end is one row whose mentorship columns are NULL, so the count still comes back.
WITH f AS NOT MATERIALIZED (
    SELECT m.id, m.created_at
    FROM mentorships m
    WHERE m.organization_id = $1
      AND ($3::text IS NULL OR m.coach_id = $3)
      AND ($4::text IS NULL OR m.teacher_id = $4)
      AND ($2::text IS NULL OR m.status = $2))
SELECT h.total, h.version, p.*
FROM (SELECT count(*) AS total,
             (SELECT sum(version)::bigint FROM mentoring_list_versions
              WHERE organization_id = $1::uuid) AS version
      FROM f) h
LEFT JOIN LATERAL (
    SELECT v.*, pg.created_at AS sort_at
    FROM (SELECT * FROM f ORDER BY created_at DESC, id DESC
          LIMIT $5::int OFFSET $6::int) pg
    JOIN mentorship_list_rows v ON v.m_id = pg.id) p ON true
ORDER BY p.sort_at DESC, p.m_id DESC;

-- name: mentorship_list_coach
-- columns: =mentorship_list_org
-- The coach $3's mentorships in the organization; parameters as above, $4 NULL.
WITH f AS NOT MATERIALIZED (
    SELECT m.id, m.created_at
    FROM mentorships m
    WHERE m.coach_id = $3 AND m.organization_id = $1 AND $4::text IS NULL
      AND ($2::text IS NULL OR m.status = $2))
SELECT h.total, h.version, p.*
FROM (SELECT count(*) AS total,
             (SELECT sum(version)::bigint FROM mentoring_list_versions
              WHERE organization_id = $1::uuid) AS version
      FROM f) h
LEFT JOIN LATERAL (
    SELECT v.*, pg.created_at AS sort_at
    FROM (SELECT * FROM f ORDER BY created_at DESC, id DESC
          LIMIT $5::int OFFSET $6::int) pg
    JOIN mentorship_list_rows v ON v.m_id = pg.id) p ON true
ORDER BY p.sort_at DESC, p.m_id DESC;

-- name: mentorship_list_teacher
-- columns: =mentorship_list_org
-- The teacher $4's mentorships in the organization; parameters as above, $3 NULL.
WITH f AS NOT MATERIALIZED (
    SELECT m.id, m.created_at
    FROM mentorships m
    WHERE m.teacher_id = $4 AND m.organization_id = $1 AND $3::text IS NULL
      AND ($2::text IS NULL OR m.status = $2))
SELECT h.total, h.version, p.*
FROM (SELECT count(*) AS total,
             (SELECT sum(version)::bigint FROM mentoring_list_versions
              WHERE organization_id = $1::uuid) AS version
      FROM f) h
LEFT JOIN LATERAL (
    SELECT v.*, pg.created_at AS sort_at
    FROM (SELECT * FROM f ORDER BY created_at DESC, id DESC
          LIMIT $5::int OFFSET $6::int) pg
    JOIN mentorship_list_rows v ON v.m_id = pg.id) p ON true
ORDER BY p.sort_at DESC, p.m_id DESC;

-- name: mentorship_create
-- columns: org_ok, coach_ok, teacher_ok, json
-- $1 id, $2 organization, $3 coach, $4 teacher, $5 title, $6 description, $7 notes. Inserts
-- only when the organization exists and both users hold the role in it; the flags say which
-- check failed. The unique index mentorships_pair_uniq may refuse it (23505).
WITH chk AS (
    SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $2) AS org_ok,
           EXISTS (SELECT 1 FROM organization_memberships
                   WHERE organization_id = $2 AND user_id = $3
                     AND role_in_organization = 'Coach'
                     AND membership_status = 'active') AS coach_ok,
           EXISTS (SELECT 1 FROM organization_memberships
                   WHERE organization_id = $2 AND user_id = $4
                     AND role_in_organization = 'Teacher'
                     AND membership_status = 'active') AS teacher_ok),
m AS (
    INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, title, description, notes)
    SELECT $1, $2, $3, $4, $5, $6, $7 FROM chk
    WHERE org_ok AND coach_ok AND teacher_ok
    RETURNING *)
SELECT chk.org_ok, chk.coach_ok, chk.teacher_ok,
       (SELECT json_build_object('data', mentorship_full_json(m::mentorships, c, t, true))
        FROM m
        JOIN users c ON c.id = m.coach_id
        JOIN users t ON t.id = m.teacher_id) AS json
FROM chk;

-- name: mentorship_get
-- columns: organization_id, coach_id, teacher_id, json
-- One mentorship as {"data": Mentorship}, with what access checks need. $1 id, $2 show notes.
SELECT m.organization_id, m.coach_id, m.teacher_id,
       json_build_object('data', mentorship_full_json(m, c, t, $2::boolean)) AS json
FROM mentorships m
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id
WHERE m.id = $1;

-- name: mentorship_lock
-- columns: organization_id, coach_id, teacher_id, status
-- Locks the mentorship $1 for an update.
SELECT organization_id, coach_id, teacher_id, status
FROM mentorships
WHERE id = $1
FOR UPDATE;

-- name: mentorship_open_sessions
-- columns: count, notices
-- The open (scheduled, confirmed) sessions of the mentorship $1, locked, with the notices that
-- cancelling them sends. Run after mentorship_lock, so a session created meanwhile is seen.
SELECT count(*) AS count, json_agg(e) AS notices
FROM (SELECT session_notice_json(s.id, m, c, t, s.scheduled_at, s.duration_minutes,
                                 s.timezone) AS n
      FROM mentorship_sessions s
      JOIN mentorships m ON m.id = s.mentorship_id
      JOIN users c ON c.id = m.coach_id
      JOIN users t ON t.id = m.teacher_id
      WHERE s.mentorship_id = $1 AND s.status IN ('scheduled', 'confirmed')
      FOR UPDATE OF s) x,
     json_array_elements(x.n) e;

-- name: mentorship_update
-- columns: sessions_cancelled, json
-- $1 id, $2 status, $3..$8 title/description/notes (flag, value), $9 cancelling user, $10 show
-- notes, $11 ending (cancel the open sessions). A PATCH that changes nothing keeps updatedAt.
WITH m AS (
    UPDATE mentorships SET
        status = COALESCE($2, status),
        title = CASE WHEN $3::boolean THEN $4 ELSE title END,
        description = CASE WHEN $5::boolean THEN $6 ELSE description END,
        notes = CASE WHEN $7::boolean THEN $8 ELSE notes END,
        updated_at = CASE WHEN ROW(COALESCE($2, status),
                                   CASE WHEN $3::boolean THEN $4 ELSE title END,
                                   CASE WHEN $5::boolean THEN $6 ELSE description END,
                                   CASE WHEN $7::boolean THEN $8 ELSE notes END)
                               IS DISTINCT FROM ROW(status, title, description, notes)
                          THEN now() ELSE updated_at END
    WHERE id = $1
    RETURNING *),
s AS (
    UPDATE mentorship_sessions SET status = 'cancelled', cancelled_at = now(),
                                   cancelled_by = $9, updated_at = now(),
                                   sequence = sequence + 1
    WHERE mentorship_id = $1 AND status IN ('scheduled', 'confirmed') AND $11::boolean
    RETURNING 1)
SELECT (SELECT count(*) FROM s) AS sessions_cancelled,
       json_build_object('data', mentorship_full_json(m::mentorships, c, t, $10::boolean)) AS json
FROM m
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id;
