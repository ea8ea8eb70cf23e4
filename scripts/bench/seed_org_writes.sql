-- Bench data for scripts/bench/org_writes.sh: one Coach (known session cookie) with 64 active
-- mentorships in one organization, and 64 more, one in each of 64 other organizations.
-- Idempotent: removes its previous data.
-- Cookie of the Coach: auth.session_token=benchOrgWritesCoachSessionToken000000000000
BEGIN;
DELETE FROM organizations WHERE id::text LIKE 'c0000000-0000-4000-8000-%';
DELETE FROM users WHERE id LIKE 'cbwrite%';

-- Organization k (0..63) holds mentorship k; organization 100 holds mentorships 100..163.
INSERT INTO organizations (id, name)
SELECT ('c0000000-0000-4000-8000-' || lpad(k::text, 12, '0'))::uuid, 'Writes Org ' || k
FROM generate_series(0, 63) k UNION ALL
SELECT 'c0000000-0000-4000-8000-000000000100', 'Writes Org single';

INSERT INTO users (id, email, first_name, last_name, preferred_language)
SELECT 'cbwritecoach', 'bench-writes-coach@example.com', 'Writes', 'Coach', 'en'
UNION ALL
SELECT 'cbwriteteacher' || i, 'bench-writes-teacher-' || i || '@example.com', 'Teacher', 'W' || i,
       'en'
FROM generate_series(0, 63) i;

INSERT INTO organization_memberships (organization_id, user_id, role_in_organization)
SELECT o.id, 'cbwritecoach', 'Coach' FROM organizations o
WHERE o.id::text LIKE 'c0000000-0000-4000-8000-%'
UNION ALL
SELECT ('c0000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid, 'cbwriteteacher' || i,
       'Teacher'
FROM generate_series(0, 63) i
UNION ALL
SELECT 'c0000000-0000-4000-8000-000000000100', 'cbwriteteacher' || i, 'Teacher'
FROM generate_series(0, 63) i;

INSERT INTO sessions (id, user_id, token_hash, expires_at)
VALUES ('c0000000-0000-4000-8000-0000000000ff', 'cbwritecoach',
        encode(sha256('benchOrgWritesCoachSessionToken000000000000'::bytea), 'hex'),
        now() + interval '7 days');

INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, status, title)
SELECT ('c1000000-0000-4000-8000-' || lpad(k::text, 12, '0'))::uuid,
       ('c0000000-0000-4000-8000-' || lpad(k::text, 12, '0'))::uuid, 'cbwritecoach',
       'cbwriteteacher' || k, 'active', 'Writes ' || k
FROM generate_series(0, 63) k
UNION ALL
SELECT ('c1000000-0000-4000-8000-' || lpad((100 + k)::text, 12, '0'))::uuid,
       'c0000000-0000-4000-8000-000000000100', 'cbwritecoach', 'cbwriteteacher' || k, 'active',
       'Writes single ' || k
FROM generate_series(0, 63) k;
COMMIT;
