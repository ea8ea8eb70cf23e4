-- Demo data (cli/seed_demo.c, `coachd seed-demo`): two organizations with accounts of every
-- role, mentorships in every status, sessions past and upcoming, chat threads and invites.
-- Every row is one the API itself could have left: the same id formats, columns, counters
-- (the triggers of migrations 0003, 0007, 0010 and 0011 keep them) and chat clocks. Times are
-- relative to now(), so a fresh seed always has yesterday's sessions and next week's.
-- $1 and $2 of the statements below are the ids of Northwind Academy and Colegio Sierra Azul
-- (organization key 'nw' / 'sa' in the value lists). Users are named by email: the accounts
-- themselves (names, emails, languages, passwords) are the command's table.

-- name: demo_lock
-- columns: pg_advisory_xact_lock
-- Serializes seed runs until the end of the transaction.
SELECT pg_advisory_xact_lock(727274002);

-- name: demo_state
-- columns: existing, northwind_id, sierra_id, invites_pending, invitees_with_account
-- Whether the demo data is there: how many of the demo emails $1 (text[]) have an account, the
-- organizations of the demo admins $2 (Northwind) and $3 (Sierra Azul), the number of pending
-- demo invites to the addresses $4 (text[]), and how many of those addresses have an account
-- (an invite to one would hold that user at the invite gate).
SELECT (SELECT count(*) FROM users WHERE email = ANY($1::text[])) AS existing,
       (SELECT m.organization_id FROM organization_memberships m
        JOIN users u ON u.id = m.user_id
        WHERE u.email = $2::text AND m.role_in_organization = 'OrganizationAdmin'
        ORDER BY m.joined_at LIMIT 1) AS northwind_id,
       (SELECT m.organization_id FROM organization_memberships m
        JOIN users u ON u.id = m.user_id
        WHERE u.email = $3::text AND m.role_in_organization = 'OrganizationAdmin'
        ORDER BY m.joined_at DESC LIMIT 1) AS sierra_id,
       (SELECT count(*) FROM invites
        WHERE email = ANY($4::text[]) AND status = 'pending' AND expires_at > now())
           AS invites_pending,
       (SELECT count(*) FROM users WHERE email = ANY($4::text[])) AS invitees_with_account;

-- name: demo_users
-- The accounts: $1 a JSON array of {id, email, first, last, lang, tz, role (global role or
-- null), hash (argon2id), days (created that many days ago)}. Verified emails (the members
-- joined through invites, whose link proves the mailbox), active, a password each.
WITH src AS (
    SELECT x.*, now() - make_interval(days => x.days, mins => (x.days * 37) % 600) AS at
    FROM json_to_recordset($1::json)
        AS x(id text, email text, first text, last text, lang text, tz text, role text,
             hash text, days int)),
u AS (
    INSERT INTO users (id, email, first_name, last_name, email_verified, status, global_role,
                       preferred_language, timezone, created_at, updated_at)
    SELECT id, email, first, last, true, 'active', role, lang, tz, at, at FROM src
    RETURNING id)
INSERT INTO accounts (user_id, password_hash, created_at, updated_at)
SELECT s.id, s.hash, s.at, s.at FROM src s JOIN u ON u.id = s.id;

-- name: demo_organizations
-- The two organizations, created before any of their members joined.
INSERT INTO organizations (id, name, description, status, settings, default_timezone,
                           created_at, updated_at)
VALUES ($1::uuid, 'Northwind Academy',
        'A network of three middle and high schools. Instructional coaches support teachers '
        'in their first years through weekly sessions and chat.',
        'active', '{}', 'America/New_York', now() - interval '210 days',
        now() - interval '210 days'),
       ($2::uuid, 'Colegio Sierra Azul',
        'Colegio bilingüe de primaria y secundaria. Programa de acompañamiento docente.',
        'active', '{}', 'Europe/Madrid', now() - interval '150 days',
        now() - interval '150 days');

