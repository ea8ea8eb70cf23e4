-- Object storage (rt/storage.c).

-- name: storage_secret
-- columns: value
-- The secret of local URL signatures and storage references (created by migration 0009), read
-- at start when STORAGE_SECRET is not set.
SELECT value FROM server_secrets WHERE name = 'storage_url_key';
