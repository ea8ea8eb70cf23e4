-- Page-cache versions that concurrent writers do not queue on, and a version for chat history.
--
-- 1. Mentoring-list versions (migration 0007) in slots. A single row per organization made
--    every write to the organization's mentorships and sessions wait for the previous writer's
--    commit (the row lock is held until then): 64 connections creating and cancelling sessions
--    in one organization ran at about a third of the rate of 64 spread over 64 organizations.
--    Now a write bumps the slot of its database connection (pg_backend_pid() % 64) by one, and
--    the organization's version is the sum of its slots. Every committed bump raises the sum and
--    nothing lowers it, so a page read at sum S is current exactly while the sum is still S.
--    A transaction keeps one slot per organization (its connection's), so writers still lock
--    version rows in organization order and cannot deadlock on them.
ALTER TABLE mentoring_list_versions ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE mentoring_list_versions DROP CONSTRAINT mentoring_list_versions_pkey;
ALTER TABLE mentoring_list_versions ADD PRIMARY KEY (organization_id, slot);

CREATE OR REPLACE FUNCTION mentoring_list_versions_bump(orgs uuid[]) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO mentoring_list_versions AS v (organization_id, slot, version)
    SELECT o, pg_backend_pid() % 64, 1
    FROM (SELECT DISTINCT unnest(orgs) AS o ORDER BY 1) d
    WHERE o IS NOT NULL
    ON CONFLICT (organization_id, slot) DO UPDATE SET version = v.version + 1
$$;

-- The list statements and the cache check read the sum themselves (routes/mentoring.c): a SQL
-- function for it was not inlined, and running it reparsed its body on every call.

-- 2. Chat history versions: a number per mentorship that changes in the same transaction as
--    anything its history page shows (its messages, their reactions and attachments, the
--    attached files, and the name, email or avatar of anyone who has posted in it: senders and
--    reply previews). coachd keeps the rendered first page per mentorship and reuses it while
--    the version is unchanged (routes/chat.c). Values come from a sequence, so a row that is
--    removed and created again never repeats an old value. No foreign key: a cascaded delete may
--    remove messages after the mentorship.
CREATE SEQUENCE chat_history_version_seq;
CREATE TABLE chat_history_versions (
    mentorship_id uuid PRIMARY KEY,
    version       bigint NOT NULL
);

CREATE FUNCTION chat_history_versions_bump(ms uuid[]) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO chat_history_versions AS v
    SELECT m, nextval('chat_history_version_seq')
    FROM (SELECT DISTINCT unnest(ms) AS m ORDER BY 1) d
    WHERE m IS NOT NULL
    ON CONFLICT (mentorship_id) DO UPDATE SET version = EXCLUDED.version
$$;

CREATE FUNCTION chat_history_versions_messages() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM chat_history_versions_bump(ARRAY(SELECT mentorship_id FROM new_rows));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM chat_history_versions_bump(ARRAY(SELECT mentorship_id FROM old_rows));
    ELSE
        PERFORM chat_history_versions_bump(ARRAY(SELECT mentorship_id FROM new_rows
            UNION SELECT mentorship_id FROM old_rows));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER chat_history_versions_ins AFTER INSERT ON chat_messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_messages();
CREATE TRIGGER chat_history_versions_upd AFTER UPDATE ON chat_messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_messages();
CREATE TRIGGER chat_history_versions_del AFTER DELETE ON chat_messages
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_messages();

-- Reactions and attachments name their message; a message already removed (cascade) needs no
-- bump of its own: its delete bumped the mentorship.
CREATE FUNCTION chat_history_versions_of_message() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM chat_history_versions_bump(ARRAY(SELECT c.mentorship_id FROM chat_messages c
            WHERE c.id IN (SELECT message_id FROM new_rows)));
    ELSE
        PERFORM chat_history_versions_bump(ARRAY(SELECT c.mentorship_id FROM chat_messages c
            WHERE c.id IN (SELECT message_id FROM old_rows)));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER chat_history_versions_rx_ins AFTER INSERT ON chat_reactions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_of_message();
CREATE TRIGGER chat_history_versions_rx_del AFTER DELETE ON chat_reactions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_of_message();
CREATE TRIGGER chat_history_versions_att_ins AFTER INSERT ON chat_message_attachments
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_of_message();
CREATE TRIGGER chat_history_versions_att_del AFTER DELETE ON chat_message_attachments
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chat_history_versions_of_message();

-- An attached file's name, type, size or storage key shows in the attachment.
CREATE FUNCTION chat_history_versions_file() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM chat_history_versions_bump(ARRAY(SELECT c.mentorship_id
        FROM chat_message_attachments a JOIN chat_messages c ON c.id = a.message_id
        WHERE a.file_id = NEW.id));
    RETURN NULL;
END
$$;

CREATE TRIGGER chat_history_versions_file AFTER UPDATE ON files
    FOR EACH ROW
    WHEN (OLD.filename IS DISTINCT FROM NEW.filename
          OR OLD.mime_type IS DISTINCT FROM NEW.mime_type
          OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes
          OR OLD.storage_key IS DISTINCT FROM NEW.storage_key)
    EXECUTE FUNCTION chat_history_versions_file();

-- A user's email, names or avatar show as sender and in reply previews of every mentorship
-- where they have posted; chat_counts holds a row per mentorship and sender that ever posted
-- (rows are decremented, never removed).
CREATE INDEX chat_counts_sender_idx ON chat_counts (sender_id);

CREATE FUNCTION chat_history_versions_user() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM chat_history_versions_bump(ARRAY(
        SELECT mentorship_id FROM chat_counts WHERE sender_id = NEW.id));
    RETURN NULL;
END
$$;

CREATE TRIGGER chat_history_versions_user AFTER UPDATE ON users
    FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email
          OR OLD.first_name IS DISTINCT FROM NEW.first_name
          OR OLD.last_name IS DISTINCT FROM NEW.last_name
          OR OLD.avatar_url IS DISTINCT FROM NEW.avatar_url)
    EXECUTE FUNCTION chat_history_versions_user();
