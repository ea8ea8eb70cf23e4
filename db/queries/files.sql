-- Files (routes/files.c, routes/files_upload.c).

-- name: files_gc
-- columns: queued
-- Deletes the file $1 when nothing refers to it any more (file_referenced() of migration 0009)
-- and queues the deletion of its stored object in the outbox; one row, the number of objects
-- queued (0 or 1). Run it in the transaction that dropped a reference, then outbox_kick() after
-- the commit when it queued one. The row lock comes first: an attach or avatar change racing with this either
-- committed before (and file_referenced sees it) or waits and then finds the file gone.
WITH l AS (SELECT id FROM files WHERE id = $1 FOR UPDATE),
     f AS (DELETE FROM files WHERE id IN (SELECT id FROM l) AND NOT file_referenced($1)
           RETURNING storage_key),
     q AS (INSERT INTO outbox (kind, payload)
           SELECT 'storage_delete', jsonb_build_object('key', storage_key) FROM f RETURNING 1)
SELECT count(*) AS queued FROM q;

-- name: files_presigned
-- A presigned upload: $1 storage key, $2 user, $3 organization, $4 filename, $5 mime type,
-- $6 size.
INSERT INTO file_uploads (storage_key, user_id, organization_id, filename, mime_type,
                          size_bytes)
VALUES ($1, $2, $3, $4, $5, $6::bigint);

-- name: files_reg_check
-- columns: user_id, mime_type, registered
-- The presigned upload of storage key $1, and whether a file already has that key.
SELECT u.user_id, u.mime_type,
       EXISTS (SELECT 1 FROM files f WHERE f.storage_key = $1) AS registered
FROM file_uploads u
WHERE u.storage_key = $1;

-- name: files_reg_insert
-- columns: created_at
-- Registers an uploaded file: $1 id, $2 organization, $3 uploader, $4 filename, $5 mime type,
-- $6 size, $7 sha256, $8 storage key. No row: that key was registered meanwhile.
INSERT INTO files (id, organization_id, uploader_id, filename, mime_type, size_bytes,
                   sha256_hash, storage_key)
VALUES ($1, $2, $3, $4, $5, $6::bigint, $7, $8)
ON CONFLICT (storage_key) DO NOTHING
RETURNING iso(created_at) AS created_at;

-- name: files_get
-- columns: organization_id, uploader_id, participant,
-- columns: id, filename, mime_type, size_bytes, sha256_hash, storage_key, created_at
-- The file $1 as the caller $2 reads it. participant: the caller is coach or teacher of a
-- mentorship the file is attached to.
SELECT f.organization_id, f.uploader_id,
       EXISTS (SELECT 1 FROM file_attachments a
               JOIN mentorships m ON m.id = a.object_id
               WHERE a.file_id = f.id AND a.object_type = 'mentorship'
                 AND (m.coach_id = $2 OR m.teacher_id = $2)) AS participant,
       f.id, f.filename, f.mime_type, f.size_bytes, f.sha256_hash, f.storage_key,
       iso(f.created_at) AS created_at
FROM files f
WHERE f.id = $1;

-- name: files_attach_check
-- columns: organization_id, uploader_id, participant, m_organization_id, m_coach_id, id
-- Attaching the file $1 to the mentorship $3 by the caller $2: the file's access columns (as
-- files_get), the mentorship's organization and coach, and the file id (NULL: no such file).
-- Always one row.
SELECT f.organization_id, f.uploader_id,
       EXISTS (SELECT 1 FROM file_attachments a
               JOIN mentorships m ON m.id = a.object_id
               WHERE a.file_id = f.id AND a.object_type = 'mentorship'
                 AND (m.coach_id = $2 OR m.teacher_id = $2)) AS participant,
       m.organization_id AS m_organization_id, m.coach_id AS m_coach_id, f.id
FROM (SELECT 1) x
LEFT JOIN files f ON f.id = $1
LEFT JOIN mentorships m ON m.id = $3;

