-- What the object asks the treasury to send, and what it learned back.
--
-- The settlements table gains the columns D1's has (the treasury's row of a held settlement
-- uses them; here they stay empty).
ALTER TABLE settlements ADD COLUMN held_by INTEGER;
ALTER TABLE settlements ADD COLUMN decimals INTEGER;

-- The object's outbox to the treasury: one request per settlement, written in the same
-- transaction as the settlement, its claims, its items and the merchant's side of the books,
-- before the treasury signs anything. The treasury stores the transaction under the request's
-- id (its first send id: a second store of it is refused), so a request sent again (the cron
-- sends on any left `requested`) is never paid twice; the treasury's replacements keep its
-- figures. The outcome is read back from the treasury and recorded here with the
-- transaction that was final.
CREATE TABLE object_sends (
    id              TEXT PRIMARY KEY,
    settlement_id   TEXT NOT NULL UNIQUE REFERENCES settlements (id),
    network         TEXT NOT NULL,
    -- The token contract (lower-case hex) or 'native', its symbol and decimals.
    token           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- The merchant's wallet, lower case.
    wallet          TEXT NOT NULL,
    -- Base units paid, and what the merchant's debt took of its payments' net.
    units           TEXT NOT NULL,
    netted          TEXT NOT NULL,
    -- As priced: gas limit, wei per gas, the most L1 data fee, and where the gas's rate came
    -- from.
    gas_limit       INTEGER NOT NULL,
    gas_price       TEXT NOT NULL,
    l1_fee          TEXT NOT NULL,
    rate_source     TEXT NOT NULL,
    -- requested: not yet stored by the treasury; sent: stored (it signs, broadcasts, follows
    -- and replaces it); confirmed or failed: final on chain, as the treasury recorded it.
    state           TEXT NOT NULL CHECK (state IN ('requested', 'sent', 'confirmed', 'failed')),
    -- The transaction final on chain (a replacement's, when it was the one mined).
    tx_hash         TEXT,
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX object_sends_by_state ON object_sends (state, created_at);
