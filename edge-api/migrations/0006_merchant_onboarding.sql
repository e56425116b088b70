-- Merchant onboarding in the portal: settlement wallets (and every change to them), the origins a
-- checkout may return the customer to, and a publishable key that can be rolled with a grace
-- period.

ALTER TABLE merchants ADD COLUMN updated_at TEXT;
-- After a roll, the previous key keeps creating sessions until this instant (Unix seconds).
ALTER TABLE merchants ADD COLUMN previous_public_key TEXT;
ALTER TABLE merchants ADD COLUMN previous_key_expires_at INTEGER;
CREATE UNIQUE INDEX merchants_by_previous_key ON merchants (previous_public_key)
    WHERE previous_public_key IS NOT NULL;
-- Search by name within an institution.
CREATE INDEX merchants_by_name ON merchants (institution_id, name COLLATE NOCASE, id);

-- One external address per network the merchant is paid out on.
CREATE TABLE merchant_wallets (
    merchant_id  INTEGER NOT NULL REFERENCES merchants (id),
    network      TEXT NOT NULL,
    address      TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (merchant_id, network)
) WITHOUT ROWID;

-- Every change of a settlement wallet: who, when, old, new. Never updated or deleted.
CREATE TABLE wallet_changes (
    id            INTEGER PRIMARY KEY,
    merchant_id   INTEGER NOT NULL REFERENCES merchants (id),
    network       TEXT NOT NULL,
    old_address   TEXT,
    new_address   TEXT,
    changed_by    TEXT NOT NULL,
    changed_at    TEXT NOT NULL
);
CREATE INDEX wallet_changes_by_merchant ON wallet_changes (merchant_id, id);

-- The origins a checkout's redirectUrl may point at.
CREATE TABLE merchant_origins (
    merchant_id  INTEGER NOT NULL REFERENCES merchants (id),
    origin       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (merchant_id, origin)
) WITHOUT ROWID;
