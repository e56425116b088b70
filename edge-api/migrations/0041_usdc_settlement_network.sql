-- A merchant's choice to take USDC on every network that carries it across with CCTP and be paid
-- it on one network (docs/CCTP.md): that network's name, or NULL (each payment settles on the
-- network it was paid on). Settlements across use the choice from `usdc_settlement_usable_from`
-- (Unix seconds: a network chosen waits the settlement wallet's cool-off, as a wallet set does;
-- a clear applies at once, as a wallet removed does, and is its time).
ALTER TABLE merchants ADD COLUMN usdc_settlement_network TEXT;
ALTER TABLE merchants ADD COLUMN usdc_settlement_usable_from INTEGER;

-- Every change of that choice, as `wallet_changes` keeps every wallet change: who, when, the
-- network before and after (NULL: none chosen) and from when the new choice applies. Written in
-- the batch that makes the change; never updated or deleted.
CREATE TABLE usdc_settlement_changes (
    id            INTEGER PRIMARY KEY,
    merchant_id   INTEGER NOT NULL REFERENCES merchants (id),
    old_network   TEXT,
    new_network   TEXT,
    usable_from   INTEGER NOT NULL,
    changed_by    TEXT NOT NULL,
    changed_at    TEXT NOT NULL
);
CREATE INDEX usdc_settlement_changes_by_merchant ON usdc_settlement_changes (merchant_id, id);
