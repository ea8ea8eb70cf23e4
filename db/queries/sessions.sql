-- Sessions of a mentorship (routes/sessions.c).

-- name: session_list_org
-- columns: total, version,
-- columns: id, mentorship_id, scheduled_ms, duration_minutes, timezone, notes, status,
-- columns: video_channel, cancelled_ms, cancelled_by, completed_ms, created_ms, updated_ms,
-- columns: m_id, m_organization_id, m_coach_id, m_teacher_id, m_status, m_title,
-- columns: m_description, m_notes, m_created_ms, m_updated_ms,
-- columns: c_id, c_email, c_first_name, c_last_name, c_avatar_url,
-- columns: t_id, t_email, t_first_name, t_last_name, t_avatar_url, sort_at
-- A page of an organization's sessions (Manager and above). $1 organization, $2 status,
-- $3 mentorship, $4 from, $5 to, $6 limit, $7 offset, $8 the participant (NULL here).
-- The from/to bounds are always present (infinite when unset) so that the
-- (organization_id, scheduled_at) index serves them in a generic plan too. Row 0 carries the
-- total (an index-only count) and the organization's mentoring-list version (same snapshot,
-- for the page cache); a page past the end is one row whose session columns are NULL, so the
-- count still comes back.
WITH f AS NOT MATERIALIZED (
    SELECT s.id, s.scheduled_at
    FROM mentorship_sessions s
    WHERE s.organization_id = $1 AND $8::text IS NULL
      AND s.scheduled_at >= COALESCE($4::timestamptz, '-infinity')
      AND s.scheduled_at <= COALESCE($5::timestamptz, 'infinity')
      AND ($2::text IS NULL OR s.status = $2)
      AND ($3::uuid IS NULL OR s.mentorship_id = $3))
SELECT h.total, h.version, p.*
FROM (SELECT count(*) AS total,
             (SELECT sum(version)::bigint FROM mentoring_list_versions
              WHERE organization_id = $1::uuid) AS version
      FROM f) h
LEFT JOIN LATERAL (
    SELECT v.*, pg.scheduled_at AS sort_at
    FROM (SELECT * FROM f ORDER BY scheduled_at, id LIMIT $6::int OFFSET $7::int) pg
    JOIN session_list_rows v ON v.id = pg.id) p ON true
ORDER BY p.sort_at, p.id;

-- name: session_list_coach
-- columns: =session_list_org
-- The sessions of the coach $8's mentorships in the organization; parameters as above.
WITH f AS NOT MATERIALIZED (
    SELECT s.id, s.scheduled_at
    FROM mentorship_sessions s
    WHERE s.mentorship_id IN (SELECT id FROM mentorships
                              WHERE coach_id = $8 AND organization_id = $1)
      AND s.scheduled_at >= COALESCE($4::timestamptz, '-infinity')
      AND s.scheduled_at <= COALESCE($5::timestamptz, 'infinity')
      AND ($2::text IS NULL OR s.status = $2)
      AND ($3::uuid IS NULL OR s.mentorship_id = $3))
SELECT h.total, h.version, p.*
FROM (SELECT count(*) AS total,
             (SELECT sum(version)::bigint FROM mentoring_list_versions
              WHERE organization_id = $1::uuid) AS version
      FROM f) h
LEFT JOIN LATERAL (
    SELECT v.*, pg.scheduled_at AS sort_at
    FROM (SELECT * FROM f ORDER BY scheduled_at, id LIMIT $6::int OFFSET $7::int) pg
    JOIN session_list_rows v ON v.id = pg.id) p ON true
ORDER BY p.sort_at, p.id;

-- name: session_list_teacher
-- columns: =session_list_org
-- The sessions of the teacher $8's mentorships in the organization; parameters as above.
WITH f AS NOT MATERIALIZED (
    SELECT s.id, s.scheduled_at
    FROM mentorship_sessions s
    WHERE s.mentorship_id IN (SELECT id FROM mentorships
                              WHERE teacher_id = $8 AND organization_id = $1)
      AND s.scheduled_at >= COALESCE($4::timestamptz, '-infinity')
      AND s.scheduled_at <= COALESCE($5::timestamptz, 'infinity')
      AND ($2::text IS NULL OR s.status = $2)
      AND ($3::uuid IS NULL OR s.mentorship_id = $3))
SELECT h.total, h.version, p.*
FROM (SELECT count(*) AS total,
             (SELECT sum(version)::bigint FROM mentoring_list_versions
              WHERE organization_id = $1::uuid) AS version
      FROM f) h
LEFT JOIN LATERAL (
    SELECT v.*, pg.scheduled_at AS sort_at
    FROM (SELECT * FROM f ORDER BY scheduled_at, id LIMIT $6::int OFFSET $7::int) pg
    JOIN session_list_rows v ON v.id = pg.id) p ON true
ORDER BY p.sort_at, p.id;

