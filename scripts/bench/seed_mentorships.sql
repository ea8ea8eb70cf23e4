-- Bench data for scripts/bench/mentorships.sh: one organization with 2,000 mentorships
-- (200 coaches x 400 teachers, each pair once) and 20,000 sessions (10 per mentorship, a day
-- apart), plus a Manager with a known session cookie. Idempotent: removes its previous data.
-- Cookie of the Manager: auth.session_token=benchMentorshipsManagerSessionToken00000000
BEGIN;
DELETE FROM organizations WHERE id = 'b0000000-0000-4000-8000-000000000001';
DELETE FROM users WHERE id LIKE 'cbench%';

INSERT INTO organizations (id, name) VALUES ('b0000000-0000-4000-8000-000000000001', 'Bench Org');

INSERT INTO users (id, email, first_name, last_name, preferred_language)
SELECT 'cbenchmanager', 'bench-manager@example.com', 'Bench', 'Manager', 'en'
UNION ALL
SELECT 'cbenchcoach' || i, 'bench-coach-' || i || '@example.com', 'Coach', 'Number ' || i, 'en'
FROM generate_series(0, 199) i
UNION ALL
SELECT 'cbenchteacher' || i, 'bench-teacher-' || i || '@example.com', 'Teacher', 'Number ' || i,
       CASE WHEN i % 2 = 0 THEN 'en' ELSE 'es' END
FROM generate_series(0, 399) i;

INSERT INTO organization_memberships (organization_id, user_id, role_in_organization)
SELECT 'b0000000-0000-4000-8000-000000000001', id,
       CASE WHEN id = 'cbenchmanager' THEN 'Manager'
            WHEN id LIKE 'cbenchcoach%' THEN 'Coach' ELSE 'Teacher' END
FROM users WHERE id LIKE 'cbench%';

INSERT INTO sessions (id, user_id, token_hash, expires_at)
VALUES ('b0000000-0000-4000-8000-0000000000ff', 'cbenchmanager',
        encode(sha256('benchMentorshipsManagerSessionToken00000000'::bytea), 'hex'),
        now() + interval '7 days');

INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, status, title, description,
                         created_at, updated_at)
SELECT ('b1000000-0000-4000-8000-' || lpad(to_hex(k), 12, '0'))::uuid,
       'b0000000-0000-4000-8000-000000000001', 'cbenchcoach' || (k % 200),
       'cbenchteacher' || (k / 5),
       (ARRAY['active', 'active', 'active', 'pending', 'paused', 'ended'])[k % 6 + 1],
       'Mentorship ' || k, 'Weekly sessions on topic ' || k,
       timestamptz '2026-01-01' + k * interval '1 minute',
       timestamptz '2026-01-01' + k * interval '1 minute'
FROM generate_series(0, 1999) k;

INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,
                                 duration_minutes, timezone, status, video_channel)
SELECT ('b2000000-0000-4000-8000-' || lpad(to_hex(k * 10 + n), 12, '0'))::uuid,
       ('b1000000-0000-4000-8000-' || lpad(to_hex(k), 12, '0'))::uuid,
       'b0000000-0000-4000-8000-000000000001',
       timestamptz '2030-01-01' + n * interval '1 day' + (k % 600) * interval '2 minutes',
       60, 'UTC',
       (ARRAY['scheduled', 'confirmed', 'completed', 'cancelled', 'missed'])[(k + n) % 5 + 1],
       'ms_bench_' || k || '_' || n
FROM generate_series(0, 1999) k, generate_series(0, 9) n;
COMMIT;
VACUUM ANALYZE users, organization_memberships, mentorships, mentorship_sessions;
