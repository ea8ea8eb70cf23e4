-- Accounts: users, password credentials, cookie sessions, single-use tokens, and the outbox.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE users (
    id                      text PRIMARY KEY,            -- CUID
    email                   text NOT NULL UNIQUE,        -- stored lower-cased
    first_name              text,
    last_name               text,
    email_verified          boolean NOT NULL DEFAULT false,
    status                  text NOT NULL DEFAULT 'active'
                            CHECK (status IN ('active', 'inactive', 'suspended', 'archived')),
    global_role             text CHECK (global_role IN ('Owner', 'PlatformAdmin')),
    preferred_language      text CHECK (preferred_language IN ('en', 'es')),
    phone                   text,
    birth_date              date,
    country_code            text,
    timezone                text,
    avatar_url              text,
    avatar_file_id          uuid,
    current_organization_id uuid,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CHECK (email = lower(email))
);
CREATE INDEX users_global_role_idx ON users (global_role) WHERE global_role IS NOT NULL;

-- Password credentials live apart from the profile so profile reads never touch hashes.
CREATE TABLE accounts (
    user_id       text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    password_hash text NOT NULL,                         -- argon2id encoded, parameters included
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Cookie sessions: only the SHA-256 of the token is stored.
CREATE TABLE sessions (
    id         uuid PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,
    ip         text,
    user_agent text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

-- Single-use tokens (email verification, password reset), stored hashed.
CREATE TABLE verifications (
    id         uuid PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('email_verify', 'password_reset')),
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX verifications_user_idx ON verifications (user_id, kind);

-- Transactional outbox: rows are written in the same transaction as the change that causes
-- them and drained by rt/outbox.c after commit.
CREATE TABLE outbox (
    id              bigserial PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('mail', 'push')),
    payload         jsonb NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE sent_at IS NULL;