-- name: demo_members
-- Memberships, joined when the account was made (or `later` days after it, for a second
-- organization); the first membership is the user's current organization, as when a member is
-- added. The Owner has no membership: it switched to Northwind. Coaches and Teachers came
-- through invites, kept as accepted.
WITH src AS (
    SELECT CASE v.org WHEN 'nw' THEN $1::uuid ELSE $2::uuid END AS org, u.id AS user_id,
           v.role, v.is_primary, u.created_at + make_interval(days => v.later) AS joined,
           CASE v.org WHEN 'nw' THEN 'admin@northwind.example'
                      ELSE 'admin2@northwind.example' END AS inviter
    FROM (VALUES ('nw', 'admin@northwind.example', 'OrganizationAdmin', false, 0),
                 ('nw', 'admin2@northwind.example', 'OrganizationAdmin', false, 0),
                 ('sa', 'admin2@northwind.example', 'OrganizationAdmin', true, 55),
                 ('nw', 'manager@northwind.example', 'Manager', false, 0),
                 ('nw', 'coach@northwind.example', 'Coach', false, 0),
                 ('nw', 'coach2@northwind.example', 'Coach', true, 0),
                 ('sa', 'coach2@northwind.example', 'Coach', false, 30),
                 ('nw', 'coach3@northwind.example', 'Coach', false, 0),
                 ('nw', 'teacher@northwind.example', 'Teacher', false, 0),
                 ('nw', 'teacher2@northwind.example', 'Teacher', false, 0),
                 ('nw', 'teacher3@northwind.example', 'Teacher', false, 0),
                 ('nw', 'teacher4@northwind.example', 'Teacher', false, 0),
                 ('nw', 'teacher5@northwind.example', 'Teacher', false, 0),
                 ('sa', 'teacher@sierra-azul.example', 'Teacher', false, 0))
        AS v(org, email, role, is_primary, later)
    JOIN users u ON u.email = v.email),
m AS (
    INSERT INTO organization_memberships (organization_id, user_id, role_in_organization,
                                          is_primary, membership_status, joined_at, updated_at)
    SELECT org, user_id, role, is_primary, 'active', joined, joined FROM src
    RETURNING user_id),
cur AS (
    UPDATE users u SET current_organization_id = f.org
    FROM (SELECT DISTINCT ON (user_id) user_id, org FROM src ORDER BY user_id, joined) f
    WHERE u.id = f.user_id),
own AS (
    UPDATE users SET current_organization_id = $1::uuid
    WHERE email = 'owner@northwind.example')
INSERT INTO invites (id, organization_id, email, role_in_organization, status, token_hash,
                     invited_by, expires_at, accepted_at, created_at, updated_at)
SELECT gen_random_uuid(), s.org, u.email, s.role, 'accepted',
       encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')),
              'hex'),
       i.id, s.joined - interval '2 days' + interval '7 days', s.joined,
       s.joined - interval '2 days', s.joined
FROM src s
JOIN users u ON u.id = s.user_id
JOIN users i ON i.email = s.inviter
WHERE s.role IN ('Coach', 'Teacher');

-- name: demo_invites
-- Pending invites for addresses without an account (an invite to an existing account would
-- hold that user at the invite gate): $3 a JSON array of {org, email, role, by (the inviter's
-- email), hours (created that many hours ago), hash (of the token the command prints)}. They
-- expire 30 days after they were made, the longest an invite may live.
INSERT INTO invites (id, organization_id, email, role_in_organization, status, token_hash,
                     invited_by, expires_at, created_at, updated_at)
SELECT gen_random_uuid(), CASE x.org WHEN 'nw' THEN $1::uuid ELSE $2::uuid END, x.email,
       x.role, 'pending', x.hash, i.id,
       now() - make_interval(hours => x.hours) + interval '30 days',
       now() - make_interval(hours => x.hours), now() - make_interval(hours => x.hours)
