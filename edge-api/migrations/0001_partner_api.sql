-- Institutions, their API clients and access tokens, merchants and transactions.
-- Timestamps are ISO 8601 UTC text with whole seconds (2026-11-21T04:35:27Z), so text order is
-- time order; expiry instants used in comparisons are Unix seconds.

CREATE TABLE institutions (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);

CREATE TABLE api_clients (
    id                 INTEGER PRIMARY KEY,
    institution_id     INTEGER NOT NULL REFERENCES institutions (id),
    client_id          TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL,
    -- Lower-case hex SHA-256 of the secret; the secret itself is never stored.
    secret_hash        TEXT NOT NULL,
    -- Space-separated granted scopes, canonical order.
    scopes             TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    secret_rotated_at  TEXT,
    last_used_at       TEXT
);
CREATE INDEX api_clients_by_institution ON api_clients (institution_id, id);

CREATE TABLE access_tokens (
    -- Lower-case hex SHA-256 of the bearer token.
    token_hash      TEXT PRIMARY KEY,
    client_id       INTEGER NOT NULL REFERENCES api_clients (id) ON DELETE CASCADE,
    institution_id  INTEGER NOT NULL REFERENCES institutions (id),
    scopes          TEXT NOT NULL,
    issued_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX access_tokens_by_client ON access_tokens (client_id);
CREATE INDEX access_tokens_by_expiry ON access_tokens (expires_at);

-- Failed client authentications per client id and source address, for throttling.
CREATE TABLE auth_failures (
    client_id     TEXT NOT NULL,
    source        TEXT NOT NULL,
    window_start  INTEGER NOT NULL,
    failures      INTEGER NOT NULL,
    PRIMARY KEY (client_id, source)
) WITHOUT ROWID;
CREATE INDEX auth_failures_by_window ON auth_failures (window_start);

CREATE TABLE merchants (
    id                 INTEGER PRIMARY KEY,
    institution_id     INTEGER NOT NULL REFERENCES institutions (id),
    name               TEXT NOT NULL,
    legal_name         TEXT NOT NULL,
    email              TEXT NOT NULL,
    public_key         TEXT NOT NULL UNIQUE,
    psp_reference_id   TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'disabled')),
    onboarding_status  TEXT NOT NULL
        CHECK (onboarding_status IN ('pending', 'in_review', 'completed', 'rejected')),
    crypto_enabled     INTEGER NOT NULL CHECK (crypto_enabled IN (0, 1)),
    created_at         TEXT NOT NULL,
    UNIQUE (institution_id, psp_reference_id)
);
CREATE INDEX merchants_by_institution ON merchants (institution_id, id);

CREATE TABLE transactions (
    -- Allocated in creation order: newest first is id descending.
    id                  INTEGER PRIMARY KEY,
    institution_id      INTEGER NOT NULL REFERENCES institutions (id),
    merchant_id         INTEGER NOT NULL REFERENCES merchants (id),
    status              TEXT NOT NULL
        CHECK (status IN ('pending', 'paid', 'failed', 'refunded', 'partially_refunded')),
    raw_status          TEXT NOT NULL
        CHECK (raw_status IN ('pending', 'succeeded', 'paid', 'failed', 'expired', 'refunded',
                              'partially_refunded')),
    amount_status       TEXT CHECK (amount_status IN ('EXACT', 'UNDERPAID', 'OVERPAID')),
    asset               TEXT,
    currency            TEXT,
    -- Decimal strings, never floats.
    amount_gross        TEXT,
    amount_net          TEXT,
    amount_expected     TEXT,
    psp_fee             TEXT,
    gas_fee             TEXT,
    bridge_fee          TEXT,
    network_payment     TEXT,
    network_settlement  TEXT,
    tx_hash_source      TEXT,
    tx_hash_bridge      TEXT,
    tx_hash_settlement  TEXT,
    customer_email      TEXT,
    external_reference  TEXT,
    created_at          TEXT NOT NULL,
    paid_at             TEXT,
    updated_at          TEXT NOT NULL
);
-- One index per filter shape of GET /v1/transactions: equality columns first, then id, so every
-- page is a bounded range scan in id order (see edge-api/src/db/transactions.rs).
CREATE INDEX transactions_by_institution ON transactions (institution_id, id);
CREATE INDEX transactions_by_status ON transactions (institution_id, status, id);
CREATE INDEX transactions_by_merchant ON transactions (institution_id, merchant_id, id);
CREATE INDEX transactions_by_merchant_status
    ON transactions (institution_id, merchant_id, status, id);
CREATE INDEX transactions_by_reference ON transactions (institution_id, external_reference, id);
-- Resolves created_after / created_before to an id bound.
CREATE INDEX transactions_by_created ON transactions (created_at, id);
