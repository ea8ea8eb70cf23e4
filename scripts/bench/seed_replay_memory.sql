-- Replay memory benchmark (scripts/bench/replay_memory.py): one organization with a coach and a
-- teacher in an active mentorship, and a session for the coach with a fixed token (only its
-- SHA-256 is stored, as for real sessions). Prints "userId token mentorshipId organizationId".
-- Idempotent: a second run starts from a fresh organization and empty chat.
\set ON_ERROR_STOP on
DELETE FROM organizations WHERE id = '5ee0fa00-0000-4000-8000-0000000000a1';
DELETE FROM users WHERE id IN ('creplaybenchcoach', 'creplaybenchteacher');
INSERT INTO users (id, email, first_name, last_name) VALUES
    ('creplaybenchcoach', 'replay-bench-coach@bench.test', 'Replay', 'Coach'),
    ('creplaybenchteacher', 'replay-bench-teacher@bench.test', 'Replay', 'Teacher');
INSERT INTO organizations (id, name) VALUES ('5ee0fa00-0000-4000-8000-0000000000a1', 'Replay bench');
INSERT INTO organization_memberships (organization_id, user_id, role_in_organization, membership_status)
VALUES ('5ee0fa00-0000-4000-8000-0000000000a1', 'creplaybenchcoach', 'Coach', 'active'),
       ('5ee0fa00-0000-4000-8000-0000000000a1', 'creplaybenchteacher', 'Teacher', 'active');
INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, status)
VALUES ('5ee0fa00-0000-4000-8000-0000000000a2', '5ee0fa00-0000-4000-8000-0000000000a1',
        'creplaybenchcoach', 'creplaybenchteacher', 'active');
INSERT INTO sessions (id, user_id, token_hash, expires_at)
VALUES (gen_random_uuid(), 'creplaybenchcoach',
        encode(sha256(convert_to('replaybenchtoken_creplaybenchcoach_padpadpadpad', 'UTF8')), 'hex'),
        now() + interval '7 days');
SELECT 'creplaybenchcoach replaybenchtoken_creplaybenchcoach_padpadpadpad '
       '5ee0fa00-0000-4000-8000-0000000000a2 5ee0fa00-0000-4000-8000-0000000000a1';
