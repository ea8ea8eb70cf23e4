-- Two-factor sign-in (routes/two_factor.c): TOTP secrets sealed with AES-256-GCM, backup codes
-- as keyed hashes, the sign-in challenges of the two_factor cookie and trusted devices (both
-- stored as token hashes), and an organization's policy for its admins and managers.

-- PostgreSQL (15.20 and the other minor releases of its day) refuses ADD COLUMN with a default
-- on a table whose row type a SQL-standard function takes (user_brief_json(users),
-- organization_json(organizations)): each column is added without one, then given its default,
-- filled and made NOT NULL, none of which rewrites the table.
ALTER TABLE users ADD COLUMN two_factor_enabled boolean;
ALTER TABLE users ALTER COLUMN two_factor_enabled SET DEFAULT false;
UPDATE users SET two_factor_enabled = false WHERE two_factor_enabled IS NULL;
ALTER TABLE users ALTER COLUMN two_factor_enabled SET NOT NULL;

ALTER TABLE organizations ADD COLUMN require_two_factor_for_admins boolean;
ALTER TABLE organizations ALTER COLUMN require_two_factor_for_admins SET DEFAULT false;
UPDATE organizations SET require_two_factor_for_admins = false
WHERE require_two_factor_for_admins IS NULL;
ALTER TABLE organizations ALTER COLUMN require_two_factor_for_admins SET NOT NULL;

CREATE TABLE two_factors (
    user_id       text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    secret_sealed text NOT NULL,                  -- hex nonce || AES-256-GCM ciphertext || tag
    verified      boolean NOT NULL DEFAULT false, -- true after the first accepted code
    last_step     bigint NOT NULL DEFAULT -1,     -- the newest 30-second step used: each once
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE two_factor_backup_codes (
    user_id   text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash text NOT NULL, -- hex HMAC-SHA256(key, user id ':' code)
    PRIMARY KEY (user_id, code_hash)
);

-- The second step of a sign-in: the two_factor cookie's token hash, single use, 10 minutes.
CREATE TABLE two_factor_challenges (
    token_hash text PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX two_factor_challenges_user_idx ON two_factor_challenges (user_id);

-- "Trust this device": the trust_device cookie's token hash, 30 days.
CREATE TABLE trusted_devices (
    token_hash text PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX trusted_devices_user_idx ON trusted_devices (user_id);

-- The organization's answer carries its policy.
CREATE OR REPLACE FUNCTION organization_json(o organizations) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN json_build_object('id', o.id, 'name', o.name, 'description', o.description,
        'logoUrl', o.logo_url, 'status', o.status, 'settings', o.settings,
        'defaultTimezone', o.default_timezone,
        'requireTwoFactorForAdmins', o.require_two_factor_for_admins,
        'createdAt', iso(o.created_at), 'updatedAt', iso(o.updated_at));