-- name: files_attach
-- columns: id
-- $1 attachment id, $2 file, $3 mentorship, $4 caller. No row: already attached.
INSERT INTO file_attachments (id, file_id, object_type, object_id, created_by)
VALUES ($1, $2, 'mentorship', $3, $4)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: files_detach_lock
-- columns: file_id, organization_id, coach_id
-- Detaching the file $1 from the mentorship $2, read step 1. The file row is locked first, so
-- two detaches of one file (or a detach and an avatar change) decide "last reference" one
-- after the other; an attach waits too (its foreign key check shares the row).
SELECT (SELECT f.id FROM files f WHERE f.id = $1 FOR UPDATE) AS file_id,
       (SELECT m.organization_id FROM mentorships m WHERE m.id = $2) AS organization_id,
       (SELECT m.coach_id FROM mentorships m WHERE m.id = $2) AS coach_id;

-- name: files_detach_attached
-- columns: attached
-- Read step 2, after the lock (a statement of its own so that it sees what committed while
-- the lock was awaited): whether the file $1 is attached to the mentorship $2.
SELECT EXISTS (SELECT 1 FROM file_attachments
               WHERE file_id = $1 AND object_type = 'mentorship' AND object_id = $2) AS attached;

-- name: files_detach
-- columns: id
-- Write step: the attachment of the file $1 to the mentorship $2 (then files_gc).
DELETE FROM file_attachments
WHERE file_id = $1 AND object_type = 'mentorship' AND object_id = $2
RETURNING id;

-- name: files_attachments
-- columns: organization_id, coach_id, teacher_id,
-- columns: attachment_id, file_id, filename, mime_type, size_bytes, storage_key, created_at
-- The mentorship $1 and its attachments, newest first; a mentorship without any is one row
-- whose attachment columns are NULL.
SELECT m.organization_id, m.coach_id, m.teacher_id, a.id AS attachment_id, f.id AS file_id,
       f.filename, f.mime_type, f.size_bytes, f.storage_key, iso(a.created_at) AS created_at
FROM mentorships m
LEFT JOIN (file_attachments a JOIN files f ON f.id = a.file_id)
       ON a.object_type = 'mentorship' AND a.object_id = m.id
WHERE m.id = $1
ORDER BY a.created_at DESC, a.id DESC;

-- name: files_up_insert
-- A multipart upload's file: $1 id, $2 organization, $3 uploader, $4 filename, $5 mime type,
-- $6 size, $7 sha256, $8 storage key.
INSERT INTO files (id, organization_id, uploader_id, filename, mime_type, size_bytes,
                   sha256_hash, storage_key)
VALUES ($1, $2, $3, $4, $5, $6::bigint, $7, $8);

-- name: files_logo_admin
-- columns: org_exists, org_admin
-- Whether the organization $1 exists and the caller $2 is an active OrganizationAdmin of it.
SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1) AS org_exists,
       EXISTS (SELECT 1 FROM organization_memberships
               WHERE organization_id = $1 AND user_id = $2
                 AND role_in_organization = 'OrganizationAdmin'
                 AND membership_status = 'active') AS org_admin;

-- name: files_ref_file
-- columns: organization_id, uploader_id, participant, mime_type, storage_key
-- The file $1 that the caller $2 makes an avatar or logo: its access columns (as files_get),
-- its type and key.
SELECT f.organization_id, f.uploader_id,
       EXISTS (SELECT 1 FROM file_attachments a
               JOIN mentorships m ON m.id = a.object_id
               WHERE a.file_id = f.id AND a.object_type = 'mentorship'
                 AND (m.coach_id = $2 OR m.teacher_id = $2)) AS participant,
       f.mime_type, f.storage_key
FROM files f
WHERE f.id = $1;

-- name: files_set_avatar
-- columns: old_file_id
-- The user $1's avatar becomes the file $2 (reference $3); returns the file it replaces.
WITH old AS (SELECT id, avatar_file_id FROM users WHERE id = $1 FOR UPDATE)
UPDATE users SET avatar_file_id = $2, avatar_url = $3, updated_at = now()
FROM old
WHERE users.id = old.id
RETURNING old.avatar_file_id AS old_file_id;

-- name: files_set_logo
-- columns: =files_set_avatar
-- The organization $1's logo becomes the file $2 (reference $3); returns the file it replaces.
WITH old AS (SELECT id, logo_file_id FROM organizations WHERE id = $1 FOR UPDATE)
UPDATE organizations SET logo_file_id = $2, logo_url = $3, updated_at = now()
FROM old
WHERE organizations.id = old.id
RETURNING old.logo_file_id AS old_file_id;
