-- The object's requests to the treasury carry refunds too.
--
-- The settlements table gains the column D1's has (the treasury's row of a held refund's
-- attempt uses it; here it stays empty).
ALTER TABLE settlements ADD COLUMN refund_of TEXT;

-- `object_sends` again, a request now paying a settlement or one attempt of a refund (a refund
-- whose transaction failed is asked again, as D1's are, up to three attempts). The treasury
-- keeps a row of what it pays under `payout_id`: the settlement's id, or for a refund the
-- request's own id (one row per attempt). Nothing refers to this table: it is rebuilt whole.
CREATE TABLE object_requests (
    id              TEXT PRIMARY KEY,
    settlement_id   TEXT UNIQUE REFERENCES settlements (id),
    refund_id       TEXT REFERENCES refunds (id),
    payout_id       TEXT NOT NULL UNIQUE,
    network         TEXT NOT NULL,
    token           TEXT NOT NULL,
    asset           TEXT NOT NULL,
    decimals        INTEGER NOT NULL,
    -- The merchant's wallet, or the customer's address, lower case.
    wallet          TEXT NOT NULL,
    units           TEXT NOT NULL,
    netted          TEXT NOT NULL,
    -- As priced, for a settlement (its payments were charged the gas); a refund's transaction is
    -- priced when the treasury signs it (its gas is the PSP's): zero here.
    gas_limit       INTEGER NOT NULL,
    gas_price       TEXT NOT NULL,
    l1_fee          TEXT NOT NULL,
    rate_source     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('requested', 'sent', 'confirmed', 'failed')),
    tx_hash         TEXT,
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    CHECK ((settlement_id IS NULL) <> (refund_id IS NULL))
) WITHOUT ROWID;

INSERT INTO object_requests (id, settlement_id, refund_id, payout_id, network, token, asset,
    decimals, wallet, units, netted, gas_limit, gas_price, l1_fee, rate_source, state, tx_hash,
    error, created_at, updated_at)
SELECT id, settlement_id, NULL, settlement_id, network, token, asset, decimals, wallet, units,
    netted, gas_limit, gas_price, l1_fee, rate_source, state, tx_hash, error, created_at,
    updated_at
FROM object_sends;

DROP TABLE object_sends;
ALTER TABLE object_requests RENAME TO object_sends;

CREATE INDEX object_sends_by_state ON object_sends (state, created_at);
CREATE INDEX object_sends_by_refund ON object_sends (refund_id, state);
