-- Fan-out benchmark (scripts/bench/streams.sh MODE=fanout): makes the users of
-- seed_stream_users.sql PlatformAdmins, who may open any mentorship's stream, and creates one
-- organization with one mentorship between the first two of them. Prints the mentorship id.
\set ON_ERROR_STOP on
UPDATE users SET global_role = 'PlatformAdmin' WHERE email LIKE 'sse-bench-%@bench.test';
DELETE FROM organizations WHERE id = '5ee0fa00-0000-4000-8000-000000000001';
INSERT INTO organizations (id, name) VALUES ('5ee0fa00-0000-4000-8000-000000000001', 'SSE fan-out bench');
INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, status)
SELECT '5ee0fa00-0000-4000-8000-000000000002', '5ee0fa00-0000-4000-8000-000000000001',
       min(id), max(id), 'active'
FROM users WHERE email LIKE 'sse-bench-%@bench.test';
SELECT '5ee0fa00-0000-4000-8000-000000000002';
