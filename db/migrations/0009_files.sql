-- Files in object storage, their attachments, and the keys presigned for upload.
-- The files area (routes/files.c) owns these tables; chat messages refer to files by id.

-- A storage key handed out by POST /api/files/presign, remembered so that register can check
-- that the key was presigned for the caller and the janitor can delete objects never registered.
CREATE TABLE file_uploads (
    storage_key     text PRIMARY KEY,
    user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    organization_id uuid REFERENCES organizations (id) ON DELETE SET NULL,
    filename        text NOT NULL,
    mime_type       text NOT NULL,
    size_bytes      bigint NOT NULL CHECK (size_bytes >= 0),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX file_uploads_created_idx ON file_uploads (created_at);

CREATE TABLE files (
    id              uuid PRIMARY KEY,
    organization_id uuid REFERENCES organizations (id) ON DELETE SET NULL,
    uploader_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    filename        text NOT NULL CHECK (char_length(filename) BETWEEN 1 AND 255),
    mime_type       text NOT NULL,
    size_bytes      bigint NOT NULL CHECK (size_bytes >= 0),
    sha256_hash     text,                         -- hex; NULL while it is being computed
    storage_key     text NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_uploader_idx ON files (uploader_id, created_at DESC);

CREATE TABLE file_attachments (
    id          uuid PRIMARY KEY,
    file_id     uuid NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    object_type text NOT NULL CHECK (object_type IN ('mentorship')),
    object_id   uuid NOT NULL,
    created_by  text REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (file_id, object_type, object_id)
);
CREATE INDEX file_attachments_object_idx ON file_attachments (object_type, object_id, created_at);

-- Avatars and organization logos are files. avatar_url / logo_url then hold a storage reference
-- ("storage:<mime type>:<key>") that every response renders as a fresh short-lived download URL.
ALTER TABLE users ADD CONSTRAINT users_avatar_file_fk
    FOREIGN KEY (avatar_file_id) REFERENCES files (id) ON DELETE SET NULL;
ALTER TABLE organizations ADD COLUMN logo_file_id uuid REFERENCES files (id) ON DELETE SET NULL;

-- Stored objects are deleted after the transaction that drops their last reference commits:
-- the outbox drainer runs 'storage_delete' rows ({"key": "..."}) and retries them.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('mail', 'push', 'storage_delete'));

-- Server-side secrets shared by every worker and host. storage_url_key signs the local storage
-- driver's presigned URLs (STORAGE_SECRET overrides it); gen_random_uuid() draws from a
-- cryptographically strong source, two of them give 244 random bits.
CREATE TABLE server_secrets (
    name  text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO server_secrets (name, value)
VALUES ('storage_url_key', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));

CREATE INDEX users_avatar_file_idx ON users (avatar_file_id) WHERE avatar_file_id IS NOT NULL;
CREATE INDEX organizations_logo_file_idx ON organizations (logo_file_id)
    WHERE logo_file_id IS NOT NULL;

-- True while anything refers to the file: an attachment, an avatar, an organization logo, or a
-- chat message attachment (that table arrives with the chat migration, hence the dynamic
-- lookup). Callers lock the file row first, so "last reference" is decided one at a time.
CREATE FUNCTION file_referenced(fid uuid) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found boolean;
BEGIN
    IF EXISTS (SELECT 1 FROM file_attachments WHERE file_id = fid)
       OR EXISTS (SELECT 1 FROM users WHERE avatar_file_id = fid)
       OR EXISTS (SELECT 1 FROM organizations WHERE logo_file_id = fid) THEN
        RETURN true;
    END IF;
    IF to_regclass('chat_message_attachments') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM chat_message_attachments WHERE file_id = $1)'
            INTO found USING fid;
        RETURN found;
    END IF;
    RETURN false;
END
$$;