FROM json_to_recordset($3::json)
    AS x(org text, email text, role text, by text, hours int, hash text)
JOIN users i ON i.email = x.by;

-- name: demo_mentorships
-- A mentorship in each status for coach@ (pending, active, paused, ended), and more for the
-- other coaches. Created `created` days ago; `updated` days ago its status last changed.
INSERT INTO mentorships (id, organization_id, coach_id, teacher_id, status, title, description,
                         notes, created_at, updated_at)
SELECT gen_random_uuid(), CASE v.org WHEN 'nw' THEN $1::uuid ELSE $2::uuid END, c.id, t.id,
       v.status, v.title, v.description, v.notes,
       now() - make_interval(days => v.created, mins => 95),
       now() - make_interval(days => v.updated, mins => 70)
FROM (VALUES
    ('nw', 'coach@northwind.example', 'teacher@northwind.example', 'active',
     'Classroom management, first year',
     'Weekly coaching on routines, transitions and student engagement in Emma''s 7th-grade '
     'science classes.',
     'Responds well to concrete examples. Follow up on the seating-chart experiment.', 60, 59),
    ('nw', 'coach@northwind.example', 'teacher2@northwind.example', 'active',
     'Evaluación formativa en matemáticas',
     'Rúbricas, tickets de salida y retroalimentación en las clases de 9.º grado de Mateo.',
     'Prefers to meet in Spanish. Strong content knowledge, work on pacing.', 45, 44),
    ('nw', 'coach@northwind.example', 'teacher3@northwind.example', 'pending',
     'Differentiated instruction',
     'Planning tiered tasks for mixed-ability English classes.', NULL, 2, 2),
    ('nw', 'coach@northwind.example', 'teacher5@northwind.example', 'paused',
     'Project-based learning',
     'Designing and running a six-week PBL unit in 10th-grade history.',
     'Paused while Noah is on leave, resume after spring break.', 90, 12),
    ('nw', 'coach@northwind.example', 'teacher4@northwind.example', 'ended',
     'Literacy across the curriculum',
     'Reading strategies for social studies texts.', 'Goals met, closed by mutual agreement.',
     130, 30),
    ('nw', 'coach3@northwind.example', 'teacher3@northwind.example', 'active',
     'Science of reading',
     'Phonics routines and fluency checks for Hannah''s intervention groups.', NULL, 35, 34),
    ('nw', 'coach2@northwind.example', 'teacher4@northwind.example', 'active',
     'Lectura en voz alta y comprensión',
     'Estrategias de lectura compartida y preguntas de comprensión.', NULL, 25, 24),
    ('sa', 'coach2@northwind.example', 'teacher@sierra-azul.example', 'active',
     'Primer año en el aula',
     'Acompañamiento semanal para un docente nuevo de ciencias.', NULL, 20, 19))
    AS v(org, coach, teacher, status, title, description, notes, created, updated)
JOIN users c ON c.email = v.coach
JOIN users t ON t.email = v.teacher;

