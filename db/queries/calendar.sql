-- Personal calendar feeds (routes/calendar.c).

-- name: calendar_feed_set
-- Creates or replaces the feed of user $1 with the token hash $2: the previous token stops.
INSERT INTO calendar_feeds (user_id, token_hash) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, created_at = now();

-- name: calendar_feed_delete
-- Revokes the feed of user $1 (no row deleted: there was none).
DELETE FROM calendar_feeds WHERE user_id = $1;

-- name: calendar_feed_rows
-- columns: user_lang, user_tz,
-- columns: id, mentorship_id, sequence, start_ms, duration_minutes, timezone, status, notes,
-- columns: updated_ms, title, coach_name, coach_email, teacher_name, teacher_email, start_text
-- The feed of token hash $1: no row when there is none. Else one row per session of the
-- feed's user, as coach or teacher, starting from $2 days ago to $3 days ahead, in the
-- organizations where they are still an active member; a user who is not active gets none.
-- Without sessions, one row whose session columns are NULL. At most 5000 sessions: past that,
-- the coming ones first (the nearest first), then the past ones (the latest first).
SELECT u.preferred_language AS user_lang, u.timezone AS user_tz, e.*
FROM calendar_feeds f
JOIN users u ON u.id = f.user_id
LEFT JOIN LATERAL (
    SELECT s.id, s.mentorship_id, s.sequence, epoch_ms(s.scheduled_at) AS start_ms,
           s.duration_minutes, s.timezone, s.status, s.notes, epoch_ms(s.updated_at) AS updated_ms,
           m.title,
           COALESCE(NULLIF(concat_ws(' ', c.first_name, c.last_name), ''), c.email) AS coach_name,
           c.email AS coach_email,
           COALESCE(NULLIF(concat_ws(' ', t.first_name, t.last_name), ''), t.email)
               AS teacher_name,
           t.email AS teacher_email,
           session_start_text(s.scheduled_at, COALESCE(u.timezone, s.timezone),
                              u.preferred_language) AS start_text
    FROM mentorships m
    JOIN organization_memberships om ON om.organization_id = m.organization_id
         AND om.user_id = u.id AND om.membership_status = 'active'
    JOIN mentorship_sessions s ON s.mentorship_id = m.id
    JOIN users c ON c.id = m.coach_id
    JOIN users t ON t.id = m.teacher_id
    WHERE (m.coach_id = u.id OR m.teacher_id = u.id) AND u.status = 'active'
      AND s.scheduled_at >= now() - make_interval(days => $2::int)
      AND s.scheduled_at < now() + make_interval(days => $3::int)
    ORDER BY s.scheduled_at < now(), abs(extract(epoch FROM s.scheduled_at - now())), s.id
    LIMIT 5000) e ON true
WHERE f.token_hash = $1
ORDER BY e.start_ms, e.id;
