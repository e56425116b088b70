-- Checkout: sessions behind the hosted page, idempotency keys, refund accounting.

-- Total refunded so far, decimal text in the order currency (the API shows the status only).
ALTER TABLE transactions ADD COLUMN amount_refunded TEXT;

CREATE TABLE checkout_sessions (
    -- `cs_` + 256 random bits: the hosted page URL is a capability.
    id               TEXT PRIMARY KEY,
    transaction_id   INTEGER NOT NULL UNIQUE REFERENCES transactions (id),
    merchant_id      INTEGER NOT NULL REFERENCES merchants (id),
    title            TEXT NOT NULL,
    redirect_url     TEXT NOT NULL,
    -- The quote: what the customer sends, where, in which asset on which network.
    asset            TEXT NOT NULL,
    network          TEXT NOT NULL,
    deposit_address  TEXT NOT NULL,
    crypto_amount    TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX checkout_sessions_by_expiry ON checkout_sessions (expires_at);

-- One row per (merchant, idempotency key): a retry with the same key and the same options gets
-- the same session; other options are a conflict. Kept at least 24 hours.
CREATE TABLE idempotency_keys (
    merchant_id     INTEGER NOT NULL REFERENCES merchants (id),
    key             TEXT NOT NULL,
    -- Hex SHA-256 of the options that created the session.
    fingerprint     TEXT NOT NULL,
    session_id      TEXT NOT NULL REFERENCES checkout_sessions (id),
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