-- name: demo_sessions
-- Sessions in every status. A session starts at `at` local time in its time zone, `day` days
-- from today there; it was created `created` ago. Past sessions are final (completed, cancelled
-- or missed, as the sweeper leaves one 30 minutes after its end), upcoming ones scheduled or
-- confirmed; `event` ago a cancellation or a confirmation happened, by `by`. The video channel
-- is ms_<id>_<creation in epoch ms>, as a create names it.
WITH src AS (
    SELECT gen_random_uuid() AS id, m.id AS mentorship_id, m.organization_id,
           (date_trunc('day', now() AT TIME ZONE v.tz) + make_interval(days => v.day)
            + v.at::interval) AT TIME ZONE v.tz AS starts,
           v.minutes, v.tz, v.notes, v.status,
           now() - v.created::interval - make_interval(mins => abs(v.day * 47) % 240)
               AS created_at,
           now() - v.event::interval AS event_at, b.id AS by_id
    FROM (VALUES
        ('coach@northwind.example', 'teacher@northwind.example', -21, '10:00', 60,
         'America/New_York', 'Observed the lab transition, agreed on a three-step routine.',
         'completed', '27 days', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', -14, '10:00', 45,
         'America/New_York', 'Seating chart: fewer side conversations during labs.',
         'completed', '20 days', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', -7, '10:00', 60,
         'America/New_York', NULL, 'missed', '13 days', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', -3, '15:30', 30,
         'America/New_York', 'Cancelled: district training day.', 'cancelled', '9 days',
         '5 days', 'coach@northwind.example'),
        ('coach@northwind.example', 'teacher@northwind.example', 2, '10:00', 60,
         'America/New_York', 'Exit tickets: bring three samples.', 'confirmed', '4 days',
         '3 days', 'teacher@northwind.example'),
        ('coach@northwind.example', 'teacher@northwind.example', 9, '10:00', 60,
         'America/New_York', NULL, 'scheduled', '1 day', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', -10, '16:00', 45,
         'America/Bogota', 'Revisamos la rúbrica de resolución de problemas.', 'completed',
         '15 days', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', 3, '16:00', 45,
         'America/Bogota', NULL, 'scheduled', '2 days', NULL, NULL),
        ('coach@northwind.example', 'teacher5@northwind.example', -30, '13:00', 60,
         'America/Denver', 'Mapped the unit''s driving question and milestones.', 'completed',
         '35 days', NULL, NULL),
        ('coach@northwind.example', 'teacher5@northwind.example', -13, '13:00', 60,
         'America/Denver', NULL, 'cancelled', '20 days', '14 days 1 hour',
         'manager@northwind.example'),
        ('coach@northwind.example', 'teacher4@northwind.example', -60, '09:00', 60,
         'America/Santiago', NULL, 'completed', '64 days', NULL, NULL),
        ('coach@northwind.example', 'teacher4@northwind.example', -45, '09:00', 60,
         'America/Santiago', 'Annotation strategies for primary sources.', 'completed',
         '50 days', NULL, NULL),
        ('coach@northwind.example', 'teacher4@northwind.example', -28, '09:00', 60,
         'America/Santiago', NULL, 'cancelled', '33 days', '30 days 1 hour 10 minutes',
         'manager@northwind.example'),
        ('coach3@northwind.example', 'teacher3@northwind.example', -4, '08:30', 30,
         'America/Phoenix', 'Fluency checks: three students moved up a level.', 'completed',
         '9 days', NULL, NULL),
        ('coach3@northwind.example', 'teacher3@northwind.example', 6, '08:30', 30,
         'America/Phoenix', NULL, 'scheduled', '4 days', NULL, NULL),
        ('coach2@northwind.example', 'teacher4@northwind.example', -8, '11:00', 45,
         'America/Mexico_City', 'Lectura compartida: modelamos preguntas antes de leer.',
         'completed', '12 days', NULL, NULL),
        ('coach2@northwind.example', 'teacher4@northwind.example', 5, '11:00', 45,
         'America/Mexico_City', NULL, 'confirmed', '3 days', '2 days',
         'teacher4@northwind.example'),
        ('coach2@northwind.example', 'teacher4@northwind.example', 12, '11:00', 45,
         'America/Mexico_City', NULL, 'scheduled', '3 days', NULL, NULL),
        ('coach2@northwind.example', 'teacher@sierra-azul.example', -6, '17:00', 60,
         'Europe/Madrid', 'Gestión del laboratorio y normas de seguridad.', 'completed',
         '10 days', NULL, NULL),
        ('coach2@northwind.example', 'teacher@sierra-azul.example', 1, '17:00', 60,
         'Europe/Madrid', NULL, 'scheduled', '5 days', NULL, NULL))
        AS v(coach, teacher, day, at, minutes, tz, notes, status, created, event, by)
    JOIN users c ON c.email = v.coach
    JOIN users t ON t.email = v.teacher
    JOIN mentorships m ON m.coach_id = c.id AND m.teacher_id = t.id
    LEFT JOIN users b ON b.email = v.by)
