-- Bench data for scripts/bench/calendar_feed.sh: one Coach in 20 active mentorships of one
-- organization, :sessions sessions over the next year spread over them, and two calendar feeds
-- of known tokens: the Coach's (every session) and the first Teacher's (one mentorship's).
-- Idempotent: removes its previous data.
-- Feeds: /api/calendar/benchCalendarFeedCoachToken00000000000000000.ics
--        /api/calendar/benchCalendarFeedTeacherToken0000000000000000.ics
BEGIN;
DELETE FROM organizations WHERE id = 'ca000000-0000-4000-8000-000000000001';
DELETE FROM users WHERE id LIKE 'cbcal%';

INSERT INTO organizations (id, name)
VALUES ('ca000000-0000-4000-8000-000000000001', 'Calendar Bench Org');

INSERT INTO users (id, email, first_name, last_name, preferred_language, timezone)
SELECT 'cbcalcoach', 'bench-calendar-coach@example.com', 'Calendar', 'Coach', 'en',
       'Europe/Madrid'
UNION ALL
SELECT 'cbcalteacher' || i, 'bench-calendar-teacher-' || i || '@example.com', 'Teacher',
       'C' || i, 'es', NULL
FROM generate_series(0, 19) i;

INSERT INTO organization_memberships (organization_id, user_id, role_in_organization)
SELECT 'ca000000-0000-4000-8000-000000000001'::uuid, 'cbcalcoach', 'Coach'
UNION ALL
SELECT 'ca000000-0000-4000-8000-000000000001'::uuid, 'cbcalteacher' || i, 'Teacher'
FROM generate_series(0, 19) i;

INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, status, title)
SELECT ('ca100000-0000-4000-8000-' || lpad(k::text, 12, '0'))::uuid,
       'ca000000-0000-4000-8000-000000000001', 'cbcalcoach', 'cbcalteacher' || k, 'active',
       'Weekly plan, review; notes ' || k
FROM generate_series(0, 19) k;

-- Session g of mentorship g % 20, every 90 minutes from tomorrow: 45 minutes long, so the
-- sessions of one mentorship never come within the spacing rule's 15 minutes.
INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,
                                 duration_minutes, ends_at, busy, timezone, notes)
SELECT gen_random_uuid(), ('ca100000-0000-4000-8000-' || lpad((g % 20)::text, 12, '0'))::uuid,
       'ca000000-0000-4000-8000-000000000001', t, 45, t + interval '45 minutes',
       tstzrange(t, t + interval '60 minutes'), 'America/New_York',
       'Bring the lesson plan, the rubric; and the notes from last week (' || g || ').'
FROM generate_series(1, :sessions) g,
     LATERAL (SELECT date_trunc('hour', now()) + interval '1 day'
                     + make_interval(mins => 90 * g) AS t) s;

INSERT INTO calendar_feeds (user_id, token_hash)
VALUES ('cbcalcoach', encode(sha256('benchCalendarFeedCoachToken00000000000000000'::bytea), 'hex')),
       ('cbcalteacher0',
        encode(sha256('benchCalendarFeedTeacherToken0000000000000000'::bytea), 'hex'));
COMMIT;
ANALYZE mentorship_sessions;
