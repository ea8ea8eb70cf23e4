-- Mentorships (one coach, one teacher, one organization) and their scheduled video sessions.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE mentorships (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    coach_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    teacher_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'active', 'paused', 'ended')),
    title           text CHECK (char_length(title) <= 255),
    description     text CHECK (char_length(description) <= 2000),
    notes           text CHECK (char_length(notes) <= 1000),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
-- One mentorship per coach-teacher pair and organization: two concurrent creates cannot both win.
CREATE UNIQUE INDEX mentorships_pair_uniq ON mentorships (organization_id, coach_id, teacher_id);
-- The list orders by creation, newest first, per organization / coach / teacher.
CREATE INDEX mentorships_org_created_idx ON mentorships (organization_id, created_at DESC, id DESC);
CREATE INDEX mentorships_coach_idx ON mentorships (coach_id, created_at DESC, id DESC);
CREATE INDEX mentorships_teacher_idx ON mentorships (teacher_id, created_at DESC, id DESC);

-- "sessions" holds the cookie sessions, so video sessions live in mentorship_sessions.
CREATE TABLE mentorship_sessions (
    id               uuid PRIMARY KEY,
    mentorship_id    uuid NOT NULL REFERENCES mentorships (id) ON DELETE CASCADE,
    organization_id  uuid NOT NULL,                   -- copied from the mentorship (list index)
    scheduled_at     timestamptz NOT NULL,
    duration_minutes integer NOT NULL CHECK (duration_minutes BETWEEN 15 AND 480),
    ends_at          timestamptz NOT NULL,            -- scheduled_at + duration (trigger)
    busy             tstzrange NOT NULL,              -- [scheduled_at, ends_at + 15 min) (trigger)
    timezone         text NOT NULL DEFAULT 'UTC' CHECK (char_length(timezone) <= 100),
    notes            text CHECK (char_length(notes) <= 2000),
    status           text NOT NULL DEFAULT 'scheduled'
                     CHECK (status IN ('scheduled', 'confirmed', 'completed', 'cancelled', 'missed')),
    video_channel    text,
    cancelled_at     timestamptz,
    cancelled_by     text REFERENCES users (id) ON DELETE SET NULL,
    completed_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- Session spacing (docs/api.md): two sessions of one mentorship that are not cancelled may
    -- neither overlap nor leave less than 15 minutes between one's end and the other's start.
    -- Race-safe: the constraint, not a prior SELECT, decides (23P01 -> 409 SESSION_CONFLICT).
    CONSTRAINT mentorship_sessions_spacing
        EXCLUDE USING gist (mentorship_id WITH =, busy WITH &&) WHERE (status <> 'cancelled')
);
CREATE INDEX mentorship_sessions_mentorship_idx ON mentorship_sessions (mentorship_id, scheduled_at, id);
CREATE INDEX mentorship_sessions_org_idx ON mentorship_sessions (organization_id, scheduled_at, id)
    INCLUDE (status, mentorship_id);
-- The missed-session sweeper looks only at open sessions.
CREATE INDEX mentorship_sessions_open_idx ON mentorship_sessions (ends_at)
    WHERE status IN ('scheduled', 'confirmed');

-- timestamptz + interval is only STABLE, so an index expression cannot compute the end; the
-- trigger stores it (and the busy range the exclusion constraint compares).
CREATE FUNCTION mentorship_sessions_span() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.ends_at := NEW.scheduled_at + make_interval(mins => NEW.duration_minutes);
    NEW.busy := tstzrange(NEW.scheduled_at, NEW.ends_at + interval '15 minutes', '[)');
    RETURN NEW;
END $$;
CREATE TRIGGER mentorship_sessions_span BEFORE INSERT OR UPDATE OF scheduled_at, duration_minutes
    ON mentorship_sessions FOR EACH ROW EXECUTE FUNCTION mentorship_sessions_span();

-- ---- JSON renderers (row in, JSON out: no table access, so no query per row) ----

-- The coach / teacher object of enriched responses.
CREATE FUNCTION user_brief_json(u users) RETURNS json LANGUAGE sql STABLE PARALLEL SAFE
    RETURN CASE WHEN u.id IS NULL THEN NULL ELSE json_build_object('id', u.id, 'email', u.email,
        'firstName', u.first_name, 'lastName', u.last_name, 'avatarUrl', u.avatar_url) END;

