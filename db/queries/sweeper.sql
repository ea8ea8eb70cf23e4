-- The missed-session sweeper (rt/sweeper.c).

-- name: sweeper_missed
-- columns: mentorship_id, coach_id, teacher_id, sessions, organization_id
-- Moves scheduled and confirmed sessions that ended over 30 minutes ago to missed; one row per
-- mentorship touched, each with the number of sessions moved in all (sessions).
WITH s AS (UPDATE mentorship_sessions SET status = 'missed', updated_at = now()
           WHERE status IN ('scheduled', 'confirmed') AND ends_at < now() - interval '30 minutes'
           RETURNING mentorship_id)
SELECT m.id AS mentorship_id, m.coach_id, m.teacher_id, (SELECT count(*) FROM s) AS sessions,
       m.organization_id
FROM mentorships m
WHERE m.id IN (SELECT mentorship_id FROM s);
