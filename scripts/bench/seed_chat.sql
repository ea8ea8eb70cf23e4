-- Bench data for scripts/bench/chat.sh, on top of seed_mentorships.sql (one organization, 2,000
-- mentorships, a Manager with a known cookie): 1,000,000 chat messages (500 per mentorship,
-- coach and teacher alternating, English and Spanish text), every 10th a reply to the one
-- before, every 5th with two reactions, every 20th with an attachment, and a push token for
-- every coach and teacher (so posts queue push rows in the outbox). Idempotent.
BEGIN;
DELETE FROM chat_messages WHERE mentorship_id IN
    (SELECT id FROM mentorships WHERE organization_id = 'b0000000-0000-4000-8000-000000000001');
DELETE FROM chat_clocks WHERE mentorship_id IN
    (SELECT id FROM mentorships WHERE organization_id = 'b0000000-0000-4000-8000-000000000001');
DELETE FROM files WHERE uploader_id LIKE 'cbench%';
DELETE FROM push_tokens WHERE user_id LIKE 'cbench%';

INSERT INTO push_tokens (token, user_id, platform)
SELECT 'ExponentPushToken[bench-' || id || ']', id, 'ios' FROM users
WHERE id LIKE 'cbenchcoach%' OR id LIKE 'cbenchteacher%';

INSERT INTO files (id, uploader_id, filename, mime_type, size_bytes, storage_key)
SELECT md5('file-' || i)::uuid, 'cbenchcoach' || i, 'notes-' || i || '.pdf', 'application/pdf',
       1000 + i, 'uploads/' || md5('file-' || i)::uuid || '/notes-' || i || '.pdf'
FROM generate_series(0, 199) i;

INSERT INTO chat_messages (id, mentorship_id, sender_id, body, created_at, reply_to_message_id)
SELECT md5(k || '-' || n)::uuid, m.id,
       CASE WHEN n % 2 = 0 THEN m.coach_id ELSE m.teacher_id END,
       (ARRAY['Hola, ¿cómo va la tarea de matemáticas?',
              'The meeting moved to Thursday afternoon, is that fine?',
              'Revisé tu ensayo: la introducción está muy bien, falta la conclusión.',
              'Can you send me the reading list for next week?',
              'Mañana tenemos la reunión a las cinco.',
              'Great progress today, keep practicing the exercises.',
              'No pude abrir el archivo, ¿lo puedes reenviar?',
              'Thanks! See you on Monday.'])[n % 8 + 1] || ' (' || n || ')',
       timestamptz '2026-03-01' + k * interval '1 second' + n * interval '1 hour',
       CASE WHEN n % 10 = 9 THEN md5(k || '-' || (n - 1))::uuid END
FROM generate_series(0, 1999) k
JOIN mentorships m ON m.id = ('b1000000-0000-4000-8000-' || lpad(to_hex(k), 12, '0'))::uuid,
     generate_series(0, 499) n;

INSERT INTO chat_reactions (message_id, emoji, user_id)
SELECT c.id, e.emoji, CASE WHEN e.emoji = '👍' THEN m.coach_id ELSE m.teacher_id END
FROM chat_messages c JOIN mentorships m ON m.id = c.mentorship_id,
     (VALUES ('👍'), ('❤️')) e(emoji)
WHERE m.organization_id = 'b0000000-0000-4000-8000-000000000001'
  AND (extract(epoch FROM c.created_at)::bigint / 3600) % 5 = 0;

INSERT INTO chat_message_attachments (id, message_id, file_id, position)
SELECT md5('att-' || c.id)::uuid, c.id,
       md5('file-' || substr(m.coach_id, 12))::uuid, 1
FROM chat_messages c JOIN mentorships m ON m.id = c.mentorship_id
WHERE m.organization_id = 'b0000000-0000-4000-8000-000000000001'
  AND (extract(epoch FROM c.created_at)::bigint / 3600) % 20 = 0;

INSERT INTO chat_clocks (mentorship_id, last_at)
SELECT mentorship_id, max(created_at) FROM chat_messages GROUP BY mentorship_id
ON CONFLICT (mentorship_id) DO UPDATE SET last_at = EXCLUDED.last_at;
COMMIT;
VACUUM ANALYZE chat_messages, chat_reactions, chat_message_attachments, files, push_tokens;
