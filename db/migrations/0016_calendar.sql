-- Calendars: the iCalendar SEQUENCE of each session (invitations and feeds) and the personal
-- calendar feeds, whose secret token is stored as its SHA-256 hex only.

-- SEQUENCE (RFC 5545 3.8.7.4): 0 when scheduled, one more at each reschedule and at the
-- cancellation, so calendar apps apply the newest invitation. Added without a default first
-- (db/README.md: the table's row type is taken by session_full_json).
ALTER TABLE mentorship_sessions ADD COLUMN sequence integer;
ALTER TABLE mentorship_sessions ALTER COLUMN sequence SET DEFAULT 0;
UPDATE mentorship_sessions SET sequence = 0 WHERE sequence IS NULL;
ALTER TABLE mentorship_sessions ALTER COLUMN sequence SET NOT NULL;

-- One feed per user: creating it again replaces the token (the old URL stops at once).
CREATE TABLE calendar_feeds (
    user_id    text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    token_hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The session notices gain what the invitation attached to their mail needs: the start and
-- time zone as data, both addresses, the recipient's role, and the session's stored SEQUENCE
-- and notes (NULL while the session is being created).
CREATE OR REPLACE FUNCTION session_notice_json(session_id uuid, m mentorships, c users, t users,
                                               scheduled_at timestamptz, duration integer,
                                               tz text)
    RETURNS json LANGUAGE sql STABLE
    RETURN (SELECT json_agg(json_build_object('sessionId', session_id, 'mentorshipId', m.id,
            'userId', (x.u).id, 'email', (x.u).email, 'lang', (x.u).preferred_language,
            'start', session_start_text(scheduled_at, COALESCE((x.u).timezone, tz),
                                        (x.u).preferred_language),
            'coachName', COALESCE(NULLIF(concat_ws(' ', c.first_name, c.last_name), ''), c.email),
            'teacherName', COALESCE(NULLIF(concat_ws(' ', t.first_name, t.last_name), ''),
                                    t.email),
            'title', m.title, 'duration', duration,
            'startMs', epoch_ms(scheduled_at), 'timezone', tz,
            'coachEmail', c.email, 'teacherEmail', t.email,
            'role', CASE WHEN x.ord = 1 THEN 'coach' ELSE 'teacher' END,
            'sequence', (SELECT s.sequence FROM mentorship_sessions s WHERE s.id = session_id),
            'notes', (SELECT s.notes FROM mentorship_sessions s WHERE s.id = session_id))
            ORDER BY x.ord)
        FROM (VALUES (1, c), (2, t)) AS x (ord, u));