-- A Mentorship; notes are internal and hidden from teachers (show_notes false).
CREATE FUNCTION mentorship_json(m mentorships, show_notes boolean) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('id', m.id, 'organizationId', m.organization_id,
        'coachId', m.coach_id, 'teacherId', m.teacher_id, 'status', m.status, 'title', m.title,
        'description', m.description, 'notes', CASE WHEN show_notes THEN m.notes END,
        'createdAt', iso(m.created_at), 'updatedAt', iso(m.updated_at));

-- An enriched Mentorship (with coach and teacher).
CREATE FUNCTION mentorship_full_json(m mentorships, c users, t users, show_notes boolean)
    RETURNS json LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('id', m.id, 'organizationId', m.organization_id,
        'coachId', m.coach_id, 'teacherId', m.teacher_id, 'status', m.status, 'title', m.title,
        'description', m.description, 'notes', CASE WHEN show_notes THEN m.notes END,
        'createdAt', iso(m.created_at), 'updatedAt', iso(m.updated_at),
        'coach', user_brief_json(c), 'teacher', user_brief_json(t));

-- A Session with its mentorship, coach and teacher.
CREATE FUNCTION session_full_json(s mentorship_sessions, m mentorships, c users, t users,
                                  show_notes boolean)
    RETURNS json LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('id', s.id, 'mentorshipId', s.mentorship_id,
        'scheduledAt', iso(s.scheduled_at), 'durationMinutes', s.duration_minutes,
        'timezone', s.timezone, 'notes', s.notes, 'status', s.status,
        'videoChannel', s.video_channel, 'cancelledAt', iso(s.cancelled_at),
        'cancelledBy', s.cancelled_by, 'completedAt', iso(s.completed_at),
        'createdAt', iso(s.created_at), 'updatedAt', iso(s.updated_at),
        'mentorship', mentorship_json(m, show_notes),
        'coach', user_brief_json(c), 'teacher', user_brief_json(t));

-- The start of a session as a mail shows it: in the recipient's time zone and language, e.g.
-- "Monday, March 2, 2026 10:00 (America/New_York)" / "lunes, 2 de marzo de 2026, 10:00 (...)".
-- A zone PostgreSQL does not know falls back to UTC rather than failing the request.
CREATE FUNCTION session_start_text(ts timestamptz, tz text, lang text) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    l timestamp;
BEGIN
    BEGIN
        l := ts AT TIME ZONE tz;
    EXCEPTION WHEN others THEN
        tz := 'UTC';
        l := ts AT TIME ZONE 'UTC';
    END;
    IF lang = 'es' THEN
        RETURN (ARRAY['domingo', 'lunes', 'martes', 'miércoles', 'jueves', 'viernes',
                      'sábado'])[extract(dow FROM l)::int + 1]
            || ', ' || extract(day FROM l)::int || ' de '
            || (ARRAY['enero', 'febrero', 'marzo', 'abril', 'mayo', 'junio', 'julio', 'agosto',
                      'septiembre', 'octubre', 'noviembre', 'diciembre'])[extract(month FROM l)::int]
            || ' de ' || to_char(l, 'YYYY, HH24:MI') || ' (' || tz || ')';
    END IF;
    RETURN to_char(l, 'FMDay, FMMonth FMDD, YYYY HH24:MI') || ' (' || tz || ')';
END $$;

-- What the notice mails and pushes of one session need, one element per participant (coach,
-- then teacher): each sees the start in their own time zone (else the session's) and language.
-- Rendered into mail and push texts by the service (routes/mentoring.c).
CREATE FUNCTION session_notice_json(session_id uuid, m mentorships, c users, t users,
                                    scheduled_at timestamptz, duration integer, tz text)
    RETURNS json LANGUAGE sql STABLE
    RETURN (SELECT json_agg(json_build_object('sessionId', session_id, 'mentorshipId', m.id,
            'userId', (x.u).id, 'email', (x.u).email, 'lang', (x.u).preferred_language,
            'start', session_start_text(scheduled_at, COALESCE((x.u).timezone, tz),
                                        (x.u).preferred_language),
            'coachName', COALESCE(NULLIF(concat_ws(' ', c.first_name, c.last_name), ''), c.email),
            'teacherName', COALESCE(NULLIF(concat_ws(' ', t.first_name, t.last_name), ''),
                                    t.email),
            'title', m.title, 'duration', duration) ORDER BY x.ord)
        FROM (VALUES (1, c), (2, t)) AS x (ord, u));
