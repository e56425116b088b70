-- Deposit addresses derived by BIP32: the next index of each key family, allocated atomically and
-- never reused, and the index each checkout session's address was derived at.

CREATE TABLE deposit_indexes (
    -- The key family (`evm`: one xpub for every EVM network).
    family  TEXT PRIMARY KEY,
    next    INTEGER NOT NULL
) WITHOUT ROWID;

ALTER TABLE checkout_sessions ADD COLUMN deposit_index INTEGER;