-- name: session_get
-- columns: organization_id, coach_id, teacher_id, json, video_channel, mentorship_id
-- One session as {"data": Session}, with what access checks need. $1 id, $2 show the
-- mentorship's notes.
SELECT m.organization_id, m.coach_id, m.teacher_id,
       json_build_object('data', session_full_json(s, m, c, t, $2::boolean)) AS json,
       s.video_channel, s.mentorship_id
FROM mentorship_sessions s
JOIN mentorships m ON m.id = s.mentorship_id
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id
WHERE s.id = $1;

-- name: session_create_lock
-- columns: organization_id, coach_id, teacher_id, status, notices
-- Locks the mentorship $1 (so it cannot end meanwhile) and prepares the notices of the new
-- session: $2 its id, $3 start, $4 duration, $5 time zone. FOR NO KEY UPDATE, not FOR SHARE:
-- the session writes of one mentorship take turns on this row. Under a shared lock concurrent
-- inserts each saw the other's uncommitted row in mentorship_sessions_spacing, waited for it,
-- and the deadlock detector failed all but one (40P01 instead of 409), one second apiece.
SELECT m.organization_id, m.coach_id, m.teacher_id, m.status,
       session_notice_json($2::uuid, m, c, t, $3::timestamptz, $4::int, $5) AS notices
FROM mentorships m
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id
WHERE m.id = $1
FOR NO KEY UPDATE OF m;

-- name: session_insert
-- columns: json
-- $1 id, $2 mentorship, $3 start, $4 duration, $5 time zone, $6 notes. The video channel is
-- ms_<id>_<epoch ms>. The exclusion constraint mentorship_sessions_spacing may refuse it
-- (23P01).
WITH s AS (
    INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,
                                     duration_minutes, timezone, notes, video_channel)
    SELECT $1::uuid, m.id, m.organization_id, $3::timestamptz, $4::int, $5, $6,
           'ms_' || $1::uuid || '_' || floor(extract(epoch FROM now()) * 1000)::bigint
    FROM mentorships m
    WHERE m.id = $2
    RETURNING *)
SELECT json_build_object('data',
           session_full_json(s::mentorship_sessions, m, c, t, true)) AS json
FROM s
JOIN mentorships m ON m.id = s.mentorship_id
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id;

-- name: session_mentorship_lock
-- columns: id
-- Locks the mentorship of session $1 before session_lock locks the session: a reschedule takes
-- its turn with the creates of the mentorship (session_create_lock), and the order mentorship
-- then session is that of a mentorship's end (mentorship_lock, then its sessions).
SELECT m.id
FROM mentorships m
WHERE m.id = (SELECT s.mentorship_id FROM mentorship_sessions s WHERE s.id = $1)
FOR NO KEY UPDATE OF m;

-- name: session_lock
-- columns: organization_id, coach_id, teacher_id, status, mentorship_id, changed_notices
-- Locks the session $1 for an update, with the notices of the session as the update leaves it:
-- moved to $2 start, $3 duration, $4 time zone (NULL keeps a value). A reschedule sends them,
-- and so does a cancellation (with or without a move: it tells the times the session is then
-- stored with). Runs after session_mentorship_lock in the same transaction.
SELECT m.organization_id, m.coach_id, m.teacher_id, s.status, s.mentorship_id,
       session_notice_json(s.id, m, c, t, COALESCE($2::timestamptz, s.scheduled_at),
                           COALESCE($3::int, s.duration_minutes),
                           COALESCE($4, s.timezone)) AS changed_notices
FROM mentorship_sessions s
JOIN mentorships m ON m.id = s.mentorship_id
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id
WHERE s.id = $1
FOR UPDATE OF s;

-- name: session_update
-- columns: json
-- $1 id, $2 start, $3 duration, $4 time zone, $5/$6 notes (flag, value), $7 status,
-- $8 caller, $9 show the mentorship's notes, $10 a new iCalendar SEQUENCE is due (reschedule or
-- cancellation). NULL keeps a value.
WITH s AS (
    UPDATE mentorship_sessions SET
        scheduled_at = COALESCE($2::timestamptz, scheduled_at),
        duration_minutes = COALESCE($3::int, duration_minutes),
        timezone = COALESCE($4, timezone),
        notes = CASE WHEN $5::boolean THEN $6 ELSE notes END,
        status = COALESCE($7, status),
        cancelled_at = CASE WHEN $7 = 'cancelled' THEN now() ELSE cancelled_at END,
        cancelled_by = CASE WHEN $7 = 'cancelled' THEN $8 ELSE cancelled_by END,
        completed_at = CASE WHEN $7 = 'completed' THEN now() ELSE completed_at END,
        sequence = sequence + CASE WHEN $10::boolean THEN 1 ELSE 0 END,
        updated_at = now()
    WHERE id = $1
    RETURNING *)
SELECT json_build_object('data',
           session_full_json(s::mentorship_sessions, m, c, t, $9::boolean)) AS json
FROM s
JOIN mentorships m ON m.id = s.mentorship_id
JOIN users c ON c.id = m.coach_id
JOIN users t ON t.id = m.teacher_id;
