-- Chat: one conversation per mentorship. Messages (soft-deleted, never removed by the API),
-- their file attachments, emoji reactions and each participant's read receipt.
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- ISO 8601 UTC text with microseconds: chat message times are history cursors, and a cursor
-- must name one message exactly (createdAt is unique within a mentorship, to the microsecond).
CREATE FUNCTION chat_iso(ts timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');

-- unaccent() is only STABLE (its dictionary could change); naming the dictionary makes the
-- result depend on the argument alone, which the stored search column and its index need.
CREATE FUNCTION chat_unaccent(t text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN unaccent('unaccent'::regdictionary, t);

-- The searchable form of a body: lower-cased, accent-free words as written ('simple', which
-- prefix queries match), plus their English and Spanish stems (so "meetings" finds "meeting").
CREATE FUNCTION chat_search_tsv(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN to_tsvector('simple'::regconfig, chat_unaccent(body))
        || to_tsvector('english'::regconfig, chat_unaccent(body))
        || to_tsvector('spanish'::regconfig, chat_unaccent(body));

-- A search term in web-search syntax ("quoted phrase", -word, or) as a tsquery: every word of
-- the 'simple' form outside a quoted phrase becomes a prefix ("reun" finds "reunión"); the
-- words of a phrase match whole. Without negations and phrases
-- the English and Spanish stemmed readings are OR-ed in; with either they are left out, because
-- those configurations drop stop words: a dropped "-the" would exclude nothing, and the phrase
-- "la reunión" would shrink to the word "reunion" in Spanish.
CREATE FUNCTION chat_search_query(q text) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    RETURN (SELECT CASE WHEN s::text ~ '[!<]' THEN p
                        ELSE p || websearch_to_tsquery('english'::regconfig, u)
                               || websearch_to_tsquery('spanish'::regconfig, u) END
            FROM (SELECT u, s, regexp_replace(regexp_replace(regexp_replace(s::text,
                      '''((?:[^'']|'''')*)''', '''\1'':*', 'g'),
                      ''':\*( <(?:-|[0-9]+)> )', '''\1', 'g'),
                      '( <(?:-|[0-9]+)> )''((?:[^'']|'''')*)'':\*', '\1''\2''', 'g')::tsquery AS p
                  FROM (SELECT u, websearch_to_tsquery('simple'::regconfig, u) AS s
                        FROM (SELECT chat_unaccent(q) AS u) a) b) c);

-- createdAt is unique within a mentorship: each post takes the next tick of its mentorship's
-- clock, max(clock_timestamp(), last + 1 microsecond), under the clock row's lock, which is
-- held until the post commits. Posts of one mentorship therefore commit in createdAt order,
-- so a reader paging by createdAt never misses a message that commits later with an older time.
CREATE TABLE chat_clocks (
    mentorship_id uuid PRIMARY KEY REFERENCES mentorships (id) ON DELETE CASCADE,
    last_at       timestamptz NOT NULL
);

CREATE TABLE chat_messages (
    id                  uuid PRIMARY KEY,
    mentorship_id       uuid NOT NULL REFERENCES mentorships (id) ON DELETE CASCADE,
    sender_id           text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    body                text NOT NULL CHECK (char_length(body) BETWEEN 1 AND 4000),
    client_message_id   uuid,
    reply_to_message_id uuid REFERENCES chat_messages (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL,
    edited_at           timestamptz,
    deleted_at          timestamptz,
    deleted_by          text REFERENCES users (id) ON DELETE SET NULL,
    search_tsv          tsvector GENERATED ALWAYS AS (chat_search_tsv(body)) STORED
);
CREATE UNIQUE INDEX chat_messages_created_uniq ON chat_messages (mentorship_id, created_at);
-- Idempotent posts: one message per sender and clientMessageId in a mentorship, race-safe.
CREATE UNIQUE INDEX chat_messages_client_uniq
    ON chat_messages (mentorship_id, sender_id, client_message_id);
-- History pages, the last message of a conversation and unread counts skip deleted messages.
CREATE INDEX chat_messages_live_idx ON chat_messages (mentorship_id, created_at DESC)
    INCLUDE (sender_id) WHERE deleted_at IS NULL;
-- Search runs within one mentorship: with the mentorship id in the same GIN index the posting
-- lists are intersected inside the index, instead of a bitmap of every matching message of
-- every mentorship (a common word matches a tenth of the table) ANDed with the mentorship's.
CREATE INDEX chat_messages_search_idx ON chat_messages USING gin (mentorship_id, search_tsv);
CREATE INDEX chat_messages_reply_idx ON chat_messages (reply_to_message_id)
    WHERE reply_to_message_id IS NOT NULL;

-- One page of search results: live messages of a mentorship older than `before` that match
-- tq, newest first, at most lim. The newest 500 messages are read in order and matched one by
-- one, which stops as soon as the page is full: for a common word ("reunión" is in an eighth of
-- all messages) that is a few hundred rows, where the GIN index would first gather every
-- posting of the word in the whole table. Only when the page is not full after that window
-- does the GIN index (chat_messages_search_idx) search the older messages, so a rare word in a
-- long conversation still costs an index search, not a scan of the conversation.
CREATE FUNCTION chat_search_page(m uuid, before timestamptz, lim integer, tq tsquery)
    RETURNS SETOF chat_messages
    -- A page, not the default estimate of 1,000 rows: with that, the statement that renders the
    -- page read all attachments of the table in a hash join instead of probing the page's.
    LANGUAGE plpgsql STABLE PARALLEL SAFE ROWS 20 AS $$
DECLARE
    found integer;
    edge  timestamptz;
BEGIN
    RETURN QUERY
        SELECT w.* FROM (SELECT * FROM chat_messages c
                         WHERE c.mentorship_id = m AND c.deleted_at IS NULL
                         AND c.created_at < before
                         ORDER BY c.created_at DESC LIMIT 500) w
        WHERE w.search_tsv @@ tq
        ORDER BY w.created_at DESC LIMIT lim;
    GET DIAGNOSTICS found = ROW_COUNT;
    IF found >= lim THEN
        RETURN;
    END IF;
    SELECT c.created_at INTO edge FROM chat_messages c
    WHERE c.mentorship_id = m AND c.deleted_at IS NULL AND c.created_at < before
    ORDER BY c.created_at DESC OFFSET 499 LIMIT 1;
    IF edge IS NULL THEN
        RETURN; -- the window held every message
    END IF;
    RETURN QUERY
        SELECT * FROM chat_messages c
        WHERE c.mentorship_id = m AND c.deleted_at IS NULL AND c.created_at < edge
        AND c.search_tsv @@ tq
        ORDER BY c.created_at DESC LIMIT lim - found;
END
$$;

CREATE TABLE chat_message_attachments (
    id         uuid PRIMARY KEY,
    message_id uuid NOT NULL REFERENCES chat_messages (id) ON DELETE CASCADE,
    file_id    uuid NOT NULL REFERENCES files (id),
    position   integer NOT NULL,
    UNIQUE (message_id, file_id)
);
CREATE INDEX chat_message_attachments_file_idx ON chat_message_attachments (file_id);

CREATE TABLE chat_reactions (
    message_id uuid NOT NULL REFERENCES chat_messages (id) ON DELETE CASCADE,
    emoji      text NOT NULL,
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (message_id, emoji, user_id)
);

-- Live (not deleted) messages per mentorship and sender, kept by statement-level triggers. The
-- unread count of someone without a read receipt is the sum over the other senders (a few
-- rows), not a count over the whole conversation: an administrator who never opened a chat
-- would otherwise count every message of every conversation in the conversation list. Each
-- trigger applies its net deltas in one upsert, in key order, so concurrent changes lock count
-- rows in the same order. No foreign key: a cascaded delete may remove messages after counts.
CREATE TABLE chat_counts (
    mentorship_id uuid NOT NULL,
    sender_id     text NOT NULL,
    n             bigint NOT NULL,
    PRIMARY KEY (mentorship_id, sender_id)
);

-- Each conversation's last live message, kept by the same statement triggers, so the
-- conversation list reads one row per mentorship instead of probing every mentorship's messages.
-- Inserts move it forward; any other change of a mentorship's messages (an edit of the last
-- message's body, soft and hard deletes) recomputes the row from chat_messages_live_idx. last_message_id is NULL while the mentorship has no live message. No foreign key: a
-- cascaded delete of a mentorship removes its messages, whose delete trigger then drops the row
-- (a foreign key would make the refresh of that trigger insert a row it rejects).
CREATE TABLE chat_conversations (
    mentorship_id   uuid PRIMARY KEY,
    last_message_id uuid,
    last_sender_id  text,
    last_body       text,
    last_at         timestamptz
);

-- Recomputes the rows of the given mentorships. The rows are locked first (in key order, so
-- concurrent writers lock in the same order) and computed in a later statement: under READ
-- COMMITTED that statement's snapshot sees every message committed by a writer that held a lock
-- before, so the last writer to get the lock always leaves the true last message.
CREATE FUNCTION chat_conversations_refresh(ms uuid[]) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chat_conversations (mentorship_id)
    SELECT DISTINCT m FROM unnest(ms) m ORDER BY 1
    ON CONFLICT (mentorship_id) DO NOTHING;
    PERFORM 1 FROM chat_conversations WHERE mentorship_id = ANY (ms)
    ORDER BY mentorship_id FOR UPDATE;
    UPDATE chat_conversations v
    SET last_message_id = lm.id, last_sender_id = lm.sender_id, last_body = lm.body,
        last_at = lm.created_at
    FROM (SELECT DISTINCT m FROM unnest(ms) m) d
    LEFT JOIN LATERAL (SELECT c.id, c.sender_id, c.body, c.created_at FROM chat_messages c
                       WHERE c.mentorship_id = d.m AND c.deleted_at IS NULL
                       ORDER BY c.created_at DESC LIMIT 1) lm ON true
    WHERE v.mentorship_id = d.m;
END
$$;

CREATE FUNCTION chat_counts_apply() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chat_counts AS c
        SELECT mentorship_id, sender_id, count(*) FROM new_rows WHERE deleted_at IS NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (mentorship_id, sender_id) DO UPDATE SET n = c.n + EXCLUDED.n;
        -- New messages can only move the last message forward: a monotone upsert, no probe.
        -- DO UPDATE compares against the latest committed row, so it composes with a refresh.
        INSERT INTO chat_conversations AS v
        SELECT DISTINCT ON (mentorship_id) mentorship_id, id, sender_id, body, created_at
        FROM new_rows WHERE deleted_at IS NULL ORDER BY mentorship_id, created_at DESC
        ON CONFLICT (mentorship_id) DO UPDATE SET last_message_id = EXCLUDED.last_message_id,
            last_sender_id = EXCLUDED.last_sender_id, last_body = EXCLUDED.last_body,
            last_at = EXCLUDED.last_at
        WHERE v.last_at IS NULL OR v.last_at < EXCLUDED.last_at;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE chat_counts c SET n = c.n - d.k
        FROM (SELECT mentorship_id, sender_id, count(*) AS k FROM old_rows
              WHERE deleted_at IS NULL GROUP BY 1, 2 ORDER BY 1, 2) d
        WHERE c.mentorship_id = d.mentorship_id AND c.sender_id = d.sender_id;
        PERFORM chat_conversations_refresh(ARRAY(SELECT DISTINCT mentorship_id FROM old_rows));
        -- Rows of mentorships deleted in this transaction (their messages went by cascade).
        DELETE FROM chat_conversations v
        WHERE v.mentorship_id IN (SELECT mentorship_id FROM old_rows)
        AND NOT EXISTS (SELECT 1 FROM mentorships m WHERE m.id = v.mentorship_id);
    ELSE
        INSERT INTO chat_counts AS c
        SELECT mentorship_id, sender_id, sum(k)
        FROM (SELECT mentorship_id, sender_id, 1 AS k FROM new_rows WHERE deleted_at IS NULL
              UNION ALL
              SELECT mentorship_id, sender_id, -1 FROM old_rows WHERE deleted_at IS NULL) d
        GROUP BY 1, 2 HAVING sum(k) <> 0 ORDER BY 1, 2
        ON CONFLICT (mentorship_id, sender_id) DO UPDATE SET n = c.n + EXCLUDED.n;
        PERFORM chat_conversations_refresh(ARRAY(SELECT mentorship_id FROM new_rows
                                                 UNION SELECT mentorship_id FROM old_rows));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER chat_counts_ins AFTER INSERT ON chat_messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_counts_apply();
CREATE TRIGGER chat_counts_upd AFTER UPDATE ON chat_messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_counts_apply();
CREATE TRIGGER chat_counts_del AFTER DELETE ON chat_messages
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_counts_apply();

-- Unread messages of user_id in a mentorship: messages of others, not deleted, newer than the
-- receipt (read_at; NULL without one). GET /api/chat/conversations writes the same expression
-- out inline (routes/chat.c): change both together.
CREATE FUNCTION chat_unread(mentorship uuid, user_id text, read_at timestamptz) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN CASE WHEN read_at IS NULL THEN
        (SELECT COALESCE(sum(k.n), 0)::bigint FROM chat_counts k
         WHERE k.mentorship_id = mentorship AND k.sender_id <> user_id)
    ELSE
        (SELECT count(*) FROM chat_messages c WHERE c.mentorship_id = mentorship
         AND c.deleted_at IS NULL AND c.sender_id <> user_id AND c.created_at > read_at)
    END;

-- A receipt keeps the createdAt of the message it names, so unread counts are one range scan
-- of chat_messages_live_idx and a later deletion of that message changes nothing.
CREATE TABLE chat_read_receipts (
    mentorship_id        uuid NOT NULL REFERENCES mentorships (id) ON DELETE CASCADE,
    user_id              text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    last_read_message_id uuid,
    last_read_at         timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mentorship_id, user_id)
);

-- ---- rendering ----

-- {id, firstName, lastName, email, avatar} of a message's sender.
CREATE FUNCTION chat_user_json(u users) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('id', u.id, 'firstName', u.first_name, 'lastName', u.last_name,
                             'email', u.email, 'avatar', u.avatar_url);

-- ChatReaction[]: one element per emoji in the order it was first used, userIds oldest first.
-- History pages aggregate the same shape for all their messages at once (routes/chat.c).
CREATE FUNCTION chat_reactions_json(message uuid) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (SELECT COALESCE(json_agg(json_build_object('emoji', r.emoji, 'count', r.n,
                                                       'userIds', r.users)
                                     ORDER BY r.first_at, r.emoji), '[]'::json)
            FROM (SELECT emoji, count(*) AS n, json_agg(user_id ORDER BY created_at, user_id)
                         AS users, min(created_at) AS first_at
                  FROM chat_reactions WHERE message_id = message GROUP BY emoji) r);

-- ChatAttachment[] with "_key" (the storage key): the server replaces it by a presigned url.
-- History pages aggregate the same shape for all their messages at once (routes/chat.c).
CREATE FUNCTION chat_attachments_json(message uuid) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (SELECT COALESCE(json_agg(json_build_object('id', a.id, 'fileId', a.file_id,
                'filename', f.filename, 'mimeType', f.mime_type, 'sizeBytes', f.size_bytes,
                '_key', f.storage_key) ORDER BY a.position), '[]'::json)
            FROM chat_message_attachments a LEFT JOIN files f ON f.id = a.file_id
            WHERE a.message_id = message);

-- A ChatMessage from its row, attachments and reactions (passed in, so a statement that has
-- just inserted them can render them from its own CTEs).
CREATE FUNCTION chat_message_obj(c chat_messages, attachments json, reactions json)
    RETURNS json LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object(
        'id', c.id, 'mentorshipId', c.mentorship_id, 'senderId', c.sender_id, 'body', c.body,
        'clientMessageId', c.client_message_id, 'createdAt', chat_iso(c.created_at),
        'editedAt', chat_iso(c.edited_at), 'deletedAt', chat_iso(c.deleted_at),
        'replyToMessageId', c.reply_to_message_id,
        'replyTo', (SELECT json_build_object('id', p.id, 'senderId', p.sender_id,
                        'senderName', user_display_name(u.first_name, u.last_name),
                        'body', CASE WHEN p.deleted_at IS NULL THEN left(p.body, 120) END)
                    FROM chat_messages p JOIN users u ON u.id = p.sender_id
                    WHERE p.id = c.reply_to_message_id),
        'attachments', attachments, 'reactions', reactions,
        'sender', (SELECT chat_user_json(u) FROM users u WHERE u.id = c.sender_id));

CREATE FUNCTION chat_message_json(c chat_messages) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN chat_message_obj(c, chat_attachments_json(c.id), chat_reactions_json(c.id));
