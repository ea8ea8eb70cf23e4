-- Chat of a mentorship (routes/chat.c).
--
-- Every read that decides access starts with the same four columns, which routes/chat.c reads
-- through the enum of chat_access (it checks at compile time that each statement's enum agrees):
-- organization_id, coach_id, teacher_id, and admins, the organization's active Managers and
-- OrganizationAdmins as a comma-separated list (the event recipients). The admins subquery is
-- written out in each statement rather than kept in a SQL function: PostgreSQL does not inline
-- a function whose body holds a subquery, and these statements are on the hot path.

-- name: chat_access
-- columns: organization_id, coach_id, teacher_id, admins
-- The mentorship $1's access columns (the RTM token).
SELECT m.organization_id, m.coach_id, m.teacher_id,
       (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
        WHERE om.organization_id = m.organization_id AND om.membership_status = 'active'
          AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins
FROM mentorships m
WHERE m.id = $1::uuid;

-- name: chat_history
-- columns: organization_id, coach_id, teacher_id, admins,
-- columns: id, sender_id, body, client_message_id, created_at, edited_at, deleted_at,
-- columns: reply_to_message_id, reply_id, reply_sender_id, reply_sender_name, reply_body,
-- columns: user_id, user_first_name, user_last_name, user_email, user_avatar_url,
-- columns: attachments, reactions, version
-- A history page: $1 mentorship, $2 before (or NULL), $3 limit; one row more than the limit
-- tells hasMore. The messages come as plain rows, written as JSON in C (json_build_object per
-- message, its sender and its reply preview was most of the cost of a page). Every row repeats
-- the access columns (read once, in a materialized CTE: the administrators' list is a
-- subquery); a mentorship without messages gives one row whose message columns are NULL.
-- Attachments and reactions stay JSON from SQL (few messages have any), aggregated once for
-- the whole page (the shapes of chat_attachments_json and chat_reactions_json, migration 0010):
-- calling those functions per message cost as much as the rest of the statement. version: the
-- mentorship's chat history version (migration 0011), read in the same snapshot as the page,
-- for the cache of first pages.
WITH acc AS MATERIALIZED (
         SELECT m.organization_id, m.coach_id, m.teacher_id,
                (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
                 WHERE om.organization_id = m.organization_id
                   AND om.membership_status = 'active'
                   AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins
         FROM mentorships m
         WHERE m.id = $1::uuid),
     ver AS (SELECT (SELECT version FROM chat_history_versions WHERE mentorship_id = $1::uuid)
                    AS v),
     page AS (SELECT c.* FROM chat_messages c
              WHERE c.mentorship_id = $1::uuid AND c.deleted_at IS NULL
                AND c.created_at < COALESCE($2::timestamptz, 'infinity')
              ORDER BY c.created_at DESC LIMIT $3::int + 1),
     att AS (SELECT a.message_id,
                    json_agg(json_build_object('id', a.id, 'fileId', a.file_id,
                                               'filename', f.filename, 'mimeType', f.mime_type,
                                               'sizeBytes', f.size_bytes,
                                               '_key', f.storage_key) ORDER BY a.position) AS j
             FROM chat_message_attachments a LEFT JOIN files f ON f.id = a.file_id
             WHERE a.message_id IN (SELECT id FROM page)
             GROUP BY a.message_id),
     rx AS (SELECT r.message_id,
                   json_agg(json_build_object('emoji', r.emoji, 'count', r.n,
                                              'userIds', r.users)
                            ORDER BY r.first_at, r.emoji) AS j
            FROM (SELECT message_id, emoji, count(*) AS n,
                         json_agg(user_id ORDER BY created_at, user_id) AS users,
                         min(created_at) AS first_at
                  FROM chat_reactions WHERE message_id IN (SELECT id FROM page)
                  GROUP BY 1, 2) r
            GROUP BY 1)
SELECT acc.*, p.id, p.sender_id, p.body, p.client_message_id,
       chat_iso(p.created_at) AS created_at, chat_iso(p.edited_at) AS edited_at,
       chat_iso(p.deleted_at) AS deleted_at, p.reply_to_message_id,
       rp.id AS reply_id, rp.sender_id AS reply_sender_id,
       user_display_name(ru.first_name, ru.last_name) AS reply_sender_name,
       CASE WHEN rp.deleted_at IS NULL THEN left(rp.body, 120) END AS reply_body,
       su.id AS user_id, su.first_name AS user_first_name, su.last_name AS user_last_name,
       su.email AS user_email, su.avatar_url AS user_avatar_url,
       att.j AS attachments, rx.j AS reactions, ver.v AS version
FROM acc CROSS JOIN ver
LEFT JOIN page p ON true
LEFT JOIN att ON att.message_id = p.id
LEFT JOIN rx ON rx.message_id = p.id
LEFT JOIN chat_messages rp ON rp.id = p.reply_to_message_id
LEFT JOIN users ru ON ru.id = rp.sender_id
LEFT JOIN users su ON su.id = p.sender_id
ORDER BY p.created_at DESC;

-- name: chat_search
-- columns: =chat_history
-- A search page: $1 mentorship, $2 before (or NULL), $3 limit, $4 the search term
-- (chat_search_page, migration 0010, chooses between reading the newest messages in order and
-- the GIN index). The rest as chat_history; version is NULL (search pages are not cached).
WITH acc AS MATERIALIZED (
         SELECT m.organization_id, m.coach_id, m.teacher_id,
                (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
                 WHERE om.organization_id = m.organization_id
                   AND om.membership_status = 'active'
                   AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins
         FROM mentorships m
         WHERE m.id = $1::uuid),
     ver AS (SELECT NULL::bigint AS v),
     page AS MATERIALIZED (SELECT * FROM chat_search_page($1::uuid,
                                                          COALESCE($2::timestamptz, 'infinity'),
                                                          $3::int, chat_search_query($4))),
     att AS (SELECT a.message_id,
                    json_agg(json_build_object('id', a.id, 'fileId', a.file_id,
                                               'filename', f.filename, 'mimeType', f.mime_type,
                                               'sizeBytes', f.size_bytes,
                                               '_key', f.storage_key) ORDER BY a.position) AS j
             FROM chat_message_attachments a LEFT JOIN files f ON f.id = a.file_id
             WHERE a.message_id IN (SELECT id FROM page)
             GROUP BY a.message_id),
     rx AS (SELECT r.message_id,
                   json_agg(json_build_object('emoji', r.emoji, 'count', r.n,
                                              'userIds', r.users)
                            ORDER BY r.first_at, r.emoji) AS j
            FROM (SELECT message_id, emoji, count(*) AS n,
                         json_agg(user_id ORDER BY created_at, user_id) AS users,
                         min(created_at) AS first_at
                  FROM chat_reactions WHERE message_id IN (SELECT id FROM page)
                  GROUP BY 1, 2) r
            GROUP BY 1)
SELECT acc.*, p.id, p.sender_id, p.body, p.client_message_id,
       chat_iso(p.created_at) AS created_at, chat_iso(p.edited_at) AS edited_at,
       chat_iso(p.deleted_at) AS deleted_at, p.reply_to_message_id,
       rp.id AS reply_id, rp.sender_id AS reply_sender_id,
       user_display_name(ru.first_name, ru.last_name) AS reply_sender_name,
       CASE WHEN rp.deleted_at IS NULL THEN left(rp.body, 120) END AS reply_body,
       su.id AS user_id, su.first_name AS user_first_name, su.last_name AS user_last_name,
       su.email AS user_email, su.avatar_url AS user_avatar_url,
       att.j AS attachments, rx.j AS reactions, ver.v AS version
FROM acc CROSS JOIN ver
LEFT JOIN page p ON true
LEFT JOIN att ON att.message_id = p.id
LEFT JOIN rx ON rx.message_id = p.id
LEFT JOIN chat_messages rp ON rp.id = p.reply_to_message_id
LEFT JOIN users ru ON ru.id = rp.sender_id
LEFT JOIN users su ON su.id = p.sender_id
ORDER BY p.created_at DESC;

-- name: chat_history_version
-- columns: organization_id, coach_id, teacher_id, admins, version
-- When a first history page of the mentorship $1 is cached: the access columns (without the
-- administrators, which only events need) and the current chat history version.
SELECT m.organization_id, m.coach_id, m.teacher_id, NULL::text AS admins,
       (SELECT version FROM chat_history_versions WHERE mentorship_id = m.id) AS version
FROM mentorships m
WHERE m.id = $1::uuid;

-- name: chat_post_load
-- columns: organization_id, coach_id, teacher_id, admins,
-- columns: reply_here, files_found, files_own, existing, ord
-- Before posts, those of one loop turn at once (routes/chat.c "posts", db/coalesce.h): one
-- element per post in $1 mentorships, $2 callers, $3 clientMessageIds, $4 replyToMessageIds,
-- $5 attachment ids (each an array literal, "{}" for none). One row per post whose mentorship
-- exists, ord its position. reply_here: the reply target is in this mentorship (NULL: no such
-- message); files_found, files_own: attachment files found, of those uploaded by the caller;
-- existing: the message of this clientMessageId. Each mentorship's access columns are read
-- once, however many posts it has, and each organization's administrators' list (a subquery)
-- once, however many of its mentorships the posts name. The arrays are read through
-- sub-selects, so that PostgreSQL does not see their length when it plans: a custom plan for a
-- post alone looked far cheaper than the generic plan (estimated for longer arrays), and the
-- statement was planned on every execution. An absent reply target or clientMessageId is the
-- nil UUID (no message has it: ids are v4) rather than NULL, for the same reason.
WITH s AS MATERIALIZED (
         SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::text[]), (SELECT $3::uuid[]),
                              (SELECT $4::uuid[]), (SELECT $5::text[]))
                       WITH ORDINALITY AS s(mentorship, sender, cid, reply, files, ord)),
     acc AS MATERIALIZED (
         SELECT m.id, m.organization_id, m.coach_id, m.teacher_id
         FROM mentorships m
         WHERE m.id IN (SELECT mentorship FROM s)),
     adm AS MATERIALIZED (
         SELECT o.organization_id,
                (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
                 WHERE om.organization_id = o.organization_id
                   AND om.membership_status = 'active'
                   AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins
         FROM (SELECT DISTINCT organization_id FROM acc) o)
SELECT acc.organization_id, acc.coach_id, acc.teacher_id, adm.admins,
       (SELECT c.mentorship_id = acc.id FROM chat_messages c
        WHERE c.id = COALESCE(s.reply, '00000000-0000-0000-0000-000000000000'::uuid))
           AS reply_here,
       (SELECT count(*) FROM files f WHERE f.id = ANY(s.files::uuid[])) AS files_found,
       (SELECT count(*) FROM files f WHERE f.id = ANY(s.files::uuid[]) AND f.uploader_id = s.sender)
           AS files_own,
       (SELECT chat_message_json(c) FROM chat_messages c
        WHERE c.mentorship_id = acc.id AND c.sender_id = s.sender
          AND c.client_message_id = COALESCE(s.cid,
                                             '00000000-0000-0000-0000-000000000000'::uuid))
           AS existing,
       s.ord
FROM s JOIN acc ON acc.id = s.mentorship JOIN adm ON adm.organization_id = acc.organization_id
ORDER BY s.ord;

-- name: chat_post_insert
-- columns: organization_id, coach_id, teacher_id, admins,
-- columns: id, sender_id, body, client_message_id, created_at, edited_at, deleted_at,
-- columns: reply_to_message_id, reply_id, reply_sender_id, reply_sender_name, reply_body,
-- columns: user_id, user_first_name, user_last_name, user_email, user_avatar_url,
-- columns: attachments, reactions, version, pushes, ord
-- Posts, of any mentorships, in one statement and one commit (routes/chat.c "posts",
-- db/coalesce.h): one element per post in $1 ids, $2 mentorships, $3 senders, $4 bodies,
-- $5 clientMessageIds, $6 replyToMessageIds, $7 attachment ids (array literals, "{}" for
-- none), $8 push titles (the sender's display name). The clock rows of the mentorships are
-- taken first, in mentorship id order, so that concurrent statements (other workers) sharing
-- mentorships wait for each other instead of deadlocking; a mentorship with k posts here moves
-- its clock k ticks, and its posts take them in their order, so createdAt stays unique and in
-- commit order per mentorship. The count and conversation rows move in the statement triggers
-- (migration 0010), once per mentorship, in key order too. One row per new message, ord its
-- post's position, in the layout of chat_history (access columns, reactions and version NULL;
-- attachments NULL when none), which C writes as JSON like a history page; a post whose
-- clientMessageId already has a message gets no row. pushes: the push rows queued by the whole
-- statement. The arrays are read through sub-selects, as in chat_post_load (generic plans).
WITH src AS MATERIALIZED (
         SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::uuid[]), (SELECT $3::text[]),
                              (SELECT $4::text[]), (SELECT $5::uuid[]), (SELECT $6::uuid[]),
                              (SELECT $7::text[]), (SELECT $8::text[]))
                       WITH ORDINALITY AS s(id, mentorship, sender, body, cid, reply, files,
                                            title, ord)),
     n AS MATERIALIZED (SELECT mentorship, count(*)::int AS k FROM src GROUP BY mentorship),
     clk AS (INSERT INTO chat_clocks AS k (mentorship_id, last_at)
             SELECT n.mentorship, clock_timestamp() + (n.k - 1) * interval '1 microsecond'
             FROM n ORDER BY n.mentorship
             ON CONFLICT (mentorship_id) DO UPDATE
             SET last_at = GREATEST(EXCLUDED.last_at,
                                    k.last_at + (SELECT n.k FROM n
                                                 WHERE n.mentorship = k.mentorship_id)
                                                * interval '1 microsecond')
             RETURNING mentorship_id, last_at),
     ins AS (INSERT INTO chat_messages (id, mentorship_id, sender_id, body, client_message_id,
                                        reply_to_message_id, created_at)
             SELECT s.id, s.mentorship, s.sender, s.body, s.cid, s.reply,
                    clk.last_at - (n.k - s.tick) * interval '1 microsecond'
             FROM (SELECT src.*,
                          row_number() OVER (PARTITION BY src.mentorship ORDER BY src.ord)
                              AS tick
                   FROM src) s
             JOIN clk ON clk.mentorship_id = s.mentorship
             JOIN n ON n.mentorship = s.mentorship
             ORDER BY s.ord
             ON CONFLICT (mentorship_id, sender_id, client_message_id) DO NOTHING
             RETURNING *),
     att AS (INSERT INTO chat_message_attachments (id, message_id, file_id, position)
             SELECT gen_random_uuid(), ins.id, a.fid, a.pos
             FROM ins JOIN src s ON s.id = ins.id,
                  unnest(s.files::uuid[]) WITH ORDINALITY a(fid, pos)
             RETURNING *),
     push AS (INSERT INTO outbox (kind, payload)
              SELECT 'push',
                     jsonb_build_object('to', jsonb_agg(pt.token ORDER BY pt.token),
                                        'title', s.title, 'body', left(ins.body, 200),
                                        'data', jsonb_build_object(
                                            'type', 'chat-message',
                                            'mentorshipId', ins.mentorship_id,
                                            'messageId', ins.id))
              FROM ins
              JOIN src s ON s.id = ins.id
              JOIN mentorships m ON m.id = ins.mentorship_id
              JOIN push_tokens pt ON pt.user_id IN (m.coach_id, m.teacher_id)
                                 AND pt.user_id <> ins.sender_id
              GROUP BY ins.id, ins.body, ins.mentorship_id, s.title, pt.user_id
              RETURNING 1)
SELECT NULL::text AS organization_id, NULL::text AS coach_id, NULL::text AS teacher_id,
       NULL::text AS admins, ins.id, ins.sender_id, ins.body, ins.client_message_id,
       chat_iso(ins.created_at) AS created_at, chat_iso(ins.edited_at) AS edited_at,
       chat_iso(ins.deleted_at) AS deleted_at, ins.reply_to_message_id,
       rp.id AS reply_id, rp.sender_id AS reply_sender_id,
       user_display_name(ru.first_name, ru.last_name) AS reply_sender_name,
       CASE WHEN rp.deleted_at IS NULL THEN left(rp.body, 120) END AS reply_body,
       su.id AS user_id, su.first_name AS user_first_name, su.last_name AS user_last_name,
       su.email AS user_email, su.avatar_url AS user_avatar_url,
       (SELECT json_agg(json_build_object('id', a.id, 'fileId', a.file_id,
                                          'filename', f.filename, 'mimeType', f.mime_type,
                                          'sizeBytes', f.size_bytes, '_key', f.storage_key)
                        ORDER BY a.position)
        FROM att a LEFT JOIN files f ON f.id = a.file_id
        WHERE a.message_id = ins.id) AS attachments,
       NULL::json AS reactions, NULL::bigint AS version,
       (SELECT count(*) FROM push) AS pushes, s.ord
FROM ins
JOIN src s ON s.id = ins.id
LEFT JOIN chat_messages rp ON rp.id = ins.reply_to_message_id
LEFT JOIN users ru ON ru.id = rp.sender_id
LEFT JOIN users su ON su.id = ins.sender_id
ORDER BY s.ord;

-- name: chat_post_existing
-- columns: message
-- The message of the mentorship $1 that the sender $2 posted with clientMessageId $3.
SELECT chat_message_json(c) AS message
FROM chat_messages c
WHERE c.mentorship_id = $1::uuid AND c.sender_id = $2 AND c.client_message_id = $3::uuid;

-- name: chat_msg_load
-- columns: organization_id, coach_id, teacher_id, admins, sender_id, deleted, editable
-- Before an edit, delete or reaction: $1 mentorship, $2 message. After the access columns
-- (NULL when the message is not one of this mentorship): sender, deleted, within the edit
-- window.
SELECT m.organization_id, m.coach_id, m.teacher_id,
       (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
        WHERE om.organization_id = m.organization_id AND om.membership_status = 'active'
          AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins,
       c.sender_id, c.deleted_at IS NOT NULL AS deleted,
       c.created_at > now() - interval '15 minutes' AS editable
FROM mentorships m
LEFT JOIN chat_messages c ON c.id = $2::uuid AND c.mentorship_id = m.id
WHERE m.id = $1::uuid;

-- name: chat_edit
-- columns: message
-- $1 mentorship, $2 message, $3 body, $4 sender. No row: not editable (any more).
WITH u AS (UPDATE chat_messages SET body = $3, edited_at = now()
           WHERE id = $2::uuid AND mentorship_id = $1::uuid AND deleted_at IS NULL
             AND sender_id = $4 AND created_at > now() - interval '15 minutes'
           RETURNING *)
SELECT chat_message_json(u::chat_messages) AS message FROM u;

-- name: chat_delete
-- columns: id
-- $1 mentorship, $2 message, $3 caller. No row: already deleted.
UPDATE chat_messages SET deleted_at = now(), deleted_by = $3
WHERE id = $2::uuid AND mentorship_id = $1::uuid AND deleted_at IS NULL
RETURNING id;

-- name: chat_react
-- columns: changed, live
-- $1 message, $2 emoji, $3 caller. changed: the reaction is new; live: the message is still
-- live.
WITH live AS (SELECT id FROM chat_messages WHERE id = $1::uuid AND deleted_at IS NULL),
     ins AS (INSERT INTO chat_reactions (message_id, emoji, user_id)
             SELECT id, $2, $3 FROM live
             ON CONFLICT DO NOTHING
             RETURNING 1)
SELECT EXISTS (SELECT 1 FROM ins) AS changed, EXISTS (SELECT 1 FROM live) AS live;

-- name: chat_unreact
-- columns: =chat_react
-- $1 message, $2 emoji, $3 caller. changed: a reaction was removed.
WITH live AS (SELECT id FROM chat_messages WHERE id = $1::uuid AND deleted_at IS NULL),
     del AS (DELETE FROM chat_reactions
             WHERE message_id IN (SELECT id FROM live) AND emoji = $2 AND user_id = $3
             RETURNING 1)
SELECT EXISTS (SELECT 1 FROM del) AS changed, EXISTS (SELECT 1 FROM live) AS live;

-- name: chat_reactions
-- columns: reactions
-- The reactions of the message $1 (chat_reactions_json, migration 0010).
SELECT chat_reactions_json($1::uuid) AS reactions;

-- name: chat_receipt_load
-- columns: organization_id, coach_id, teacher_id, admins, message_here
-- Before a read receipt: $1 mentorship, $2 message; message_here: it is one of this
-- mentorship's.
SELECT m.organization_id, m.coach_id, m.teacher_id,
       (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
        WHERE om.organization_id = m.organization_id AND om.membership_status = 'active'
          AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins,
       EXISTS (SELECT 1 FROM chat_messages c WHERE c.id = $2::uuid AND c.mentorship_id = m.id)
           AS message_here
FROM mentorships m
WHERE m.id = $1::uuid;

-- name: chat_receipt
-- $1 mentorship, $2 message, $3 caller: the caller has read up to that message (a receipt
-- never moves back).
INSERT INTO chat_read_receipts AS r (mentorship_id, user_id, last_read_message_id,
                                     last_read_at)
SELECT c.mentorship_id, $3, c.id, c.created_at
FROM chat_messages c
WHERE c.id = $2::uuid AND c.mentorship_id = $1::uuid
ON CONFLICT (mentorship_id, user_id) DO UPDATE
SET last_read_message_id = EXCLUDED.last_read_message_id,
    last_read_at = EXCLUDED.last_read_at, updated_at = now()
WHERE r.last_read_at < EXCLUDED.last_read_at;

-- name: chat_unread
-- columns: organization_id, coach_id, teacher_id, admins, unread_count
-- $1 mentorship, $2 caller: the access columns and the caller's unread count (messages of
-- others, not deleted, after the caller's receipt).
SELECT m.organization_id, m.coach_id, m.teacher_id,
       (SELECT string_agg(om.user_id, ',') FROM organization_memberships om
        WHERE om.organization_id = m.organization_id AND om.membership_status = 'active'
          AND om.role_in_organization IN ('Manager', 'OrganizationAdmin')) AS admins,
       chat_unread(m.id, $2, (SELECT r.last_read_at FROM chat_read_receipts r
                              WHERE r.mentorship_id = m.id AND r.user_id = $2))
           AS unread_count
FROM mentorships m
WHERE m.id = $1::uuid;

-- name: chat_conversations
-- columns: mentorship_id, title, status, user_id, user_first_name, user_last_name, user_email,
-- columns: user_avatar_url, last_message_id, last_body, last_sender_id, last_at, unread_count
-- The conversation list: $1 organization, $2 caller, $3 every mentorship of the organization
-- (else the caller's own), $4 whether the caller has unread counts (participants). Newest last
-- message first; the last message is the stored one of chat_conversations (migration 0010),
-- not a probe of every mentorship's messages. The unread count is chat_unread written out: as
-- a function call per row (not inlined, for its CASE of subqueries) it cost more than the
-- rest. Plain rows, written as JSON in C: building 2,000 objects with json_build_object cost
-- more than the rest of the statement.
SELECT m.id AS mentorship_id, m.title, m.status, ou.id AS user_id,
       ou.first_name AS user_first_name, ou.last_name AS user_last_name,
       ou.email AS user_email, ou.avatar_url AS user_avatar_url,
       v.last_message_id, v.last_body, v.last_sender_id, chat_iso(v.last_at) AS last_at,
       CASE WHEN NOT $4::boolean THEN 0
            WHEN rr.last_read_at IS NULL THEN
                (SELECT COALESCE(sum(k.n), 0) FROM chat_counts k
                 WHERE k.mentorship_id = m.id AND k.sender_id <> $2)
            ELSE (SELECT count(*) FROM chat_messages c
                  WHERE c.mentorship_id = m.id AND c.deleted_at IS NULL
                    AND c.sender_id <> $2 AND c.created_at > rr.last_read_at)
       END AS unread_count
FROM mentorships m
JOIN chat_conversations v ON v.mentorship_id = m.id AND v.last_message_id IS NOT NULL
LEFT JOIN chat_read_receipts rr ON rr.mentorship_id = m.id AND rr.user_id = $2
JOIN users ou ON ou.id = CASE WHEN m.teacher_id = $2 THEN m.coach_id ELSE m.teacher_id END
WHERE m.organization_id = $1::uuid AND ($3::boolean OR $2 IN (m.coach_id, m.teacher_id))
ORDER BY v.last_at DESC, m.id;
