-- Organizations, memberships and invites: the caller context (organization, role, invite gate)
-- reads them on every request, so they come with the foundation.

-- ISO 8601 UTC text with milliseconds, the one timestamp format of the API.
CREATE FUNCTION iso(ts timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

CREATE TABLE organizations (
    id               uuid PRIMARY KEY,
    name             text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    description      text,
    logo_url         text,
    status           text NOT NULL DEFAULT 'active'
                     CHECK (status IN ('active', 'inactive', 'suspended', 'archived')),
    settings         jsonb NOT NULL DEFAULT '{}'::jsonb,
    default_timezone text NOT NULL DEFAULT 'UTC' CHECK (char_length(default_timezone) <= 100),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX organizations_name_trgm_idx ON organizations USING gin (lower(name) gin_trgm_ops);

CREATE TABLE organization_memberships (
    organization_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id              text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role_in_organization text NOT NULL
                         CHECK (role_in_organization IN ('OrganizationAdmin', 'Manager', 'Coach', 'Teacher')),
    is_primary           boolean NOT NULL DEFAULT false,
    membership_status    text NOT NULL DEFAULT 'active' CHECK (membership_status IN ('active', 'disabled')),
    joined_at            timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user_idx ON organization_memberships (user_id);
CREATE INDEX memberships_org_role_idx ON organization_memberships (organization_id, role_in_organization);

ALTER TABLE users ADD CONSTRAINT users_current_org_fk
    FOREIGN KEY (current_organization_id) REFERENCES organizations (id) ON DELETE SET NULL;

CREATE TABLE invites (
    id                   uuid PRIMARY KEY,
    organization_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email                text NOT NULL CHECK (email = lower(email)),
    role_in_organization text NOT NULL
                         CHECK (role_in_organization IN ('OrganizationAdmin', 'Manager', 'Coach', 'Teacher')),
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
    token_hash           text NOT NULL UNIQUE,
    invited_by           text REFERENCES users (id) ON DELETE SET NULL,
    expires_at           timestamptz NOT NULL,
    accepted_at          timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
-- One pending invite per email and organization; the invite gate looks them up by email.
CREATE UNIQUE INDEX invites_pending_uniq ON invites (organization_id, email) WHERE status = 'pending';
CREATE INDEX invites_email_pending_idx ON invites (email) WHERE status = 'pending';

-- Device push tokens (Expo), owned by one user at a time.
CREATE TABLE push_tokens (
    token      text PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    platform   text NOT NULL CHECK (platform IN ('ios', 'android', 'web')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_tokens_user_idx ON push_tokens (user_id);
