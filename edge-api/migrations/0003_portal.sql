-- The portal: institution admins and their sessions, and webhook endpoints with their signing
-- secrets. (Failed logins are throttled in auth_failures, keyed `login:<email>`.)

CREATE TABLE portal_admins (
    id              INTEGER PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    -- Lower-cased.
    email           TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL,
    -- Argon2id PHC string.
    password_hash   TEXT NOT NULL,
    created_at      TEXT NOT NULL
);

CREATE TABLE portal_sessions (
    -- Lower-case hex SHA-256 of the session cookie's value.
    token_hash      TEXT PRIMARY KEY,
    admin_id        INTEGER NOT NULL REFERENCES portal_admins (id) ON DELETE CASCADE,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    -- Synchronizer token for forms and the X-CSRF-Token header.
    csrf_token      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    -- The earlier of the absolute end and the idle end; moved forward on use.
    expires_at      INTEGER NOT NULL,
    absolute_expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX portal_sessions_by_expiry ON portal_sessions (expires_at);

CREATE TABLE webhook_endpoints (
    -- `ep_` + random.
    id              TEXT PRIMARY KEY,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    url             TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    -- Space-separated event types; NULL means every type, present and future.
    event_types     TEXT,
    status          TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
    -- Signing secrets (`whsec_…`) are needed in clear to sign, so they are stored encrypted
    -- (AES-256-GCM under the PAYRAIL_ENCRYPTION_KEY secret), never hashed.
    secret_encrypted           TEXT NOT NULL,
    previous_secret_encrypted  TEXT,
    previous_secret_expires_at INTEGER,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX webhook_endpoints_by_institution ON webhook_endpoints (institution_id, created_at);