INSERT INTO mentorship_sessions (id, mentorship_id, organization_id, scheduled_at,
                                 duration_minutes, timezone, notes, status, video_channel,
                                 cancelled_at, cancelled_by, completed_at, created_at,
                                 updated_at)
SELECT id, mentorship_id, organization_id, starts, minutes, tz, notes, status,
       'ms_' || id || '_' || floor(extract(epoch FROM created_at) * 1000)::bigint,
       CASE WHEN status = 'cancelled' THEN event_at END,
       CASE WHEN status = 'cancelled' THEN by_id END,
       CASE WHEN status = 'completed'
            THEN starts + make_interval(mins => minutes + 12) END,
       created_at,
       CASE status WHEN 'completed' THEN starts + make_interval(mins => minutes + 12)
                   WHEN 'missed' THEN starts + make_interval(mins => minutes + 31)
                   WHEN 'scheduled' THEN created_at
                   ELSE event_at END
FROM src;

-- name: demo_chat
-- Chat threads: messages (`ago` before now, some replies, one edited, one deleted by its
-- sender), the file $1 (NULL: none) attached to the message keyed 'plan' and to its mentorship,
-- reactions, read receipts, and each conversation's clock at its last message, as posts leave
-- it. The counters and last-message rows follow from the triggers of migration 0010.
WITH msg AS MATERIALIZED (
    SELECT gen_random_uuid() AS id, m.id AS mentorship_id, v.k, s.id AS sender_id, v.body,
           v.reply,
           now() - v.ago::interval + make_interval(secs => (ascii(v.k) % 50) / 1000.0)
               AS created_at,
           v.edited::interval AS edited, v.deleted::interval AS deleted
    FROM (VALUES
        ('coach@northwind.example', 'teacher@northwind.example', 'e1',
         'coach@northwind.example',
         'Thanks for having me in your lab today, Emma. The transition after the warm-up was '
         'much smoother than last week.', NULL, '21 days -4 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e2',
         'teacher@northwind.example',
         'Thank you! The countdown timer really helped. Do you have the seating chart template '
         'you mentioned?', NULL, '21 days -5 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'plan',
         'coach@northwind.example',
         'Here is the week 3 plan, with the seating chart at the end.', NULL,
         '21 days -5 hours -20 minutes', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e4',
         'teacher@northwind.example', 'Perfect, I''ll try it with 3rd period on Monday.', 'plan',
         '21 days -6 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e5',
         'teacher@northwind.example',
         'The seating chart worked! Far fewer side conversations during the lab.', NULL,
         '14 days -7 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e6',
         'coach@northwind.example',
         'Great to hear. Let''s look at exit tickets in our next session.', 'e5',
         '14 days -7 hours -15 minutes', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e7',
         'teacher@northwind.example',
         'Sorry I missed our session today, a parent conference ran late.', NULL,
         '7 days -8 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e8',
         'coach@northwind.example',
         'No problem at all! I''ll send you a new time.', 'e7', '7 days -8 hours -10 minutes',
         '3 minutes', NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e9',
         'teacher@northwind.example', 'Can we meet on Thursday instead?', NULL, '6 days',
         NULL, '2 minutes'),
        ('coach@northwind.example', 'teacher@northwind.example', 'e10',
         'coach@northwind.example',
         'I had to cancel our Friday session, I''ll be at the district training. A new time '
         'is on the calendar.', NULL, '5 days', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e11',
         'teacher@northwind.example',
         'Confirmed ✅ I''ll have three exit tickets ready.', 'e10', '3 days', NULL, NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e12',
         'coach@northwind.example', 'Thanks! See you then.', NULL, '2 days 23 hours', NULL,
         NULL),
        ('coach@northwind.example', 'teacher@northwind.example', 'e13',
         'teacher@northwind.example',
         'Quick question before our next session: should the exit tickets be graded?', NULL,
         '2 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', 'm1',
         'teacher2@northwind.example',
         'Hola Daniel, gracias por la sesión de hoy. ¿Podemos revisar las rúbricas la '
         'próxima vez?', NULL, '10 days -3 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', 'm2',
         'coach@northwind.example',
         '¡Claro! Trae dos ejemplos de trabajos de tus estudiantes.', NULL,
         '10 days -3 hours -30 minutes', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', 'm3',
         'teacher2@northwind.example', 'Perfecto, los llevaré.', 'm2',
         '10 days -4 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', 'm4',
         'coach@northwind.example',
         'Te comparto una idea para la próxima clase: empieza con un ticket de entrada de '
         'dos preguntas.', NULL, '1 day 4 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher2@northwind.example', 'm5',
         'teacher2@northwind.example', '¡Muchas gracias! Lo pruebo el lunes.', NULL,
         '1 day 1 hour', NULL, NULL),
        ('coach@northwind.example', 'teacher5@northwind.example', 'n1',
         'teacher5@northwind.example',
         'Heads up: I''ll be on leave until after spring break.', NULL, '14 days 3 hours',
         NULL, NULL),
        ('coach@northwind.example', 'teacher5@northwind.example', 'n2',
         'coach@northwind.example',
         'Take care, Noah. We''ll pick up the PBL unit when you''re back.', 'n1',
         '14 days 2 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher4@northwind.example', 'v1',
         'coach@northwind.example',
         'It has been a pleasure working with you, Valentina. Your annotation routine is '
         'ready to share with the department.', NULL, '30 days 2 hours', NULL, NULL),
        ('coach@northwind.example', 'teacher4@northwind.example', 'v2',
         'teacher4@northwind.example', 'Thank you, Daniel! I learned a lot.', NULL,
         '30 days 1 hour', NULL, NULL),
        ('coach2@northwind.example', 'teacher4@northwind.example', 's1',
         'coach2@northwind.example',
         'Hola Valentina, te dejo las preguntas de comprensión para el jueves.', NULL,
         '4 days', NULL, NULL),
        ('coach2@northwind.example', 'teacher4@northwind.example', 's2',
         'teacher4@northwind.example', '¡Gracias, Sofía! Las reviso hoy.', 's1',
         '3 days 22 hours', NULL, NULL),
        ('coach2@northwind.example', 'teacher@sierra-azul.example', 'j1',
         'teacher@sierra-azul.example',
         'Buenas tardes, Sofía. ¿Repasamos las normas del laboratorio en la próxima sesión?',
         NULL, '2 days', NULL, NULL),
        ('coach2@northwind.example', 'teacher@sierra-azul.example', 'j2',
         'coach2@northwind.example', 'Sí, y preparamos una lista de verificación.', 'j1',
         '1 day 20 hours', NULL, NULL))
        AS v(coach, teacher, k, sender, body, reply, ago, edited, deleted)
    JOIN users c ON c.email = v.coach
    JOIN users t ON t.email = v.teacher
    JOIN users s ON s.email = v.sender
    JOIN mentorships m ON m.coach_id = c.id AND m.teacher_id = t.id),
ins AS (
    INSERT INTO chat_messages (id, mentorship_id, sender_id, body, client_message_id,
                               reply_to_message_id, created_at, edited_at, deleted_at,
                               deleted_by)
    SELECT g.id, g.mentorship_id, g.sender_id, g.body, gen_random_uuid(), p.id, g.created_at,
           g.created_at + g.edited, g.created_at + g.deleted,
           CASE WHEN g.deleted IS NOT NULL THEN g.sender_id END
    FROM msg g
    LEFT JOIN msg p ON p.mentorship_id = g.mentorship_id AND p.k = g.reply
    ORDER BY g.mentorship_id, g.created_at
    RETURNING id),
clk AS (
    INSERT INTO chat_clocks (mentorship_id, last_at)
    SELECT mentorship_id, max(created_at) FROM msg GROUP BY mentorship_id),
att AS (
    INSERT INTO chat_message_attachments (id, message_id, file_id, position)
    SELECT gen_random_uuid(), g.id, $1::uuid, 1 FROM msg g
    WHERE g.k = 'plan' AND $1::uuid IS NOT NULL),
fat AS (
    INSERT INTO file_attachments (id, file_id, object_type, object_id, created_by, created_at)
    SELECT gen_random_uuid(), $1::uuid, 'mentorship', g.mentorship_id, g.sender_id,
           g.created_at + interval '1 minute'
    FROM msg g
    WHERE g.k = 'plan' AND $1::uuid IS NOT NULL),
rx AS (
    INSERT INTO chat_reactions (message_id, emoji, user_id, created_at)
    SELECT g.id, v.emoji, u.id, g.created_at + v.after::interval
    FROM (VALUES ('plan', '👍', 'teacher@northwind.example', '4 minutes'),
                 ('e4', '👍', 'coach@northwind.example', '10 minutes'),
                 ('e5', '🎉', 'coach@northwind.example', '5 minutes'),
                 ('e5', '👏', 'manager@northwind.example', '2 hours'),
                 ('e5', '🎉', 'manager@northwind.example', '2 hours 1 minute'),
                 ('e11', '❤️', 'coach@northwind.example', '20 minutes'),
                 ('m3', '👍', 'coach@northwind.example', '1 hour'),
                 ('m5', '🙌', 'coach@northwind.example', '2 minutes'),
                 ('n2', '❤️', 'teacher5@northwind.example', '1 hour'),
                 ('v2', '❤️', 'coach@northwind.example', '5 minutes'))
        AS v(k, emoji, email, after)
    JOIN msg g ON g.k = v.k
    JOIN users u ON u.email = v.email)
INSERT INTO chat_read_receipts (mentorship_id, user_id, last_read_message_id, last_read_at,
                                updated_at)
SELECT g.mentorship_id, u.id, g.id, g.created_at, g.created_at + v.after::interval
FROM (VALUES ('e12', 'coach@northwind.example', '1 minute'),
             ('e12', 'teacher@northwind.example', '3 hours'),
             ('e5', 'manager@northwind.example', '2 hours'),
             ('m3', 'coach@northwind.example', '1 hour'),
             ('m5', 'teacher2@northwind.example', '1 minute'),
             ('n2', 'coach@northwind.example', '1 minute'),
             ('n2', 'teacher5@northwind.example', '1 hour'),
             ('v2', 'coach@northwind.example', '5 minutes'),
             ('v2', 'teacher4@northwind.example', '1 minute'),
             ('s2', 'coach2@northwind.example', '30 minutes'),
             ('s2', 'teacher4@northwind.example', '1 minute'),
             ('j2', 'coach2@northwind.example', '1 minute'))
    AS v(k, email, after)
JOIN msg g ON g.k = v.k
JOIN users u ON u.email = v.email;

-- name: demo_file
-- The chat attachment's file, uploaded by coach@ in Northwind just before the message that
-- carries it: $2 id, $3 filename, $4 MIME type, $5 size, $6 SHA-256, $7 storage key.
INSERT INTO files (id, organization_id, uploader_id, filename, mime_type, size_bytes,
                   sha256_hash, storage_key, created_at)
SELECT $2::uuid, $1::uuid, u.id, $3::text, $4::text, $5::bigint, $6::text, $7::text,
       now() - interval '21 days -5 hours -19 minutes'
FROM users u
WHERE u.email = 'coach@northwind.example';
